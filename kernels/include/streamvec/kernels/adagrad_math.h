// Per-pair math of the streaming learner's Adagrad skip-gram step, shared by its CPU steps
// (trainer/src/adagrad_step.h) and the CUDA twin (cuda_sgns.h), compiled __host__ __device__
// under nvcc. The functions are `static`: every ISA's translation unit of the CPU step compiles
// its own copy (an inline function built with AVX-512 flags must never be linked into the
// portable step).
//
// Adagrad (Duchi, Hazan and Singer 2011, "Adaptive Subgradient Methods", section 1.1) with one
// accumulator per row, as GloVe (Pennington et al. 2014, section 4.2) and fastText's streaming
// variants keep it: acc += |g|^2 / dim; row += eta / sqrt(acc + epsilon) * g.
#ifndef STREAMVEC_KERNELS_ADAGRAD_MATH_H_
#define STREAMVEC_KERNELS_ADAGRAD_MATH_H_

#include <math.h>

#include "streamvec/kernels/sgns_math.h"

namespace streamvec {

// -log sigma(logit) for a positive pair, -log(1 - sigma(logit)) for a negative (nats; p floored
// at 1e-30), in double: the loss the steps report (SGNS objective, Mikolov et al. 2013, eq. 4).
SV_HOST_DEVICE static inline float AdagradPairLoss(float logit, bool positive) {
  const double sig = 1.0 / (1.0 + ::exp(-static_cast<double>(logit)));
  const double p = positive ? sig : 1.0 - sig;
  return static_cast<float>(-::log(p > 1e-30 ? p : 1e-30));
}

// The weight of a pair's context word against target t: its occurrences wi in the window of
// centre i for t = 0, wj in that of centre i + 1 for t = 1, both for a negative.
SV_HOST_DEVICE static inline int AdagradPairWeight(int t, int wi, int wj) {
  return t == 0 ? wi : t == 1 ? wj : wi + wj;
}

// The step size of a row whose accumulator holds `acc` after this update's |g|^2 / dim.
SV_HOST_DEVICE static inline float AdagradRate(float acc, float eta, float epsilon) {
  return eta / ::sqrtf(acc + epsilon);
}

}  // namespace streamvec

#endif  // STREAMVEC_KERNELS_ADAGRAD_MATH_H_

// Exact per-term SGNS loss, used only when a caller asks for statistics (the CPU kernels and the
// CUDA twin, cuda/cuda_sgns.cu, share it).
#ifndef STREAMVEC_KERNELS_SRC_LOSS_H_
#define STREAMVEC_KERNELS_SRC_LOSS_H_

#include <math.h>

#include "streamvec/kernels/sgns_math.h"

namespace streamvec::internal {

// -log sigma(logit) for a positive target, -log sigma(-logit) for a negative one, in nats.
SV_HOST_DEVICE inline double PairLoss(float logit, bool positive) {
  const double z = positive ? -static_cast<double>(logit) : static_cast<double>(logit);
  // log(1 + e^z) without overflow.
  return z > 30.0 ? z : ::log1p(::exp(z));
}

}  // namespace streamvec::internal

#endif  // STREAMVEC_KERNELS_SRC_LOSS_H_

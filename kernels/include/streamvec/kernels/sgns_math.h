// Per-pair SGNS math shared by the CPU kernels and the CUDA twin (compiled as __host__ __device__
// under nvcc), so the device math is tested on the CPU.
//
// Skip-gram with negative sampling (Mikolov et al. 2013, "Distributed Representations of Words
// and Phrases", section 2.2): for an input row x and a target row t with label l (1 for the
// observed word, 0 for a noise word), the log-likelihood term is log sigma(+-x.t) and its gradient
// with respect to the logit is (l - sigma(x.t)). word2vec.c scales it by the learning rate and
// reads sigma from a table clipped at |x| = 6 (MAX_EXP); we clip at kMaxLogit with a finer table.
#ifndef STREAMVEC_KERNELS_SGNS_MATH_H_
#define STREAMVEC_KERNELS_SGNS_MATH_H_

#include <cstdint>

#if defined(__CUDACC__)
#define SV_HOST_DEVICE __host__ __device__
#else
#define SV_HOST_DEVICE
#endif

namespace streamvec {

// Logits beyond +-kMaxLogit saturate: sigma is taken as exactly 0 or 1 (as word2vec.c).
constexpr float kMaxLogit = 8.0f;
// Entries of the sigmoid table over [-kMaxLogit, kMaxLogit); entry i holds sigma at the middle of
// its bucket, so the table error is below max|sigma'| * bucket / 2 = 0.25 * 16/2048/2 < 1e-3.
constexpr int kSigmoidTableSize = 2048;

// Fills table[0 .. kSigmoidTableSize) (float[kSigmoidTableSize]).
void FillSigmoidTable(float* table);

// sigma(x) = 1 / (1 + exp(-x)) read from `table` (see FillSigmoidTable); saturates outside
// [-kMaxLogit, kMaxLogit].
SV_HOST_DEVICE inline float TableSigmoid(const float* table, float x) {
  if (x >= kMaxLogit) return 1.0f;
  if (!(x > -kMaxLogit)) return 0.0f;  // also NaN (a diverged row): never an index out of range
  int i = static_cast<int>((x + kMaxLogit) * (kSigmoidTableSize / (2.0f * kMaxLogit)));
  if (i >= kSigmoidTableSize) i = kSigmoidTableSize - 1;
  return table[i];
}

// Scaled gradient of the SGNS log-likelihood with respect to the logit: (label - sigma) * lr.
// label is 1 for the observed (positive) target and 0 for a negative sample.
SV_HOST_DEVICE inline float SgnsLogitGradient(const float* table, float logit, float label,
                                              float lr) {
  return (label - TableSigmoid(table, logit)) * lr;
}

// A draw from an alias table (Walker 1977; Vose 1991) of `size` columns, column i held as
// entries[2 i] (keep column i if the low 32 random bits are below it) and entries[2 i + 1] (its
// alias), from one uniform 64-bit random number: the high 32 bits pick the column. The host's
// UnigramTable::Sample and the device's negative draws (cuda_sgns.h) are this function.
SV_HOST_DEVICE inline uint32_t AliasDraw(const uint32_t* entries, uint32_t size, uint64_t random) {
  const uint32_t i = static_cast<uint32_t>(((random >> 32) * size) >> 32);
  return static_cast<uint32_t>(random) < entries[2 * i] ? i : entries[2 * i + 1];
}

}  // namespace streamvec

#endif  // STREAMVEC_KERNELS_SGNS_MATH_H_

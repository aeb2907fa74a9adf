// The streaming learner's skip-gram step with per-row Adagrad (private to trainer/): the portable
// step (adagrad_step.inc, loops the compiler vectorises for the baseline ISA; the reference the
// SIMD steps are tested against) and the register-blocked, prefetching step of
// adagrad_step_simd.inc compiled for AVX2+FMA and for AVX-512, chosen at run time by the
// learner's Isa (AdagradSentence). See streaming_learner.h and docs/streaming.md.
#ifndef STREAMVEC_TRAINER_SRC_ADAGRAD_STEP_H_
#define STREAMVEC_TRAINER_SRC_ADAGRAD_STEP_H_

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "streamvec/base/cpu_features.h"
#include "streamvec/kernels/adagrad_math.h"
#include "streamvec/kernels/sgns_kernel.h"

namespace streamvec {

// One sentence: tokens[0..n) are row ids; per position a window radius and `negative` noise ids.
// Rows are padded to `stride` floats (a multiple of 16); the padding is zero or holds the
// accumulators.
struct AdagradSentenceArgs {
  float* input = nullptr;    // rows x stride
  float* output = nullptr;   // rows x stride
  // One Adagrad accumulator per input row, row r's at acc_in[r * acc_stride], and one per
  // output row the same way: packed arrays (acc_stride 1), or in the rows' own padding
  // (acc_in = input + dim, acc_out = output + dim + 1, acc_stride = stride), as the learner keeps
  // them. The step reads only the first dim floats of a row into its sums and never changes the
  // padding, accumulators aside.
  float* acc_in = nullptr;
  float* acc_out = nullptr;
  size_t acc_stride = 1;
  size_t stride = 0;
  int dim = 0;
  const uint32_t* tokens = nullptr;
  int n = 0;
  const uint8_t* windows = nullptr;
  const uint32_t* negatives = nullptr;  // n x negative
  int negative = 0;
  // 1, or 2: positions 2m and 2m + 1 whose negatives are the same and whose K + 2 targets
  // (both centres and the negatives) are distinct train as one window (AdagradSentencePortable).
  int negative_share = 1;
  float eta = 0.0f;
  float epsilon = 0.0f;
  const float* sigmoid = nullptr;  // FillSigmoidTable
  float* scratch = nullptr;        // kAdagradScratchRows x stride floats, 64-byte aligned
  bool want_loss = false;
  double* loss_sum = nullptr;
  uint64_t* loss_pairs = nullptr;
};

// Rows of scratch a step needs: (kMaxTargets + 1) + 1 for a pair's general path (K + 2 target
// gradients and one context's), 7 + 12 for the blocked pair.
constexpr size_t kAdagradScratchRows = kMaxTargets + 2;
// Targets of a pair at most: two centres and kMaxTargets - 1 negatives.
constexpr int kAdagradMaxPairTargets = kMaxTargets + 1;
// Distinct context words of a pair at most: both windows at the widest radius (255).
constexpr int kAdagradMaxPairContexts = 2 * 255 + 2;

// The helpers below are `static`: every ISA's translation unit compiles its own copy (an inline
// function built with AVX-512 flags must never be linked into the portable step).

// True when positions i and i + 1 train as one window: negative_share 2, i even, i + 1 < n,
// the same K negatives, and the K + 2 targets [tokens[i], tokens[i + 1], negatives] distinct.
static inline bool AdagradPairAt(const AdagradSentenceArgs& a, int i) {
  if (a.negative_share != 2 || i % 2 != 0 || i + 1 >= a.n) return false;
  const int k_count = a.negative;
  const uint32_t* ni = a.negatives + static_cast<size_t>(i) * k_count;
  const uint32_t* nj = ni + k_count;
  const uint32_t c0 = a.tokens[i], c1 = a.tokens[i + 1];
  if (c0 == c1) return false;
  for (int k = 0; k < k_count; ++k) {
    if (ni[k] != nj[k] || ni[k] == c0 || ni[k] == c1) return false;
    for (int q = 0; q < k; ++q) {
      if (ni[q] == ni[k]) return false;
    }
  }
  return true;
}

// The distinct words among the contexts of the pair (i, i + 1): the positions of window i but i
// and of window i + 1 but i + 1, each word once, in the order of its first position. For word
// ids[q], in_i[q] and in_j[q] count its positions in window i and in window i + 1. Returns the
// number of words (<= kAdagradMaxPairContexts).
static inline int AdagradPairContexts(const AdagradSentenceArgs& a, int i, uint32_t* ids,
                                      uint16_t* in_i, uint16_t* in_j) {
  const int j = i + 1;
  const int lo_i = i - a.windows[i] < 0 ? 0 : i - a.windows[i];
  const int hi_i = i + a.windows[i] > a.n - 1 ? a.n - 1 : i + a.windows[i];
  const int lo_j = j - a.windows[j] < 0 ? 0 : j - a.windows[j];
  const int hi_j = j + a.windows[j] > a.n - 1 ? a.n - 1 : j + a.windows[j];
  int nc = 0;
  for (int p = lo_i < lo_j ? lo_i : lo_j; p <= (hi_i > hi_j ? hi_i : hi_j); ++p) {
    const bool wi = p >= lo_i && p <= hi_i && p != i;
    const bool wj = p >= lo_j && p <= hi_j && p != j;
    if (!wi && !wj) continue;
    const uint32_t w = a.tokens[p];
    int q = 0;
    while (q < nc && ids[q] != w) ++q;
    if (q == nc) {
      ids[nc] = w;
      in_i[nc] = 0;
      in_j[nc] = 0;
      ++nc;
    }
    in_i[q] = static_cast<uint16_t>(in_i[q] + (wi ? 1 : 0));
    in_j[q] = static_cast<uint16_t>(in_j[q] + (wj ? 1 : 0));
  }
  return nc;
}

void AdagradSentencePortable(const AdagradSentenceArgs& args);
#if defined(STREAMVEC_X86_TRAINER)
void AdagradSentenceAvx2(const AdagradSentenceArgs& args);    // needs Isa::kAvx2 support
void AdagradSentenceAvx512(const AdagradSentenceArgs& args);  // needs Isa::kAvx512 support
#endif

// The step of `isa` (kPortable, or the best of AVX2 / AVX-512 up to `isa` built here); the
// caller checked IsaSupported(isa).
void AdagradSentence(Isa isa, const AdagradSentenceArgs& args);

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_SRC_ADAGRAD_STEP_H_

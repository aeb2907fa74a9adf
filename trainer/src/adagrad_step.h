// The streaming learner's skip-gram step with per-row Adagrad (private to trainer/): the portable
// step (adagrad_step.inc, loops the compiler vectorises for the baseline ISA; the reference the
// SIMD steps are tested against) and the register-blocked, prefetching step of
// adagrad_step_simd.inc compiled for AVX2+FMA and for AVX-512, chosen at run time by the
// learner's Isa (AdagradSentence). See streaming_learner.h and docs/streaming.md.
#ifndef STREAMVEC_TRAINER_SRC_ADAGRAD_STEP_H_
#define STREAMVEC_TRAINER_SRC_ADAGRAD_STEP_H_

#include <cstddef>
#include <cstdint>

#include "streamvec/base/cpu_features.h"

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
  float eta = 0.0f;
  float epsilon = 0.0f;
  const float* sigmoid = nullptr;  // FillSigmoidTable
  float* scratch = nullptr;        // kAdagradScratchRows x stride floats, 64-byte aligned
  bool want_loss = false;
  double* loss_sum = nullptr;
  uint64_t* loss_pairs = nullptr;
};

// Rows of scratch a step needs: (kMaxTargets + 1) for the general path, 6 + 10 for the blocked.
constexpr size_t kAdagradScratchRows = 66;

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

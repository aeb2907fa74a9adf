// The streaming learner's skip-gram step with per-row Adagrad (private to trainer/), compiled
// twice from adagrad_step.inc: portable x86-64 and AVX2+FMA, chosen at run time by the learner's
// Isa. See streaming_learner.h and docs/streaming.md.
#ifndef STREAMVEC_TRAINER_SRC_ADAGRAD_STEP_H_
#define STREAMVEC_TRAINER_SRC_ADAGRAD_STEP_H_

#include <cstddef>
#include <cstdint>

namespace streamvec {

// One sentence: tokens[0..n) are row ids; per position a window radius and `negative` noise ids.
// Rows are zero-padded to `stride` floats (a multiple of 16) and stay zero-padded.
struct AdagradSentenceArgs {
  float* input = nullptr;    // rows x stride
  float* output = nullptr;   // rows x stride
  float* acc_in = nullptr;   // one Adagrad accumulator per input row
  float* acc_out = nullptr;  // one per output row
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
  float* scratch = nullptr;        // (negative + 1) x stride + stride floats
  bool want_loss = false;
  double* loss_sum = nullptr;
  uint64_t* loss_pairs = nullptr;
};

void AdagradSentencePortable(const AdagradSentenceArgs& args);
#if defined(STREAMVEC_X86_TRAINER)
void AdagradSentenceAvx2(const AdagradSentenceArgs& args);
#endif

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_SRC_ADAGRAD_STEP_H_

// SGNS / CBOW on a CUDA device: the word2vec tables live in device memory and the HogBatch step
// of SgnsKernel (sgns_kernel.h) runs there, one warp per sentence.
//
// Algorithm: the same as the CPU kernels (sgns_kernel.h: Mikolov et al. 2013; HogBatch, Ji et
// al. 2016, section 3; context combining, Rengasamy et al. 2017), on the GPU as BlazingText
// (Gupta and Khare 2017, section 3.2) lays it out: a thread block's warp owns a sentence and
// trains its windows in order, sentences run in parallel and share the tables without locks
// (Hogwild; Recht et al. 2011). A block of a window's target rows and their gradients stay in
// shared memory for the block's life (FULL-W2V, Randall et al. 2021, keeps rows on chip the same
// way). The per-pair math is sgns_math.h, shared with the CPU.
//
// Two ways in: Step() trains a host micro-batch with the caller's draws (the oracle path: with
// serial = true one warp trains the sentences in order, as the CPU reference does, and the rows
// agree with it to float rounding); TrainCorpus() trains a corpus copied to the device once,
// with the subsampling, window radii and negatives drawn on the device by a counter-based hash
// (no host work per word). No CUDA type appears here.
#ifndef STREAMVEC_KERNELS_CUDA_SGNS_H_
#define STREAMVEC_KERNELS_CUDA_SGNS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "streamvec/base/status.h"
#include "streamvec/kernels/cuda.h"
#include "streamvec/kernels/sgns_kernel.h"

namespace streamvec {

// The largest vector size the CUDA kernels train (a warp's lanes hold a row in registers).
constexpr int kCudaMaxDim = 1024;

// A corpus for TrainCorpus: host arrays, copied to the device by SetCorpus.
struct CudaCorpus {
  const uint32_t* tokens = nullptr;            // word ids, num_tokens
  size_t num_tokens = 0;
  const uint64_t* sentence_offsets = nullptr;  // num_sentences + 1 offsets into tokens
  size_t num_sentences = 0;
  const uint64_t* keep_thresholds = nullptr;   // per word id: keep if (random >> 32) < threshold
  size_t vocab_size = 0;                       // (SubsampleThresholds; 2^32: always)
  const uint32_t* noise_entries = nullptr;     // alias table, AliasDraw's layout (sgns_math.h)
  uint32_t noise_size = 0;                     // columns (= vocab_size)
};

// One training run over a device corpus (TrainCorpus). Learning rate: alpha decays linearly to
// min_alpha with the corpus words before each sentence over epochs x num_tokens (word2vec.c's
// schedule, taken per sentence).
struct CudaTrainOptions {
  TrainModel model = TrainModel::kSkipGram;
  int window = 5;
  int negative = 5;
  int negative_share = 2;  // consecutive kept positions of a sentence sharing one draw
  int epochs = 1;
  float alpha = 0.025f;
  float min_alpha = 0.0001f;
  uint64_t seed = 1;
  int loss_sample_every = 64;  // sentences: the loss is summed over one sentence in this many
  // The corpus is trained in chunks of about this many tokens (the device keeps each chunk's
  // kept tokens, radii and negatives: (5 + 4 x negative) bytes per token, two chunks in flight).
  size_t chunk_tokens = size_t{1} << 24;
  // The most warps (sentences) training at once; 0: one per 16 rows of the tables. A block's
  // target rows are read at its start and written back with its updates at its end, so warps
  // on the same rows lose each other's updates: with thousands of warps on a 20-word vocabulary
  // nothing was learnt (planted-groups test: separation 0.02 against the CPU's 0.90). On real
  // vocabularies (68k words) the bound is above what the device holds at once.
  int max_warps = 0;
};

class CudaSgnsModel {
 public:
  // Device bytes of the two tables of `rows` rows at `dim` (PaddedStride(dim) floats a row).
  static size_t TableBytes(size_t rows, int dim);

  // Allocates and zeroes the tables on device `ordinal`. Errors (FailedPrecondition, naming the
  // cause): CudaCheckDevice's; dim over kCudaMaxDim; out of device memory, naming what the
  // tables need, what the device has free and the most rows that fit at this dim.
  static StatusOr<std::unique_ptr<CudaSgnsModel>> Create(int ordinal, size_t rows, int dim);
  ~CudaSgnsModel();
  CudaSgnsModel(const CudaSgnsModel&) = delete;
  CudaSgnsModel& operator=(const CudaSgnsModel&) = delete;

  // Copies host tables (rows x PaddedStride(dim) floats each, padding zero) to or from the
  // device: all rows, or the first `rows` of them. Download waits for the training enqueued
  // before it; a null table is skipped.
  Status Upload(const float* input, const float* output, size_t rows = SIZE_MAX);
  Status Download(float* input, float* output, size_t rows = SIZE_MAX);

  // SgnsKernel::SkipGram (skip_gram) or Cbow on the device rows, the batch's host arrays copied
  // up first; waits for the result. serial: one warp trains the sentences in order (the CPU
  // reference's order and results, to float rounding); else a warp per sentence (Hogwild).
  // stats: nullptr, or accumulates the loss and pairs of every window. The batch's windows must
  // be <= 255 and negative < kMaxTargets.
  Status Step(TrainModel model, const MicroBatch& batch, float lr, bool serial, StepStats* stats);

  // The streaming learner's skip-gram step with per-row Adagrad (trainer/src/adagrad_step.h;
  // Duchi et al. 2011) on the device rows and their accumulators (one float a row, packed, zero
  // after Create), the batch's host arrays copied up first; waits for the result. Each context
  // row takes acc += |g|^2 / dim, row += eta / sqrt(acc + epsilon) g right after its gradient,
  // each target row after the window. negative_share 2: positions 2m and 2m + 1 of a sentence
  // with one draw and distinct targets train as one window (context combining). serial as in
  // Step. stats: nullptr, or accumulates the loss (AdagradPairLoss) and pairs of every window.
  // max_warps: sentences training at once, at most (0: all; CudaTrainOptions::max_warps says
  // why a small vocabulary wants few). The rows' padding must be zero.
  Status AdagradStep(const MicroBatch& batch, int negative_share, float eta, float epsilon,
                     bool serial, StepStats* stats, int max_warps = 0);
  // AdagradStep without waiting, for a stream of jobs (the streaming learner): first starts the
  // rows of init_slots[i] afresh (a word admitted to a slot: input row = init_rows[i * dim ..
  // + dim), padding zero; output row and both accumulators zero; i < num_init), then trains the
  // batch; steps train in the order they are enqueued. The job is copied into pinned
  // memory before this returns (the caller may reuse its arrays) and goes up on one of two
  // streams, so a job's copies overlap the previous job's kernel. A call waits only for the
  // step enqueued two calls before it, whose statistics (want_stats) it adds to *finished.
  Status EnqueueAdagradStep(const MicroBatch& batch, const uint32_t* init_slots, size_t num_init,
                            const float* init_rows, int negative_share, float eta, float epsilon,
                            bool want_stats, int max_warps, StepStats* finished);
  // Waits for every enqueued step, adding the statistics of those not yet reported.
  Status FinishSteps(StepStats* finished);

  // Copies the Adagrad accumulators (rows floats each) to or from the device.
  Status UploadAccumulators(const float* acc_in, const float* acc_out, size_t rows = SIZE_MAX);
  Status DownloadAccumulators(float* acc_in, float* acc_out, size_t rows = SIZE_MAX);

  // Copies a corpus to the device (replacing any earlier one). Errors: out of device memory.
  Status SetCorpus(const CudaCorpus& corpus);

  // Trains options.epochs passes over the corpus of SetCorpus, drawing on the device. Every
  // chunk's end calls on_chunk(corpus words trained so far, loss and pairs of the sampled
  // sentences so far) on this thread while the next chunk trains. Errors: Internal naming the
  // CUDA error; FailedPrecondition without a corpus.
  Status TrainCorpus(const CudaTrainOptions& options,
                     const std::function<void(uint64_t, const StepStats&)>& on_chunk);

  const CudaDeviceInfo& device() const;

 private:
  struct Impl;
  explicit CudaSgnsModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_KERNELS_CUDA_SGNS_H_

// Internal to kernels/src/cuda: the streaming learner's Adagrad skip-gram step on the device
// (CudaSgnsModel::AdagradStep and EnqueueAdagradStep; trainer/src/adagrad_step.h is its CPU
// twin and the tests' oracle) and the kernel that starts rows afresh.
#ifndef STREAMVEC_KERNELS_SRC_CUDA_ADAGRAD_STEP_CUH_
#define STREAMVEC_KERNELS_SRC_CUDA_ADAGRAD_STEP_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "streamvec/base/status.h"

namespace streamvec::cuda_detail {

// What an Adagrad launch reads: the device tables and packed accumulators, a micro-batch (sentence
// s is sent_len[s] tokens from sent_off[s] - sent_off[0]; windows and `negative` negatives a
// token), the step's constants, and where the statistics go.
struct AdagradParams {
  float* in;
  float* out;
  float* acc_in;   // one accumulator per row, packed
  float* acc_out;
  int stride, dim;
  const uint32_t* tokens;
  const uint64_t* sent_off;
  const uint32_t* sent_len;
  int num_sentences;
  const uint8_t* windows;
  const uint32_t* negatives;
  int negative, share;
  float eta, epsilon;
  const float* sigmoid;
  double* loss;  // nullptr: no statistics
  unsigned long long* pairs;
  int serial;
  int* next_sentence;
  int max_entries;
  int warp_floats;
};

// Shared floats a warp of the Adagrad kernel needs for `negative` negatives, rows of `stride`
// floats and windows up to `window`.
int AdagradWarpFloats(int negative, int stride, int window);

// Launches the Adagrad kernel for p (serial: one warp) on `stream`: warps per block fitted to
// the shared memory a warp needs (max_shared bytes a block), at most max_warps sentences at once
// (0: all), no more blocks than the device holds. Errors: InvalidArgument when one warp's shared
// memory exceeds max_shared; Internal naming a CUDA error.
Status LaunchAdagrad(AdagradParams p, size_t max_shared, int multiprocessors, int max_warps,
                     cudaStream_t stream);

// Starts n rows afresh on `stream`: input row slots[i] = rows[i * dim .. + dim) (padding zero),
// output row slots[i] and both accumulators zero.
cudaError_t LaunchSetRows(float* in, float* out, float* acc_in, float* acc_out, int stride,
                          int dim, const uint32_t* slots, const float* rows, int n,
                          cudaStream_t stream);

}  // namespace streamvec::cuda_detail

#endif  // STREAMVEC_KERNELS_SRC_CUDA_ADAGRAD_STEP_CUH_

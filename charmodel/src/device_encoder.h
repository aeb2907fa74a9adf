// The character model's encoder on a CUDA device (char_lstm.cu; cuda_stub.cpp without a CUDA
// build): what CharModel (char_model.cpp) hands it and gets back. Private to charmodel/; no CUDA
// or Eigen type appears here.
//
// The device runs the same network as the CPU path (char_model.h) in another batching: the words
// of a pass are sorted by length, longest first, so that at step t the words still reading are a
// prefix of that order (as cuDNN's packed sequences and PyTorch's pack_padded_sequence have it),
// and every step is one product over that prefix, whatever the lengths: at most max_word_chars +
// 2 steps per direction where the CPU runs a group per length. Each step's h_prev Wh is a cuBLAS
// sgemm, and one kernel adds the characters' rows of E Wx and runs lstm_element.h's unit math
// (a thread per word and hidden unit). Backward mirrors it; the characters' rows of dL/d(E Wx)
// are summed with atomic adds, so a device pass is not bit-reproducible (float sums in any
// order), and the products over all steps (dWh, db) run once at the end.
#ifndef STREAMVEC_CHARMODEL_DEVICE_ENCODER_H_
#define STREAMVEC_CHARMODEL_DEVICE_ENCODER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec::internal {

// Where each parameter block starts in CharModel's flat array (CharModel::parameters()).
struct CharLayout {
  int dim = 0, char_dim = 0, hidden = 0, dirs = 0, buckets = 0;
  size_t emb = 0;
  size_t wx[2] = {0, 0}, wh[2] = {0, 0}, b[2] = {0, 0};
  size_t proj = 0, proj_bias = 0, total = 0;
};

// A pass's words as the device reads them (CharModel builds it from CharIds).
struct DeviceWords {
  // order[k]: the position in the caller's list of the k-th word by length (longest first,
  // ties in the caller's order). Outputs and d_out go in this order.
  std::vector<int32_t> order;
  std::vector<int32_t> lengths;  // n: sequence length T (code points + 2 marks), sorted order
  int max_len = 0;               // lengths[0]
  // n x max_len: row of `used` at each position (padding 0 past the word's length).
  std::vector<int32_t> ids;
  std::vector<int32_t> active;  // max_len: words with T > t (a prefix of the sorted order)
  std::vector<int32_t> used;    // rows of the embedding table read, ascending
  size_t size() const { return lengths.size(); }
};

class DeviceEncoder;
class DevicePass;  // a forward pass's device buffers, kept for its backward pass

// The encoder of CUDA device `ordinal` for this layout (a cuBLAS handle and a stream). Errors:
// FailedPrecondition naming the cause (a build without CUDA, the CUDA error).
StatusOr<std::shared_ptr<DeviceEncoder>> MakeDeviceEncoder(int ordinal, const CharLayout& layout);

// Forward over `words` with `params` (layout.total floats; copied to the device when `version`
// differs from the last one seen): out (words.size() x dim, sorted order) written. With `pass`,
// every step's gates and states stay on the device for DeviceBackward. Errors: Internal naming a
// CUDA or cuBLAS error (out of device memory among them).
Status DeviceForward(DeviceEncoder* encoder, const float* params, uint64_t version,
                     const DeviceWords& words, float* out, std::shared_ptr<DevicePass>* pass);

// Backward of a kept pass for d_out (n x dim, sorted order): ADDS dL/dparameters into gradient
// (layout.total floats). Runs once per pass (it overwrites the kept gates). Errors: Internal as
// DeviceForward; FailedPrecondition for a pass already back-propagated.
Status DeviceBackward(DeviceEncoder* encoder, DevicePass* pass, const float* d_out,
                      float* gradient);

}  // namespace streamvec::internal

#endif  // STREAMVEC_CHARMODEL_DEVICE_ENCODER_H_

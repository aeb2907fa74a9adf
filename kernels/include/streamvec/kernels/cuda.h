// The CUDA side of kernels/: device discovery, the `--device` flag, and the device twins of the
// shared per-pair math. No CUDA type appears here; without a CUDA build (STREAMVEC_ENABLE_CUDA off
// or no nvcc) every function reports that no GPU is available.
#ifndef STREAMVEC_KERNELS_CUDA_H_
#define STREAMVEC_KERNELS_CUDA_H_

#include <cstddef>
#include <string>

#include "streamvec/base/status.h"

namespace streamvec {

// True when this binary was built with the CUDA kernels.
bool CudaBuilt();

// Number of usable CUDA devices; 0 without a driver or device (any CUDA error counts as "no GPU"
// and is cleared, as cudaGetDeviceCount fails with cudaErrorInsufficientDriver on GPU-less hosts).
int CudaDeviceCount();

// Where a trainer runs: `cpu` or `cuda[:N]` (`cuda` is `cuda:0`).
struct DeviceSpec {
  bool cuda = false;
  int ordinal = 0;  // CUDA device number when cuda
  std::string ToString() const { return cuda ? "cuda:" + std::to_string(ordinal) : "cpu"; }
};

// Parses a `--device` value. Errors: InvalidArgument naming the value and the accepted forms.
// Whether the device exists is CudaCheckDevice's question.
Status ParseDeviceSpec(const std::string& text, DeviceSpec* out);

// A CUDA device as the runtime reports it.
struct CudaDeviceInfo {
  std::string name;            // "NVIDIA H100 80GB HBM3"
  int ordinal = 0;
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
  size_t total_bytes = 0;      // device memory
  size_t free_bytes = 0;       // free now (cudaMemGetInfo)
  int driver_version = 0;      // CUDA version the driver supports, 1000 x major + 10 x minor
  int runtime_version = 0;     // CUDA runtime this binary was built with, same encoding
};

// Checks that CUDA device `ordinal` can run this build's kernels and describes it. Errors
// (FailedPrecondition, the message naming the cause): built without CUDA; no CUDA driver; driver
// too old for the runtime (both versions named); no device; no device `ordinal` (the count
// named); a compute capability below 7.0; any other CUDA error by its name.
Status CudaCheckDevice(int ordinal, CudaDeviceInfo* info);

// Computes out[i] = SgnsLogitGradient(sigmoid table, logits[i], labels[i], lr) for i < n on the
// device (host pointers in and out): the device twin of sgns_math.h, for tests.
// Errors: FailedPrecondition without a GPU; Internal naming the CUDA error.
Status CudaSgnsLogitGradients(const float* logits, const float* labels, float lr, int n,
                              float* out);

}  // namespace streamvec

#endif  // STREAMVEC_KERNELS_CUDA_H_

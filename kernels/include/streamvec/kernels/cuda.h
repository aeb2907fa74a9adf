// The CUDA side of kernels/: device discovery and the device twins of the shared per-pair math.
// No CUDA type appears here; without a CUDA build (STREAMVEC_ENABLE_CUDA off or no nvcc) every
// function reports that no GPU is available.
#ifndef STREAMVEC_KERNELS_CUDA_H_
#define STREAMVEC_KERNELS_CUDA_H_

#include "streamvec/base/status.h"

namespace streamvec {

// True when this binary was built with the CUDA kernels.
bool CudaBuilt();

// Number of usable CUDA devices; 0 without a driver or device (any CUDA error counts as "no GPU"
// and is cleared, as cudaGetDeviceCount fails with cudaErrorInsufficientDriver on GPU-less hosts).
int CudaDeviceCount();

// Computes out[i] = SgnsLogitGradient(sigmoid table, logits[i], labels[i], lr) for i < n on the
// device (host pointers in and out): the device twin of sgns_math.h, for tests.
// Errors: FailedPrecondition without a GPU; Internal naming the CUDA error.
Status CudaSgnsLogitGradients(const float* logits, const float* labels, float lr, int n,
                              float* out);

}  // namespace streamvec

#endif  // STREAMVEC_KERNELS_CUDA_H_

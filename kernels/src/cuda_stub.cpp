// Built instead of src/cuda/*.cu when CUDA is off: no GPU.
#include "streamvec/kernels/cuda.h"

namespace streamvec {

bool CudaBuilt() { return false; }
int CudaDeviceCount() { return 0; }
Status CudaSgnsLogitGradients(const float*, const float*, float, int, float*) {
  return Status::FailedPrecondition("streamvec was built without CUDA");
}

}  // namespace streamvec

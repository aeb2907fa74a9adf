// Built instead of src/cuda/*.cu when CUDA is off: no GPU.
#include "streamvec/kernels/cuda.h"
#include "streamvec/kernels/cuda_sgns.h"

namespace streamvec {

bool CudaBuilt() { return false; }
int CudaDeviceCount() { return 0; }
Status CudaCheckDevice(int, CudaDeviceInfo*) {
  return Status::FailedPrecondition("this streamvec was built without CUDA (rebuild with the CUDA "
                                    "toolkit installed and STREAMVEC_ENABLE_CUDA=ON)");
}
Status CudaSgnsLogitGradients(const float*, const float*, float, int, float*) {
  return Status::FailedPrecondition("streamvec was built without CUDA");
}

struct CudaSgnsModel::Impl {
  CudaDeviceInfo info;
};
CudaSgnsModel::CudaSgnsModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaSgnsModel::~CudaSgnsModel() = default;
size_t CudaSgnsModel::TableBytes(size_t rows, int dim) {
  return 2 * rows * PaddedStride(dim) * sizeof(float);
}
StatusOr<std::unique_ptr<CudaSgnsModel>> CudaSgnsModel::Create(int ordinal, size_t, int) {
  return CudaCheckDevice(ordinal, nullptr);
}
// Unreachable: Create never succeeds without CUDA.
Status CudaSgnsModel::Upload(const float*, const float*, size_t) {
  return CudaCheckDevice(0, nullptr);
}
Status CudaSgnsModel::Download(float*, float*, size_t) { return CudaCheckDevice(0, nullptr); }
Status CudaSgnsModel::Step(TrainModel, const MicroBatch&, float, bool, StepStats*) {
  return CudaCheckDevice(0, nullptr);
}
Status CudaSgnsModel::SetCorpus(const CudaCorpus&) { return CudaCheckDevice(0, nullptr); }
Status CudaSgnsModel::AdagradStep(const MicroBatch&, int, float, float, bool, StepStats*, int) {
  return CudaCheckDevice(0, nullptr);
}
Status CudaSgnsModel::EnqueueAdagradStep(const MicroBatch&, const uint32_t*, size_t, const float*,
                                         int, float, float, bool, int, StepStats*) {
  return CudaCheckDevice(0, nullptr);
}
Status CudaSgnsModel::FinishSteps(StepStats*) { return CudaCheckDevice(0, nullptr); }
Status CudaSgnsModel::UploadAccumulators(const float*, const float*, size_t) {
  return CudaCheckDevice(0, nullptr);
}
Status CudaSgnsModel::DownloadAccumulators(float*, float*, size_t) {
  return CudaCheckDevice(0, nullptr);
}
Status CudaSgnsModel::TrainCorpus(const CudaTrainOptions&,
                                  const std::function<void(uint64_t, const StepStats&)>&) {
  return CudaCheckDevice(0, nullptr);
}
const CudaDeviceInfo& CudaSgnsModel::device() const { return impl_->info; }

}  // namespace streamvec

// The character model's device encoder in a build without CUDA (STREAMVEC_ENABLE_CUDA off or no
// nvcc): every call says so.
#include "device_encoder.h"

namespace streamvec::internal {
namespace {

Status NoCuda() {
  return Status::FailedPrecondition(
      "this build has no CUDA support (configure with an nvcc and STREAMVEC_ENABLE_CUDA=ON)");
}

}  // namespace

StatusOr<std::shared_ptr<DeviceEncoder>> MakeDeviceEncoder(int, const CharLayout&) {
  return NoCuda();
}

Status DeviceForward(DeviceEncoder*, const float*, uint64_t, const DeviceWords&, float*,
                     std::shared_ptr<DevicePass>*) {
  return NoCuda();
}

Status DeviceBackward(DeviceEncoder*, DevicePass*, const float*, float*) { return NoCuda(); }

}  // namespace streamvec::internal

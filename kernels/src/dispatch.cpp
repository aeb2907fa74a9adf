#include <memory>

#include "streamvec/kernels/sgns_kernel.h"

namespace streamvec {
namespace internal {
std::unique_ptr<SgnsKernel> MakePortableKernel();
#if defined(STREAMVEC_X86_KERNELS)
std::unique_ptr<SgnsKernel> MakeAvx2Kernel();
std::unique_ptr<SgnsKernel> MakeAvx512Kernel();
#endif
}  // namespace internal

std::unique_ptr<SgnsKernel> MakeCpuKernel(Isa isa) {
  switch (isa) {
    case Isa::kPortable:
      return internal::MakePortableKernel();
#if defined(STREAMVEC_X86_KERNELS)
    case Isa::kAvx2:
      return internal::MakeAvx2Kernel();
    case Isa::kAvx512:
      return internal::MakeAvx512Kernel();
#endif
    default:
      return nullptr;
  }
}

}  // namespace streamvec

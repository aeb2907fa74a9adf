#include <memory>

#include "streamvec/kernels/dot.h"
#include "streamvec/kernels/sgns_kernel.h"

namespace streamvec {
namespace internal {
std::unique_ptr<SgnsKernel> MakePortableKernel();
float DotPortable(const float* a, const float* b, size_t n);
int32_t Int8DotPortable(const int8_t* a, const int8_t* b, size_t n);
void Int8DotManyPortable(const int8_t* q, const int8_t* const* rows, size_t count, size_t n,
                         int32_t* out);
void ColumnScoresPortable(const float* columns, const float* query, size_t dim, size_t width,
                          float* scores);
#if defined(STREAMVEC_X86_KERNELS)
void ColumnScoresAvx2(const float* columns, const float* query, size_t dim, size_t width,
                      float* scores);
void ColumnScoresAvx512(const float* columns, const float* query, size_t dim, size_t width,
                        float* scores);
std::unique_ptr<SgnsKernel> MakeAvx2Kernel();
std::unique_ptr<SgnsKernel> MakeAvx512Kernel();
float DotAvx2(const float* a, const float* b, size_t n);
float DotAvx512(const float* a, const float* b, size_t n);
int32_t Int8DotAvx2(const int8_t* a, const int8_t* b, size_t n);
int32_t Int8DotAvx512(const int8_t* a, const int8_t* b, size_t n);
void Int8DotManyAvx2(const int8_t* q, const int8_t* const* rows, size_t count, size_t n,
                     int32_t* out);
void Int8DotManyAvx512(const int8_t* q, const int8_t* const* rows, size_t count, size_t n,
                       int32_t* out);
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

DotFn DotFunction(Isa isa) {
  switch (isa) {
#if defined(STREAMVEC_X86_KERNELS)
    case Isa::kAvx2:
      return internal::DotAvx2;
    case Isa::kAvx512:
      return internal::DotAvx512;
#endif
    default:
      return internal::DotPortable;
  }
}

ColumnScoresFn ColumnScoresFunction(Isa isa) {
  switch (isa) {
#if defined(STREAMVEC_X86_KERNELS)
    case Isa::kAvx2:
      return internal::ColumnScoresAvx2;
    case Isa::kAvx512:
      return internal::ColumnScoresAvx512;
#endif
    default:
      return internal::ColumnScoresPortable;
  }
}

Int8DotFn Int8DotFunction(Isa isa) {
  switch (isa) {
#if defined(STREAMVEC_X86_KERNELS)
    case Isa::kAvx2:
      return internal::Int8DotAvx2;
    case Isa::kAvx512:
      return internal::Int8DotAvx512;
#endif
    default:
      return internal::Int8DotPortable;
  }
}

Int8DotManyFn Int8DotManyFunction(Isa isa) {
  switch (isa) {
#if defined(STREAMVEC_X86_KERNELS)
    case Isa::kAvx2:
      return internal::Int8DotManyAvx2;
    case Isa::kAvx512:
      return internal::Int8DotManyAvx512;
#endif
    default:
      return internal::Int8DotManyPortable;
  }
}

}  // namespace streamvec

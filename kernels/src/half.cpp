#include "streamvec/kernels/half.h"

#include <Eigen/Core>

#include "streamvec/base/cpu_features.h"

#if defined(STREAMVEC_X86_KERNELS)
#include <cpuid.h>
#endif

namespace streamvec {
namespace internal {
#if defined(STREAMVEC_X86_KERNELS)
void FloatsToHalvesF16c(const float* in, uint16_t* out, size_t n);
void HalvesToFloatsF16c(const uint16_t* in, float* out, size_t n);
#endif
}  // namespace internal

namespace {

void FloatsToHalvesPortable(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = Eigen::numext::bit_cast<uint16_t>(Eigen::half(in[i]));
}

void HalvesToFloatsPortable(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(in[i]));
  }
}

}  // namespace

bool HalfConversionF16cSupported() {
#if defined(STREAMVEC_X86_KERNELS)
  // AVX with its registers saved by the OS (IsaSupported's AVX2 check), and CPUID leaf 1's F16C
  // bit (clang's __builtin_cpu_supports does not know "f16c").
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return IsaSupported(Isa::kAvx2) && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
         (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

FloatsToHalvesFn FloatsToHalvesFunction(bool f16c) {
#if defined(STREAMVEC_X86_KERNELS)
  if (f16c) return internal::FloatsToHalvesF16c;
#endif
  (void)f16c;
  return FloatsToHalvesPortable;
}

HalvesToFloatsFn HalvesToFloatsFunction(bool f16c) {
#if defined(STREAMVEC_X86_KERNELS)
  if (f16c) return internal::HalvesToFloatsF16c;
#endif
  (void)f16c;
  return HalvesToFloatsPortable;
}

void FloatsToHalves(const float* in, uint16_t* out, size_t n) {
  static const FloatsToHalvesFn fn = FloatsToHalvesFunction(HalfConversionF16cSupported());
  fn(in, out, n);
}

void HalvesToFloats(const uint16_t* in, float* out, size_t n) {
  static const HalvesToFloatsFn fn = HalvesToFloatsFunction(HalfConversionF16cSupported());
  fn(in, out, n);
}

}  // namespace streamvec

#include "streamvec/kernels/half.h"

#include <Eigen/Core>

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
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
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

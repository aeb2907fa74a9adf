// The F16C build of kernels/half.h (compiled with -mavx -mf16c; called only where the CPU has
// both: HalfConversionF16cSupported).
#include <immintrin.h>

#include <cstring>

#include "streamvec/kernels/half.h"

namespace streamvec {
namespace internal {

void FloatsToHalvesF16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  if (i < n) {  // the last 1-7 through a buffer
    float f[8] = {};
    uint16_t h[8];
    std::memcpy(f, in + i, (n - i) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h),
                     _mm256_cvtps_ph(_mm256_loadu_ps(f), _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(out + i, h, (n - i) * sizeof(uint16_t));
  }
}

void HalvesToFloatsF16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  if (i < n) {
    uint16_t h[8] = {};
    float f[8];
    std::memcpy(h, in + i, (n - i) * sizeof(uint16_t));
    _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))));
    std::memcpy(out + i, f, (n - i) * sizeof(float));
  }
}

}  // namespace internal
}  // namespace streamvec

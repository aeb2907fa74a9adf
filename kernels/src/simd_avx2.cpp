// AVX2 + FMA build of simd_kernel.h (compiled with -mavx2 -mfma).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "dot_body.h"
#include "loss.h"
#include "streamvec/base/status.h"
#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"
#include "streamvec/kernels/simd_vec_avx2.h"

namespace streamvec::internal {
namespace avx2 {

#include "gradients8_avx2.h"

struct Vec : simd::Avx2 {  // Sum8 from simd::Avx2
  static constexpr bool kHasGradients8 = true;
  static constexpr bool kHasGradientsN = false;
  static void Gradients8(const float* table, const float* logits, float lr, float* out) {
    SgnsGradients8(table, logits, lr, out);
  }
};

#include "simd_kernel.h"

}  // namespace avx2

std::unique_ptr<SgnsKernel> MakeAvx2Kernel() { return std::make_unique<avx2::SimdKernel>("avx2"); }

float DotAvx2(const float* a, const float* b, size_t n) { return DotBody<avx2::Vec>(a, b, n); }

// 16 codes a step: sign-extended to int16, pairs multiplied and added into int32 lanes.
int32_t Int8DotAvx2(const int8_t* a, const int8_t* b, size_t n) {
  __m256i sum = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i x =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256i y =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(x, y));
  }
  const __m128i half = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  const __m128i quarter = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0x4e));
  int32_t dot = _mm_cvtsi128_si32(_mm_add_epi32(quarter, _mm_shuffle_epi32(quarter, 0xb1)));
  for (; i < n; ++i) dot += int32_t{a[i]} * int32_t{b[i]};
  return dot;
}

void Int8DotManyAvx2(const int8_t* q, const int8_t* const* rows, size_t count, size_t n,
                     int32_t* out) {
  for (size_t c = 0; c < count; ++c) out[c] = Int8DotAvx2(q, rows[c], n);
}

void ColumnScoresAvx2(const float* columns, const float* query, size_t dim, size_t width,
                      float* scores) {
  ColumnScoresBody<avx2::Vec>(columns, query, dim, width, scores);
}

}  // namespace streamvec::internal

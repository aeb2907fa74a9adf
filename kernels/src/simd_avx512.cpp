// AVX-512 build of simd_kernel.h (compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma).
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
#include "streamvec/kernels/sgns_gradients_avx512.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"
#include "streamvec/kernels/simd_vec_avx512.h"

namespace streamvec::internal {
namespace avx512 {

#include "gradients8_avx2.h"

struct Vec : simd::Avx512 {  // Sum8 from simd::Avx512
  static constexpr bool kHasGradients8 = true;
  static void Gradients8(const float* table, const float* logits, float lr, float* out) {
    SgnsGradients8(table, logits, lr, out);
  }
  static constexpr bool kHasGradientsN = true;
  static void GradientsN(const float* table, const float* logits, const float* labels, int n,
                         float lr, float* out) {
    simd::SgnsGradientsN(table, logits, labels, n, lr, out);
  }
};

#include "simd_kernel.h"

}  // namespace avx512

std::unique_ptr<SgnsKernel> MakeAvx512Kernel() {
  return std::make_unique<avx512::SimdKernel>("avx512");
}

float DotAvx512(const float* a, const float* b, size_t n) {
  return DotBody<avx512::Vec>(a, b, n);
}

// 32 codes a step (AVX-512BW): sign-extended to int16, pairs multiplied and added into int32
// lanes; the tail of fewer than 32 codes under a mask.
int32_t Int8DotAvx512(const int8_t* a, const int8_t* b, size_t n) {
  __m512i sum = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i x =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i)));
    const __m512i y =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
    sum = _mm512_add_epi32(sum, _mm512_madd_epi16(x, y));
  }
  if (i < n) {
    const __mmask32 tail = (__mmask32{1} << (n - i)) - 1;
    const __m512i x = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(tail, a + i));
    const __m512i y = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(tail, b + i));
    sum = _mm512_add_epi32(sum, _mm512_madd_epi16(x, y));
  }
  return _mm512_reduce_add_epi32(sum);
}

// The query's codes are widened to int16 once (up to 128 codes in four registers); each row's
// are loaded 32 at a time, the last under a mask. Longer rows go one by one.
void Int8DotManyAvx512(const int8_t* q, const int8_t* const* rows, size_t count, size_t n,
                       int32_t* out) {
  constexpr size_t kMaxChunks = 4;
  if (n > 32 * kMaxChunks) {
    for (size_t c = 0; c < count; ++c) out[c] = Int8DotAvx512(q, rows[c], n);
    return;
  }
  const size_t chunks = (n + 31) / 32;
  __m512i qx[kMaxChunks];
  __mmask32 mask[kMaxChunks];
  for (size_t k = 0; k < chunks; ++k) {
    const size_t left = n - 32 * k;
    mask[k] = left >= 32 ? ~__mmask32{0} : (__mmask32{1} << left) - 1;
    qx[k] = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mask[k], q + 32 * k));
  }
  for (size_t c = 0; c < count; ++c) {
    const int8_t* row = rows[c];
    __m512i sum = _mm512_setzero_si512();
    for (size_t k = 0; k < chunks; ++k) {
      const __m512i y = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mask[k], row + 32 * k));
      sum = _mm512_add_epi32(sum, _mm512_madd_epi16(qx[k], y));
    }
    out[c] = _mm512_reduce_add_epi32(sum);
  }
}

void ColumnScoresAvx512(const float* columns, const float* query, size_t dim, size_t width,
                        float* scores) {
  ColumnScoresBody<avx512::Vec>(columns, query, dim, width, scores);
}

}  // namespace streamvec::internal

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
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"
#include "streamvec/kernels/simd_vec_avx512.h"

namespace streamvec::internal {
namespace avx512 {

#include "gradients8_avx2.h"

struct Vec : simd::Avx512 {
  // out[j] = Sum(a[j]) for j < 8, as one transposing reduction (23 instructions, not 8 x 9).
  static constexpr bool kHasSum8 = true;
  static constexpr bool kHasGradients8 = true;
  static void Gradients8(const float* table, const float* logits, float lr, float* out) {
    SgnsGradients8(table, logits, lr, out);
  }
  // out[j] = (labels[j] - TableSigmoid(table, logits[j])) * lr for j < n, 16 at a time, with
  // the arithmetic of TableSigmoid (add, multiply, truncate: no contraction), so the results
  // equal the scalar function's; nothing at or beyond n is read or written.
  static constexpr bool kHasGradientsN = true;
  static void GradientsN(const float* table, const float* logits, const float* labels, int n,
                         float lr, float* out) {
    const __m512 max_logit = _mm512_set1_ps(streamvec::kMaxLogit);
    const __m512 scale =
        _mm512_set1_ps(streamvec::kSigmoidTableSize / (2.0f * streamvec::kMaxLogit));
    const __m512i last = _mm512_set1_epi32(streamvec::kSigmoidTableSize - 1);
    const __m512 rate = _mm512_set1_ps(lr);
    for (int j = 0; j < n; j += 16) {
      const __mmask16 live = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
      const __m512 x = _mm512_maskz_loadu_ps(live, logits + j);
      __m512i index = _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_add_ps(x, max_logit), scale));
      index = _mm512_min_epi32(_mm512_max_epi32(index, _mm512_setzero_si512()), last);
      __m512 sigma = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, index, table, 4);
      sigma = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, max_logit, _CMP_GE_OQ), sigma,
                                   _mm512_set1_ps(1.0f));
      sigma = _mm512_mask_blend_ps(
          _mm512_cmp_ps_mask(x, _mm512_sub_ps(_mm512_setzero_ps(), max_logit), _CMP_LE_OQ), sigma,
          _mm512_setzero_ps());
      const __m512 label = _mm512_maskz_loadu_ps(live, labels + j);
      _mm512_mask_storeu_ps(out + j, live, _mm512_mul_ps(_mm512_sub_ps(label, sigma), rate));
    }
  }
  static void Sum8(const R* a, float* out) {
    auto pair = [](R x, R y) {  // [x halves, y halves] as 256-bit partial sums
      return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
    };
    const R s01 = pair(a[0], a[1]), s23 = pair(a[2], a[3]);
    const R s45 = pair(a[4], a[5]), s67 = pair(a[6], a[7]);
    // 128-bit quad j of t0123 holds a 4-float partial sum of a[j]; of t4567, of a[4 + j].
    const R t0123 = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88),
                                  _mm512_shuffle_f32x4(s01, s23, 0xDD));
    const R t4567 = _mm512_add_ps(_mm512_shuffle_f32x4(s45, s67, 0x88),
                                  _mm512_shuffle_f32x4(s45, s67, 0xDD));
    const R x = _mm512_add_ps(_mm512_unpacklo_ps(t0123, t4567), _mm512_unpackhi_ps(t0123, t4567));
    const R y = _mm512_add_ps(x, _mm512_permute_ps(x, 0x4E));  // quad j: [a[j], a[4+j], ...]
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm256_storeu_ps(out, _mm512_castps512_ps256(_mm512_permutexvar_ps(order, y)));
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

void ColumnScoresAvx512(const float* columns, const float* query, size_t dim, size_t width,
                        float* scores) {
  ColumnScoresBody<avx512::Vec>(columns, query, dim, width, scores);
}

}  // namespace streamvec::internal

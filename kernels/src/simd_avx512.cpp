// AVX-512 build of simd_kernel.h (compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "loss.h"
#include "streamvec/base/status.h"
#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/sgns_math.h"
#include "streamvec/kernels/simd_vec_avx512.h"

#include "streamvec/kernels/sgns_kernel.h"
#include "dot_body.h"

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

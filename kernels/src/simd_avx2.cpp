// AVX2 + FMA build of simd_kernel.h (compiled with -mavx2 -mfma).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "loss.h"
#include "streamvec/base/status.h"
#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/sgns_math.h"
#include "streamvec/kernels/simd_vec_avx2.h"

#include "streamvec/kernels/sgns_kernel.h"

namespace streamvec::internal {
namespace avx2 {

#include "gradients8_avx2.h"

struct Vec : simd::Avx2 {
  // out[j] = Sum(a[j]) for j < 8, as one transposing reduction.
  static constexpr bool kHasSum8 = true;
  static constexpr bool kHasGradients8 = true;
  static void Gradients8(const float* table, const float* logits, float lr, float* out) {
    SgnsGradients8(table, logits, lr, out);
  }
  static void Sum8(const R* a, float* out) {
    const R h0123 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const R h4567 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                                        _mm256_permute2f128_ps(h0123, h4567, 0x31)));
  }
};

#include "simd_kernel.h"

}  // namespace avx2

std::unique_ptr<SgnsKernel> MakeAvx2Kernel() { return std::make_unique<avx2::SimdKernel>("avx2"); }

}  // namespace streamvec::internal

namespace streamvec::internal {

float DotAvx2(const float* a, const float* b, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  if (i + 8 <= n) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    i += 8;
  }
  const __m256 s = _mm256_add_ps(s0, s1);
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  float dot = _mm_cvtss_f32(q);
  for (; i < n; ++i) dot += a[i] * b[i];
  return dot;
}

}  // namespace streamvec::internal

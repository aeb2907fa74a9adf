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

#include "streamvec/kernels/sgns_kernel.h"

namespace streamvec::internal {
namespace avx2 {

#include "gradients8_avx2.h"

struct Vec {
  using R = __m256;
  static constexpr int kLanes = 8;
  static R Zero() { return _mm256_setzero_ps(); }
  static R Load(const float* p) { return _mm256_load_ps(p); }
  static void Store(float* p, R v) { _mm256_store_ps(p, v); }
  static R Set1(float a) { return _mm256_set1_ps(a); }
  static R Fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R Add(R a, R b) { return _mm256_add_ps(a, b); }
  static R Mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static float Sum(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
    return _mm_cvtss_f32(s);
  }
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

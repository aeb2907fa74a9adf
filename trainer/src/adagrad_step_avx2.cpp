// The register-blocked Adagrad step (adagrad_step_simd.inc) with AVX2+FMA: compiled with
// -mavx2 -mfma (trainer/CMakeLists.txt), called only when the CPU has them.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "adagrad_step.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"

namespace streamvec {
namespace adagrad_avx2 {

struct Vec {
  using R = __m256;
  static constexpr int kLanes = 8;
  static R Zero() { return _mm256_setzero_ps(); }
  static R Load(const float* p) { return _mm256_load_ps(p); }
  static void Store(float* p, R v) { _mm256_store_ps(p, v); }
  static R Set1(float a) { return _mm256_set1_ps(a); }
  static R Fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R Add(R a, R b) { return _mm256_add_ps(a, b); }
  static float Sum(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

#include "adagrad_step_simd.inc"

}  // namespace adagrad_avx2

void AdagradSentenceAvx2(const AdagradSentenceArgs& args) { adagrad_avx2::Step(args).Run(); }

}  // namespace streamvec

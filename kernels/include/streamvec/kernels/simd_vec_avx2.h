// One AVX2 register of 8 floats behind the small vocabulary that the register-blocked loops are
// written in (kernels/src/simd_kernel.h, trainer/src/adagrad_step_simd.inc, kernels/src/
// dot_body.h): Zero, Load and Store (64-byte aligned rows), LoadU (any alignment), Set1, Fma,
// Add, Mul and a horizontal Sum.
//
// Include only from a translation unit compiled with -mavx2 -mfma whose code runs after CPU
// detection (DetectBestIsa). The struct has internal linkage (unnamed namespace), so the linker
// can never merge its functions with a copy built for another ISA.
#ifndef STREAMVEC_KERNELS_SIMD_VEC_AVX2_H_
#define STREAMVEC_KERNELS_SIMD_VEC_AVX2_H_

#include <immintrin.h>

#if !defined(__AVX2__) || !defined(__FMA__)
#error "simd_vec_avx2.h needs -mavx2 -mfma"
#endif

namespace streamvec::simd {
namespace {

struct Avx2 {
  using R = __m256;
  static constexpr int kLanes = 8;
  static R Zero() { return _mm256_setzero_ps(); }
  static R Load(const float* p) { return _mm256_load_ps(p); }
  static R LoadU(const float* p) { return _mm256_loadu_ps(p); }  // any alignment
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
};

}  // namespace
}  // namespace streamvec::simd

#endif  // STREAMVEC_KERNELS_SIMD_VEC_AVX2_H_

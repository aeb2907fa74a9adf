// One AVX2 register of 8 floats behind the small vocabulary that the register-blocked loops are
// written in (kernels/src/simd_kernel.h, trainer/src/adagrad_step_simd.inc, kernels/src/
// dot_body.h): Zero, Load and Store (64-byte aligned rows), LoadU (any alignment), Set1, Fma,
// Add, Mul, a horizontal Sum and Sum8 (eight of them at once).
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
  // out[j] = Sum(a[j]) for j < 8 (a: R[8], out: float[8]), as one transposing reduction (may
  // differ from Sum by rounding: another order of the lanes).
  static constexpr bool kHasSum8 = true;
  static void Sum8(const R* a, float* out) {
    const R h0123 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const R h4567 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                                        _mm256_permute2f128_ps(h0123, h4567, 0x31)));
  }
};

}  // namespace
}  // namespace streamvec::simd

#endif  // STREAMVEC_KERNELS_SIMD_VEC_AVX2_H_

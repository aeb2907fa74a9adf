// One AVX-512 register of 16 floats behind the vocabulary of simd_vec_avx2.h (Zero, Load, LoadU,
// Store, Set1, Fma, Add, Mul, Sum), for the same register-blocked loops.
//
// Include only from a translation unit compiled with AVX-512F (and FMA) flags whose code runs
// after CPU detection; internal linkage, as simd_vec_avx2.h.
#ifndef STREAMVEC_KERNELS_SIMD_VEC_AVX512_H_
#define STREAMVEC_KERNELS_SIMD_VEC_AVX512_H_

#include <immintrin.h>

#if !defined(__AVX512F__)
#error "simd_vec_avx512.h needs -mavx512f"
#endif

namespace streamvec::simd {
namespace {

struct Avx512 {
  using R = __m512;
  static constexpr int kLanes = 16;
  static R Zero() { return _mm512_setzero_ps(); }
  static R Load(const float* p) { return _mm512_load_ps(p); }
  static R LoadU(const float* p) { return _mm512_loadu_ps(p); }  // any alignment
  static void Store(float* p, R v) { _mm512_store_ps(p, v); }
  static R Set1(float a) { return _mm512_set1_ps(a); }
  static R Fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R Add(R a, R b) { return _mm512_add_ps(a, b); }
  static R Mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static float Sum(R v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace
}  // namespace streamvec::simd

#endif  // STREAMVEC_KERNELS_SIMD_VEC_AVX512_H_

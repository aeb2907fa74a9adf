// One AVX-512 register of 16 floats behind the vocabulary of simd_vec_avx2.h (Zero, Load, LoadU,
// Store, Set1, Fma, Add, Mul, Sum, Sum8), for the same register-blocked loops.
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
  // out[j] = Sum(a[j]) for j < 8 (a: R[8], out: float[8]), as one transposing reduction: 23
  // instructions instead of 8 horizontal sums of 9 each. Each sum adds the lanes in another order
  // than Sum, so the two may differ by rounding.
  static constexpr bool kHasSum8 = true;
  static void Sum8(const R* a, float* out) {
    auto pair = [](R x, R y) {  // [x halves, y halves] as 256-bit partial sums
      return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
    };
    const R s01 = pair(a[0], a[1]), s23 = pair(a[2], a[3]);
    const R s45 = pair(a[4], a[5]), s67 = pair(a[6], a[7]);
    // 128-bit quad j of t0123 holds a 4-float partial sum of a[j]; of t4567, of a[4 + j].
    const R t0123 =
        _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD));
    const R t4567 =
        _mm512_add_ps(_mm512_shuffle_f32x4(s45, s67, 0x88), _mm512_shuffle_f32x4(s45, s67, 0xDD));
    const R x = _mm512_add_ps(_mm512_unpacklo_ps(t0123, t4567), _mm512_unpackhi_ps(t0123, t4567));
    const R y = _mm512_add_ps(x, _mm512_permute_ps(x, 0x4E));  // quad j: [a[j], a[4+j], ...]
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm256_storeu_ps(out, _mm512_castps512_ps256(_mm512_permutexvar_ps(order, y)));
  }
};

}  // namespace
}  // namespace streamvec::simd

#endif  // STREAMVEC_KERNELS_SIMD_VEC_AVX512_H_

// SGNS logit gradients sixteen at a time with AVX-512F: the vector form of SgnsLogitGradient
// (sgns_math.h), shared by the batch kernels (kernels/src/simd_avx512.cpp) and the streaming
// learner's Adagrad step (trainer/src/adagrad_step_avx512.cpp).
//
// Include only from a translation unit compiled with -mavx512f whose code runs after CPU
// detection; internal linkage, as simd_vec_avx512.h.
#ifndef STREAMVEC_KERNELS_SGNS_GRADIENTS_AVX512_H_
#define STREAMVEC_KERNELS_SGNS_GRADIENTS_AVX512_H_

#include <immintrin.h>

#include "streamvec/kernels/sgns_math.h"

#if !defined(__AVX512F__)
#error "sgns_gradients_avx512.h needs -mavx512f"
#endif

namespace streamvec::simd {
namespace {

// out[j] = (labels[j] - TableSigmoid(table, logits[j])) * lr for j < n (table:
// float[kSigmoidTableSize] from FillSigmoidTable; logits, labels, out: float[n]), 16 at a time.
// The arithmetic of TableSigmoid (add, multiply, truncate: no contraction; sigma 1 at or above
// kMaxLogit, 0 at or below -kMaxLogit and for NaN), so the results equal the scalar function's.
// Nothing at or beyond n is read or written; n <= 0 does nothing; no errors. The gradient of the
// skip-gram negative-sampling objective with respect to a logit (Mikolov et al. 2013,
// "Distributed Representations of Words and Phrases", eq. 4), times the learning rate.
inline void SgnsGradientsN(const float* table, const float* logits, const float* labels, int n,
                           float lr, float* out) {
  const __m512 max_logit = _mm512_set1_ps(kMaxLogit);
  const __m512 min_logit = _mm512_set1_ps(-kMaxLogit);
  const __m512 scale = _mm512_set1_ps(kSigmoidTableSize / (2.0f * kMaxLogit));
  const __m512i last = _mm512_set1_epi32(kSigmoidTableSize - 1);
  const __m512 rate = _mm512_set1_ps(lr);
  for (int j = 0; j < n; j += 16) {
    const __mmask16 live = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(live, logits + j);
    __m512i index = _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_add_ps(x, max_logit), scale));
    index = _mm512_min_epi32(_mm512_max_epi32(index, _mm512_setzero_si512()), last);
    __m512 sigma = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, index, table, 4);
    sigma = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, max_logit, _CMP_GE_OQ), sigma,
                                 _mm512_set1_ps(1.0f));
    // !(x > -kMaxLogit): true for NaN too (unordered), as TableSigmoid.
    sigma = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, min_logit, _CMP_NGT_UQ), sigma,
                                 _mm512_setzero_ps());
    const __m512 label = _mm512_maskz_loadu_ps(live, labels + j);
    _mm512_mask_storeu_ps(out + j, live, _mm512_mul_ps(_mm512_sub_ps(label, sigma), rate));
  }
}

}  // namespace
}  // namespace streamvec::simd

#endif  // STREAMVEC_KERNELS_SGNS_GRADIENTS_AVX512_H_

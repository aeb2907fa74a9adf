// Eight SGNS logit gradients at once (AVX2; also used by the AVX-512 build). Included inside the
// namespace of simd_avx2.cpp / simd_avx512.cpp after <immintrin.h>.
//
// out[k] = SgnsLogitGradient(table, logits[k], k == 0 ? 1 : 0, lr) for k < 8, with the same table
// index arithmetic as TableSigmoid (add, multiply, truncate: no contraction), so the results are
// identical to the scalar function's.
inline void SgnsGradients8(const float* table, const float* logits, float lr, float* out) {
  const __m256 x = _mm256_loadu_ps(logits);
  const __m256 max_logit = _mm256_set1_ps(streamvec::kMaxLogit);
  const __m256 scaled =
      _mm256_mul_ps(_mm256_add_ps(x, max_logit),
                    _mm256_set1_ps(streamvec::kSigmoidTableSize / (2.0f * streamvec::kMaxLogit)));
  __m256i index = _mm256_cvttps_epi32(scaled);
  index = _mm256_min_epi32(_mm256_max_epi32(index, _mm256_setzero_si256()),
                           _mm256_set1_epi32(streamvec::kSigmoidTableSize - 1));
  __m256 sigma = _mm256_i32gather_ps(table, index, 4);
  sigma = _mm256_blendv_ps(sigma, _mm256_set1_ps(1.0f), _mm256_cmp_ps(x, max_logit, _CMP_GE_OQ));
  sigma = _mm256_blendv_ps(sigma, _mm256_setzero_ps(),
                           _mm256_cmp_ps(x, _mm256_sub_ps(_mm256_setzero_ps(), max_logit),
                                         _CMP_LE_OQ));
  const __m256 label = _mm256_setr_ps(1.0f, 0, 0, 0, 0, 0, 0, 0);
  _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_sub_ps(label, sigma), _mm256_set1_ps(lr)));
}

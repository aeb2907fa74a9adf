// The dot product written once over a register wrapper (simd_vec_avx2.h, simd_vec_avx512.h):
// two accumulators of Vec::kLanes floats, a scalar tail. Include from the ISA's translation unit.
#ifndef STREAMVEC_KERNELS_SRC_DOT_BODY_H_
#define STREAMVEC_KERNELS_SRC_DOT_BODY_H_

#include <cstddef>

namespace streamvec::internal {

template <typename Vec>
float DotBody(const float* a, const float* b, size_t n) {
  constexpr size_t L = Vec::kLanes;
  typename Vec::R s0 = Vec::Zero(), s1 = Vec::Zero();
  size_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    s0 = Vec::Fma(Vec::LoadU(a + i), Vec::LoadU(b + i), s0);
    s1 = Vec::Fma(Vec::LoadU(a + i + L), Vec::LoadU(b + i + L), s1);
  }
  if (i + L <= n) {
    s0 = Vec::Fma(Vec::LoadU(a + i), Vec::LoadU(b + i), s0);
    i += L;
  }
  float dot = Vec::Sum(Vec::Add(s0, s1));
  for (; i < n; ++i) dot += a[i] * b[i];
  return dot;
}

// scores[i] = sum_j columns[j * width + i] * query[j] for i < width, j < dim (in order of j, one
// Vec::Fma per term: fused where the build has FMA): four vectors of scores at a time. scores
// must be aligned for Vec::Store (64 bytes covers every build).
template <typename Vec>
void ColumnScoresBody(const float* columns, const float* query, size_t dim, size_t width,
                      float* scores) {
  constexpr size_t L = Vec::kLanes;
  size_t i = 0;
  for (; i + 4 * L <= width; i += 4 * L) {
    typename Vec::R s0 = Vec::Zero(), s1 = Vec::Zero(), s2 = Vec::Zero(), s3 = Vec::Zero();
    const float* c = columns + i;
    for (size_t j = 0; j < dim; ++j, c += width) {
      const typename Vec::R q = Vec::Set1(query[j]);
      s0 = Vec::Fma(Vec::LoadU(c), q, s0);
      s1 = Vec::Fma(Vec::LoadU(c + L), q, s1);
      s2 = Vec::Fma(Vec::LoadU(c + 2 * L), q, s2);
      s3 = Vec::Fma(Vec::LoadU(c + 3 * L), q, s3);
    }
    Vec::Store(scores + i, s0);
    Vec::Store(scores + i + L, s1);
    Vec::Store(scores + i + 2 * L, s2);
    Vec::Store(scores + i + 3 * L, s3);
  }
  for (; i < width; ++i) {
    float s = 0;
    for (size_t j = 0; j < dim; ++j) s += columns[j * width + i] * query[j];
    scores[i] = s;
  }
}

}  // namespace streamvec::internal

#endif  // STREAMVEC_KERNELS_SRC_DOT_BODY_H_

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

}  // namespace streamvec::internal

#endif  // STREAMVEC_KERNELS_SRC_DOT_BODY_H_

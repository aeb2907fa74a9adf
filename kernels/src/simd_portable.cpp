// Portable build of simd_kernel.h: SSE2 (the x86-64 baseline) or, elsewhere, 4-float GCC vector
// extensions. No FMA: multiply then add.
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "dot_body.h"
#include "loss.h"
#include "streamvec/base/status.h"
#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace streamvec::internal {
namespace portable {

#if defined(__SSE2__)
struct Vec {
  using R = __m128;
  static constexpr int kLanes = 4;
  static R Zero() { return _mm_setzero_ps(); }
  static R Load(const float* p) { return _mm_load_ps(p); }
  static R LoadU(const float* p) { return _mm_loadu_ps(p); }  // any alignment
  static void Store(float* p, R v) { _mm_store_ps(p, v); }
  static R Set1(float a) { return _mm_set1_ps(a); }
  static R Fma(R a, R b, R c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
  static R Add(R a, R b) { return _mm_add_ps(a, b); }
  static R Mul(R a, R b) { return _mm_mul_ps(a, b); }
  static float Sum(R v) {
    R s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
    return _mm_cvtss_f32(s);
  }
  static constexpr bool kHasSum8 = false;
  static constexpr bool kHasGradients8 = false;
  static constexpr bool kHasGradientsN = false;
  static void Gradients8(const float*, const float*, float, float*) {}
  static void Sum8(const R*, float*) {}
};
#else
struct Vec {
  typedef float R __attribute__((vector_size(16)));
  static constexpr int kLanes = 4;
  static R Zero() { return R{0, 0, 0, 0}; }
  static R Load(const float* p) { return *reinterpret_cast<const R*>(p); }
  static R LoadU(const float* p) {  // any alignment
    R v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
  }
  static void Store(float* p, R v) { *reinterpret_cast<R*>(p) = v; }
  static R Set1(float a) { return R{a, a, a, a}; }
  static R Fma(R a, R b, R c) { return a * b + c; }
  static R Add(R a, R b) { return a + b; }
  static R Mul(R a, R b) { return a * b; }
  static float Sum(R v) { return (v[0] + v[1]) + (v[2] + v[3]); }
  static constexpr bool kHasSum8 = false;
  static constexpr bool kHasGradients8 = false;
  static constexpr bool kHasGradientsN = false;
  static void Gradients8(const float*, const float*, float, float*) {}
  static void Sum8(const R*, float*) {}
};
#endif

#include "simd_kernel.h"

}  // namespace portable

std::unique_ptr<SgnsKernel> MakePortableKernel() {
  return std::make_unique<portable::SimdKernel>("portable");
}

// Eight partial sums: vectorisable without -ffast-math (SSE2 at the baseline).
float DotPortable(const float* a, const float* b, size_t n) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t l = 0; l < 8; ++l) partial[l] += a[i + l] * b[i + l];
  }
  float dot = 0;
  for (; i < n; ++i) dot += a[i] * b[i];
  for (float p : partial) dot += p;
  return dot;
}

int32_t Int8DotPortable(const int8_t* a, const int8_t* b, size_t n) {
  int32_t dot = 0;
  for (size_t i = 0; i < n; ++i) dot += int32_t{a[i]} * int32_t{b[i]};
  return dot;
}

void Int8DotManyPortable(const int8_t* q, const int8_t* const* rows, size_t count, size_t n,
                         int32_t* out) {
  for (size_t c = 0; c < count; ++c) out[c] = Int8DotPortable(q, rows[c], n);
}

void ColumnScoresPortable(const float* columns, const float* query, size_t dim, size_t width,
                          float* scores) {
  ColumnScoresBody<portable::Vec>(columns, query, dim, width, scores);
}

}  // namespace streamvec::internal

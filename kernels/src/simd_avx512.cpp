// AVX-512 build of simd_kernel.h (compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "loss.h"
#include "streamvec/base/status.h"
#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/sgns_math.h"

#include "streamvec/kernels/sgns_kernel.h"

namespace streamvec::internal {
namespace avx512 {

struct Vec {
  using R = __m512;
  static constexpr int kLanes = 16;
  static R Zero() { return _mm512_setzero_ps(); }
  static R Load(const float* p) { return _mm512_load_ps(p); }
  static void Store(float* p, R v) { _mm512_store_ps(p, v); }
  static R Set1(float a) { return _mm512_set1_ps(a); }
  static R Fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R Add(R a, R b) { return _mm512_add_ps(a, b); }
  static R Mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static float Sum(R v) { return _mm512_reduce_add_ps(v); }
};

#include "simd_kernel.h"

}  // namespace avx512

std::unique_ptr<SgnsKernel> MakeAvx512Kernel() {
  return std::make_unique<avx512::SimdKernel>("avx512");
}

}  // namespace streamvec::internal

// The register-blocked Adagrad step (adagrad_step_simd.inc) with AVX-512F: compiled with
// -mavx512f -mavx512vl -mavx512dq -mfma (trainer/CMakeLists.txt), called only when the CPU has
// them (Isa::kAvx512, as the kernels' AVX-512 build).
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "adagrad_step.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"

namespace streamvec {
namespace adagrad_avx512 {

struct Vec {
  using R = __m512;
  static constexpr int kLanes = 16;
  static R Zero() { return _mm512_setzero_ps(); }
  static R Load(const float* p) { return _mm512_load_ps(p); }
  static void Store(float* p, R v) { _mm512_store_ps(p, v); }
  static R Set1(float a) { return _mm512_set1_ps(a); }
  static R Fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R Add(R a, R b) { return _mm512_add_ps(a, b); }
  static float Sum(R v) { return _mm512_reduce_add_ps(v); }
};

#include "adagrad_step_simd.inc"

}  // namespace adagrad_avx512

void AdagradSentenceAvx512(const AdagradSentenceArgs& args) {
  adagrad_avx512::Step(args).Run();
}

}  // namespace streamvec

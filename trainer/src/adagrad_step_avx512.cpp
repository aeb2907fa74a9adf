// The register-blocked Adagrad step (adagrad_step_simd.inc) with AVX-512F: compiled with
// -mavx512f -mavx512vl -mavx512dq -mfma (trainer/CMakeLists.txt), called only when the CPU has
// them (Isa::kAvx512, as the kernels' AVX-512 build).
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "adagrad_step.h"
#include "streamvec/kernels/sgns_gradients_avx512.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"
#include "streamvec/kernels/simd_vec_avx512.h"

namespace streamvec {
namespace adagrad_avx512 {

struct Vec : simd::Avx512 {
  static constexpr bool kHasGradientsN = true;
  static void GradientsN(const float* table, const float* logits, const float* labels, int n,
                         float lr, float* out) {
    simd::SgnsGradientsN(table, logits, labels, n, lr, out);
  }
};

#include "adagrad_step_simd.inc"

}  // namespace adagrad_avx512

void AdagradSentenceAvx512(const AdagradSentenceArgs& args) {
  adagrad_avx512::Step(args).Run();
}

}  // namespace streamvec

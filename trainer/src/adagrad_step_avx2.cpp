// The register-blocked Adagrad step (adagrad_step_simd.inc) with AVX2+FMA: compiled with
// -mavx2 -mfma (trainer/CMakeLists.txt), called only when the CPU has them.
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "adagrad_step.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"
#include "streamvec/kernels/simd_vec_avx2.h"

namespace streamvec {
namespace adagrad_avx2 {

struct Vec : simd::Avx2 {
  static constexpr bool kHasGradientsN = false;
};

#include "adagrad_step_simd.inc"

}  // namespace adagrad_avx2

void AdagradSentenceAvx2(const AdagradSentenceArgs& args) { adagrad_avx2::Step(args).Run(); }

}  // namespace streamvec

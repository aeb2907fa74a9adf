// AVX2 + FMA build of simd_kernel.h (compiled with -mavx2 -mfma).
#include <immintrin.h>

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
#include "streamvec/kernels/simd_vec_avx2.h"

namespace streamvec::internal {
namespace avx2 {

#include "gradients8_avx2.h"

struct Vec : simd::Avx2 {  // Sum8 from simd::Avx2
  static constexpr bool kHasGradients8 = true;
  static constexpr bool kHasGradientsN = false;
  static void Gradients8(const float* table, const float* logits, float lr, float* out) {
    SgnsGradients8(table, logits, lr, out);
  }
};

#include "simd_kernel.h"

}  // namespace avx2

std::unique_ptr<SgnsKernel> MakeAvx2Kernel() { return std::make_unique<avx2::SimdKernel>("avx2"); }

float DotAvx2(const float* a, const float* b, size_t n) { return DotBody<avx2::Vec>(a, b, n); }

void ColumnScoresAvx2(const float* columns, const float* query, size_t dim, size_t width,
                      float* scores) {
  ColumnScoresBody<avx2::Vec>(columns, query, dim, width, scores);
}

}  // namespace streamvec::internal

#include "streamvec/kernels/dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "streamvec/base/cpu_features.h"

namespace streamvec {
namespace {

class DotTest : public ::testing::TestWithParam<Isa> {};

// Every build against a double-precision sum, for lengths around each build's steps (8, 16, 32)
// and unaligned starts.
TEST_P(DotTest, MatchesADoublePrecisionSumForAnyLengthAndAlignment) {
  if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  const DotFn dot = DotFunction(GetParam());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(400), b(400);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  for (size_t n : {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 100, 127, 300}) {
    for (size_t offset : {0, 1, 3}) {
      double want = 0, magnitude = 0;
      for (size_t i = 0; i < n; ++i) {
        want += static_cast<double>(a[offset + i]) * b[offset + i];
        magnitude += std::abs(static_cast<double>(a[offset + i]) * b[offset + i]);
      }
      const float got = dot(a.data() + offset, b.data() + offset, n);
      EXPECT_NEAR(got, want, 1e-6 * (1 + magnitude))
          << IsaName(GetParam()) << " n=" << n << " offset=" << offset;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, DotTest,
                         ::testing::Values(Isa::kPortable, Isa::kAvx2, Isa::kAvx512),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

}  // namespace
}  // namespace streamvec

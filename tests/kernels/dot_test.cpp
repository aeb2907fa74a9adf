#include "streamvec/kernels/dot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// Column-major blocks (an exact neighbour scan's layout), widths around the vector steps.
TEST_P(DotTest, ColumnScoresMatchADoublePrecisionSumPerColumn) {
  if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  const ColumnScoresFn scores_fn = ColumnScoresFunction(GetParam());
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t dim : {1, 3, 100}) {
    for (size_t width : {1, 15, 64, 65, 256}) {
      std::vector<float> columns(dim * width), query(dim);
      for (float& x : columns) x = u(rng);
      for (float& x : query) x = u(rng);
      alignas(64) float scores[256 + 16];
      std::fill(scores, scores + 256 + 16, -7.0f);
      scores_fn(columns.data(), query.data(), dim, width, scores);
      for (size_t i = 0; i < width; ++i) {
        double want = 0, magnitude = 0;
        for (size_t j = 0; j < dim; ++j) {
          want += static_cast<double>(columns[j * width + i]) * query[j];
          magnitude += std::abs(static_cast<double>(columns[j * width + i]) * query[j]);
        }
        ASSERT_NEAR(scores[i], want, 1e-6 * (1 + magnitude))
            << IsaName(GetParam()) << " dim=" << dim << " width=" << width << " i=" << i;
      }
      EXPECT_EQ(scores[width], -7.0f) << "wrote past width " << width;
    }
  }
}

// The int8 inner product is exact: every build equals the int32 sum for lengths around each
// build's steps (16, 32), unaligned starts, and the extreme codes (-128 * -128 summed).
TEST_P(DotTest, Int8DotIsTheExactIntegerSumForAnyLengthAndAlignment) {
  if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  const Int8DotFn dot = Int8DotFunction(GetParam());
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> u(-128, 127);
  std::vector<int8_t> a(400), b(400);
  for (int8_t& x : a) x = static_cast<int8_t>(u(rng));
  for (int8_t& x : b) x = static_cast<int8_t>(u(rng));
  for (size_t n : {0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 100, 127, 300}) {
    for (size_t offset : {0, 1, 3}) {
      int64_t want = 0;
      for (size_t i = 0; i < n; ++i) want += int64_t{a[offset + i]} * b[offset + i];
      EXPECT_EQ(dot(a.data() + offset, b.data() + offset, n), want)
          << IsaName(GetParam()) << " n=" << n << " offset=" << offset;
    }
  }
  const std::vector<int8_t> low(300, -128);
  EXPECT_EQ(dot(low.data(), low.data(), 300), 300 * 128 * 128) << IsaName(GetParam());
}

// The batched form gives each row's exact sum, for lengths on both sides of the widened query's
// four registers (128 codes), rows at unaligned addresses, and a count of 0.
TEST_P(DotTest, Int8DotManyEqualsTheExactSumOfEachRow) {
  if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  const Int8DotManyFn many = Int8DotManyFunction(GetParam());
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> u(-128, 127);
  std::vector<int8_t> q(301), pool(7 * 301);
  for (int8_t& x : q) x = static_cast<int8_t>(u(rng));
  for (int8_t& x : pool) x = static_cast<int8_t>(u(rng));
  for (size_t n : {1, 31, 32, 33, 100, 104, 127, 128, 129, 300}) {
    std::vector<const int8_t*> rows;
    for (size_t c = 0; c < 6; ++c) rows.push_back(pool.data() + c * 301 + c % 3);
    std::vector<int32_t> out(rows.size() + 1, -7);
    many(q.data() + 1, rows.data(), rows.size(), n, out.data());
    for (size_t c = 0; c < rows.size(); ++c) {
      int64_t want = 0;
      for (size_t i = 0; i < n; ++i) want += int64_t{q[1 + i]} * rows[c][i];
      EXPECT_EQ(out[c], want) << IsaName(GetParam()) << " n=" << n << " row " << c;
    }
    EXPECT_EQ(out[rows.size()], -7) << "wrote past count";
    out[0] = -9;
    many(q.data(), rows.data(), 0, n, out.data());
    EXPECT_EQ(out[0], -9) << "count 0 writes nothing";
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, DotTest,
                         ::testing::Values(Isa::kPortable, Isa::kAvx2, Isa::kAvx512),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

}  // namespace
}  // namespace streamvec

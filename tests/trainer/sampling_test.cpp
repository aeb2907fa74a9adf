#include "streamvec/trainer/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "streamvec/base/rng.h"

namespace streamvec {
namespace {

TEST(SubsamplingTest, KeepProbabilityIsSqrtRatioPlusRatio) {
  // f = 0.1, t = 1e-3: t/f = 0.01 -> 0.1 + 0.01.
  EXPECT_NEAR(SubsampleKeepProbability(100000, 1000000, 1e-3), 0.11, 1e-12);
  // f = 0.01, t = 1e-4: t/f = 0.01 -> 0.11 too.
  EXPECT_NEAR(SubsampleKeepProbability(10000, 1000000, 1e-4), 0.11, 1e-12);
  // Rare words are always kept; sample 0 disables subsampling.
  EXPECT_EQ(SubsampleKeepProbability(10, 1000000, 1e-3), 1.0);
  EXPECT_EQ(SubsampleKeepProbability(900000, 1000000, 0.0), 1.0);
}

TEST(SubsamplingTest, ThresholdsKeepTheRightFraction) {
  const std::vector<uint64_t> counts = {500000, 10};
  const auto thr = SubsampleThresholds(counts, 1000000, 1e-3);
  EXPECT_EQ(thr[1], uint64_t{1} << 32);
  Rng rng(3);
  int kept = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) kept += (rng.Next() >> 32) < thr[0];
  const double p = SubsampleKeepProbability(500000, 1000000, 1e-3);
  EXPECT_NEAR(static_cast<double>(kept) / n, p, 4 * std::sqrt(p * (1 - p) / n));
}

TEST(UnigramTableTest, ExactProbabilitiesFollowCountToThePower) {
  const std::vector<uint64_t> counts = {1000, 300, 300, 50, 7, 1, 0, 12345};
  UnigramTable t;
  t.Build(counts, 0.75);
  double sum = 0;
  for (uint64_t c : counts) sum += std::pow(static_cast<double>(c), 0.75);
  for (uint32_t i = 0; i < counts.size(); ++i) {
    EXPECT_NEAR(t.Probability(i), std::pow(static_cast<double>(counts[i]), 0.75) / sum, 1e-8)
        << "word " << i;
  }
}

TEST(UnigramTableTest, SampledFrequenciesPassChiSquared) {
  // Zipf-like counts over 50 words; 1M draws with a fixed seed.
  std::vector<uint64_t> counts;
  for (int i = 1; i <= 50; ++i) counts.push_back(100000 / i);
  UnigramTable t;
  t.Build(counts, 0.75);
  std::vector<int> seen(counts.size(), 0);
  Rng rng(12345);
  const int n = 1000000;
  for (int i = 0; i < n; ++i) ++seen[t.Sample(rng.Next())];
  double sum = 0;
  for (uint64_t c : counts) sum += std::pow(static_cast<double>(c), 0.75);
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = n * std::pow(static_cast<double>(counts[i]), 0.75) / sum;
    chi2 += (seen[i] - expected) * (seen[i] - expected) / expected;
  }
  // 49 degrees of freedom: P(chi2 > 85.35) = 0.001.
  EXPECT_LT(chi2, 85.35);
  // And a flat exponent gives a uniform table, a visibly different distribution.
  UnigramTable flat;
  flat.Build(counts, 0.0);
  EXPECT_NEAR(flat.Probability(0), 1.0 / 50, 1e-9);
  EXPECT_NEAR(flat.Probability(49), 1.0 / 50, 1e-9);
}

TEST(UnigramTableTest, NeverDrawsZeroCountWords) {
  UnigramTable t;
  t.Build({0, 5, 0, 5}, 0.75);
  Rng rng(1);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t w = t.Sample(rng.Next());
    ASSERT_TRUE(w == 1 || w == 3) << w;
  }
}

TEST(DrawNegativesTest, PoolNegativesComeFromThePoolAndKeepTheNoiseDistribution) {
  // Zipf-like counts over 50 words; micro-batches of 100 positions x 5 negatives from pools of
  // 16 words: each negative is one of its call's pool, and over 2000 calls the frequencies
  // follow count^0.75 (the pool is an i.i.d. sample of it, and a negative a uniform pick).
  std::vector<uint64_t> counts;
  for (int i = 1; i <= 50; ++i) counts.push_back(100000 / i);
  UnigramTable t;
  t.Build(counts, 0.75);
  Rng rng(7);
  const size_t n = 100;
  const int K = 5;
  std::vector<uint32_t> pool, out(n * K);
  std::vector<int> seen(counts.size(), 0);
  const int calls = 2000;
  for (int c = 0; c < calls; ++c) {
    DrawNegatives(t, rng, n, K, /*share=*/1, /*pool_size=*/16, &pool, out.data());
    ASSERT_EQ(pool.size(), 16u);
    for (uint32_t w : out) {
      ASSERT_NE(std::find(pool.begin(), pool.end(), w), pool.end()) << w;
      ++seen[w];
    }
  }
  // Draws are correlated within a call: a word's share of a call's picks has variance
  // p (1 - p) (1/16 + 1/500) (the pool's 16 draws, then 500 uniform picks from it), that is of
  // 1 / (1/16 + 1/500) independent draws per call.
  const double effective = calls / (1.0 / 16 + 1.0 / (n * K));
  const double total = static_cast<double>(calls) * n * K;
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double p = t.Probability(static_cast<uint32_t>(i));
    const double freq = seen[i] / total;
    chi2 += effective * (freq - p) * (freq - p) / p;
  }
  // 49 degrees of freedom: P(chi2 > 85.35) = 0.001. (Picking one pool word per call for all
  // its negatives keeps the mean but not the variance: chi2 near 500.)
  EXPECT_LT(chi2, 85.35);
}

TEST(DrawNegativesTest, SharedDrawsCopyThePreviousPosition) {
  UnigramTable t;
  t.Build({100, 50, 25, 10, 5, 1}, 0.75);
  Rng rng(3);
  const int K = 3;
  for (int pool_size : {0, 4}) {
    std::vector<uint32_t> pool, out(7 * K);
    DrawNegatives(t, rng, 7, K, /*share=*/2, pool_size, &pool, out.data());
    for (int i = 1; i < 7; i += 2) {
      for (int k = 0; k < K; ++k) EXPECT_EQ(out[i * K + k], out[(i - 1) * K + k]) << i;
    }
  }
}

TEST(DrawNegativesTest, WithoutAPoolTheDrawsAreTheTablesOwn) {
  // pool_size 0: the same sequence as UnigramTable::Sample on the same generator.
  UnigramTable t;
  t.Build({100, 50, 25, 10, 5, 1}, 0.75);
  Rng a(11), b(11);
  std::vector<uint32_t> pool, out(20 * 5);
  DrawNegatives(t, a, 20, 5, 1, 0, &pool, out.data());
  for (uint32_t w : out) EXPECT_EQ(w, t.Sample(b.Next()));
  EXPECT_TRUE(pool.empty());
}

}  // namespace
}  // namespace streamvec

// Merge rules: each against a hand-computed case, AdaSum's defining properties, and the batch
// that collects a round per row.
#include "streamvec/param/merge.h"

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace streamvec {
namespace {

using ::testing::HasSubstr;

struct Row {
  std::vector<float> v;
  float g = 0.0f;
  NodeRowRef ref() { return NodeRowRef{v.data(), &g}; }
};

void Merge(MergeRule rule, Row& row, const std::vector<std::vector<float>>& deltas,
           float eta = 0.2f, double scale = 1.0) {
  MergeOptions o;
  o.rule = rule;
  o.eta = eta;
  o.scale = scale;
  std::vector<const float*> p;
  for (const auto& d : deltas) p.push_back(d.data());
  MergeRound(o, p, static_cast<int>(row.v.size()), row.ref());
}

TEST(MergeRuleTest, NamesRoundTripAndBadNamesAreRefused) {
  for (MergeRule r : {MergeRule::kDownpour, MergeRule::kAverage, MergeRule::kSum,
                      MergeRule::kAdaSum, MergeRule::kScaledSum}) {
    StatusOr<MergeRule> back = ParseMergeRule(MergeRuleName(r));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, r);
  }
  EXPECT_EQ(MergeRuleName(MergeRule::kAdaSum), "adasum");
  EXPECT_EQ(MergeRuleName(MergeRule::kDownpour), "downpour");
  EXPECT_EQ(MergeRuleName(MergeRule::kScaledSum), "scaled");
  StatusOr<MergeRule> bad = ParseMergeRule("mean");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--merge must be one of downpour, average, sum, adasum, scaled, not 'mean'");
}

TEST(MergeRuleTest, MergeScaleIsAutoOrAFactorUpToOne) {
  EXPECT_EQ(*ParseMergeScale("auto"), 0.0);
  EXPECT_EQ(*ParseMergeScale("0.35"), 0.35);
  EXPECT_EQ(*ParseMergeScale("1"), 1.0);
  for (const char* bad : {"", "0", "-0.5", "1.5", "half", "0.5x", "nan"}) {
    StatusOr<double> s = ParseMergeScale(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().message(),
              "--merge-scale must be auto or a number in (0, 1], not '" + std::string(bad) + "'");
  }
}

TEST(MergeRuleTest, SumAddsEveryDelta) {
  Row row{{1.0f, 2.0f}};
  Merge(MergeRule::kSum, row, {{0.5f, -1.0f}, {0.25f, 0.5f}});
  EXPECT_EQ(row.v, (std::vector<float>{1.75f, 1.5f}));
  EXPECT_EQ(row.g, 0.0f);
}

TEST(MergeRuleTest, AverageAddsTheMeanAndKeepsALoneDeltaWhole) {
  Row row{{1.0f, 2.0f}};
  Merge(MergeRule::kAverage, row, {{0.5f, -1.0f}, {0.25f, 0.5f}});
  // mean = (0.375, -0.25)
  EXPECT_EQ(row.v, (std::vector<float>{1.375f, 1.75f}));
  Row lone{{1.0f, 2.0f}};
  Merge(MergeRule::kAverage, lone, {{0.5f, -1.0f}});
  EXPECT_EQ(lone.v, (std::vector<float>{1.5f, 1.0f}));
}

TEST(MergeRuleTest, ScaledSumAddsTheSumTimesTheNodesScale) {
  // 4 active trainers: scale 1/sqrt(4) = 0.5; sum = (0.75, -0.5) -> row += (0.375, -0.25).
  Row row{{1.0f, 2.0f}};
  Merge(MergeRule::kScaledSum, row, {{0.5f, -1.0f}, {0.25f, 0.5f}}, 0.2f, 0.5);
  EXPECT_EQ(row.v, (std::vector<float>{1.375f, 1.75f}));
  Row lone{{1.0f, 2.0f}};  // a lone delta is scaled too: its pusher's staleness is the same
  Merge(MergeRule::kScaledSum, lone, {{0.5f, -1.0f}}, 0.2f, 0.5);
  EXPECT_EQ(lone.v, (std::vector<float>{1.25f, 1.5f}));
}

TEST(MergeRuleTest, AdaSumPairMatchesTheHandComputedCombination) {
  // a = (1, 0), b = (1, 1): a.b = 1, |a|^2 = 1, |b|^2 = 2;
  // (1 - 1/2) a + (1 - 1/4) b = (0.5, 0) + (0.75, 0.75) = (1.25, 0.75).
  Row row{{0.0f, 0.0f}};
  Merge(MergeRule::kAdaSum, row, {{1.0f, 0.0f}, {1.0f, 1.0f}});
  EXPECT_EQ(row.v, (std::vector<float>{1.25f, 0.75f}));
}

TEST(MergeRuleTest, AdaSumTreeCarriesTheOddDeltaUpALevel) {
  // Level 1: adasum(a, b) = x = (1.25, 0.75); c = (0, 2) moves up. Level 2: x.c = 1.5,
  // |x|^2 = 2.125, |c|^2 = 4: (1 - 1.5/4.25) x + (1 - 1.5/8) c = (11/17) x + (13/16) c
  // = (55/68, 33/68 + 13/8) = (0.8088235, 2.1102941).
  Row row{{0.0f, 0.0f}};
  Merge(MergeRule::kAdaSum, row, {{1.0f, 0.0f}, {1.0f, 1.0f}, {0.0f, 2.0f}});
  EXPECT_FLOAT_EQ(row.v[0], 55.0f / 68.0f);
  EXPECT_FLOAT_EQ(row.v[1], 287.0f / 136.0f);
}

TEST(MergeRuleTest, DownpourAppliesEachDeltaWithNodeSideAdagrad) {
  // eta 0.5. d1 = (3, 4): G = (9 + 16) / 2 = 12.5, lr = 0.5 / sqrt(12.5) = 0.14142136,
  // row = (0.42426407, 0.56568542). d2 = (1, -1): G = 13.5, lr = 0.5 / sqrt(13.5) = 0.13608276,
  // row = (0.56034683, 0.42960266).
  Row row{{0.0f, 0.0f}};
  Merge(MergeRule::kDownpour, row, {{3.0f, 4.0f}, {1.0f, -1.0f}}, 0.5f);
  EXPECT_FLOAT_EQ(row.g, 13.5f);
  EXPECT_NEAR(row.v[0], 0.56034683f, 1e-6);
  EXPECT_NEAR(row.v[1], 0.42960266f, 1e-6);
  // The accumulator persists: the same delta again takes a smaller step.
  Row again = row;
  Merge(MergeRule::kDownpour, again, {{1.0f, -1.0f}}, 0.5f);
  EXPECT_FLOAT_EQ(again.g, 14.5f);
  EXPECT_NEAR(again.v[0] - row.v[0], 0.5 / std::sqrt(14.5), 1e-6);
}

TEST(MergeRuleTest, AdaSumOfOrthogonalDeltasIsTheirSum) {
  std::mt19937 rng(11);
  std::normal_distribution<double> n(0.0, 1.0);
  for (int dim : {2, 17, 100}) {
    std::vector<double> a(dim), b(dim), out(dim);
    for (int j = 0; j < dim; ++j) a[j] = n(rng), b[j] = n(rng);
    double ab = 0, aa = 0;
    for (int j = 0; j < dim; ++j) ab += a[j] * b[j], aa += a[j] * a[j];
    for (int j = 0; j < dim; ++j) b[j] -= ab / aa * a[j];  // b orthogonal to a
    AdaSumPair(a.data(), b.data(), dim, out.data());
    for (int j = 0; j < dim; ++j) EXPECT_NEAR(out[j], a[j] + b[j], 1e-12) << dim;
  }
}

TEST(MergeRuleTest, AdaSumOfIdenticalDeltasIsTheDeltaWhereSumGrowsWithTrainers) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  std::vector<float> d(50);
  for (float& x : d) x = u(rng);
  const std::vector<std::vector<float>> sixteen(16, d);
  Row ada{std::vector<float>(50, 0.0f)}, sum{std::vector<float>(50, 0.0f)};
  Merge(MergeRule::kAdaSum, ada, sixteen);
  Merge(MergeRule::kSum, sum, sixteen);
  for (int j = 0; j < 50; ++j) {
    EXPECT_NEAR(ada.v[j], d[j], 1e-7);
    EXPECT_NEAR(sum.v[j], 16 * d[j], 1e-6);
  }
}

TEST(MergeRuleTest, ZeroDeltasAndEmptyRoundsChangeNothing) {
  for (MergeRule rule :
       {MergeRule::kDownpour, MergeRule::kAverage, MergeRule::kSum, MergeRule::kAdaSum}) {
    Row row{{0.25f, -0.5f, 3.0f}, 2.0f};
    const Row before = row;
    Merge(rule, row, {{0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f}});
    EXPECT_EQ(row.v, before.v) << MergeRuleName(rule);
    EXPECT_EQ(row.g, before.g) << MergeRuleName(rule);
    Merge(rule, row, {});
    EXPECT_EQ(row.v, before.v) << MergeRuleName(rule);
    // A zero delta beside a real one: AdaSum and sum give the real one, average half of it.
    Row mixed{{0.0f, 0.0f, 0.0f}};
    Merge(rule, mixed, {{0.0f, 0.0f, 0.0f}, {1.0f, 2.0f, -2.0f}});
    if (rule == MergeRule::kAdaSum || rule == MergeRule::kSum) {
      EXPECT_EQ(mixed.v, (std::vector<float>{1.0f, 2.0f, -2.0f})) << MergeRuleName(rule);
    }
  }
}

TEST(MergeRuleTest, HugeDeltasGiveFiniteRowsUnderEveryRule) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-1e30f, 1e30f);
  std::vector<std::vector<float>> deltas(5, std::vector<float>(64));
  for (auto& d : deltas) {
    for (float& x : d) x = u(rng);
  }
  for (MergeRule rule : {MergeRule::kDownpour, MergeRule::kAverage, MergeRule::kSum,
                         MergeRule::kAdaSum, MergeRule::kScaledSum}) {
    Row row{std::vector<float>(64, 0.5f)};
    Merge(rule, row, deltas);
    Merge(rule, row, deltas);
    for (float x : row.v) ASSERT_TRUE(std::isfinite(x)) << MergeRuleName(rule);
    ASSERT_TRUE(std::isfinite(row.g)) << MergeRuleName(rule);
  }
  // Float arithmetic would overflow in |a|^2 (1e60); the pair is computed in double.
  std::vector<double> a(64), out(64);
  for (int j = 0; j < 64; ++j) a[j] = deltas[0][j];
  AdaSumPair(a.data(), a.data(), 64, out.data());
  for (int j = 0; j < 64; ++j) EXPECT_NEAR(out[j], a[j], 1e-6 * std::abs(a[j]));
}

TEST(MergeBatchTest, SumsASendersDeltasAndMergesSendersPerRow) {
  MergeBatch batch(2);
  const std::vector<float> a1{1.0f, 0.0f}, a2{0.0f, 0.0f}, b{1.0f, 1.0f}, c{4.0f, -2.0f};
  batch.Add(/*key=*/10, /*sender=*/1, a1);
  batch.Add(10, 2, b);
  batch.Add(10, 1, a2);  // sender 1 again: summed with its first delta
  batch.Add(3, 1, c);
  EXPECT_EQ(batch.rows(), 2u);
  EXPECT_EQ(batch.contributions(), 3u);
  std::map<uint64_t, Row> rows;
  rows[10] = Row{{0.0f, 0.0f}};
  rows[3] = Row{{1.0f, 1.0f}};
  std::vector<uint64_t> order;
  MergeOptions o;
  o.rule = MergeRule::kAdaSum;
  batch.Apply(o, [&](uint64_t key) {
    order.push_back(key);
    return rows.at(key).ref();
  });
  EXPECT_EQ(order, (std::vector<uint64_t>{10, 3}));
  // Row 10: adasum((1, 0), (1, 1)) = (1.25, 0.75) as by hand above; row 3: a lone delta.
  EXPECT_EQ(rows[10].v, (std::vector<float>{1.25f, 0.75f}));
  EXPECT_EQ(rows[3].v, (std::vector<float>{5.0f, -1.0f}));
  EXPECT_EQ(batch.rows(), 0u);
  EXPECT_EQ(batch.contributions(), 0u);
}

// Keys of any size are rows of their own (small ones through the batch's table, large ones
// through its map), in first-added order, and a reused batch starts every row afresh.
TEST(MergeBatchTest, KeysOfAnySizeAreRowsOfTheirOwnInTheOrderTheyCame) {
  MergeBatch batch(2);
  MergeOptions o;
  o.rule = MergeRule::kSum;
  const uint64_t small = 5, edge = uint64_t{1} << 22, large = uint64_t{1} << 40;
  const std::vector<float> one{1.0f, 2.0f}, ten{10.0f, 20.0f};
  for (int pass = 0; pass < 2; ++pass) {
    std::map<uint64_t, Row> rows;
    for (uint64_t key : {small, edge, large, edge - 1}) rows[key] = Row{{0.0f, 0.0f}};
    batch.Add(small, 1, one);
    batch.Add(large, 1, one);
    batch.Add(edge, 2, ten);
    batch.Add(small, 2, ten);
    batch.Add(large, 1, ten);  // sender 1 again: summed into its first delta
    batch.Add(edge - 1, 1, one);
    EXPECT_EQ(batch.rows(), 4u) << pass;
    EXPECT_EQ(batch.contributions(), 5u) << pass;
    std::vector<uint64_t> order;
    batch.Apply(o, [&](uint64_t key) {
      order.push_back(key);
      return rows.at(key).ref();
    });
    EXPECT_EQ(order, (std::vector<uint64_t>{small, large, edge, edge - 1})) << pass;
    EXPECT_EQ(rows[small].v, (std::vector<float>{11.0f, 22.0f})) << pass;
    EXPECT_EQ(rows[large].v, (std::vector<float>{11.0f, 22.0f})) << pass;
    EXPECT_EQ(rows[edge].v, (std::vector<float>{10.0f, 20.0f})) << pass;
    EXPECT_EQ(rows[edge - 1].v, (std::vector<float>{1.0f, 2.0f})) << pass;
  }
}

TEST(MergeBatchTest, ABatchReusedAfterApplyMergesItsSendersInTheOrderTheyCame) {
  MergeBatch batch(2);
  MergeOptions o;
  o.rule = MergeRule::kAdaSum;  // order-sensitive: the tree pairs senders 1 and 2 first
  std::map<uint64_t, Row> rows;
  rows[7] = Row{{0.0f, 0.0f}};
  batch.Add(7, 9, std::vector<float>{5.0f, 5.0f});
  batch.Apply(o, [&](uint64_t key) { return rows.at(key).ref(); });
  EXPECT_EQ(rows[7].v, (std::vector<float>{5.0f, 5.0f}));
  // The second batch: three senders for row 7, interleaved with another row's.
  const std::vector<float> a{1.0f, 0.0f}, b{1.0f, 1.0f}, c{0.0f, 3.0f}, d{2.0f, 2.0f};
  rows[7] = Row{{0.0f, 0.0f}};
  rows[8] = Row{{0.0f, 0.0f}};
  batch.Add(7, 3, a);
  batch.Add(8, 3, d);
  batch.Add(7, 1, b);
  batch.Add(7, 2, c);
  batch.Add(8, 1, d);
  EXPECT_EQ(batch.rows(), 2u);
  EXPECT_EQ(batch.contributions(), 5u);
  batch.Apply(o, [&](uint64_t key) { return rows.at(key).ref(); });
  std::vector<double> want7{1, 0, 1, 1, 0, 3}, want8{2, 2, 2, 2};
  AdaSumRound(want7.data(), 3, 2);
  AdaSumRound(want8.data(), 2, 2);
  EXPECT_FLOAT_EQ(rows[7].v[0], static_cast<float>(want7[0]));
  EXPECT_FLOAT_EQ(rows[7].v[1], static_cast<float>(want7[1]));
  EXPECT_FLOAT_EQ(rows[8].v[0], static_cast<float>(want8[0]));  // parallel: their mean
  EXPECT_FLOAT_EQ(rows[8].v[0], 2.0f);
  // Another order of row 7's senders gives another result: the test tells orders apart.
  std::vector<double> other{0, 3, 1, 1, 1, 0};
  AdaSumRound(other.data(), 3, 2);
  EXPECT_GT(std::fabs(other[0] - want7[0]) + std::fabs(other[1] - want7[1]), 1e-3);
}

}  // namespace
}  // namespace streamvec

#include "streamvec/eval/neighbors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace streamvec::eval {
namespace {

using ::testing::HasSubstr;

// Cosines with "a" = (1, 0): b 0.995, e 0.707, c 0, f -0.447, d -1.
Embeddings TinyTable() {
  Embeddings e;
  e.dim = 2;
  e.words = {"a", "b", "c", "d", "e", "f"};
  e.vectors = {1, 0, 2, 0.2f, 0, 3, -1, 0, 1, 1, -1, 2};
  return e;
}

std::vector<std::string> Words(const NeighborIndex& index, const std::vector<Neighbor>& found) {
  std::vector<std::string> words;
  for (const Neighbor& n : found) words.push_back(index.word(n.row));
  return words;
}

TEST(NeighborIndexTest, ReturnsTopKByCosineWithoutTheWordItself) {
  const NeighborIndex index(TinyTable());
  StatusOr<std::vector<Neighbor>> top = index.Nearest("a", 3);
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(Words(index, *top), (std::vector<std::string>{"b", "e", "c"}));
  EXPECT_NEAR((*top)[0].similarity, 2 / std::sqrt(4.04), 1e-6);
  EXPECT_NEAR((*top)[1].similarity, 1 / std::sqrt(2.0), 1e-6);
  EXPECT_NEAR((*top)[2].similarity, 0.0, 1e-7);
}

TEST(NeighborIndexTest, LargeKReturnsEveryOtherRowInOrder) {
  const NeighborIndex index(TinyTable());
  StatusOr<std::vector<Neighbor>> all = index.Nearest("a", 100);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Words(index, *all), (std::vector<std::string>{"b", "e", "c", "f", "d"}));
  EXPECT_NEAR(all->back().similarity, -1.0, 1e-7);
}

TEST(NeighborIndexTest, UnknownWordIsNotFoundNamingIt) {
  const NeighborIndex index(TinyTable());
  StatusOr<std::vector<Neighbor>> r = index.Nearest("A", 3);  // exact match only
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("'A'"));
}

TEST(NeighborIndexTest, NearestToVectorIgnoresLength) {
  const NeighborIndex index(TinyTable());
  const float query[2] = {0, 10};
  const std::vector<Neighbor> top = index.NearestToVector(query, 2);
  EXPECT_EQ(Words(index, top), (std::vector<std::string>{"c", "f"}));
}

TEST(TopKByDotTest, AgreesWithFullSortOnRandomRows) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const size_t rows = 1000;
  const int dim = 13;
  std::vector<float> raw(rows * dim);
  for (float& v : raw) v = normal(rng);
  const std::vector<float> unit = NormalizeRows(raw.data(), rows, dim);
  std::vector<float> query(dim);
  for (float& v : query) v = normal(rng);
  const size_t exclude[] = {3, 500};
  const std::vector<Neighbor> top = TopKByDot(unit.data(), rows, dim, query.data(), 25, exclude);

  std::vector<Neighbor> all;
  for (size_t i = 0; i < rows; ++i) {
    if (i == 3 || i == 500) continue;
    double dot = 0;
    for (int d = 0; d < dim; ++d) dot += double(unit[i * dim + d]) * query[d];
    all.push_back({i, static_cast<float>(dot)});
  }
  std::sort(all.begin(), all.end(),
            [](const Neighbor& x, const Neighbor& y) { return x.similarity > y.similarity; });
  ASSERT_EQ(top.size(), 25u);
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(top[i].row, all[i].row) << i;
    EXPECT_NEAR(top[i].similarity, all[i].similarity, 1e-5);
  }
}

TEST(TopKByDotTest, NormalizedRowsHaveUnitLengthAndZeroRowsStayZero) {
  const float raw[6] = {3, 4, 0, 0, 0, 0};
  const std::vector<float> unit = NormalizeRows(raw, 2, 3);
  EXPECT_FLOAT_EQ(unit[0], 0.6f);
  EXPECT_FLOAT_EQ(unit[1], 0.8f);
  EXPECT_EQ(unit[3], 0.0f);
  EXPECT_FALSE(std::isnan(unit[4]));
}

}  // namespace
}  // namespace streamvec::eval

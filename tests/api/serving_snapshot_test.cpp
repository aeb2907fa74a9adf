// ServingSnapshot's blocked neighbour scan against eval's plain scan (the reference).
#include "streamvec/api/serving_snapshot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "streamvec/eval/neighbors.h"

namespace streamvec::api {
namespace {

Embeddings RandomEmbeddings(size_t rows, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Embeddings e;
  e.dim = dim;
  for (size_t i = 0; i < rows; ++i) e.words.push_back("w" + std::to_string(i));
  e.vectors.resize(rows * dim);
  for (float& v : e.vectors) v = normal(rng);
  return e;
}

TEST(ServingSnapshotTest, NeighborsMatchPlainScanOnRandomRows) {
  for (const size_t rows : {size_t{2}, size_t{255}, size_t{256}, size_t{1000}, size_t{3001}}) {
    const int dim = 37;
    Embeddings e = RandomEmbeddings(rows, dim, static_cast<uint32_t>(rows));
    e.vectors.resize(rows * dim);
    std::fill(e.vectors.begin() + dim, e.vectors.begin() + 2 * dim, 0.0f);  // a zero row
    const std::vector<float> unit = eval::NormalizeRows(e.vectors.data(), rows, dim);
    const ServingSnapshot s(e, SnapshotInfo{7, 1.5, "{}"});
    ASSERT_EQ(s.rows(), rows);
    for (const size_t query : {size_t{0}, rows / 2, rows - 1}) {
      for (const size_t k : {size_t{1}, size_t{10}, size_t{5000}}) {
        const size_t self[] = {query};
        const std::vector<eval::Neighbor> want =
            eval::TopKByDot(unit.data(), rows, dim, unit.data() + query * dim, k, self);
        const std::vector<ServingSnapshot::Neighbor> got = s.Neighbors(query, k);
        ASSERT_EQ(got.size(), want.size()) << rows << " rows, k " << k;
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_NE(got[i].row, query);
          // Same similarity at each rank (rows may swap on near-ties from float rounding).
          EXPECT_NEAR(got[i].similarity, want[i].similarity, 1e-5) << "rank " << i;
          if (i > 0) {
            EXPECT_GE(got[i - 1].similarity, got[i].similarity);
          }
        }
      }
    }
  }
}

TEST(ServingSnapshotTest, SimilarityIsCosineAndZeroForZeroRows) {
  Embeddings e;
  e.dim = 2;
  e.words = {"a", "b", "zero", "a"};
  e.vectors = {3, 4, -4, 3, 0, 0, 1, 1};
  const ServingSnapshot s(e, SnapshotInfo{1, 0, "{}"});
  EXPECT_NEAR(s.Similarity(0, 0), 1.0f, 1e-6);
  EXPECT_NEAR(s.Similarity(0, 1), 0.0f, 1e-6);
  EXPECT_EQ(s.Similarity(0, 2), 0.0f);
  EXPECT_EQ(s.Find("a"), 0u);  // duplicate word: the first row wins
  EXPECT_EQ(s.Find("zero"), 2u);
  EXPECT_FALSE(s.Find("A").has_value());
  EXPECT_EQ(s.version(), 1u);
  const float* v = s.vector(0);
  EXPECT_EQ(v[0], 3.0f);  // served as trained, not normalised
  EXPECT_EQ(v[1], 4.0f);
}

TEST(ServingSnapshotTest, SingleWordHasNoNeighbors) {
  Embeddings e;
  e.dim = 3;
  e.words = {"only"};
  e.vectors = {1, 2, 3};
  const ServingSnapshot s(e, SnapshotInfo{});
  EXPECT_TRUE(s.Neighbors(0, 10).empty());
}

}  // namespace
}  // namespace streamvec::api

// InterleaveEmbeddings: the union `serve` and `export` make of parameter-node shards.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "streamvec/store/embedding_entries.h"

namespace streamvec {
namespace {

Embeddings Make(int dim, const std::vector<std::string>& words, float first) {
  Embeddings e;
  e.dim = dim;
  e.words = words;
  for (size_t i = 0; i < words.size() * dim; ++i) e.vectors.push_back(first + i);
  return e;
}

TEST(EmbeddingUnionTest, ShardsAreInterleavedByRankAndAWordKeepsItsFirstRow) {
  std::vector<Embeddings> shards;
  shards.push_back(Make(2, {"the", "cat", "sat"}, 0));
  shards.push_back(Make(2, {"of", "cat"}, 100));
  StatusOr<Embeddings> u = InterleaveEmbeddings(std::move(shards));
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->words, (std::vector<std::string>{"the", "of", "cat", "sat"}));
  ASSERT_EQ(u->vectors.size(), 8u);
  EXPECT_EQ(u->row(1)[0], 100);  // "of": shard 1's row 0
  EXPECT_EQ(u->row(2)[1], 3);    // "cat": shard 0's row 1 (shard 1's copy dropped)
  EXPECT_EQ(u->row(3)[0], 4);    // "sat": shard 0's row 2
}

TEST(EmbeddingUnionTest, DifferentDimsAreRefusedNamingTheShards) {
  std::vector<Embeddings> shards;
  shards.push_back(Make(2, {"a"}, 0));
  shards.push_back(Make(3, {"b"}, 0));
  StatusOr<Embeddings> u = InterleaveEmbeddings(std::move(shards));
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("shard 1 has dim 3, shard 0 has dim 2"), std::string::npos)
      << u.status().ToString();
  EXPECT_FALSE(InterleaveEmbeddings({}).ok());
}

// With every shard's counts the union is in count order (ties: the lower rank, then the lower
// shard), a word held twice keeps the row and count that come first, and the counts come along.
TEST(EmbeddingUnionTest, WithCountsTheUnionIsInCountOrder) {
  std::vector<Embeddings> shards;
  shards.push_back(Make(2, {"the", "cat", "sat"}, 0));
  shards.push_back(Make(2, {"of", "cat", "mat"}, 100));
  const std::vector<std::vector<double>> counts = {{100, 10, 2}, {50, 20, 10}};
  std::vector<double> joined_counts = {7};
  StatusOr<Embeddings> u = InterleaveEmbeddings(std::move(shards), &counts, &joined_counts);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->words, (std::vector<std::string>{"the", "of", "cat", "mat", "sat"}));
  EXPECT_EQ(joined_counts, (std::vector<double>{100, 50, 20, 10, 2}));
  EXPECT_EQ(u->row(2)[0], 102);  // "cat": shard 1's row 1 (count 20 before shard 0's 10)
  EXPECT_EQ(u->row(3)[0], 104);  // "mat": shard 1's row 2
  EXPECT_EQ(u->row(4)[0], 4);    // "sat": shard 0's row 2
}

// A shard without counts (a snapshot written before they were) leaves the union by rank and
// without counts; counts of another size than the shard's words are refused.
TEST(EmbeddingUnionTest, MissingCountsFallBackToRankAndWrongSizesAreRefused) {
  std::vector<Embeddings> shards;
  shards.push_back(Make(2, {"the", "cat", "sat"}, 0));
  shards.push_back(Make(2, {"of", "mat"}, 100));
  const std::vector<std::vector<double>> partial = {{1, 2, 300}, {}};
  std::vector<double> joined_counts = {7};
  StatusOr<Embeddings> u = InterleaveEmbeddings(shards, &partial, &joined_counts);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->words, (std::vector<std::string>{"the", "of", "cat", "mat", "sat"}));
  EXPECT_TRUE(joined_counts.empty());
  const std::vector<std::vector<double>> wrong = {{1, 2, 3}, {4}};
  StatusOr<Embeddings> bad = InterleaveEmbeddings(shards, &wrong, &joined_counts);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("shard 1 has 1 counts for 2 words"), std::string::npos)
      << bad.status().ToString();
}

}  // namespace
}  // namespace streamvec

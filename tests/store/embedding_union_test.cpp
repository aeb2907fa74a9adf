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

}  // namespace
}  // namespace streamvec

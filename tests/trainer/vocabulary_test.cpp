#include "streamvec/trainer/vocabulary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace streamvec {
namespace {

TEST(VocabularyBuilderTest, CountsAndOrdersByCountThenFirstOccurrence) {
  VocabularyBuilder b;
  const char* words[] = {"b", "a", "c", "a", "d", "c", "a", "e", "b", "d", "f"};
  std::vector<uint32_t> provisional;
  for (const char* w : words) provisional.push_back(b.Add(w));
  EXPECT_EQ(b.size(), 6u);
  EXPECT_EQ(provisional[0], provisional[8]);  // "b" keeps its id
  EXPECT_EQ(b.count(b.Add("a") - 0), 4u);     // 3 + this one

  std::vector<uint32_t> remap;
  Vocabulary v = b.Build(2, &remap);
  // counts: a 4, b 2, c 2, d 2, e 1, f 1; ties b, c, d in first-occurrence order.
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v.word(0), "a");
  EXPECT_EQ(v.word(1), "b");
  EXPECT_EQ(v.word(2), "c");
  EXPECT_EQ(v.word(3), "d");
  EXPECT_EQ(v.count(0), 4u);
  EXPECT_EQ(v.total_count(), 10u);
  EXPECT_EQ(v.Find("c"), 2u);
  EXPECT_EQ(v.Find("e"), WordIndex::kNotFound);
  EXPECT_EQ(remap[provisional[0]], 1u);                       // b
  EXPECT_EQ(remap[provisional[7]], VocabularyBuilder::kDropped);  // e
}

TEST(VocabularyBuilderTest, ManyDistinctWordsSurviveRehashing) {
  VocabularyBuilder b;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 200000; ++i) b.Add(std::string("w").append(std::to_string(i)));
  }
  EXPECT_EQ(b.size(), 200000u);
  Vocabulary v = b.Build(3, nullptr);
  EXPECT_EQ(v.size(), 200000u);
  EXPECT_EQ(v.word(0), "w0");  // all tied: first occurrence first
  EXPECT_EQ(v.Find("w199999"), 199999u);
}

// Reserve sizes the table once; words inserted before and after it are all found, and ids of
// words that only share a prefix or a hash bucket are not confused.
TEST(WordIndexTest, FindsEveryWordAcrossReserveAndGrowth) {
  std::vector<std::string> words;
  for (int i = 0; i < 50000; ++i) words.push_back("word" + std::to_string(i));
  WordIndex index;
  EXPECT_EQ(index.Find("word0"), WordIndex::kNotFound);  // empty table
  for (uint32_t i = 0; i < 100; ++i) index.Insert(words[i], i);
  index.Reserve(20000);
  for (uint32_t i = 100; i < words.size(); ++i) index.Insert(words[i], i);  // past the reserve
  EXPECT_EQ(index.size(), words.size());
  for (uint32_t i = 0; i < words.size(); ++i) ASSERT_EQ(index.Find(words[i]), i) << words[i];
  EXPECT_EQ(index.Find("word"), WordIndex::kNotFound);
  EXPECT_EQ(index.Find("word50000"), WordIndex::kNotFound);
}

}  // namespace
}  // namespace streamvec

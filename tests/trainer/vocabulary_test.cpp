#include "streamvec/trainer/vocabulary.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <string_view>
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

TEST(VocabularyBuilderTest, WordsDifferingInAnyOneByteAreDistinct) {
  // Every length up to 12 (short words are compared as one zero-padded integer, longer ones
  // byte by byte), each byte position changed in turn, and a word with a trailing NUL.
  VocabularyBuilder b;
  std::vector<std::string> words;
  for (size_t n = 1; n <= 12; ++n) {
    const std::string base = std::string("abcdefghijkl").substr(0, n);
    words.push_back(base);
    for (size_t i = 0; i < n; ++i) {
      std::string w = base;
      w[i] = static_cast<char>(0xC3);  // a byte with the high bit set
      words.push_back(w);
    }
    words.push_back(base + std::string(1, '\0'));
  }
  std::vector<uint32_t> ids;
  for (const std::string& w : words) ids.push_back(b.Add(w));
  for (size_t i = 0; i < words.size(); ++i) {
    EXPECT_EQ(ids[i], i) << i;  // a new word each time
    EXPECT_EQ(b.Add(words[i]), ids[i]) << i;  // and found again
    EXPECT_EQ(b.count(ids[i]), 2u) << i;
  }
}

TEST(HashWordTest, EqualsTheTailLoadedByMemcpy) {
  // The tail of up to 8 bytes is read without memcpy's library call; the value must not change
  // (memcpy into a zeroed integer is the definition, on a little-endian machine).
  if constexpr (std::endian::native != std::endian::little) GTEST_SKIP() << "big-endian";
  auto reference = [](std::string_view word) {
    const char* p = word.data();
    size_t n = word.size();
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0xff51afd7ed558ccdULL);
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      h = (h ^ v) * 0xbf58476d1ce4e5b9ULL;
      h ^= h >> 31;
    }
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94d049bb133111ebULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
  };
  std::string text;
  for (int i = 0; i < 40; ++i) text.push_back(static_cast<char>(0x30 + i * 37 % 200));
  for (size_t n = 0; n <= 24; ++n) {
    const std::string_view w(text.data() + 3, n);
    EXPECT_EQ(HashWord(w), reference(w)) << n;
  }
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

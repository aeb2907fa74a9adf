#include "streamvec/trainer/corpus.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "corpus_options.h"

namespace streamvec {
namespace {

using testing::MinCount;

class CorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("streamvec_corpus_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::filesystem::path dir_;
};

TEST_F(CorpusTest, OneLineCorpusIsCutIntoSentencesOfMaxLength) {
  std::string text;
  for (int i = 0; i < 2500; ++i) text += (i % 2 ? "a " : "b ");
  CorpusOptions o;
  o.min_count = 1;
  o.max_sentence_length = 1000;
  o.chunk_bytes = 333;  // tokens straddle chunks
  auto c = LoadCorpus(Write("one.txt", text), o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tokens.size(), 2500u);
  ASSERT_EQ(c->num_sentences(), 3u);
  EXPECT_EQ(c->sentence_offsets[1], 1000u);
  EXPECT_EQ(c->sentence_offsets[2], 2000u);
  EXPECT_EQ(c->sentence_offsets[3], 2500u);
}

TEST_F(CorpusTest, NewlinesEndSentencesAndRareWordsAreDropped) {
  auto c = LoadCorpus(Write("lines.txt", "x y rare1 x\n\ny x\nrare2\nx y\n"), MinCount(2));
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->vocab.size(), 2u);
  EXPECT_EQ(c->vocab.word(0), "x");
  EXPECT_EQ(c->vocab.count(0), 4u);
  EXPECT_EQ(c->raw_words, 9u);
  // Sentences: [x y x] [y x] [x y]; the line holding only "rare2" is empty after dropping.
  ASSERT_EQ(c->num_sentences(), 3u);
  EXPECT_EQ(std::vector<uint32_t>(c->tokens.begin(), c->tokens.end()),
            (std::vector<uint32_t>{0, 1, 0, 1, 0, 0, 1}));
  EXPECT_EQ(c->sentence_offsets, (std::vector<uint64_t>{0, 3, 5, 7}));
}

TEST_F(CorpusTest, InvalidUtf8IsSkippedAndCounted) {
  auto c = LoadCorpus(Write("bad.txt", "ok ok \xff\xfe ok \xc0 fine fine"), MinCount(1));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tokenizer_stats.invalid_utf8_tokens, 2u);
  EXPECT_EQ(c->tokenizer_stats.first_skipped_offset, 6u);
  EXPECT_EQ(c->tokens.size(), 5u);
}

TEST_F(CorpusTest, MissingEmptyAndTooRareInputsAreClearErrors) {
  auto missing = LoadCorpus((dir_ / "nope.txt").string(), {});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.txt"), std::string::npos);
  auto empty = LoadCorpus(Write("empty.txt", " \n\t\n"), {});
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("no words"), std::string::npos);
  auto rare = LoadCorpus(Write("rare.txt", "a b c"), MinCount(5));
  EXPECT_EQ(rare.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rare.status().message().find("min-count"), std::string::npos);
  auto dir = LoadCorpus(dir_.string(), {});
  EXPECT_FALSE(dir.ok());
}

}  // namespace
}  // namespace streamvec

namespace streamvec {
namespace {

// Loading `path` with `threads` threads gives what one thread gives: vocabulary, counts, tokens,
// sentences and raw word count.
void ExpectSameLoadWithThreads(const std::string& path, uint64_t min_count, int threads) {
  CorpusOptions one = MinCount(min_count), many = MinCount(min_count);
  many.threads = threads;
  auto a = LoadCorpus(path, one);
  auto b = LoadCorpus(path, many);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->vocab.words(), b->vocab.words());
  EXPECT_EQ(a->vocab.counts(), b->vocab.counts());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->sentence_offsets, b->sentence_offsets);
  EXPECT_EQ(a->raw_words, b->raw_words);
}

TEST_F(CorpusTest, ParallelLoadingGivesTheSameVocabularyAndTokens) {
  // 12 MB of lines: large enough to be split into three parts.
  std::string text;
  uint32_t x = 1;
  while (text.size() < (12u << 20)) {
    for (int i = 0; i < 30; ++i) {
      x = x * 1103515245u + 12345u;
      text += 'w';
      text += std::to_string((x >> 16) % 5000 % (1 + (x >> 8) % 5000));
      text += ' ';
    }
    text += '\n';
  }
  // Split points fall on newlines, so sentences agree too.
  ExpectSameLoadWithThreads(Write("big.txt", text), 3, 3);
}

TEST_F(CorpusTest, ParallelLoadingOfDenseAndSparseStretches) {
  // 4.5 MB of long words, then 4.5 MB of one-letter words and empty lines (a line end per byte
  // in places): the two parts yield very different numbers of ids per byte.
  std::string text;
  uint32_t x = 7;
  while (text.size() < (9u << 20) / 2) {
    x = x * 1103515245u + 12345u;
    text += "longwordnumber" + std::to_string((x >> 16) % 300) + (x % 7 == 0 ? "\n" : " ");
  }
  while (text.size() < (9u << 20)) {
    x = x * 1103515245u + 12345u;
    text += static_cast<char>('a' + (x >> 16) % 20);
    text += (x >> 8) % 3 == 0 ? " " : "\n\n\n";
  }
  ExpectSameLoadWithThreads(Write("mixed.txt", text), 1, 2);
}

}  // namespace
}  // namespace streamvec

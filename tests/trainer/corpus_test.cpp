#include "streamvec/trainer/corpus.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace streamvec {
namespace {

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
  auto c = LoadCorpus(Write("lines.txt", "x y rare1 x\n\ny x\nrare2\nx y\n"), {.min_count = 2});
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->vocab.size(), 2u);
  EXPECT_EQ(c->vocab.word(0), "x");
  EXPECT_EQ(c->vocab.count(0), 4u);
  EXPECT_EQ(c->raw_words, 9u);
  // Sentences: [x y x] [y x] [x y]; the line holding only "rare2" is empty after dropping.
  ASSERT_EQ(c->num_sentences(), 3u);
  EXPECT_EQ(c->tokens, (std::vector<uint32_t>{0, 1, 0, 1, 0, 0, 1}));
  EXPECT_EQ(c->sentence_offsets, (std::vector<uint64_t>{0, 3, 5, 7}));
}

TEST_F(CorpusTest, InvalidUtf8IsSkippedAndCounted) {
  auto c = LoadCorpus(Write("bad.txt", "ok ok \xff\xfe ok \xc0 fine fine"), {.min_count = 1});
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
  auto rare = LoadCorpus(Write("rare.txt", "a b c"), {.min_count = 5});
  EXPECT_EQ(rare.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rare.status().message().find("min-count"), std::string::npos);
  auto dir = LoadCorpus(dir_.string(), {});
  EXPECT_FALSE(dir.ok());
}

}  // namespace
}  // namespace streamvec

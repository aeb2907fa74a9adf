#include "streamvec/store/word2vec_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace streamvec {
namespace {

using ::testing::HasSubstr;

class Word2VecFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("w2v_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::string WriteRaw(const std::string& name, const std::string& bytes) const {
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  static std::string ReadRaw(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Random table with hard floats: tiny, huge, negative zero, subnormal, many digits.
  static Embeddings RandomTable(size_t rows, int dim, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Embeddings e;
    e.dim = dim;
    for (size_t i = 0; i < rows; ++i) {
      std::string word = std::to_string(i);
      word += "_\xc3\xa9";  // non-ASCII bytes pass through unchanged
      e.words.push_back(std::move(word));
    }
    e.vectors.resize(rows * dim);
    for (float& v : e.vectors) v = normal(rng);
    if (rows * dim >= 6) {
      e.vectors[0] = 1e-40f;  // subnormal
      e.vectors[1] = -0.0f;
      e.vectors[2] = 3.4028235e38f;
      e.vectors[3] = 1.17549435e-38f;
      e.vectors[4] = 0.1f;
      e.vectors[5] = -123456.789f;
    }
    return e;
  }

  static void ExpectSameBits(const Embeddings& want, const Embeddings& got) {
    ASSERT_EQ(want.dim, got.dim);
    ASSERT_EQ(want.words, got.words);
    ASSERT_EQ(want.vectors.size(), got.vectors.size());
    for (size_t i = 0; i < want.vectors.size(); ++i) {
      uint32_t a, b;
      std::memcpy(&a, &want.vectors[i], 4);
      std::memcpy(&b, &got.vectors[i], 4);
      ASSERT_EQ(a, b) << "value " << i << ": " << want.vectors[i] << " vs " << got.vectors[i];
    }
  }

  std::filesystem::path dir_;
};

TEST_F(Word2VecFormatTest, TextRoundTripIsBitExact) {
  const Embeddings e = RandomTable(300, 17, 1);
  ASSERT_TRUE(WriteWord2Vec(Path("v.txt"), e, VectorFormat::kText).ok());
  VectorFormat detected = VectorFormat::kBinary;
  StatusOr<Embeddings> back = ReadWord2Vec(Path("v.txt"), &detected);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(detected, VectorFormat::kText);
  ExpectSameBits(e, *back);
  EXPECT_FALSE(std::filesystem::exists(Path("v.txt.tmp")));
}

TEST_F(Word2VecFormatTest, TextUsesShortestRoundTripFloats) {
  Embeddings e;
  e.dim = 3;
  e.words = {"a"};
  e.vectors = {0.1f, -2.5f, 1e-7f};
  ASSERT_TRUE(WriteWord2Vec(Path("v.txt"), e, VectorFormat::kText).ok());
  EXPECT_EQ(ReadRaw(Path("v.txt")), "1 3\na 0.1 -2.5 1e-07\n");
}

TEST_F(Word2VecFormatTest, BinaryRoundTripIsBitExact) {
  const Embeddings e = RandomTable(257, 10, 2);
  ASSERT_TRUE(WriteWord2Vec(Path("v.bin"), e, VectorFormat::kBinary).ok());
  VectorFormat detected = VectorFormat::kText;
  StatusOr<Embeddings> back = ReadWord2Vec(Path("v.bin"), &detected);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(detected, VectorFormat::kBinary);
  ExpectSameBits(e, *back);
  // word2vec.c layout: header, then "word " + dim float32 + '\n' per row.
  const std::string raw = ReadRaw(Path("v.bin"));
  EXPECT_EQ(
      raw.size(), std::string("257 10\n").size() + [&] {
        size_t n = 0;
        for (const std::string& w : e.words) n += w.size() + 1 + 40 + 1;
        return n;
      }());
}

TEST_F(Word2VecFormatTest, PaddedRowsWriteOnlyTheFirstDimColumns) {
  const int dim = 5;
  const size_t stride = 8;
  const std::vector<std::string> words = {"x", "y", "z"};
  std::vector<float> rows(words.size() * stride, std::numeric_limits<float>::quiet_NaN());
  for (size_t i = 0; i < words.size(); ++i) {
    for (int j = 0; j < dim; ++j) rows[i * stride + j] = static_cast<float>(i * 10 + j) + 0.25f;
  }
  for (VectorFormat format : {VectorFormat::kText, VectorFormat::kBinary}) {
    ASSERT_TRUE(WriteWord2Vec(Path("p"), words, rows.data(), stride, dim, format, 2).ok());
    StatusOr<Embeddings> back = ReadWord2Vec(Path("p"));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->dim, dim);
    ASSERT_EQ(back->words, words);
    for (size_t i = 0; i < words.size(); ++i) {
      for (int j = 0; j < dim; ++j) EXPECT_EQ(back->row(i)[j], rows[i * stride + j]);
    }
  }
}

TEST_F(Word2VecFormatTest, ThreadedTextWriteIsByteIdenticalToSingleThreaded) {
  const Embeddings e = RandomTable(10000, 7, 3);  // several rounds of per-thread row ranges
  ASSERT_TRUE(WriteWord2Vec(Path("one.txt"), e, VectorFormat::kText, 1).ok());
  ASSERT_TRUE(WriteWord2Vec(Path("three.txt"), e, VectorFormat::kText, 3).ok());
  EXPECT_EQ(ReadRaw(Path("one.txt")), ReadRaw(Path("three.txt")));
}

TEST_F(Word2VecFormatTest, ReadsWord2VecCToolTextWithTrailingSpace) {
  // word2vec.c: fprintf("%s ", word); fprintf("%lf ", v) per value; then "\n".
  const std::string path = WriteRaw(
      "c.txt", "2 3\nthe 0.100000 -0.200000 0.300000 \n</s> 1.000000 2.000000 3.000000 \n");
  StatusOr<Embeddings> e = ReadWord2Vec(path);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->words, (std::vector<std::string>{"the", "</s>"}));
  EXPECT_EQ(e->vectors, (BigVector<float>{0.1f, -0.2f, 0.3f, 1.0f, 2.0f, 3.0f}));
}

TEST_F(Word2VecFormatTest, TextWhoseFirstRowIsOnlyNanAndInfIsText) {
  // No digit in the first row (a diverged model's): still "<word> <dim floats>", so text.
  const std::string path = WriteRaw("nan.txt", "2 3\nthe nan -inf inf\nof -nan 1 2\n");
  VectorFormat detected = VectorFormat::kBinary;
  StatusOr<Embeddings> e = ReadWord2Vec(path, &detected);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(detected, VectorFormat::kText);
  EXPECT_EQ(e->words, (std::vector<std::string>{"the", "of"}));
  EXPECT_TRUE(std::isnan(e->vectors[0]));
  EXPECT_EQ(e->vectors[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(e->vectors[5], 2.0f);
}

TEST_F(Word2VecFormatTest, ReadsCrlfText) {
  const std::string path = WriteRaw("crlf.txt", "2 2\r\na 1 2\r\nb +3 -4e-1\r\n");
  StatusOr<Embeddings> e = ReadWord2Vec(path);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->words, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(e->vectors, (BigVector<float>{1.0f, 2.0f, 3.0f, -0.4f}));
}

TEST_F(Word2VecFormatTest, ReadsBinaryWithoutRowNewlinesAsGensimWritesIt) {
  std::string bytes = "2 2\n";
  const float v[4] = {1.5f, -2.0f, 0.25f, 8.0f};
  bytes += "a ";
  bytes.append(reinterpret_cast<const char*>(v), 8);
  bytes += "b ";
  bytes.append(reinterpret_cast<const char*>(v + 2), 8);
  VectorFormat detected = VectorFormat::kText;
  StatusOr<Embeddings> e = ReadWord2Vec(WriteRaw("g.bin", bytes), &detected);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(detected, VectorFormat::kBinary);
  EXPECT_EQ(e->words, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(e->vectors, (BigVector<float>(v, v + 4)));
}

TEST_F(Word2VecFormatTest, ReadsGensimTextFixture) {
  StatusOr<Embeddings> e = ReadWord2Vec(STREAMVEC_TEST_DATA "/eval/small-vectors.txt");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->rows(), 4328u);
  EXPECT_EQ(e->dim, 32);
  EXPECT_EQ(e->words[0], "the");
  EXPECT_EQ(e->row(0)[0], -0.41272593f);
}

TEST_F(Word2VecFormatTest, MissingFileIsNotFound) {
  StatusOr<Embeddings> e = ReadWord2Vec(Path("nope.txt"));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(e.status().message(), HasSubstr("nope.txt"));
}

struct CorruptCase {
  const char* name;
  std::string bytes;
  const char* message;  // expected substring
};

TEST_F(Word2VecFormatTest, CorruptFilesGiveCorruptionNamingLineOrOffset) {
  std::string truncated_binary = "2 4\na ";
  truncated_binary.append(16, '\x7f');
  truncated_binary += "\nb ";
  truncated_binary.append(5, '\x01');
  const std::vector<CorruptCase> cases = {
      {"empty", "", "line 1"},
      {"bad header", "two 3\na 1 2 3\n", "line 1: bad header"},
      {"zero dim", "1 0\na\n", "line 1: bad header"},
      {"huge header", "1000000000 300\na 1\n", "line 1: header claims"},
      {"short row", "2 3\na 1 2 3\nb 1 2\n", "line 3: word 'b' has 2 values, expected 3"},
      {"long row", "2 3\na 1 2 3\nb 1 2 3 4\n", "line 3: word 'b' has more than 3 values"},
      {"not a number", "2 3\na 1 2 3\nb 1 x2 3\n", "line 3, byte offset 16"},
      {"missing rows", "3 2\na 1 2\nb 3 4\n", "line 4: file ends after 2 of the header's 3 rows"},
      {"extra rows", "1 2\na 1 2\nb 3 4\n", "line 3: unexpected content"},
      {"blank row", "2 2\na 1 2\n\nb 3 4\n", "line 3"},
      {"truncated binary", truncated_binary, "byte offset 25: truncated binary row 1"},
  };
  for (const CorruptCase& c : cases) {
    StatusOr<Embeddings> e = ReadWord2Vec(WriteRaw("bad", c.bytes));
    ASSERT_FALSE(e.ok()) << c.name;
    EXPECT_EQ(e.status().code(), StatusCode::kCorruption)
        << c.name << ": " << e.status().ToString();
    EXPECT_THAT(e.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(e.status().message(), HasSubstr(Path("bad"))) << c.name;
  }
}

TEST_F(Word2VecFormatTest, RejectsWordsTheFormatCannotHold) {
  const float v[2] = {1, 2};
  Status s = WriteWord2Vec(Path("w.txt"), {"new york"}, v, 2, 2, VectorFormat::kText);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(Path("w.txt")));
}

TEST_F(Word2VecFormatTest, UnwritableDirectoryIsIoErrorAndLeavesNoFile) {
  const float v[2] = {1, 2};
  const std::string path = Path("missing-dir/v.txt");
  Status s = WriteWord2Vec(path, {"a"}, v, 2, 2, VectorFormat::kText);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("missing-dir"));
  EXPECT_FALSE(CheckWritable(path).ok());
  EXPECT_TRUE(CheckWritable(Path("ok.txt")).ok());
  EXPECT_FALSE(std::filesystem::exists(Path("ok.txt")));
  EXPECT_FALSE(std::filesystem::exists(Path("ok.txt.tmp")));
}

TEST_F(Word2VecFormatTest, OverwriteReplacesTheWholeFile) {
  const Embeddings big = RandomTable(50, 4, 4);
  const Embeddings small = RandomTable(2, 4, 5);
  ASSERT_TRUE(WriteWord2Vec(Path("v.txt"), big, VectorFormat::kText).ok());
  ASSERT_TRUE(WriteWord2Vec(Path("v.txt"), small, VectorFormat::kText).ok());
  StatusOr<Embeddings> back = ReadWord2Vec(Path("v.txt"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameBits(small, *back);
}

}  // namespace
}  // namespace streamvec

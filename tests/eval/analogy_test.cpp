#include "streamvec/eval/analogy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "eval_fixtures.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec::eval {
namespace {

using ::testing::HasSubstr;

using fixtures::GensimReference;
using fixtures::kEvalDir;

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

class GensimAnalogyTest : public ::testing::TestWithParam<int> {};

TEST_P(GensimAnalogyTest, EqualsGensimEvaluateWordAnalogiesPerSection) {
  const nlohmann::json ref = GensimReference()["analogy"][GetParam()];
  StatusOr<Embeddings> e = ReadWord2Vec(kEvalDir + "small-vectors.txt");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (bool simd : {true, false}) {
    SCOPED_TRACE(simd ? "SIMD kernel" : "portable kernel");
    AnalogyOptions options;
    options.restrict_vocab = ref["restrict"].get<size_t>();
    options.simd = simd;
    StatusOr<AnalogyResult> r = EvaluateAnalogies(*e, kEvalDir + "questions-words.txt", options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();

    const nlohmann::json& sections = ref["sections"];  // gensim's list ends with "Total accuracy"
    ASSERT_EQ(r->sections.size() + 1, sections.size());
    for (size_t i = 0; i < r->sections.size(); ++i) {
      const size_t correct = sections[i]["correct"].get<size_t>();
      const size_t incorrect = sections[i]["incorrect"].get<size_t>();
      EXPECT_EQ(r->sections[i].name, sections[i]["section"].get<std::string>());
      EXPECT_EQ(r->sections[i].correct, correct) << r->sections[i].name;
      EXPECT_EQ(r->sections[i].total, correct + incorrect) << r->sections[i].name;
    }
    const nlohmann::json& total = sections.back();
    EXPECT_EQ(r->correct, total["correct"].get<size_t>());
    EXPECT_EQ(r->total, total["correct"].get<size_t>() + total["incorrect"].get<size_t>());
    EXPECT_EQ(r->questions, ref["questions"].get<size_t>());
    EXPECT_EQ(r->oov, ref["oov"].get<size_t>());
    EXPECT_NEAR(r->accuracy(), ref["accuracy"].get<double>(), 1e-12);
  }
}

// 0: restrict_vocab 30000 (the whole 4328-word table), 1: restrict_vocab 2000.
INSTANTIATE_TEST_SUITE_P(Fixtures, GensimAnalogyTest, ::testing::Values(0, 1));

// The simple reference path: one question at a time, double precision, full scan of the first
// n rows, a, b and c excluded. Returns the answer's row.
int ReferenceAnswer(const Embeddings& e, size_t n, int a, int b, int c) {
  auto unit = [&](int row, int j) {
    double norm = 0;
    for (int k = 0; k < e.dim; ++k) norm += double(e.row(row)[k]) * e.row(row)[k];
    return e.row(row)[j] / std::sqrt(norm);
  };
  std::vector<double> q(e.dim);
  for (int j = 0; j < e.dim; ++j) q[j] = unit(b, j) + unit(c, j) - unit(a, j);
  int best = -1;
  double best_score = -2;
  for (size_t r = 0; r < n; ++r) {
    if (int(r) == a || int(r) == b || int(r) == c) continue;
    double dot = 0, qq = 0;
    for (int j = 0; j < e.dim; ++j) {
      dot += unit(int(r), j) * q[j];
      qq += q[j] * q[j];
    }
    if (dot / std::sqrt(qq) > best_score) {
      best_score = dot / std::sqrt(qq);
      best = int(r);
    }
  }
  return best;
}

TEST(AnalogyTest, BlockedThreadedScoringAgreesWithSimpleReferenceOnRandomVectors) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  Embeddings e;
  e.dim = 23;  // not a multiple of any SIMD width
  for (int i = 0; i < 301; ++i) e.words.push_back(std::string("w").append(std::to_string(i)));
  e.vectors.resize(e.words.size() * e.dim);
  for (float& v : e.vectors) v = normal(rng);
  const size_t restrict_vocab = 250;
  // One section per question, so per-section counts show each answer. The expected word is the
  // reference answer for half of the questions and a random word otherwise.
  std::uniform_int_distribution<int> pick(0, int(restrict_vocab) - 1);
  std::string file;
  std::vector<bool> expected_correct;
  for (int i = 0; i < 400; ++i) {
    int a = pick(rng), b = pick(rng), c = pick(rng);
    if (a == b || b == c || a == c) continue;
    const int answer = ReferenceAnswer(e, restrict_vocab, a, b, c);
    const int d = i % 2 == 0 ? answer : pick(rng);
    expected_correct.push_back(d == answer);
    file.append(": q").append(std::to_string(i)).append("\n");
    file.append(e.words[a]).append(" ").append(e.words[b]).append(" ").append(e.words[c]);
    file.append(" ").append(e.words[d]).append("\n");
  }
  const std::string path = TempFile("random-analogies.txt", file);
  for (int threads : {1, 2, 3}) {
    for (bool simd : {true, false}) {
      AnalogyOptions options;
      options.restrict_vocab = restrict_vocab;
      options.threads = threads;
      options.simd = simd;
      StatusOr<AnalogyResult> r = EvaluateAnalogies(e, path, options);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->sections.size(), expected_correct.size());
      size_t correct = 0;
      for (size_t i = 0; i < expected_correct.size(); ++i) {
        ASSERT_EQ(r->sections[i].total, 1u);
        EXPECT_EQ(r->sections[i].correct == 1, expected_correct[i])
            << r->sections[i].name << " threads " << threads << " simd " << simd;
        correct += expected_correct[i];
      }
      EXPECT_EQ(r->correct, correct);
      EXPECT_GT(correct, expected_correct.size() / 3);  // the test exercises right answers too
    }
  }
  std::filesystem::remove(path);
}

TEST(AnalogyTest, QuestionWordsAreNeverTheAnswerAndCaseIsFolded) {
  // king - man + woman: the closest row is "woman" itself (a question word), then "queen".
  Embeddings e;
  e.dim = 3;
  e.words = {"king", "man", "woman", "queen", "apple"};
  e.vectors = {1.0f,  1.0f, 0.0f,   // king
               1.0f,  0.0f, 0.0f,   // man
               0.0f,  0.0f, 1.0f,   // woman
               0.8f,  1.0f, 1.2f,   // queen
               -1.0f, 0.2f, 0.1f};  // apple
  const std::string path = TempFile("tiny-analogy.txt",
                                    ": royals\nMAN King Woman QUEEN\nman king woman apple\n"
                                    "man king pear queen\n: empty\n");
  StatusOr<AnalogyResult> r = EvaluateAnalogies(e, path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->sections.size(), 2u);
  EXPECT_EQ(r->sections[0].name, "royals");
  EXPECT_EQ(r->sections[0].correct, 1u);
  EXPECT_EQ(r->sections[0].total, 2u);
  EXPECT_EQ(r->sections[0].oov, 1u);
  EXPECT_EQ(r->sections[1].total, 0u);
  EXPECT_EQ(r->sections[1].accuracy(), 0.0);
  EXPECT_EQ(r->questions, 3u);
  EXPECT_NEAR(r->oov_ratio(), 100.0 / 3, 1e-12);
  std::filesystem::remove(path);
}

TEST(AnalogyTest, BadFilesAreErrorsNamingFileAndLine) {
  Embeddings e;
  e.dim = 1;
  e.words = {"a"};
  e.vectors = {1};
  StatusOr<AnalogyResult> missing = EvaluateAnalogies(e, "/nonexistent/questions.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/questions.txt"));

  const std::string empty = TempFile("empty-analogy.txt", "");
  StatusOr<AnalogyResult> none = EvaluateAnalogies(e, empty);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr(empty));

  const std::string headless = TempFile("headless-analogy.txt", "a b c d\n: s\na b c d\n");
  StatusOr<AnalogyResult> no_section = EvaluateAnalogies(e, headless);
  ASSERT_FALSE(no_section.ok());
  EXPECT_EQ(no_section.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(no_section.status().message(), HasSubstr("line 1"));
  std::filesystem::remove(empty);
  std::filesystem::remove(headless);
}

}  // namespace
}  // namespace streamvec::eval

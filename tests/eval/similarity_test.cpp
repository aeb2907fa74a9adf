#include "streamvec/eval/similarity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval_fixtures.h"
#include "streamvec/eval/vocabulary.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec::eval {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using fixtures::GensimReference;
using fixtures::kEvalDir;

TEST(CorrelationTest, AverageRanksShareTiedRanks) {
  EXPECT_THAT(AverageRanks({10, 20, 20, 30}), ElementsAre(1.0, 2.5, 2.5, 4.0));
  EXPECT_THAT(AverageRanks({3, 1, 3, 3}), ElementsAre(3.0, 1.0, 3.0, 3.0));
}

TEST(CorrelationTest, SpearmanWithTiesMatchesHandComputedValue) {
  // Ranks x: 1 2.5 2.5 4 5; ranks y: 2 1 3.5 3.5 5. Centred products sum to 7.25, both sums of
  // squares are 9.5: rho = 7.25 / 9.5 (scipy.stats.spearmanr gives 0.7631578947368421).
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 2, 3, 4}, {2, 1, 3, 3, 5}), 7.25 / 9.5, 1e-15);
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 3}, {30, 20, 10}), -1.0, 1e-15);
}

TEST(CorrelationTest, PearsonMatchesHandComputedValue) {
  // Centred x: -1.5 -0.5 0.5 1.5; y: -3 -1 0 4. r = 11 / sqrt(5 * 26) (scipy: 0.9647638212377322).
  EXPECT_NEAR(PearsonCorrelation({1, 2, 3, 4}, {2, 4, 5, 9}), 11.0 / std::sqrt(130.0), 1e-15);
  EXPECT_NEAR(PearsonCorrelation({1, 2}, {5, 3}), -1.0, 0.0);
}

TEST(CorrelationTest, UndefinedCorrelationIsNaN) {
  EXPECT_TRUE(std::isnan(PearsonCorrelation({1, 1, 1}, {1, 2, 3})));
  EXPECT_TRUE(std::isnan(PearsonCorrelation({1}, {2})));
  EXPECT_TRUE(std::isnan(SpearmanCorrelation({}, {})));
}

TEST(CosineSimilarityTest, IsScaleInvariantAndZeroForZeroVectors) {
  const float a[3] = {1, 2, 2};
  const float b[3] = {10, 20, 20};
  const float c[3] = {2, -1, 0};
  const float zero[3] = {0, 0, 0};
  EXPECT_NEAR(CosineSimilarity(a, b, 3), 1.0f, 2e-7);
  EXPECT_EQ(CosineSimilarity(a, c, 3), 0.0f);
  EXPECT_EQ(CosineSimilarity(a, zero, 3), 0.0f);
}

TEST(VocabularyTest, CaseFoldingKeepsTheMostFrequentRow) {
  Embeddings e;
  e.dim = 1;
  e.words = {"paris", "Paris", "straße", "rare"};
  e.vectors = {1, 2, 3, 4};
  const EvalVocabulary vocab(e, 3, /*case_insensitive=*/true);
  EXPECT_EQ(vocab.size(), 3u);
  EXPECT_EQ(vocab.Find(vocab.Key("PaRiS")), 0u);
  EXPECT_EQ(vocab.Key("straße"), "STRASSE");  // as Python's "straße".upper()
  EXPECT_EQ(vocab.Find(vocab.Key("Straße")), 2u);
  EXPECT_FALSE(vocab.Find(vocab.Key("rare")).has_value());  // beyond restrict_vocab
  const EvalVocabulary exact(e, 10, /*case_insensitive=*/false);
  EXPECT_EQ(exact.Find(exact.Key("Paris")), 1u);
}

class GensimSimilarityTest : public ::testing::TestWithParam<int> {};

TEST_P(GensimSimilarityTest, EqualsGensimEvaluateWordPairs) {
  const nlohmann::json ref = GensimReference()["similarity"][GetParam()];
  StatusOr<Embeddings> e = ReadWord2Vec(kEvalDir + "small-vectors.txt");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  StatusOr<SimilarityResult> r = EvaluateWordPairs(*e, kEvalDir + ref["file"].get<std::string>());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pairs, ref["pairs"].get<size_t>());
  EXPECT_EQ(r->oov, ref["oov"].get<size_t>());
  EXPECT_EQ(r->total, r->pairs + r->oov);
  EXPECT_NEAR(r->oov_ratio, ref["oov_ratio"].get<double>(), 1e-12);
  EXPECT_NEAR(r->spearman, ref["spearman"].get<double>(), 1e-6);
  EXPECT_NEAR(r->pearson, ref["pearson"].get<double>(), 1e-6);
}

// 0: EN-WS-353-ALL (CRLF), 1: EN-MEN-TR-3k, 2: pairs-edge-cases (comments, bad lines, case).
INSTANTIATE_TEST_SUITE_P(Fixtures, GensimSimilarityTest, ::testing::Values(0, 1, 2));

TEST(EvaluateWordPairsTest, SkipsCommentsAndMalformedLines) {
  StatusOr<Embeddings> e = ReadWord2Vec(kEvalDir + "small-vectors.txt");
  ASSERT_TRUE(e.ok());
  StatusOr<SimilarityResult> r = EvaluateWordPairs(*e, kEvalDir + "pairs-edge-cases.txt");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // 2 comment lines + "not a valid line" + score "six" + 4 fields + the blank line.
  EXPECT_EQ(r->skipped_lines, 6u);
  EXPECT_EQ(r->total, 15u);
}

TEST(EvaluateWordPairsTest, MissingAndEmptyFilesAreErrorsNamingTheFile) {
  Embeddings e;
  e.dim = 1;
  e.words = {"a"};
  e.vectors = {1};
  StatusOr<SimilarityResult> missing = EvaluateWordPairs(e, "/nonexistent/pairs.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/pairs.txt"));

  const std::string empty =
      (std::filesystem::path(::testing::TempDir()) / "empty-pairs.txt").string();
  std::ofstream(empty) << "# only a comment\n\n";
  StatusOr<SimilarityResult> none = EvaluateWordPairs(e, empty);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr(empty));
  std::filesystem::remove(empty);
}

}  // namespace
}  // namespace streamvec::eval

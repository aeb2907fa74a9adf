#include "streamvec/eval/pip.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace streamvec::eval {
namespace {

std::vector<float> Random(size_t n, int d, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(n * d);
  for (float& v : x) v = normal(gen);
  return x;
}

// ||A A^T - B B^T||_F with the n x n matrices written out.
double DirectPip(const std::vector<float>& a, int da, const std::vector<float>& b, int db,
                 size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double pa = 0, pb = 0;
      for (int k = 0; k < da; ++k) pa += double(a[i * da + k]) * a[j * da + k];
      for (int k = 0; k < db; ++k) pb += double(b[i * db + k]) * b[j * db + k];
      sum += (pa - pb) * (pa - pb);
    }
  }
  return std::sqrt(sum);
}

TEST(PipLossTest, EqualsTheDirectNByNComputation) {
  const size_t n = 40;
  const auto a = Random(n, 7, 1), b = Random(n, 5, 2);
  const PipResult r = PipLossDense(a.data(), 7, b.data(), 5, n);
  EXPECT_EQ(r.words, n);
  EXPECT_NEAR(r.loss, DirectPip(a, 7, b, 5, n), 1e-6 * r.loss);
  EXPECT_NEAR(r.relative, r.loss / r.norm_a, 1e-12);
  // Scaling b changes the loss but not the normalized loss.
  std::vector<float> b3 = b;
  for (float& v : b3) v *= 3.0f;
  const PipResult r3 = PipLossDense(a.data(), 7, b3.data(), 5, n);
  EXPECT_GT(std::fabs(r3.loss - r.loss), 1.0);
  EXPECT_NEAR(r3.normalized, r.normalized, 1e-6);
  EXPECT_GT(r.normalized, 0.0);
  EXPECT_LE(r.normalized, std::sqrt(2.0));
}

TEST(PipLossTest, IsZeroForARotatedCopyAndPositiveOtherwise) {
  const size_t n = 50;
  const int d = 4;
  const auto a = Random(n, d, 3);
  std::vector<float> rotated(a.size());
  const double t = 0.7;
  for (size_t i = 0; i < n; ++i) {  // rotate dims (0,1) and (2,3)
    for (int p = 0; p < d; p += 2) {
      const float x = a[i * d + p], y = a[i * d + p + 1];
      rotated[i * d + p] = static_cast<float>(std::cos(t) * x - std::sin(t) * y);
      rotated[i * d + p + 1] = static_cast<float>(std::sin(t) * x + std::cos(t) * y);
    }
  }
  EXPECT_LT(PipLossDense(a.data(), d, rotated.data(), d, n).relative, 1e-5);
  const auto other = Random(n, d, 4);
  EXPECT_GT(PipLossDense(a.data(), d, other.data(), d, n).relative, 0.5);
}

TEST(PipLossTest, ComparesSharedWordsInTheFirstEmbeddingsOrder) {
  Embeddings a, b;
  a.dim = b.dim = 2;
  a.words = {"x", "y", "z"};
  a.vectors = {1, 0, 0, 1, 5, 5};
  b.words = {"w", "y", "x"};  // "z" and "w" are not shared
  b.vectors = {9, 9, 0, 1, 1, 0};
  const PipResult r = PipLoss(a, b);
  EXPECT_EQ(r.words, 2u);
  EXPECT_NEAR(r.loss, 0.0, 1e-12);
  EXPECT_EQ(PipLoss(a, b, 1).words, 1u);  // only a's first row
}

TEST(SppmiEmbeddingTest, SeparatesWordsThatNeverCoOccur) {
  // Words 0-4 only co-occur with each other, words 5-9 likewise.
  std::mt19937 gen(5);
  std::uniform_int_distribution<uint32_t> pick(0, 4);
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets{0};
  for (int s = 0; s < 400; ++s) {
    const uint32_t base = s % 2 ? 0 : 5;
    for (int i = 0; i < 12; ++i) tokens.push_back(base + pick(gen));
    offsets.push_back(tokens.size());
  }
  SppmiOptions o;
  o.dim = 4;
  o.shift = 1.0;
  auto e = SppmiEmbedding(tokens, offsets, 10, o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto cos = [&](int i, int j) {
    double ab = 0, aa = 0, bb = 0;
    for (int k = 0; k < 4; ++k) {
      ab += (*e)[i * 4 + k] * (*e)[j * 4 + k];
      aa += (*e)[i * 4 + k] * (*e)[i * 4 + k];
      bb += (*e)[j * 4 + k] * (*e)[j * 4 + k];
    }
    return ab / std::sqrt(aa * bb);
  };
  EXPECT_GT(cos(0, 1), 0.5);
  EXPECT_GT(cos(6, 7), 0.5);
  EXPECT_LT(std::fabs(cos(0, 7)), 0.2);
  EXPECT_FALSE(SppmiEmbedding(tokens, offsets, 3, o).ok());  // fewer words than dimensions
}

}  // namespace
}  // namespace streamvec::eval

#include "streamvec/kernels/sgns_kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "streamvec/base/cpu_features.h"
#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/sgns_math.h"
#include "kernel_fixture.h"

namespace streamvec {
namespace {

using testing_fixture::ExpectTablesNear;
using testing_fixture::Fixture;

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(SigmoidTableTest, MatchesExactSigmoidWithinTableError) {
  float table[kSigmoidTableSize];
  FillSigmoidTable(table);
  for (double x = -7.99; x < 7.99; x += 0.0137) {
    EXPECT_NEAR(TableSigmoid(table, static_cast<float>(x)), Sigmoid(x), 1e-3) << x;
  }
  EXPECT_EQ(TableSigmoid(table, 9.0f), 1.0f);
  EXPECT_EQ(TableSigmoid(table, -9.0f), 0.0f);
  EXPECT_NEAR(TableSigmoid(table, 0.0f), 0.5, 1e-3);
}

TEST(SgnsMathTest, GradientIsLabelMinusSigmoidTimesRate) {
  float table[kSigmoidTableSize];
  FillSigmoidTable(table);
  EXPECT_NEAR(SgnsLogitGradient(table, 0.0f, 1.0f, 0.1f), 0.05, 1e-4);
  EXPECT_NEAR(SgnsLogitGradient(table, 0.0f, 0.0f, 0.1f), -0.05, 1e-4);
  EXPECT_NEAR(SgnsLogitGradient(table, 2.0f, 1.0f, 1.0f), 1.0 - Sigmoid(2.0), 1e-3);
  EXPECT_FLOAT_EQ(SgnsLogitGradient(table, 20.0f, 1.0f, 1.0f), 0.0f);
  EXPECT_FLOAT_EQ(SgnsLogitGradient(table, 20.0f, 0.0f, 0.5f), -0.5f);
}

// Tables of 3-float rows set by hand, for hand-computed steps: the kernel trains `in` and `out`;
// x and t keep the start values of their rows.
struct HandModel {
  static constexpr int kDim = 3;
  using Row = std::array<float, kDim>;
  HandModel(std::vector<Row> x_rows, std::vector<Row> t_rows)
      : x(std::move(x_rows)),
        t(std::move(t_rows)),
        stride(PaddedStride(kDim)),
        in(x.size() * stride),
        out(t.size() * stride) {
    for (size_t r = 0; r < x.size(); ++r) std::copy(x[r].begin(), x[r].end(), &in[r * stride]);
    for (size_t r = 0; r < t.size(); ++r) std::copy(t[r].begin(), t[r].end(), &out[r * stride]);
    FillSigmoidTable(sigmoid);
  }
  ModelRows rows() { return ModelRows{in.data(), out.data(), stride, kDim}; }
  static float Dot(const float* a, const float* c) {
    return a[0] * c[0] + a[1] * c[1] + a[2] * c[2];
  }
  // The scaled logit gradient of input row a against output row c (SgnsLogitGradient's math).
  float Grad(float label, const float* a, const float* c, float lr) const {
    return (label - TableSigmoid(sigmoid, Dot(a, c))) * lr;
  }
  const std::vector<Row> x, t;
  const size_t stride;
  AlignedFloats in, out;
  float sigmoid[kSigmoidTableSize];
};

// The rows of the hand-computed skip-gram tests below.
const std::vector<HandModel::Row> kHandX = {{0.1f, -0.2f, 0.3f}, {0.05f, 0.1f, -0.1f}};
const std::vector<HandModel::Row> kHandT = {
    {0.2f, 0.1f, 0.0f}, {-0.1f, 0.3f, 0.2f}, {0.3f, -0.3f, 0.1f}, {-0.2f, 0.1f, 0.25f}};

TEST(ReferenceKernelTest, SkipGramStepMatchesHandComputedGradient) {
  // One sentence "0 1", window 1, one negative per position (word 2, then word 3: two draws),
  // so the positions train one after the other.
  HandModel h(kHandX, kHandT);
  const float *x0 = h.x[0].data(), *x1 = h.x[1].data();
  const float *t0 = h.t[0].data(), *t1 = h.t[1].data(), *t2 = h.t[2].data(), *t3 = h.t[3].data();
  const size_t stride = h.stride;
  const AlignedFloats &in = h.in, &out = h.out;
  const uint32_t tokens[2] = {0, 1}, offsets[2] = {0, 2}, negs[2] = {2, 3};
  const uint8_t windows[2] = {1, 1};
  MicroBatch b{tokens, offsets, 1, windows, negs, 1};
  const float lr = 0.5f;
  MakeReferenceKernel()->SkipGram(h.rows(), b, lr, nullptr);

  // Position 0: centre 0, context word 1 (input row x1); targets out0 (+), out2 (-).
  const float g_pos = h.Grad(1, x1, t0, lr);
  const float g_neg = h.Grad(0, x1, t2, lr);
  float x1_new[3], t0_new[3], t2_new[3];
  for (int j = 0; j < 3; ++j) {
    x1_new[j] = x1[j] + g_pos * t0[j] + g_neg * t2[j];
    t0_new[j] = t0[j] + g_pos * x1[j];
    t2_new[j] = t2[j] + g_neg * x1[j];
  }
  // Position 1: centre 1, context word 0 (input row x0); targets out1 (+), out3 (-).
  const float h_pos = h.Grad(1, x0, t1, lr);
  const float h_neg = h.Grad(0, x0, t3, lr);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(in[0 * stride + j], x0[j] + h_pos * t1[j] + h_neg * t3[j], 1e-6);
    EXPECT_NEAR(in[1 * stride + j], x1_new[j], 1e-6);
    EXPECT_NEAR(out[0 * stride + j], t0_new[j], 1e-6);
    EXPECT_NEAR(out[1 * stride + j], t1[j] + h_pos * x0[j], 1e-6);
    EXPECT_NEAR(out[2 * stride + j], t2_new[j], 1e-6);
    EXPECT_NEAR(out[3 * stride + j], t3[j] + h_neg * x0[j], 1e-6);
  }
  // Padding stays zero.
  for (size_t j = HandModel::kDim; j < stride; ++j) EXPECT_EQ(in[j], 0.0f);
}

TEST(ReferenceKernelTest, PairSharingItsNegativesIsOneWindow) {
  // One sentence "0 1", window 1, both positions with the same draw (negative word 2): one
  // window (context combining) of the input rows x0 and x1 against out0, out1 (the centres)
  // and out2, every gradient from the start values; x1 is a context of centre 0 only and x0 of
  // centre 1 only, and both meet the shared negative once.
  HandModel h(kHandX, {kHandT[0], kHandT[1], kHandT[2]});
  const float *x0 = h.x[0].data(), *x1 = h.x[1].data();
  const float *t0 = h.t[0].data(), *t1 = h.t[1].data(), *t2 = h.t[2].data();
  const size_t stride = h.stride;
  const AlignedFloats &in = h.in, &out = h.out;
  const uint32_t tokens[2] = {0, 1}, offsets[2] = {0, 2}, negs[2] = {2, 2};
  const uint8_t windows[2] = {1, 1};
  MicroBatch b{tokens, offsets, 1, windows, negs, 1};
  const float lr = 0.5f;
  StepStats stats;
  MakeReferenceKernel()->SkipGram(h.rows(), b, lr, &stats);

  auto dot = HandModel::Dot;
  const float g10 = h.Grad(1, x1, t0, lr);  // x1 with centre 0
  const float g12 = h.Grad(0, x1, t2, lr);  // x1 with the negative
  const float g01 = h.Grad(1, x0, t1, lr);  // x0 with centre 1
  const float g02 = h.Grad(0, x0, t2, lr);  // x0 with the negative
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(in[0 * stride + j], x0[j] + g01 * t1[j] + g02 * t2[j], 1e-6);
    EXPECT_NEAR(in[1 * stride + j], x1[j] + g10 * t0[j] + g12 * t2[j], 1e-6);
    EXPECT_NEAR(out[0 * stride + j], t0[j] + g10 * x1[j], 1e-6);
    EXPECT_NEAR(out[1 * stride + j], t1[j] + g01 * x0[j], 1e-6);
    EXPECT_NEAR(out[2 * stride + j], t2[j] + g12 * x1[j] + g02 * x0[j], 1e-6);
  }
  EXPECT_EQ(stats.pairs, 2u);
  auto nll = [](double z) { return std::log1p(std::exp(z)); };  // -log sigma(-z)
  const double loss = nll(-dot(x1, t0)) + nll(dot(x1, t2)) + nll(-dot(x0, t1)) + nll(dot(x0, t2));
  EXPECT_NEAR(stats.loss, loss, 1e-6);
}

TEST(ReferenceKernelTest, RepeatedContextWordIsOneRowWithItsGradientCounted) {
  // One sentence "1 0 1", window 1, no negatives. Position 1 (centre 0) has context word 1
  // twice: one update of input row 1 with twice the gradient, from the window's start values
  // (word2vec.c would update it twice in a row).
  HandModel h(kHandX, {kHandT[0], kHandT[1]});
  const float *x0 = h.x[0].data(), *x1 = h.x[1].data();
  const float *t0 = h.t[0].data(), *t1 = h.t[1].data();
  const size_t stride = h.stride;
  const AlignedFloats &in = h.in, &out = h.out;
  const uint32_t tokens[3] = {1, 0, 1}, offsets[2] = {0, 3};
  const uint8_t windows[3] = {1, 1, 1};
  MicroBatch b{tokens, offsets, 1, windows, nullptr, 0};
  const float lr = 0.5f;
  StepStats stats;
  MakeReferenceKernel()->SkipGram(h.rows(), b, lr, &stats);

  // Position 0: centre 1, context 0.
  const float ga = h.Grad(1, x0, t1, lr);
  float x0a[3], t1a[3];
  for (int j = 0; j < 3; ++j) {
    x0a[j] = x0[j] + ga * t1[j];
    t1a[j] = t1[j] + ga * x0[j];
  }
  // Position 1: centre 0, context 1 twice.
  const float gb = 2 * h.Grad(1, x1, t0, lr);
  // Position 2: centre 1, context 0, both as position 0 left them.
  const float gc = h.Grad(1, x0a, t1a, lr);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(in[1 * stride + j], x1[j] + gb * t0[j], 1e-6);
    EXPECT_NEAR(out[0 * stride + j], t0[j] + gb * x1[j], 1e-6);
    EXPECT_NEAR(in[0 * stride + j], x0a[j] + gc * t1a[j], 1e-6);
    EXPECT_NEAR(out[1 * stride + j], t1a[j] + gc * x0a[j], 1e-6);
  }
  EXPECT_EQ(stats.pairs, 4u);  // one per occurrence
}

TEST(ReferenceKernelTest, NegativeEqualToCentreIsSkipped) {
  const int dim = 4;
  Fixture f(3, dim, 1, 7, 1);
  f.tokens = {0, 1};
  f.offsets = {0, 2};
  f.windows = {1, 1};
  f.negatives = {0, 1};  // each position's negative is its own centre
  f.batch =
      MicroBatch{f.tokens.data(), f.offsets.data(), 1, f.windows.data(), f.negatives.data(), 1};
  Fixture g(f);
  g.negatives = {0, 1};
  g.batch.negative = 0;  // no negatives at all
  MakeReferenceKernel()->SkipGram(f.model(), f.batch, 0.1f, nullptr);
  MakeReferenceKernel()->SkipGram(g.model(), g.batch, 0.1f, nullptr);
  ExpectTablesNear(f, g, 0.0f);
}

TEST(ReferenceKernelTest, LossFallsOnRepeatedBatch) {
  Fixture f(20, 16, 5, 3);
  auto kernel = MakeReferenceKernel();
  StepStats first, last;
  kernel->SkipGram(f.model(), f.batch, 0.05f, &first);
  for (int i = 0; i < 30; ++i) kernel->SkipGram(f.model(), f.batch, 0.05f, nullptr);
  kernel->SkipGram(f.model(), f.batch, 0.05f, &last);
  ASSERT_GT(first.pairs, 0u);
  EXPECT_EQ(first.pairs, last.pairs);
  EXPECT_LT(last.loss, 0.7 * first.loss);
}

TEST(SgnsMathTest, SigmoidOfNaNIsInRange) {
  // A diverged row gives NaN logits: the table lookup must stay inside the table.
  float table[kSigmoidTableSize];
  FillSigmoidTable(table);
  EXPECT_EQ(TableSigmoid(table, std::nanf("")), 0.0f);
}

class SimdKernelTest : public ::testing::TestWithParam<Isa> {};

TEST_P(SimdKernelTest, SkipGramMatchesReferenceOnRandomInputs) {
  if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  // Without statistics the fast kernels take their vectorised gradient path; with them, the
  // scalar one (which also computes the loss). Both must match the reference.
  for (bool with_stats : {false, true}) {
    for (int dim : {1, 7, 16, 50, 100, 130}) {
      for (int negative : {0, 3, 5, 10, 15}) {
        Fixture a(300, dim, negative, 1000 + dim * 31 + negative);
        Fixture b(a);
        StepStats sa, sb;
        MakeReferenceKernel()->SkipGram(a.model(), a.batch, 0.025f, with_stats ? &sa : nullptr);
        auto k = MakeCpuKernel(GetParam());
        ASSERT_NE(k, nullptr);
        k->SkipGram(b.model(), b.batch, 0.025f, with_stats ? &sb : nullptr);
        SCOPED_TRACE(testing::Message()
                     << "dim " << dim << " negative " << negative << " stats " << with_stats);
        // Summation order differs, and a logit that moves across a sigmoid-table bucket edge
        // changes its gradient by up to lr * 0.25 * 16/2048 = 5e-5; errors of a wrong kernel are
        // ~lr.
        ExpectTablesNear(a, b, 2e-4f);
        EXPECT_EQ(sa.pairs, sb.pairs);
        EXPECT_NEAR(sa.loss, sb.loss, 1e-3 * sa.loss + 1e-3);
      }
    }
  }
}

TEST_P(SimdKernelTest, SkipGramPairsSharingNegativesMatchReference) {
  if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  // Pairs of positions with one draw of negatives train as one window: the blocked path (up to
  // 12 distinct context words, K + 2 <= 8 targets) and the general one (wider windows, more
  // negatives), with and without statistics; three positions per draw leave the third alone.
  for (bool with_stats : {false, true}) {
    for (int dim : {7, 16, 100}) {
      for (int negative : {1, 3, 5, 6, 10}) {
        for (int max_window : {5, 10}) {
          for (int share : {2, 3}) {
            Fixture a(300, dim, negative, 7000 + dim * 31 + negative * 7 + max_window + share, 4,
                      max_window, share);
            Fixture b(a);
            StepStats sa, sb;
            MakeReferenceKernel()->SkipGram(a.model(), a.batch, 0.025f, with_stats ? &sa : nullptr);
            MakeCpuKernel(GetParam())
                ->SkipGram(b.model(), b.batch, 0.025f, with_stats ? &sb : nullptr);
            SCOPED_TRACE(testing::Message()
                         << "dim " << dim << " negative " << negative << " window " << max_window
                         << " share " << share << " stats " << with_stats);
            ExpectTablesNear(a, b, 2e-4f);
            EXPECT_EQ(sa.pairs, sb.pairs);
            EXPECT_NEAR(sa.loss, sb.loss, 1e-3 * sa.loss + 1e-3);
          }
        }
      }
    }
  }
}

TEST(ReferenceKernelTest, PairDiffersFromTwoWindowsInARow) {
  // The same micro-batch with each pair's draw and with the second position's negatives
  // permuted (a different draw of the same words, so no pair forms): one matrix product per
  // pair is not the same update as two windows in a row, by O(lr^2).
  Fixture a(50, 16, 3, 11, 2, 5, 2);
  Fixture b(a);
  for (size_t i = 1; i < b.tokens.size(); i += 2) {
    uint32_t* neg = b.negatives.data() + i * 3;
    std::swap(neg[0], neg[1]);
  }
  MakeReferenceKernel()->SkipGram(a.model(), a.batch, 0.5f, nullptr);
  MakeReferenceKernel()->SkipGram(b.model(), b.batch, 0.5f, nullptr);
  float max_diff = 0.0f;
  for (size_t i = 0; i < a.input.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(a.input[i] - b.input[i]));
  }
  EXPECT_GT(max_diff, 1e-4f);
}

TEST_P(SimdKernelTest, CbowMatchesReferenceOnRandomInputs) {
  if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  for (bool with_stats : {false, true}) {
    for (int dim : {1, 16, 100, 130}) {
      for (int negative : {0, 5, 12}) {
        Fixture a(30, dim, negative, 2000 + dim * 31 + negative);
        Fixture b(a);
        StepStats sa, sb;
        MakeReferenceKernel()->Cbow(a.model(), a.batch, 0.05f, with_stats ? &sa : nullptr);
        MakeCpuKernel(GetParam())->Cbow(b.model(), b.batch, 0.05f, with_stats ? &sb : nullptr);
        SCOPED_TRACE(testing::Message() << "dim " << dim << " negative " << negative);
        // Summation order differs, and a logit that moves across a sigmoid-table bucket edge
        // changes its gradient by up to lr * 0.25 * 16/2048 = 5e-5; errors of a wrong kernel are
        // ~lr.
        ExpectTablesNear(a, b, 2e-4f);
        EXPECT_EQ(sa.pairs, sb.pairs);
        EXPECT_NEAR(sa.loss, sb.loss, 1e-3 * sa.loss + 1e-3);
      }
    }
  }
}

// The register-resident CBOW path (5 negatives, rows of at most 8 vectors), with and without
// statistics, on tables large enough that most rows are distinct, and on tiny ones where context
// rows, targets and negatives repeat within a window (a negative equal to the centre is skipped
// and adds no loss).
TEST_P(SimdKernelTest, CbowFusedPathMatchesReference) {
  if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  for (bool with_stats : {false, true}) {
    for (int rows : {5, 40, 5000}) {
      for (int dim : {3, 16, 50, 100, 128}) {
        Fixture a(rows, dim, 5, 3000 + rows + dim, /*num_sentences=*/20);
        Fixture b(a);
        StepStats sa, sb;
        MakeReferenceKernel()->Cbow(a.model(), a.batch, 0.05f, with_stats ? &sa : nullptr);
        MakeCpuKernel(GetParam())->Cbow(b.model(), b.batch, 0.05f, with_stats ? &sb : nullptr);
        SCOPED_TRACE(testing::Message() << "rows " << rows << " dim " << dim << " stats "
                                        << with_stats);
        ExpectTablesNear(a, b, 2e-4f);
        EXPECT_EQ(sa.pairs, sb.pairs);
        EXPECT_NEAR(sa.loss, sb.loss, 1e-3 * sa.loss + 1e-3);
      }
    }
  }
}

TEST_P(SimdKernelTest, PaddingStaysZero) {
  if (!IsaSupported(GetParam())) GTEST_SKIP();
  Fixture f(10, 20, 5, 99);
  MakeCpuKernel(GetParam())->SkipGram(f.model(), f.batch, 0.1f, nullptr);
  MakeCpuKernel(GetParam())->Cbow(f.model(), f.batch, 0.1f, nullptr);
  for (int r = 0; r < f.rows; ++r) {
    for (size_t j = f.dim; j < f.stride; ++j) {
      ASSERT_EQ(f.input[r * f.stride + j], 0.0f);
      ASSERT_EQ(f.output[r * f.stride + j], 0.0f);
    }
  }
}

// ModelRows::output_replica: rows below output_replica_rows are read and written in the replica
// (a thread's own copy, BatchTrainer) and the shared rows stay untouched; the result equals the
// same kernel on the plain table, float for float. Checked for the reference kernel too.
TEST_P(SimdKernelTest, OutputReplicaRowsStandInForTheSharedRows) {
  if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  const float kSentinel = 12345.0f;
  for (bool reference : {false, true}) {
    for (bool cbow : {false, true}) {
      for (bool with_stats : {false, true}) {
        for (uint32_t replica_rows : {0u, 7u, 20u, 40u}) {
          Fixture a(40, 100, 5, 4000 + replica_rows, /*num_sentences=*/10);
          Fixture b(a);
          AlignedFloats replica(replica_rows * a.stride);
          std::copy(b.output.data(), b.output.data() + replica.size(), replica.data());
          std::fill(b.output.data(), b.output.data() + replica.size(), kSentinel);
          ModelRows mb = b.model();
          mb.output_replica = replica.data();
          mb.output_replica_rows = replica_rows;
          auto ka = reference ? MakeReferenceKernel() : MakeCpuKernel(GetParam());
          auto kb = reference ? MakeReferenceKernel() : MakeCpuKernel(GetParam());
          StepStats sa, sb;
          if (cbow) {
            ka->Cbow(a.model(), a.batch, 0.05f, with_stats ? &sa : nullptr);
            kb->Cbow(mb, b.batch, 0.05f, with_stats ? &sb : nullptr);
          } else {
            ka->SkipGram(a.model(), a.batch, 0.025f, with_stats ? &sa : nullptr);
            kb->SkipGram(mb, b.batch, 0.025f, with_stats ? &sb : nullptr);
          }
          SCOPED_TRACE(testing::Message() << "reference " << reference << " cbow " << cbow
                                          << " stats " << with_stats << " rows " << replica_rows);
          for (size_t i = 0; i < replica.size(); ++i) {
            ASSERT_EQ(b.output[i], kSentinel) << "shared output float " << i << " was touched";
            ASSERT_EQ(replica[i], a.output[i]) << "replica float " << i;
          }
          for (size_t i = replica.size(); i < a.output.size(); ++i) {
            ASSERT_EQ(b.output[i], a.output[i]) << "output float " << i;
          }
          for (size_t i = 0; i < a.input.size(); ++i) {
            ASSERT_EQ(b.input[i], a.input[i]) << "input float " << i;
          }
          EXPECT_EQ(sa.pairs, sb.pairs);
          EXPECT_EQ(sa.loss, sb.loss);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, SimdKernelTest,
                         ::testing::Values(Isa::kPortable, Isa::kAvx2, Isa::kAvx512),
                         [](const testing::TestParamInfo<Isa>& info) {
                           return std::string(IsaName(info.param));
                         });

TEST(CpuDispatchTest, BestIsaIsSupportedAndHasAKernel) {
  const Isa best = DetectBestIsa();
  EXPECT_TRUE(IsaSupported(best));
  auto k = MakeCpuKernel(best);
  ASSERT_NE(k, nullptr);
  EXPECT_STREQ(k->name(), IsaName(best));
}

}  // namespace
}  // namespace streamvec

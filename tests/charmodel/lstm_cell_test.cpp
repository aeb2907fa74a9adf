// The LSTM cell's backward pass against central finite differences, in double.
#include "streamvec/charmodel/lstm_cell.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "streamvec/base/cpu_features.h"

namespace streamvec {
namespace {

using Mat = RowMatrix<double>;

Mat Random(int rows, int cols, std::mt19937_64* rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  Mat m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = u(*rng);
  return m;
}

struct CellCase {
  Mat x, h, c, wx, wh, b, rh, rc;
  // L = sum(rh * h') + sum(rc * c'): every output of the step reaches the loss.
  double Loss() const {
    LstmStep<double> s;
    LstmCellForward<double>(x, h, c, wx, wh, b, &s);
    return s.h.cwiseProduct(rh).sum() + s.c.cwiseProduct(rc).sum();
  }
};

// Checks d(Loss)/d(m) against `analytic` by central differences on every entry of m.
void ExpectGradient(CellCase* cc, Mat* m, const Mat& analytic, const char* name) {
  const double eps = 1e-6;
  ASSERT_EQ(m->rows(), analytic.rows()) << name;
  ASSERT_EQ(m->cols(), analytic.cols()) << name;
  for (Eigen::Index i = 0; i < m->size(); ++i) {
    const double keep = m->data()[i];
    m->data()[i] = keep + eps;
    const double up = cc->Loss();
    m->data()[i] = keep - eps;
    const double down = cc->Loss();
    m->data()[i] = keep;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic.data()[i], numeric, 1e-7 + 1e-6 * std::abs(numeric))
        << name << " entry " << i;
  }
}

TEST(LstmCellTest, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(7);
  const int batch = 3, in = 4, hidden = 5;
  CellCase cc{Random(batch, in, &rng),          Random(batch, hidden, &rng),
              Random(batch, hidden, &rng),      Random(in, 4 * hidden, &rng),
              Random(hidden, 4 * hidden, &rng), Random(1, 4 * hidden, &rng),
              Random(batch, hidden, &rng),      Random(batch, hidden, &rng)};
  LstmStep<double> step;
  LstmCellForward<double>(cc.x, cc.h, cc.c, cc.wx, cc.wh, cc.b, &step);
  Mat dwx = Mat::Zero(in, 4 * hidden), dwh = Mat::Zero(hidden, 4 * hidden),
      db = Mat::Zero(1, 4 * hidden);
  LstmStepGrad<double> grad;
  LstmCellBackward<double>(cc.x, cc.h, cc.c, cc.wx, cc.wh, step, cc.rh, cc.rc, dwx, dwh, db, &grad);
  ExpectGradient(&cc, &cc.x, grad.dx, "dx");
  ExpectGradient(&cc, &cc.h, grad.dh_prev, "dh_prev");
  ExpectGradient(&cc, &cc.c, grad.dc_prev, "dc_prev");
  ExpectGradient(&cc, &cc.wx, dwx, "dwx");
  ExpectGradient(&cc, &cc.wh, dwh, "dwh");
  ExpectGradient(&cc, &cc.b, db, "db");
}

TEST(LstmCellTest, BackwardAccumulatesIntoParameterGradients) {
  std::mt19937_64 rng(8);
  const Mat x = Random(2, 3, &rng), h = Random(2, 4, &rng), c = Random(2, 4, &rng);
  const Mat wx = Random(3, 16, &rng), wh = Random(4, 16, &rng), b = Random(1, 16, &rng);
  const Mat dh = Random(2, 4, &rng), dc = Random(2, 4, &rng);
  LstmStep<double> step;
  LstmCellForward<double>(x, h, c, wx, wh, b, &step);
  LstmStepGrad<double> grad;
  Mat once_wx = Mat::Zero(3, 16), once_wh = Mat::Zero(4, 16), once_b = Mat::Zero(1, 16);
  LstmCellBackward<double>(x, h, c, wx, wh, step, dh, dc, once_wx, once_wh, once_b, &grad);
  Mat twice_wx = once_wx, twice_wh = once_wh, twice_b = once_b;
  LstmCellBackward<double>(x, h, c, wx, wh, step, dh, dc, twice_wx, twice_wh, twice_b, &grad);
  EXPECT_TRUE(twice_wx.isApprox(2 * once_wx));
  EXPECT_TRUE(twice_wh.isApprox(2 * once_wh));
  EXPECT_TRUE(twice_b.isApprox(2 * once_b));
}

// MatMul<float> (OpenBLAS's sgemm in a build with it) against Eigen's product in double, for
// every transpose, with and without accumulation, on blocks whose rows are longer than their
// columns (as the model's hcat.middleCols) and on empty products.
TEST(LstmCellTest, FloatMatMulEqualsTheProductForEveryTranspose) {
  std::mt19937_64 rng(9);
  using F = RowMatrix<float>;
  const int m = 7, n = 5, k = 3;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      for (int acc = 0; acc < 2; ++acc) {
        // a and b live inside wider matrices, so their row strides exceed their widths.
        const Mat wide_a = Random(ta ? k : m, (ta ? m : k) + 4, &rng);
        const Mat wide_b = Random(tb ? n : k, (tb ? k : n) + 2, &rng);
        const Mat a = wide_a.leftCols(ta ? m : k), b = wide_b.middleCols(1, tb ? k : n);
        const Mat start = Random(m, n, &rng);
        const Mat opa = ta ? Mat(a.transpose()) : a, opb = tb ? Mat(b.transpose()) : b;
        const Mat want = (acc ? start : Mat::Zero(m, n)) + opa * opb;
        const F fa = wide_a.cast<float>(), fb = wide_b.cast<float>();
        F out = F::Constant(m, n + 3, -100.f);
        out.leftCols(n) = start.cast<float>();
        MatMul<float>(fa.leftCols(ta ? m : k), ta, fb.middleCols(1, tb ? k : n), tb, acc,
                      out.leftCols(n));
        for (Eigen::Index i = 0; i < m; ++i) {
          for (Eigen::Index j = 0; j < n; ++j) {
            EXPECT_NEAR(out(i, j), want(i, j), 1e-5) << ta << tb << acc << " at " << i << "," << j;
          }
          for (Eigen::Index j = n; j < n + 3; ++j) EXPECT_EQ(out(i, j), -100.f) << "outside c";
        }
      }
    }
  }
  F c = F::Constant(2, 3, 5.f);
  MatMul<float>(F(2, 0), false, F(0, 3), false, true, c);
  EXPECT_EQ(c, F::Constant(2, 3, 5.f)) << "an empty product adds nothing";
  MatMul<float>(F(2, 0), false, F(0, 3), false, false, c);
  EXPECT_EQ(c, F::Zero(2, 3)) << "an empty product assigned is zero";
}

// Each instruction set's float rows (FastMath) against the double rows (ExactMath) on
// pre-activations from -30 to 30 (saturated gates included), H = 37 so that every vector loop
// has a remainder, rows with strides wider than 4H and H.
TEST(LstmCellTest, FloatRowsOfEveryInstructionSetMatchTheExactCell) {
  std::mt19937_64 rng(10);
  const long H = 37, rows = 5, ld_a = 4 * H + 3, ld_c = H + 2;
  std::uniform_real_distribution<double> wide(-30, 30), unit(-1, 1);
  std::vector<double> a(rows * ld_a), b(4 * H), c_prev(rows * ld_c), dh(rows * ld_c),
      dc(rows * ld_c);
  for (double& v : a) v = wide(rng) * (unit(rng) > 0 ? 1 : 0.1);  // both saturated and not
  for (double& v : b) v = unit(rng);
  for (double& v : c_prev) v = 2 * unit(rng);
  for (double& v : dh) v = unit(rng);
  for (double& v : dc) v = unit(rng);
  // The reference, in double.
  std::vector<double> ra = a, rc(rows * H), rt(rows * H), rh(rows * H), rda(rows * 4 * H),
                      rdc(rows * H), rdb(4 * H, 0.5);
  LstmForwardRows<double>(ra.data(), ld_a, b.data(), c_prev.data(), ld_c, rc.data(), rt.data(),
                          rh.data(), rows, H);
  LstmBackwardRows<double>(ra.data(), ld_a, rt.data(), c_prev.data(), ld_c, dh.data(), ld_c,
                           dc.data(), ld_c, rda.data(), rdc.data(), rdb.data(), rows, H);
  auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  int tested = 0;
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
    const LstmFloatRows k = LstmFloatRowsFor(isa);
    if (k.forward == nullptr || !IsaSupported(isa)) continue;
    ++tested;
    std::vector<float> fa = f(a), fc(rows * H), ft(rows * H), fh(rows * H), fda(rows * 4 * H),
                       fdc(rows * H), fdb(4 * H, 0.5f);
    const std::vector<float> fb = f(b), fcp = f(c_prev), fdh = f(dh), fdcin = f(dc);
    k.forward(fa.data(), ld_a, fb.data(), fcp.data(), ld_c, fc.data(), ft.data(), fh.data(), rows,
              H);
    k.backward(fa.data(), ld_a, ft.data(), fcp.data(), ld_c, fdh.data(), ld_c, fdcin.data(), ld_c,
               fda.data(), fdc.data(), fdb.data(), rows, H);
    for (long r = 0; r < rows; ++r) {
      for (long j = 0; j < 4 * H; ++j) {
        ASSERT_NEAR(fa[r * ld_a + j], ra[r * ld_a + j], 2e-6) << IsaName(isa) << " gate " << j;
        ASSERT_NEAR(fda[r * 4 * H + j], rda[r * 4 * H + j], 2e-5) << IsaName(isa) << " d_a " << j;
      }
      for (long j = 4 * H; j < ld_a; ++j) {
        ASSERT_EQ(fa[r * ld_a + j], float(a[r * ld_a + j])) << "past the row: untouched";
      }
      for (long j = 0; j < H; ++j) {
        ASSERT_NEAR(fc[r * H + j], rc[r * H + j], 1e-5) << IsaName(isa) << " c " << j;
        ASSERT_NEAR(ft[r * H + j], rt[r * H + j], 2e-6) << IsaName(isa) << " tanh c " << j;
        ASSERT_NEAR(fh[r * H + j], rh[r * H + j], 2e-6) << IsaName(isa) << " h " << j;
        ASSERT_NEAR(fdc[r * H + j], rdc[r * H + j], 2e-5) << IsaName(isa) << " dc_prev " << j;
      }
    }
    for (long j = 0; j < 4 * H; ++j) {
      ASSERT_NEAR(fdb[j], rdb[j], 1e-4) << IsaName(isa) << " db " << j;
    }
  }
  EXPECT_GE(tested, 1) << "the portable rows always exist";
  EXPECT_TRUE(LstmFloatRowsFor(LstmFloatRowsIsa()).forward != nullptr);
}

}  // namespace
}  // namespace streamvec

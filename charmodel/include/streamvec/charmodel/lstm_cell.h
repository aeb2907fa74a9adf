// The LSTM cell, forward and backward, over a batch of rows: the one place its math is written.
//
// The cell is the LSTM with a forget gate (Hochreiter & Schmidhuber 1997; Gers et al. 2000) as
// written in Graves 2013, "Generating Sequences With Recurrent Neural Networks", eq. 7-11,
// without peephole connections (the form of C2W, Ling et al. 2015, section 2.1):
//   a = x Wx + h_prev Wh + b              pre-activations, gate blocks in the order i, f, g, o
//   i = sigmoid(a_i)  f = sigmoid(a_f)  g = tanh(a_g)  o = sigmoid(a_o)
//   c = f * c_prev + i * g                h = o * tanh(c)
// Shapes (B rows of a batch, D input size, H hidden size; row-major, one row per sequence):
//   x: B x D, h_prev / c_prev / h / c: B x H, wx: D x 4H, wh: H x 4H, b: 1 x 4H.
// Templated on the scalar so that the gradient checks can run it in double; the model runs it in
// float. Thread safety: free functions on caller-owned data.
#ifndef STREAMVEC_CHARMODEL_LSTM_CELL_H_
#define STREAMVEC_CHARMODEL_LSTM_CELL_H_

#include <Eigen/Core>
#include <cmath>

namespace streamvec {

template <typename Scalar>
using RowMatrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// c = a' b' (accumulate: c += a' b'), where a' is a or its transpose (trans_a), b' likewise;
// c must already have the product's shape (it is not resized). Shapes: a' m x k, b' k x n, c m x n.
// The generic version is Eigen's product (the gradient checks run it in double); the float one
// (gemm.cpp) is OpenBLAS's sgemm where the build found OpenBLAS: its kernels are chosen at run
// time (AVX-512 or AVX2 with FMA), where the portable build's Eigen multiplies with SSE2 packets,
// 2.3-2.9x slower on the cell's shapes (B x 20 by 20 x 200, B x 50 by 50 x 200 and their
// transposes). Without OpenBLAS, Eigen for float too.
template <typename Scalar>
void MatMul(const Eigen::Ref<const RowMatrix<Scalar>>& a, bool trans_a,
            const Eigen::Ref<const RowMatrix<Scalar>>& b, bool trans_b, bool accumulate,
            Eigen::Ref<RowMatrix<Scalar>> c) {
  if (!accumulate) c.setZero();
  if (trans_a && trans_b) {
    c.noalias() += a.transpose() * b.transpose();
  } else if (trans_a) {
    c.noalias() += a.transpose() * b;
  } else if (trans_b) {
    c.noalias() += a * b.transpose();
  } else {
    c.noalias() += a * b;
  }
}

template <>
void MatMul<float>(const Eigen::Ref<const RowMatrix<float>>& a, bool trans_a,
                   const Eigen::Ref<const RowMatrix<float>>& b, bool trans_b, bool accumulate,
                   Eigen::Ref<RowMatrix<float>> c);

// What one step keeps for its backward pass.
template <typename Scalar>
struct LstmStep {
  RowMatrix<Scalar> gates;   // B x 4H: i, f, g, o after their nonlinearities
  RowMatrix<Scalar> c;       // B x H: the new cell state
  RowMatrix<Scalar> tanh_c;  // B x H: tanh(c)
  RowMatrix<Scalar> h;       // B x H: the new hidden state (the step's output)
};

// One step forward for the whole batch from the input's share of the pre-activations: on entry
// step->gates holds x Wx (B x 4H), which the caller computed or gathered (the model gathers rows
// of E Wx, one per character: CharModel); fills the rest of *step.
template <typename Scalar>
void LstmCellForwardGates(const Eigen::Ref<const RowMatrix<Scalar>>& h_prev,
                          const Eigen::Ref<const RowMatrix<Scalar>>& c_prev,
                          const Eigen::Ref<const RowMatrix<Scalar>>& wh,
                          const Eigen::Ref<const RowMatrix<Scalar>>& b, LstmStep<Scalar>* step) {
  const Eigen::Index hidden = wh.rows();
  MatMul<Scalar>(h_prev, false, wh, false, true, step->gates);
  step->gates.rowwise() += b.row(0);
  // Eigen's vectorised logistic and tanh (SIMD packets; a scalar std::tanh per element took a
  // fifth of the character model's time).
  auto& a = step->gates;
  a.leftCols(2 * hidden) = a.leftCols(2 * hidden).array().logistic();                  // i, f
  a.middleCols(2 * hidden, hidden) = a.middleCols(2 * hidden, hidden).array().tanh();  // g
  a.rightCols(hidden) = a.rightCols(hidden).array().logistic();                        // o
  step->c = a.middleCols(hidden, hidden).cwiseProduct(c_prev) +
            a.leftCols(hidden).cwiseProduct(a.middleCols(2 * hidden, hidden));
  step->tanh_c = step->c.array().tanh();
  step->h = a.rightCols(hidden).cwiseProduct(step->tanh_c);
}

// One step forward for the whole batch: fills *step (resized as needed).
template <typename Scalar>
void LstmCellForward(const Eigen::Ref<const RowMatrix<Scalar>>& x,
                     const Eigen::Ref<const RowMatrix<Scalar>>& h_prev,
                     const Eigen::Ref<const RowMatrix<Scalar>>& c_prev,
                     const Eigen::Ref<const RowMatrix<Scalar>>& wx,
                     const Eigen::Ref<const RowMatrix<Scalar>>& wh,
                     const Eigen::Ref<const RowMatrix<Scalar>>& b, LstmStep<Scalar>* step) {
  step->gates.resize(x.rows(), wx.cols());
  MatMul<Scalar>(x, false, wx, false, false, step->gates);
  LstmCellForwardGates<Scalar>(h_prev, c_prev, wh, b, step);
}

// Gradient buffers of one step's backward pass (resized as needed by LstmCellBackward).
template <typename Scalar>
struct LstmStepGrad {
  RowMatrix<Scalar> d_a;      // B x 4H: gradient at the pre-activations
  RowMatrix<Scalar> dx;       // B x D
  RowMatrix<Scalar> dh_prev;  // B x H
  RowMatrix<Scalar> dc_prev;  // B x H
};

// One step backward up to the input's share: given dL/dh (`dh`, B x H) and dL/dc flowing back
// from the next step (`dc`, B x H; zeros at the last step), writes dL/da (the pre-activations:
// the gradient of x Wx as well), dL/dh_prev and dL/dc_prev into *grad and ADDS the gradients of
// wh (H x 4H) and b (1 x 4H) into dwh and db. `step` is what the forward step wrote for these
// h_prev, c_prev. The caller turns grad->d_a into dL/dx and dL/dWx (LstmCellBackward below, or
// the model once per call for all its steps: CharModel).
template <typename Scalar>
void LstmCellBackwardGates(const Eigen::Ref<const RowMatrix<Scalar>>& h_prev,
                           const Eigen::Ref<const RowMatrix<Scalar>>& c_prev,
                           const Eigen::Ref<const RowMatrix<Scalar>>& wh,
                           const LstmStep<Scalar>& step,
                           const Eigen::Ref<const RowMatrix<Scalar>>& dh,
                           const Eigen::Ref<const RowMatrix<Scalar>>& dc,
                           Eigen::Ref<RowMatrix<Scalar>> dwh, Eigen::Ref<RowMatrix<Scalar>> db,
                           LstmStepGrad<Scalar>* grad) {
  const Eigen::Index hidden = wh.rows();
  const auto& a = step.gates;
  const auto i = a.leftCols(hidden);
  const auto f = a.middleCols(hidden, hidden);
  const auto g = a.middleCols(2 * hidden, hidden);
  const auto o = a.rightCols(hidden);
  const auto ones = RowMatrix<Scalar>::Ones(a.rows(), hidden);
  // dL/dc including the path through h = o * tanh(c).
  const RowMatrix<Scalar> dc_total =
      dc + dh.cwiseProduct(o).cwiseProduct(ones - step.tanh_c.cwiseProduct(step.tanh_c));
  grad->d_a.resize(a.rows(), 4 * hidden);
  grad->d_a.leftCols(hidden) = dc_total.cwiseProduct(g).cwiseProduct(i).cwiseProduct(ones - i);
  grad->d_a.middleCols(hidden, hidden) =
      dc_total.cwiseProduct(c_prev).cwiseProduct(f).cwiseProduct(ones - f);
  grad->d_a.middleCols(2 * hidden, hidden) =
      dc_total.cwiseProduct(i).cwiseProduct(ones - g.cwiseProduct(g));
  grad->d_a.rightCols(hidden) = dh.cwiseProduct(step.tanh_c).cwiseProduct(o).cwiseProduct(ones - o);
  grad->dc_prev = dc_total.cwiseProduct(f);
  grad->dh_prev.resize(a.rows(), hidden);
  MatMul<Scalar>(grad->d_a, false, wh, true, false, grad->dh_prev);
  MatMul<Scalar>(h_prev, true, grad->d_a, false, true, dwh);
  db.row(0) += grad->d_a.colwise().sum();
}

// One step backward: as LstmCellBackwardGates, and also writes dL/dx into grad->dx and ADDS the
// gradient of wx (D x 4H) into dwx, so that a sequence (or several batches) accumulates into the
// same buffers. `step` is what LstmCellForward wrote for these x, h_prev, c_prev.
template <typename Scalar>
void LstmCellBackward(const Eigen::Ref<const RowMatrix<Scalar>>& x,
                      const Eigen::Ref<const RowMatrix<Scalar>>& h_prev,
                      const Eigen::Ref<const RowMatrix<Scalar>>& c_prev,
                      const Eigen::Ref<const RowMatrix<Scalar>>& wx,
                      const Eigen::Ref<const RowMatrix<Scalar>>& wh, const LstmStep<Scalar>& step,
                      const Eigen::Ref<const RowMatrix<Scalar>>& dh,
                      const Eigen::Ref<const RowMatrix<Scalar>>& dc,
                      Eigen::Ref<RowMatrix<Scalar>> dwx, Eigen::Ref<RowMatrix<Scalar>> dwh,
                      Eigen::Ref<RowMatrix<Scalar>> db, LstmStepGrad<Scalar>* grad) {
  LstmCellBackwardGates<Scalar>(h_prev, c_prev, wh, step, dh, dc, dwh, db, grad);
  grad->dx.resize(x.rows(), wx.rows());
  MatMul<Scalar>(grad->d_a, false, wx, true, false, grad->dx);
  MatMul<Scalar>(x, true, grad->d_a, false, true, dwx);
}

}  // namespace streamvec

#endif  // STREAMVEC_CHARMODEL_LSTM_CELL_H_

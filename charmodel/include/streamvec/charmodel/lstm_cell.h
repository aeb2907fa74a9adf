// The LSTM cell, forward and backward, over a batch of rows: its products through MatMul
// (matmul.h), its element-wise math in lstm_math.h (each written once).
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

#include "streamvec/base/cpu_features.h"
#include "streamvec/charmodel/lstm_math.h"
#include "streamvec/charmodel/matmul.h"

namespace streamvec {

// The element-wise part of a step over `rows` rows (lstm_math.h; row-major, each matrix with
// its row stride ld_*). Forward: gates (rows x 4H) hold the pre-activations without b on entry
// and the gates after; c, tanh_c, h (rows x H, stride H) are written. Backward: d_a (rows x 4H,
// stride 4H) and dc_prev (rows x H, stride H) are written, db (4H) is added to. The generic
// versions run lstm_math.h's rows with ExactMath; the float ones (lstm_rows.cpp) with FastMath,
// in the AVX-512, AVX2 or portable build of the rows chosen for this CPU (LstmFloatRowsIsa()).
template <typename Scalar>
void LstmForwardRows(Scalar* gates, Eigen::Index ld_gates, const Scalar* b, const Scalar* c_prev,
                     Eigen::Index ld_c_prev, Scalar* c, Scalar* tanh_c, Scalar* h,
                     Eigen::Index rows, Eigen::Index hidden) {
  for (Eigen::Index r = 0; r < rows; ++r) {
    LstmRowForward<Scalar, ExactMath>(gates + r * ld_gates, b, c_prev + r * ld_c_prev,
                                      c + r * hidden, tanh_c + r * hidden, h + r * hidden, hidden);
  }
}

template <typename Scalar>
void LstmBackwardRows(const Scalar* gates, Eigen::Index ld_gates, const Scalar* tanh_c,
                      const Scalar* c_prev, Eigen::Index ld_c_prev, const Scalar* dh,
                      Eigen::Index ld_dh, const Scalar* dc, Eigen::Index ld_dc, Scalar* d_a,
                      Scalar* dc_prev, Scalar* db, Eigen::Index rows, Eigen::Index hidden) {
  for (Eigen::Index r = 0; r < rows; ++r) {
    LstmRowBackward<Scalar, ExactMath>(gates + r * ld_gates, tanh_c + r * hidden,
                                       c_prev + r * ld_c_prev, dh + r * ld_dh, dc + r * ld_dc,
                                       d_a + r * 4 * hidden, dc_prev + r * hidden, db, hidden);
  }
}

template <>
void LstmForwardRows<float>(float* gates, Eigen::Index ld_gates, const float* b,
                            const float* c_prev, Eigen::Index ld_c_prev, float* c, float* tanh_c,
                            float* h, Eigen::Index rows, Eigen::Index hidden);
template <>
void LstmBackwardRows<float>(const float* gates, Eigen::Index ld_gates, const float* tanh_c,
                             const float* c_prev, Eigen::Index ld_c_prev, const float* dh,
                             Eigen::Index ld_dh, const float* dc, Eigen::Index ld_dc, float* d_a,
                             float* dc_prev, float* db, Eigen::Index rows, Eigen::Index hidden);

// The float rows built for one instruction set (nullptr where this build has none: AVX2 and
// AVX-512 exist on x86-64 only), for tests and benchmarks; LstmFloatRowsIsa() is the set the
// float LstmForwardRows / LstmBackwardRows use (the best this CPU supports).
struct LstmFloatRows {
  void (*forward)(float* gates, long ld_gates, const float* b, const float* c_prev, long ld_c_prev,
                  float* c, float* tanh_c, float* h, long rows, long hidden);
  void (*backward)(const float* gates, long ld_gates, const float* tanh_c, const float* c_prev,
                   long ld_c_prev, const float* dh, long ld_dh, const float* dc, long ld_dc,
                   float* d_a, float* dc_prev, float* db, long rows, long hidden);
};
LstmFloatRows LstmFloatRowsFor(Isa isa);
Isa LstmFloatRowsIsa();

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
  const Eigen::Index hidden = wh.rows(), rows = step->gates.rows();
  MatMul<Scalar>(h_prev, false, wh, false, true, step->gates);
  step->c.resize(rows, hidden);
  step->tanh_c.resize(rows, hidden);
  step->h.resize(rows, hidden);
  LstmForwardRows<Scalar>(step->gates.data(), step->gates.outerStride(), b.data(), c_prev.data(),
                          c_prev.outerStride(), step->c.data(), step->tanh_c.data(), step->h.data(),
                          rows, hidden);
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
  const Eigen::Index hidden = wh.rows(), rows = step.gates.rows();
  grad->d_a.resize(rows, 4 * hidden);
  grad->dc_prev.resize(rows, hidden);
  LstmBackwardRows<Scalar>(step.gates.data(), step.gates.outerStride(), step.tanh_c.data(),
                           c_prev.data(), c_prev.outerStride(), dh.data(), dh.outerStride(),
                           dc.data(), dc.outerStride(), grad->d_a.data(), grad->dc_prev.data(),
                           db.data(), rows, hidden);
  grad->dh_prev.resize(rows, hidden);
  MatMul<Scalar>(grad->d_a, false, wh, true, false, grad->dh_prev);
  MatMul<Scalar>(h_prev, true, grad->d_a, false, true, dwh);
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

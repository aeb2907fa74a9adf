// The LSTM cell's element-wise math for one hidden unit j of one row: the one place it is
// written. The CPU rows (lstm_math.h: LstmRowForward / LstmRowBackward, vectorised per
// instruction set) loop over j with it; the CUDA encoder (charmodel/src/cuda/) runs one thread
// per (row, j) with it, compiled __host__ __device__ under nvcc.
//
// The cell (Graves 2013, "Generating Sequences With Recurrent Neural Networks", eq. 7-11, no
// peepholes): with pre-activations a = x Wx + h_prev Wh + b in gate blocks i, f, g, o of H each,
//   i = sigmoid(a_i)  f = sigmoid(a_f)  g = tanh(a_g)  o = sigmoid(a_o)
//   c = f * c_prev + i * g    h = o * tanh(c)
// and backward, given dL/dh and the dL/dc flowing back from the next step:
//   dc_total = dc + dh * o * (1 - tanh(c)^2)
//   da_i = dc_total * g * i (1 - i)      da_f = dc_total * c_prev * f (1 - f)
//   da_g = dc_total * i * (1 - g^2)      da_o = dh * tanh(c) * o (1 - o)
//   dc_prev = dc_total * f               db += da
// Math supplies Sigmoid and Tanh (lstm_math.h: ExactMath, FastMath; the CUDA file its own).
// No standard library here: nvcc compiles this for the device.
#ifndef STREAMVEC_CHARMODEL_LSTM_ELEMENT_H_
#define STREAMVEC_CHARMODEL_LSTM_ELEMENT_H_

#if !defined(SV_HOST_DEVICE)
#if defined(__CUDACC__)
#define SV_HOST_DEVICE __host__ __device__
#else
#define SV_HOST_DEVICE
#endif
#endif

namespace streamvec {

// Forward of unit j: from the four pre-activations without b (a_*), their biases (b_*) and
// c_prev, writes the gates i, f, g, o, the cell c, tanh(c) and h. (Outputs through references
// the caller binds to its own locals: GCC vectorises the CPU rows' loop only so.)
template <typename T, typename Math>
SV_HOST_DEVICE inline void LstmUnitForward(T a_i, T a_f, T a_g, T a_o, T b_i, T b_f, T b_g, T b_o,
                                           T c_prev, T& i, T& f, T& g, T& o, T& c, T& tanh_c,
                                           T& h) {
  i = Math::Sigmoid(a_i + b_i);
  f = Math::Sigmoid(a_f + b_f);
  g = Math::Tanh(a_g + b_g);
  o = Math::Sigmoid(a_o + b_o);
  c = f * c_prev + i * g;
  tanh_c = Math::Tanh(c);
  h = o * tanh_c;
}

// Backward of unit j: its gates i, f, g, o and tanh(c) from the forward step, c_prev, dL/dh and
// dL/dc; writes dL/da of the four gates (d_i, d_f, d_g, d_o) and dL/dc_prev. Math only names
// the instantiation (the backward needs no exp or tanh): each instruction set's file of the CPU
// rows has its own, so that none built for AVX-512 stands in for the portable one at link time.
template <typename T, typename Math>
SV_HOST_DEVICE inline void LstmUnitBackward(T i, T f, T g, T o, T tanh_c, T c_prev, T dh, T dc,
                                            T& d_i, T& d_f, T& d_g, T& d_o, T& dc_prev) {
  const T one = T(1);
  const T dct = dc + dh * o * (one - tanh_c * tanh_c);
  d_i = dct * g * i * (one - i);
  d_f = dct * c_prev * f * (one - f);
  d_g = dct * i * (one - g * g);
  d_o = dh * tanh_c * o * (one - o);
  dc_prev = dct * f;
}

}  // namespace streamvec

#endif  // STREAMVEC_CHARMODEL_LSTM_ELEMENT_H_

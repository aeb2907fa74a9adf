// The LSTM cell's element-wise math, one row of a batch at a time: the one place it is written.
// lstm_cell.h runs it through LstmForwardRows / LstmBackwardRows: in double with ExactMath (the
// gradient checks), in float with FastMath in kernels compiled once per instruction set
// (lstm_rows_*.cpp: portable, AVX2, AVX-512) and chosen at run time.
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
//
// FastMath takes a tag type of the file that compiles it: each instruction set's file has its
// own, so its instantiations (FastMath<Tag>, LstmRowForward<float, FastMath<Tag>>, ...) have names
// of their own and none built for AVX-512 can stand in for the portable one at link time. No Eigen
// here for the same reason (its templates would be shared between those files).
#ifndef STREAMVEC_CHARMODEL_LSTM_MATH_H_
#define STREAMVEC_CHARMODEL_LSTM_MATH_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace streamvec {

// The library's functions: the reference the gradient checks differentiate.
struct ExactMath {
  template <typename T>
  static T Sigmoid(T x) {
    return T(1) / (T(1) + std::exp(-x));
  }
  template <typename T>
  static T Tanh(T x) {
    return std::tanh(x);
  }
};

// float approximations without calls or branches, so that a loop over a row vectorises with the
// instruction set its file is built for. exp(x) = 2^n e^r with n = round(x / ln 2) and
// |r| <= ln(2) / 2 (ln 2 split in two for an exact n ln 2), e^r by Cephes' degree-6 polynomial
// for expf (Moshier, Cephes Math Library, expf.c); relative error about 2e-7 in [-87, 88].
// sigmoid(x) = 1 / (1 + e^-x); tanh(x) = 1 - 2 / (1 + e^2x) (absolute error about 1e-7 near 0).
template <typename IsaTag>
struct FastMath {
  static float Exp(float x) {
    x = std::min(std::max(x, -87.0f), 88.0f);
    // Rounds x / ln 2 to an integer with the 1.5 * 2^23 trick (no SSE4.1 round needed); the
    // integer sits in the low bits of t's mantissa.
    constexpr float kShift = 12582912.0f;
    const float t = x * 1.44269504088896341f + kShift;
    const float n = t - kShift;
    // Unsigned: wraps instead of overflowing when x is NaN (the result is then garbage, not UB).
    const uint32_t ni = std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kShift);
    const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float er = p * (r * r) + r + 1.0f;
    return er * std::bit_cast<float>((ni + 127u) << 23);
  }
  template <typename T>
  static T Sigmoid(T x) {
    return 1.0f / (1.0f + Exp(-x));
  }
  template <typename T>
  static T Tanh(T x) {
    return 1.0f - 2.0f / (1.0f + Exp(2.0f * x));
  }
};

// One row forward. a: 4H, the pre-activations without b on entry, the gates i, f, g, o after;
// b: 4H; c_prev: H; c, tanh_c, h: H, written.
template <typename T, typename Math>
inline void LstmRowForward(T* a, const T* __restrict b, const T* __restrict c_prev, T* __restrict c,
                           T* __restrict tanh_c, T* __restrict h, long H) {
  // The four gate blocks do not overlap, nor any of them another argument: __restrict lets the
  // loop vectorise (without it GCC gives up on checking so many pointers for overlap).
  T* __restrict ai = a;
  T* __restrict af = a + H;
  T* __restrict ag = a + 2 * H;
  T* __restrict ao = a + 3 * H;
  for (long j = 0; j < H; ++j) {
    const T i = Math::Sigmoid(ai[j] + b[j]);
    const T f = Math::Sigmoid(af[j] + b[H + j]);
    const T g = Math::Tanh(ag[j] + b[2 * H + j]);
    const T o = Math::Sigmoid(ao[j] + b[3 * H + j]);
    ai[j] = i;
    af[j] = f;
    ag[j] = g;
    ao[j] = o;
    const T cj = f * c_prev[j] + i * g;
    const T t = Math::Tanh(cj);
    c[j] = cj;
    tanh_c[j] = t;
    h[j] = o * t;
  }
}

// One row backward. a: 4H gates (as LstmRowForward left them); tanh_c, c_prev, dh, dc: H;
// d_a: 4H and dc_prev: H, written; db: 4H, added to. Math only names the instantiation (the
// backward needs no exp or tanh).
template <typename T, typename Math>
inline void LstmRowBackward(const T* __restrict a, const T* __restrict tanh_c,
                            const T* __restrict c_prev, const T* __restrict dh,
                            const T* __restrict dc, T* __restrict d_a, T* __restrict dc_prev,
                            T* __restrict db, long H) {
  const T one = T(1);
  for (long j = 0; j < H; ++j) {
    const T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j], t = tanh_c[j];
    const T dct = dc[j] + dh[j] * o * (one - t * t);
    d_a[j] = dct * g * i * (one - i);
    d_a[H + j] = dct * c_prev[j] * f * (one - f);
    d_a[2 * H + j] = dct * i * (one - g * g);
    d_a[3 * H + j] = dh[j] * t * o * (one - o);
    dc_prev[j] = dct * f;
  }
  for (long k = 0; k < 4 * H; ++k) db[k] += d_a[k];
}

}  // namespace streamvec

#endif  // STREAMVEC_CHARMODEL_LSTM_MATH_H_

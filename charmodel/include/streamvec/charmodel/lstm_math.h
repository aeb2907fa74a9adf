// The LSTM cell's element-wise math over one row of a batch (the per-unit math: lstm_element.h).
// lstm_cell.h runs it through LstmForwardRows / LstmBackwardRows: in double with ExactMath (the
// gradient checks), in float with FastMath in kernels compiled once per instruction set
// (lstm_rows_*.cpp: portable, AVX2, AVX-512) and chosen at run time.
//
// The cell's formulas (Graves 2013, eq. 7-11) are in lstm_element.h, per hidden unit, shared
// with the CUDA encoder; here they run over a row.
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

#include "streamvec/charmodel/lstm_element.h"

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
    T i, f, g, o, cj, t, hj;
    LstmUnitForward<T, Math>(ai[j], af[j], ag[j], ao[j], b[j], b[H + j], b[2 * H + j],
                             b[3 * H + j], c_prev[j], i, f, g, o, cj, t, hj);
    ai[j] = i;
    af[j] = f;
    ag[j] = g;
    ao[j] = o;
    c[j] = cj;
    tanh_c[j] = t;
    h[j] = hj;
  }
}

// One row backward. a: 4H gates (as LstmRowForward left them); tanh_c, c_prev, dh, dc: H;
// d_a: 4H and dc_prev: H, written; db: 4H, added to.
template <typename T, typename Math>
inline void LstmRowBackward(const T* __restrict a, const T* __restrict tanh_c,
                            const T* __restrict c_prev, const T* __restrict dh,
                            const T* __restrict dc, T* __restrict d_a, T* __restrict dc_prev,
                            T* __restrict db, long H) {
  for (long j = 0; j < H; ++j) {
    LstmUnitBackward<T, Math>(a[j], a[H + j], a[2 * H + j], a[3 * H + j], tanh_c[j], c_prev[j],
                              dh[j], dc[j], d_a[j], d_a[H + j], d_a[2 * H + j], d_a[3 * H + j],
                              dc_prev[j]);
  }
  for (long k = 0; k < 4 * H; ++k) db[k] += d_a[k];
}

}  // namespace streamvec

#endif  // STREAMVEC_CHARMODEL_LSTM_MATH_H_

// The float rows of the LSTM cell: the build for the best instruction set this CPU supports.
#include "streamvec/charmodel/lstm_cell.h"

namespace streamvec {
namespace internal {

#define STREAMVEC_LSTM_ROWS_DECLARE(isa)                                                         \
  void LstmForwardRows##isa(float* gates, long ld_gates, const float* b, const float* c_prev,    \
                            long ld_c_prev, float* c, float* tanh_c, float* h, long rows,        \
                            long hidden);                                                        \
  void LstmBackwardRows##isa(const float* gates, long ld_gates, const float* tanh_c,             \
                             const float* c_prev, long ld_c_prev, const float* dh, long ld_dh,   \
                             const float* dc, long ld_dc, float* d_a, float* dc_prev, float* db, \
                             long rows, long hidden);
STREAMVEC_LSTM_ROWS_DECLARE(Portable)
#if defined(STREAMVEC_X86_KERNELS)
STREAMVEC_LSTM_ROWS_DECLARE(Avx2)
STREAMVEC_LSTM_ROWS_DECLARE(Avx512)
#endif
#undef STREAMVEC_LSTM_ROWS_DECLARE

}  // namespace internal

LstmFloatRows LstmFloatRowsFor(Isa isa) {
  switch (isa) {
    case Isa::kPortable:
      return {internal::LstmForwardRowsPortable, internal::LstmBackwardRowsPortable};
#if defined(STREAMVEC_X86_KERNELS)
    case Isa::kAvx2:
      return {internal::LstmForwardRowsAvx2, internal::LstmBackwardRowsAvx2};
    case Isa::kAvx512:
      return {internal::LstmForwardRowsAvx512, internal::LstmBackwardRowsAvx512};
#endif
    default:
      return {nullptr, nullptr};
  }
}

Isa LstmFloatRowsIsa() {
  static const Isa isa = [] {
    const Isa best = DetectBestIsa();
    return LstmFloatRowsFor(best).forward != nullptr ? best : Isa::kPortable;
  }();
  return isa;
}

namespace {

const LstmFloatRows& Chosen() {
  static const LstmFloatRows rows = LstmFloatRowsFor(LstmFloatRowsIsa());
  return rows;
}

// For rows narrower than 16 floats: AVX-512's loops take 16 units a turn, and a row of 8 (the
// n-gram bag's small LSTM, --char-hidden 8) would run entirely in the scalar remainder; AVX2's
// take 8. Wider rows keep AVX-512.
const LstmFloatRows& ChosenNarrow() {
  static const LstmFloatRows rows = [] {
    const Isa isa = LstmFloatRowsIsa() == Isa::kAvx512 ? Isa::kAvx2 : LstmFloatRowsIsa();
    const LstmFloatRows r = LstmFloatRowsFor(isa);
    return r.forward != nullptr ? r : Chosen();
  }();
  return rows;
}

const LstmFloatRows& RowsFor(Eigen::Index hidden) {
  return hidden < 16 ? ChosenNarrow() : Chosen();
}

}  // namespace

template <>
void LstmForwardRows<float>(float* gates, Eigen::Index ld_gates, const float* b,
                            const float* c_prev, Eigen::Index ld_c_prev, float* c, float* tanh_c,
                            float* h, Eigen::Index rows, Eigen::Index hidden) {
  RowsFor(hidden).forward(gates, ld_gates, b, c_prev, ld_c_prev, c, tanh_c, h, rows, hidden);
}

template <>
void LstmBackwardRows<float>(const float* gates, Eigen::Index ld_gates, const float* tanh_c,
                             const float* c_prev, Eigen::Index ld_c_prev, const float* dh,
                             Eigen::Index ld_dh, const float* dc, Eigen::Index ld_dc, float* d_a,
                             float* dc_prev, float* db, Eigen::Index rows, Eigen::Index hidden) {
  RowsFor(hidden).backward(gates, ld_gates, tanh_c, c_prev, ld_c_prev, dh, ld_dh, dc, ld_dc, d_a,
                           dc_prev, db, rows, hidden);
}

}  // namespace streamvec

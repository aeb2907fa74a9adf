// The float rows of the LSTM cell (lstm_math.h with FastMath), compiled once per instruction set:
// lstm_rows_portable.cpp, lstm_rows_avx2.cpp and lstm_rows_avx512.cpp define
// STREAMVEC_LSTM_ROWS_ISA (a name suffix) and include this; lstm_rows.cpp chooses at run time.
// Included once per file, on purpose without a guard.
#include <cstddef>

#include "streamvec/charmodel/lstm_math.h"

#define STREAMVEC_LSTM_CAT2(a, b) a##b
#define STREAMVEC_LSTM_CAT(a, b) STREAMVEC_LSTM_CAT2(a, b)
#define STREAMVEC_LSTM_NAME(base) STREAMVEC_LSTM_CAT(base, STREAMVEC_LSTM_ROWS_ISA)

namespace streamvec::internal {

// This file's tag: its FastMath and rows are its own instantiations (lstm_math.h).
struct STREAMVEC_LSTM_NAME(LstmRowsTag) {};
using STREAMVEC_LSTM_NAME(Math) = FastMath<STREAMVEC_LSTM_NAME(LstmRowsTag)>;

void STREAMVEC_LSTM_NAME(LstmForwardRows)(float* gates, long ld_gates, const float* b,
                                          const float* c_prev, long ld_c_prev, float* c,
                                          float* tanh_c, float* h, long rows, long hidden) {
  for (long r = 0; r < rows; ++r) {
    LstmRowForward<float, STREAMVEC_LSTM_NAME(Math)>(gates + r * ld_gates, b,
                                                     c_prev + r * ld_c_prev, c + r * hidden,
                                                     tanh_c + r * hidden, h + r * hidden, hidden);
  }
}

void STREAMVEC_LSTM_NAME(LstmBackwardRows)(const float* gates, long ld_gates, const float* tanh_c,
                                           const float* c_prev, long ld_c_prev, const float* dh,
                                           long ld_dh, const float* dc, long ld_dc, float* d_a,
                                           float* dc_prev, float* db, long rows, long hidden) {
  for (long r = 0; r < rows; ++r) {
    LstmRowBackward<float, STREAMVEC_LSTM_NAME(Math)>(
        gates + r * ld_gates, tanh_c + r * hidden, c_prev + r * ld_c_prev, dh + r * ld_dh,
        dc + r * ld_dc, d_a + r * 4 * hidden, dc_prev + r * hidden, db, hidden);
  }
}

}  // namespace streamvec::internal

#undef STREAMVEC_LSTM_NAME
#undef STREAMVEC_LSTM_CAT
#undef STREAMVEC_LSTM_CAT2

// The LSTM cell's float rows built for Avx2 (lstm_rows_body.h).
#define STREAMVEC_LSTM_ROWS_ISA Avx2
#include "lstm_rows_body.h"

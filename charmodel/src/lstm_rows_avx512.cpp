// The LSTM cell's float rows built for Avx512 (lstm_rows_body.h).
#define STREAMVEC_LSTM_ROWS_ISA Avx512
#include "lstm_rows_body.h"

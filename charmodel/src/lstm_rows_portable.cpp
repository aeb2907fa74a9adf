// The LSTM cell's float rows built for Portable (lstm_rows_body.h).
#define STREAMVEC_LSTM_ROWS_ISA Portable
#include "lstm_rows_body.h"

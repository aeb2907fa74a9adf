#include "streamvec/kernels/sgns_math.h"

#include <cmath>

namespace streamvec {

void FillSigmoidTable(float* table) {
  const double bucket = 2.0 * kMaxLogit / kSigmoidTableSize;
  for (int i = 0; i < kSigmoidTableSize; ++i) {
    const double x = -kMaxLogit + (i + 0.5) * bucket;
    table[i] = static_cast<float>(1.0 / (1.0 + std::exp(-x)));
  }
}

}  // namespace streamvec

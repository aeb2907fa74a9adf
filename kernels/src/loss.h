// Exact per-term SGNS loss, used only when a caller asks for statistics.
#ifndef STREAMVEC_KERNELS_SRC_LOSS_H_
#define STREAMVEC_KERNELS_SRC_LOSS_H_

#include <cmath>

namespace streamvec::internal {

// -log sigma(logit) for a positive target, -log sigma(-logit) for a negative one, in nats.
inline double PairLoss(float logit, bool positive) {
  const double z = positive ? -static_cast<double>(logit) : static_cast<double>(logit);
  // log(1 + e^z) without overflow.
  return z > 30.0 ? z : std::log1p(std::exp(z));
}

}  // namespace streamvec::internal

#endif  // STREAMVEC_KERNELS_SRC_LOSS_H_

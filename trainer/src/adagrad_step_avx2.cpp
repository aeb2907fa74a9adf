// Compiled with -mavx2 -mfma (trainer/CMakeLists.txt); called only when the CPU has them.
#include "adagrad_step.inc"

namespace streamvec {
void AdagradSentenceAvx2(const AdagradSentenceArgs& args) { AdagradSentenceImpl(args); }
}  // namespace streamvec

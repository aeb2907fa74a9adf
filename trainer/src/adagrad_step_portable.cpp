#include "adagrad_step.inc"

namespace streamvec {
void AdagradSentencePortable(const AdagradSentenceArgs& args) { AdagradSentenceImpl(args); }
}  // namespace streamvec

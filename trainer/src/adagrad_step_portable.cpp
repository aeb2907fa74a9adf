// The portable Adagrad step (adagrad_step.inc for the baseline ISA), and the run-time choice
// between it and the SIMD builds.
#include "adagrad_step.inc"

namespace streamvec {

void AdagradSentencePortable(const AdagradSentenceArgs& args) { AdagradSentenceImpl(args); }

void AdagradSentence(Isa isa, const AdagradSentenceArgs& args) {
#if defined(STREAMVEC_X86_TRAINER)
  if (isa == Isa::kAvx512) return AdagradSentenceAvx512(args);
  if (isa == Isa::kAvx2) return AdagradSentenceAvx2(args);
#else
  (void)isa;
#endif
  AdagradSentencePortable(args);
}

}  // namespace streamvec

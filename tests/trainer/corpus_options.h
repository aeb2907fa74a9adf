// Corpus options for the trainer's tests (tests/trainer).
#ifndef STREAMVEC_TESTS_TRAINER_CORPUS_OPTIONS_H_
#define STREAMVEC_TESTS_TRAINER_CORPUS_OPTIONS_H_

#include <cstdint>

#include "streamvec/trainer/corpus.h"

namespace streamvec::testing {

// The default corpus options with words seen fewer than `n` times dropped.
inline CorpusOptions MinCount(uint64_t n) {
  CorpusOptions o;
  o.min_count = n;
  return o;
}

}  // namespace streamvec::testing

#endif  // STREAMVEC_TESTS_TRAINER_CORPUS_OPTIONS_H_

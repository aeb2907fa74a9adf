// A streaming learner small enough for the parameter node's tests (tests/trainer and tests/node):
// dim 8, 64 words, no subsampling, negatives drawn from the whole noise table.
#ifndef STREAMVEC_TESTS_TRAINER_SMALL_LEARNER_H_
#define STREAMVEC_TESTS_TRAINER_SMALL_LEARNER_H_

#include "streamvec/trainer/streaming_learner.h"

namespace streamvec::testing {

inline StreamingOptions SmallLearnerOptions() {
  StreamingOptions o;
  o.dim = 8;
  o.vocab_capacity = 64;
  o.min_count = 2;
  o.noise_table_size = 4096;
  o.sample = 0;
  o.negative_pool = 0;
  return o;
}

}  // namespace streamvec::testing

#endif  // STREAMVEC_TESTS_TRAINER_SMALL_LEARNER_H_

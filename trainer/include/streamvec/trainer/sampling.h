// Sampling pieces of word2vec training: the noise distribution and subsampling.
#ifndef STREAMVEC_TRAINER_SAMPLING_H_
#define STREAMVEC_TRAINER_SAMPLING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "streamvec/base/rng.h"
#include "streamvec/kernels/sgns_math.h"

namespace streamvec {

// The negative-sampling noise distribution P(w) proportional to count(w)^power (power 0.75:
// Mikolov et al. 2013, "Distributed Representations", section 2.2), held as an alias table
// (Walker 1977; Vose 1991) instead of word2vec.c's 1e8-entry unigram table: O(1) per draw from
// one 64-bit random number, 8 bytes per word, so it stays in L2 for vocabularies up to ~200k.
// Read-only after Build: safe to Sample from many threads.
class UnigramTable {
 public:
  // counts: one per word id; power: the unigram exponent. Words with count 0 are never drawn.
  // At least one count must be positive.
  void Build(const std::vector<uint64_t>& counts, double power = 0.75);

  // A word id drawn with probability P(w), from a uniform 64-bit random number.
  uint32_t Sample(uint64_t random) const {
    return AliasDraw(reinterpret_cast<const uint32_t*>(entries_.data()), size_, random);
  }

  // The exact probability of drawing `id` (for tests): sum over alias columns.
  double Probability(uint32_t id) const;
  uint32_t size() const { return size_; }

  // The table as AliasDraw (sgns_math.h) reads it: 2 x size() words, column i's threshold then
  // its alias (for copying to a device).
  const uint32_t* entries() const { return reinterpret_cast<const uint32_t*>(entries_.data()); }

 private:
  struct Entry {
    uint32_t threshold;  // keep column i if the low 32 random bits are below this
    uint32_t alias;
  };
  std::vector<Entry> entries_;
  uint32_t size_ = 0;
};

// The K negatives of each of n positions of a micro-batch into out[i * K + k] (n x K word ids).
// share: consecutive positions sharing one draw (1: a draw per position, word2vec's way; s: a
// position i with i % s != 0 copies position i - 1's). pool_size 0: each draw from `noise`;
// P > 0: first P words are drawn from `noise` into *pool (resized to P), then each negative is
// one of them uniformly, so that a negative is still marginally distributed as `noise`, while a
// micro-batch's negatives are only P distinct words whose output rows stay in cache (our
// extension of HogBatch's negatives shared by a window, Ji et al. 2016, to a micro-batch;
// measured in docs/training.md). Deterministic given rng's state.
void DrawNegatives(const UnigramTable& noise, Rng& rng, size_t n, int K, int share, int pool_size,
                   std::vector<uint32_t>* pool, uint32_t* out);

// word2vec's subsampling of frequent words (Mikolov et al. 2013, "Distributed Representations",
// section 2.3, in the form word2vec.c implements): a word of relative frequency f = count/total is
// kept with probability min(1, sqrt(t/f) + t/f), t = sample. sample <= 0 keeps every word.
double SubsampleKeepProbability(uint64_t count, uint64_t total, double sample);

// The keep probability of each word as a 32-bit threshold for a uniform 32-bit random number r:
// keep if r < threshold (thresholds of 2^32 mean always keep).
std::vector<uint64_t> SubsampleThresholds(const std::vector<uint64_t>& counts, uint64_t total,
                                          double sample);

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_SAMPLING_H_

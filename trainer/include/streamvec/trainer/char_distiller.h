// MIMICK beside the streaming learner (`--char-distill`, docs/char-model.md): a character model
// (charmodel/) learns to reproduce the learner's current input vectors of frequent word types, so
// that words outside the bounded vocabulary get vectors from their characters.
//
// Pinter et al. 2017, "Mimicking Word Embeddings using Subword RNNs", section 2: the model is
// trained on word types (not tokens) against the existing vectors with a squared distance. Here
// the vectors keep moving, so the distiller takes a step every `every_words` words the learner
// has seen: it draws `batch_types` admitted words with probability proportional to
// count^count_exponent (0.5: frequent words are drawn more often, rare ones are not starved),
// merges repeated draws into one word whose loss weight is its number of draws, reads their
// current input rows, scales each to unit length (the service compares vectors by cosine, and
// the raw rows' lengths grow with frequency) and takes one Adam step (CharModel::DistillStep).
// The admitted words and their counts are re-read every `refresh_steps` steps; a word evicted
// since is skipped.
//
// Cost: one step encodes and back-propagates at most batch_types words (about 30 ms with the
// defaults: 256 types, 20/50 bidirectional); every 1M words that is under a tenth of the
// learner's time at 2.5-4M words/s on 2 threads (bench/char_distill.sh measures it). With
// threads > 1 each step waits for the learner's queued training (reading rows drains it).
//
// Determinism: its own RNG (seeded from the model's seed); with a learner at threads = 1, Save /
// Load continue a run exactly. Not thread-safe: the thread that drives the learner drives it.
#ifndef STREAMVEC_TRAINER_CHAR_DISTILLER_H_
#define STREAMVEC_TRAINER_CHAR_DISTILLER_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/charmodel/char_model.h"
#include "streamvec/trainer/streaming_learner.h"

namespace streamvec {

// Snapshot entries: the serving model (parameters only: what `serve` reads), and, in recovery
// checkpoints, the training state (the model with Adam's moments, and the distiller's own state
// as JSON).
inline constexpr char kCharModelStateEntry[] = "charmodel/state";
inline constexpr char kCharDistillEntry[] = "charmodel/distill";

// The character model of a checkpoint with Adam's state (kCharModelStateEntry), shared by the
// distiller's and CharSgns's Load: NotFound when the entry is missing, Corruption naming it when
// malformed, or the source's I/O error.
StatusOr<std::unique_ptr<CharModel>> LoadCharModelState(const StateSource& source);

struct CharDistillOptions {
  CharModelOptions model;          // dim is set to the learner's
  int batch_types = 256;           // word types drawn per step (--char-distill-batch)
  uint64_t every_words = 1000000;  // words seen between steps (--char-distill-every)
  double count_exponent = 0.5;     // draw probability ~ count^count_exponent
  int refresh_steps = 20;          // steps between re-reads of the admitted words
  int max_steps_per_call = 4;      // MaybeStep catches up at most this many steps at once
};

// InvalidArgument naming the flag.
Status ValidateCharDistillOptions(const CharDistillOptions& options);

struct CharDistillStats {
  uint64_t steps = 0;  // Adam steps taken over the state's lifetime
  uint64_t types = 0;  // distinct word types trained on, summed over steps
  double loss = 0;     // mean squared distance per word of the last step
  double seconds = 0;  // wall seconds spent in steps by this process
};

class CharDistiller {
 public:
  // options must be valid; options.model.dim must equal the learner's dim.
  explicit CharDistiller(const CharDistillOptions& options);
  ~CharDistiller();

  // Takes the steps due since the last call (at most max_steps_per_call), judged by the
  // learner's words_seen. Call between micro-batches. Errors only for broken inputs (none
  // expected: words that CharIds refuses are skipped).
  Status MaybeStep(const StreamingLearner& learner);
  // One step now (for tests and MaybeStep). OK and no step when nothing is admitted yet.
  Status Step(const StreamingLearner& learner);

  const CharModel& model() const { return model_; }
  const CharDistillOptions& options() const { return options_; }
  CharDistillStats stats() const { return stats_; }
  // {"steps", "types", "loss", "char_dim", "char_hidden", "char_bidirectional",
  //  "max_word_chars", "char_ngram_buckets", "batch_types", "every_words"} for snapshot
  //  metadata.
  std::string MetadataJson() const;

  // The serving entry (kCharModelEntry: parameters only) always; with `checkpoint` also
  // kCharModelStateEntry and kCharDistillEntry (what Load needs), and the next step re-reads the
  // admitted words.
  Status Save(const StateSink& sink, bool checkpoint) const;
  // NotFound when the state holds no distiller (kCharModelStateEntry missing); Corruption
  // naming the entry when one is malformed.
  static StatusOr<std::unique_ptr<CharDistiller>> Load(const StateSource& source);

 private:
  void Refresh(const StreamingLearner& learner);

  CharDistillOptions options_;
  CharModel model_;
  std::mt19937_64 rng_;
  uint64_t next_words_ = 0;  // words_seen at which the next step is due
  CharDistillStats stats_;
  // The admitted words as last read, and the draw distribution over them.
  std::vector<std::string> words_;
  std::discrete_distribution<size_t> draw_;
  uint64_t refreshed_at_step_ = 0;
  // Cleared by a checkpoint's Save, so that the next step re-reads the admitted words both in
  // the running process and in one resumed from that checkpoint (identical runs at threads 1).
  mutable bool have_words_ = false;
};

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_CHAR_DISTILLER_H_

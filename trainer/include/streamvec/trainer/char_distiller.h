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
// Steps run beside the learner (options.background, the default): Step gathers a batch on the
// calling thread (the targets copied out of the learner's rows, so the step never reads the
// learner) and queues its encoding and back-propagation for a thread of the distiller's own.
// At most max_steps_per_call steps are queued or running: further behind, Step waits for room,
// so the learner runs at most that far ahead. Wait, model(), MetadataJson(), Save and the
// destructor wait for the queue to empty. The result does not depend on the timing: the same
// calls give the same model with or without background.
//
// Cost: one step encodes and back-propagates at most batch_types words (about 30 ms with the
// defaults: 256 types, 20/50 bidirectional); every 1M words that is under a tenth of the
// learner's time at 2.5-4M words/s on 2 threads (bench/char_distill.sh measures it). With
// threads > 1 the targets are the rows as the learner's workers have them (InputRowNoWait:
// the queued training is not waited for).
//
// Determinism: its own RNG (seeded from the model's seed); with a learner at threads = 1, Save /
// Load continue a run exactly. Not thread-safe but for stats(): the thread that drives the
// learner drives it.
#ifndef STREAMVEC_TRAINER_CHAR_DISTILLER_H_
#define STREAMVEC_TRAINER_CHAR_DISTILLER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
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
  int max_steps_per_call = 4;      // MaybeStep catches up at most this many steps at once;
                                   // also the most steps queued in the background
  bool background = true;          // steps run on a thread of their own (above)
};

// InvalidArgument naming the flag.
Status ValidateCharDistillOptions(const CharDistillOptions& options);

struct CharDistillStats {
  uint64_t steps = 0;  // Adam steps taken over the state's lifetime
  uint64_t types = 0;  // distinct word types trained on, summed over steps
  double loss = 0;     // mean squared distance per word of the last step
  double seconds = 0;  // seconds spent in steps by this process (gathering + computing)
  uint64_t skipped = 0;  // steps due but dropped by this process (MaybeStep: far behind)
};

class CharDistiller {
 public:
  // options must be valid; options.model.dim must equal the learner's dim.
  explicit CharDistiller(const CharDistillOptions& options);
  ~CharDistiller();

  // Takes the steps due since the last call (at most max_steps_per_call), judged by the
  // learner's words_seen. Call between micro-batches. Errors only for broken inputs (none
  // expected: words that CharIds refuses are skipped); a background step's error is returned
  // by a later call.
  Status MaybeStep(const StreamingLearner& learner);
  // One step now (for tests and MaybeStep; queued in the background, see above). OK and no
  // step when nothing is admitted yet.
  Status Step(const StreamingLearner& learner);

  // Waits for the queued steps: the first error of one (then cleared), else OK.
  Status Wait();

  // The model after the steps taken so far (waits for the queued ones).
  const CharModel& model() const;
  const CharDistillOptions& options() const { return options_; }
  // The steps finished so far (does not wait; any thread may call it).
  CharDistillStats stats() const;
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
  // One step's words, unit-length targets (words.size() x dim) and weights.
  struct Batch {
    std::vector<std::string> words;
    std::vector<float> targets, weights;
  };

  void Refresh(const StreamingLearner& learner);
  // Waits for the steps handed over; an error is kept for the next Step or Wait.
  void Finish() const;
  Status TakeError();  // a background step's error (then cleared), else OK

  CharDistillOptions options_;
  CharModel model_;
  std::mt19937_64 rng_;
  uint64_t next_words_ = 0;  // words_seen at which the next step is due
  uint64_t launched_steps_ = 0;  // steps started (stats_.steps counts those finished)
  mutable std::mutex stats_mu_;
  CharDistillStats stats_;
  // The admitted words as last read (slot order), and their running sums of draw weights.
  std::vector<std::string> words_;
  std::vector<double> cumulative_;
  uint64_t refreshed_at_step_ = 0;
  // Cleared by a checkpoint's Save, so that the next step re-reads the admitted words both in
  // the running process and in one resumed from that checkpoint (identical runs at threads 1).
  mutable bool have_words_ = false;

  // The thread that runs background steps (started by the first), and its queue.
  void Run();
  std::thread thread_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<std::function<Status()>> queue_;  // steps handed over, not yet started
  int in_flight_ = 0;                          // steps handed over and not finished
  bool stop_ = false;
  Status failed_;  // the first error of a background step since the last TakeError
};

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_CHAR_DISTILLER_H_

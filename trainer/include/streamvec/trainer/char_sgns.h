// The character model as the input side of SGNS (`--model char-lstm`, docs/char-model.md): a
// word's input vector comes from its characters (charmodel/, C2W), trained with the skip-gram
// objective against the learner's output vectors (Cao & Rei 2016, "A Joint Model for Word
// Embedding and Word Morphology", trained a character model with it).
//
// Modes (CharMode):
// - replace: v(w) = C(w), the character model's vector. The learner's input rows are scratch.
// - sum:     v(w) = e(w) + C(w), the word's own table row plus the character model's vector, as
//            fastText sums a word's vector and its n-grams' (Bojanowski et al. 2017, section 3.2).
//            The projection starts at zero, so training starts as plain SGNS. A word outside the
//            vocabulary gets C(w).
//
// One update per micro-batch, on the learner's own SGNS kernels:
//   1. the distinct admitted words of the batch (tokenised as the learner does) are encoded once,
//      grouped by length (CharModel::Encode, split over `threads`);
//   2. each one's input row is set to v(w) (sum: e(w) + C(w); replace: C(w));
//   3. the learner trains the batch as usual (Adagrad, Hogwild with threads > 1);
//   4. each row's change d(w) = row - v(w) is the sum over the word's occurrences of its
//      (Adagrad-scaled) ascent steps; sum mode puts e(w) + d(w) back in the row;
//   5. -d(w) is back-propagated through the encoder as dL/dC(w) (each distinct word once, its
//      occurrences summed) and the character model takes one Adam step.
// Words admitted during the batch, evicted during it, or that CharIds refuses train as plain
// SGNS rows in that batch. With threads > 1 a batch's training is waited for (steps 4-5 read the
// rows), so counting does not overlap training across batches as it does for plain SGNS.
//
// Serving: the snapshot's rows are v(w) for every admitted word (WriteServingEntries), and the
// character model's entry (kCharModelEntry) lets `serve` answer any other word with C(w).
//
// Determinism: with the learner at threads = 1 and the same micro-batch cuts, Save / Load
// continue a run exactly (the encoder's split over threads sums gradients in a fixed order).
// Not thread-safe: the thread that drives the learner drives it.
#ifndef STREAMVEC_TRAINER_CHAR_SGNS_H_
#define STREAMVEC_TRAINER_CHAR_SGNS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/charmodel/char_model.h"
#include "streamvec/store/state_store.h"
#include "streamvec/trainer/streaming_learner.h"

namespace streamvec {

// Checkpoint entry: the trainer's own state as JSON (mode, counters). With it the state also
// holds kCharModelStateEntry (the model with Adam's moments) and the serving kCharModelEntry.
inline constexpr char kCharSgnsEntry[] = "charmodel/sgns";

enum class CharMode { kReplace, kSum };

// "replace" / "sum" (the --char-mode values); false for anything else.
bool ParseCharMode(std::string_view s, CharMode* mode);
const char* CharModeName(CharMode mode);

struct CharSgnsOptions {
  CharModelOptions model;  // dim is set to the learner's
  CharMode mode = CharMode::kSum;
  // Words per update (--char-batch-words): text is trained in pieces of about this many words
  // (whole documents of a micro-batch; a chunk cut at whitespace), one Adam step each. Smaller
  // pieces: more steps, and more encoding (a word is encoded once per piece it occurs in). On
  // the 100M corpus 100k-word pieces encode 0.10 words a trained word where 20k-word pieces
  // encode 0.17, and score no worse on words outside the vocabulary (docs/char-model.md).
  uint64_t batch_words = 100000;
};

struct CharSgnsStats {
  uint64_t steps = 0;  // Adam steps (micro-batches with at least one encoded word)
  uint64_t types = 0;  // distinct words encoded, summed over steps
  double seconds = 0;  // wall seconds in encoding and back-propagation, this process
  // Their parts (wall seconds, this process): finding a piece's distinct admitted words (step
  // 1), encoding them into the input rows (step 2), the rows' changes, back-propagation and the
  // Adam step (steps 4-5).
  double scan_seconds = 0, encode_seconds = 0, backward_seconds = 0;
};

class CharSgns {
 public:
  // options.model must be valid (ValidateCharModelOptions) with dim = the learner's dim.
  // `threads`: encoder threads (the learner's --threads; not saved).
  CharSgns(const CharSgnsOptions& options, int threads);
  ~CharSgns();

  // StreamingLearner::TrainMicroBatch with the character model as the input side (steps 1-5
  // above). Errors: the learner's.
  Status TrainMicroBatch(StreamingLearner* learner, const std::vector<std::string_view>& texts);
  // StreamingLearner::TrainChunk likewise: the chunk is trained up to its last whitespace byte
  // and the rest waits for the next call (a word is never cut); FinishStream trains what waits
  // and finishes the learner's stream.
  Status TrainChunk(StreamingLearner* learner, std::string_view chunk);
  Status FinishStream(StreamingLearner* learner);

  // The vectors v(w) of the learner's admitted words, most frequent first (as
  // StreamingLearner::ExportVectors): words.size() x dim.
  Status ExportVectors(const StreamingLearner& learner, std::vector<std::string>* words,
                       std::vector<float>* vectors) const;
  // The serving embedding (the learner's WriteServingEntries layout, rows v(w)) and the words'
  // counts. Replaces WriteServingEntries for a learner trained by a CharSgns.
  Status WriteServingEntries(const StreamingLearner& learner, const SnapshotSink& sink) const;

  // The character model's passes (steps 1 and 5) on CUDA device `ordinal` (CharModel::
  // UseCudaDevice; the learner stays where it is: steps 2-4 read and write its rows on the host).
  // Not saved: a loaded trainer runs on the CPU until this is called. Errors: UseCudaDevice's.
  Status UseCudaDevice(int ordinal);

  const CharModel& model() const { return model_; }
  const CharSgnsOptions& options() const { return options_; }
  CharSgnsStats stats() const { return stats_; }
  // {"char_mode", "batch_words", "steps", "types", "char_dim", "char_hidden", "char_bidirectional",
  //  "max_word_chars"} for snapshot metadata.
  std::string MetadataJson() const;

  // The serving model (kCharModelEntry) always; with `checkpoint` also kCharModelStateEntry and
  // kCharSgnsEntry (what Load needs).
  Status Save(const SnapshotSink& sink, bool checkpoint) const;
  // NotFound when the state holds no kCharSgnsEntry; Corruption naming a malformed entry.
  static StatusOr<std::unique_ptr<CharSgns>> Load(const StateSource& source, int threads);

 private:
  // v(w) of `words` (words.size() x dim): sum mode their input rows (zeros for a word without
  // one) plus the model's vectors, replace mode the model's; a word the model cannot read keeps
  // its row.
  Status ServedVectors(const StreamingLearner& learner, const std::vector<std::string>& words,
                       std::vector<float>* vectors) const;
  // TrainChunk's text (ending at whitespace or the stream's end) in pieces of batch_words words.
  Status TrainPieces(StreamingLearner* learner, std::string_view text);
  // The forward passes of EncodeParallel's parts, kept for the backward pass.
  using Passes = std::vector<std::shared_ptr<const CharModel::Pass>>;
  // Parts a call over `words` words is split into: one per thread, at least 256 words each.
  size_t Parts(size_t words) const;
  // Encodes `words` into out (n x dim) over Parts(n) threads, word range t = [n t / parts,
  // n (t+1) / parts) on thread t; with `passes`, keeps each part's forward pass.
  Status EncodeParallel(const std::vector<std::string_view>& words, std::vector<float>* out,
                        Passes* passes) const;
  // Step 1: the distinct admitted words of `texts` the model can read, in first-seen order, and
  // their slots; the texts are read on up to `threads` threads (a run of text each, the finds
  // merged in text order, so the result is the same whatever the threads).
  void ScanWords(const StreamingLearner& learner, const std::vector<std::string_view>& texts,
                 std::vector<std::string>* words, std::vector<uint32_t>* slots);
  // Trains one piece of text through `train`, the distinct admitted words of `texts` taking
  // their input from the character model.
  template <typename TrainFn>
  Status Step(StreamingLearner* learner, const std::vector<std::string_view>& texts,
              TrainFn&& train);

  CharSgnsOptions options_;
  int threads_;
  CharModel model_;
  CharSgnsStats stats_;
  std::string carry_;  // TrainChunk: text after the last whitespace, waiting for the next chunk
  // Step: per learner slot, the number of the last piece that looked at its word.
  std::vector<uint32_t> seen_;
  std::vector<std::vector<uint32_t>> part_seen_;  // ScanWords: each thread's stamps
  uint32_t piece_ = 0;
};

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_CHAR_SGNS_H_

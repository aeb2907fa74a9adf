// The streaming learner: skip-gram with negative sampling over an unbounded stream, one pass,
// bounded memory, no corpus size (docs/streaming.md has the semantics and the sources).
//
// - Vocabulary: at most `vocab_capacity` words, kept with the space-saving algorithm (Metwally
//   et al. 2005; used for word embeddings by May et al. 2017): a new word arriving at a full table
//   takes the slot of the word with the smallest count and inherits that count as its error
//   bound. A word is admitted to training once its guaranteed count (count - error) reaches
//   `min_count`. A word that takes over a slot gets fresh rows (input uniform in
//   [-0.5/dim, 0.5/dim), output zero) and a fresh optimizer state.
// - Optional exponential count decay with half-life `count_half_life` words, so the vocabulary
//   follows a drifting stream.
// - Noise: the adaptive unigram table of Kaji & Kobayashi 2017 ("Incremental Skip-gram Model
//   with Negative Sampling", Algorithm 2), count^ns_exponent, updated per token.
// - Subsampling: word2vec's keep probability min(1, sqrt(t/f) + t/f) with f from the running
//   (decayed) counts.
// - Learning rate: per-row Adagrad (Duchi et al. 2011) by default, or a constant rate.
//
// Rows are preallocated for the capacity (64-byte aligned, PaddedStride(dim) floats a row); row r
// belongs to vocabulary slot r. With threads = 1 training runs on the calling thread and, for a
// fixed seed, is deterministic: the same input in any micro-batch cut (at sentence boundaries)
// gives bit-identical rows, and SaveState / LoadState continue the run exactly. With threads > 1
// the calling thread counts, samples and draws negatives (still deterministic) and worker threads
// train on the shared rows without locks (Hogwild; Recht et al. 2011: races on rows are
// intended, and a row re-initialised by an eviction may still receive an update queued for its
// previous word). Every method that reads rows or saves the state first waits for the queued
// training (Drain).
//
// Not thread-safe: one thread drives an instance (the workers are internal).
#ifndef STREAMVEC_TRAINER_STREAMING_LEARNER_H_
#define STREAMVEC_TRAINER_STREAMING_LEARNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "streamvec/base/cpu_features.h"
#include "streamvec/base/status.h"
#include "streamvec/tokenizer/whitespace_tokenizer.h"

namespace streamvec {

enum class StreamOptimizer {
  kAdagrad,   // per-row Adagrad: lr_r = eta / sqrt(G_r + epsilon), G_r += mean square gradient
  kConstant,  // plain SGD with learning rate `alpha` (the SIMD kernel)
};

struct StreamingOptions {
  int dim = 100;                     // vector size
  int window = 5;                    // maximum context radius; each position draws [1, window]
  int negative = 5;                  // noise words per centre, < kMaxTargets
  double sample = 1e-3;              // subsampling threshold t on running counts (0 disables)
  uint32_t vocab_capacity = 1000000; // words held at most (rows preallocated for them)
  uint64_t min_count = 5;            // guaranteed count at which a word is admitted to training
  uint64_t count_half_life = 0;      // words after which counts halve; 0: no decay
  double ns_exponent = 0.75;         // noise distribution exponent
  uint32_t noise_table_size = 1u << 22;  // entries of the adaptive unigram table (4 bytes each)
  StreamOptimizer optimizer = StreamOptimizer::kAdagrad;
  float eta = 0.2f;                  // Adagrad base rate
  float epsilon = 1e-6f;             // Adagrad: added to G under the square root
  float alpha = 0.025f;              // constant learning rate (kConstant)
  uint64_t seed = 1;                 // RNG seed
  int max_sentence_length = 1000;    // longer lines are cut (word2vec.c MAX_SENTENCE_LENGTH)
  // Negatives from a pool: every kNegativePoolPeriod kept tokens (at a sentence's start) the
  // learner draws negative_pool words from the adaptive unigram table, and each position's
  // negatives are drawn uniformly from them, so a negative is still marginally distributed as
  // the table and the rows of a stretch of text's negatives (at most negative_pool of them)
  // stay in cache (the batch trainer's --negative-pool, docs/training.md). 0: every negative
  // from the table.
  int negative_pool = 1024;
  // Consecutive positions of a sentence sharing one draw of negatives (1 or 2; 0: 2 for
  // window <= kPairWindowMax, else 1). With 2, the Adagrad step trains positions 2m and 2m + 1
  // as one window when their K + 2 targets are distinct (context combining, Rengasamy et al.
  // 2017; AdagradSentenceArgs::negative_share, docs/streaming.md).
  int negative_share = 0;
  Isa isa = Isa::kPortable;          // SIMD level (DetectBestIsa(); must be supported): the
                                     // Adagrad step has AVX2+FMA and AVX-512 builds, the
                                     // constant rate the kernel of this Isa
  int threads = 1;                   // 1: train on the calling thread (deterministic); N > 1:
                                     // N worker threads train micro-batches of ~4096 words
                                     // while the caller counts (Hogwild, not deterministic)
  // CUDA device the rows live on and the Adagrad step runs on (cuda_sgns.h), or -1 (the CPU).
  // With a device, one worker thread hands the counting thread's jobs to the device (threads is
  // not used for training); a newly admitted word's fresh row goes up with the job that first
  // uses it, and the rows come back to the host before anything reads them (exports, InputRow,
  // SaveState). Needs the Adagrad optimizer and dim <= kCudaMaxDim; device_status() says whether
  // the device could be opened.
  int cuda_device = -1;
  TokenizerOptions tokenizer;
};

// Kept tokens between two draws of the pool of negatives (StreamingOptions::negative_pool).
constexpr uint64_t kNegativePoolPeriod = 2048;
// The widest window for which negative_share 0 means 2.
constexpr int kPairWindowMax = 5;

// options.negative_share, or for 0 its default: 2 up to --window kPairWindowMax, else 1.
int EffectiveStreamShare(const StreamingOptions& options);

// Checks ranges; InvalidArgument names the flag (--dim, --vocab-capacity, ...).
Status ValidateStreamingOptions(const StreamingOptions& options);

struct StreamingStats {
  uint64_t words_seen = 0;        // valid tokens counted into the vocabulary
  uint64_t words_trained = 0;     // tokens trained on (admitted and kept by subsampling)
  uint64_t sentences = 0;         // sentences completed
  uint64_t evictions = 0;         // words that lost their slot to a new word
  uint64_t admitted = 0;          // words currently admitted (guaranteed count >= min_count)
  uint64_t vocab_size = 0;        // words currently held (<= capacity)
  uint64_t invalid_tokens = 0;    // skipped: invalid UTF-8, NUL byte, or too long
  uint64_t bytes = 0;             // input bytes read
  double loss = 0.0;              // mean loss per positive pair since the last TakeLoss, nats
};

// One entry of a saved state: a key and its bytes.
using StateSink = std::function<Status(const std::string& key, std::string_view value)>;
// Reads a saved entry: the bytes, NotFound, or an I/O error.
using StateSource = std::function<StatusOr<std::string>(const std::string& key)>;

class StreamingLearner {
 public:
  // Options must be valid (ValidateStreamingOptions). Allocates the rows for the capacity.
  explicit StreamingLearner(const StreamingOptions& options);
  ~StreamingLearner();
  StreamingLearner(const StreamingLearner&) = delete;
  StreamingLearner& operator=(const StreamingLearner&) = delete;

  // The micro-batch entry point (what a Kafka consumer calls per batch of documents): each
  // element is text that ends a sentence (newlines inside it end sentences too). Invalid tokens
  // are skipped and counted. Any text pending from TrainChunk is completed first. With threads
  // > 1 it returns once the batch is counted and queued for the workers, without waiting for
  // them (as TrainChunk): the caller can fetch the next batch meanwhile.
  Status TrainMicroBatch(const std::vector<std::string_view>& sentences);

  // Byte-stream entry point: a chunk of any size; a word or a sentence may continue in the next
  // chunk. Sentences end at newlines and every max_sentence_length words.
  Status TrainChunk(std::string_view chunk);
  // Ends the stream's current word and sentence (at EOF, or before a snapshot at shutdown).
  Status FinishStream();

  // Does not wait for queued training (threads > 1): `loss` covers the jobs trained so far.
  StreamingStats stats() const;
  // The mean loss per positive pair since the last call (0 if none), then resets it.
  double TakeLoss();
  const StreamingOptions& options() const;

  // Admitted words, most frequent first (ties: slot order), and their input rows copied densely
  // (words.size() x dim).
  void ExportVectors(std::vector<std::string>* words, std::vector<float>* vectors) const;
  // The same words and, instead of a copy, a pointer to each one's input row (dim floats of a
  // PaddedStride(dim) row), valid until the next call that trains, loads or destroys the
  // learner: snapshots write the serving embedding from these without a dense copy.
  void ExportRows(std::vector<std::string>* words, std::vector<const float*>* rows) const;
  // The same words with, for each, its slot (the row of the learner's table that holds its
  // vector; stable while the word stays in the vocabulary), and one pointer per slot to its
  // input row (*stride floats, the vector first), for every slot. *rows_per_chunk: the rows of
  // each "input/" entry SaveState writes. Snapshots write the serving rows in slot order with
  // this layout, so a chunk whose rows did not change keeps its bytes, and at a checkpoint
  // equals the learner's own entry (the state store writes such bytes once).
  void ExportRowsBySlot(std::vector<std::string>* words, std::vector<uint32_t>* slots,
                        std::vector<const float*>* slot_rows, int* stride,
                        size_t* rows_per_chunk) const;
  // The seam of a distributed trainer (param/, issue 20), off the training path: the admitted
  // words, most frequent first (ties: slot order), with their slots and running (decayed)
  // counts. Waits for queued training.
  void AdmittedSlots(std::vector<std::string>* words, std::vector<uint32_t>* slots,
                     std::vector<double>* counts) const;
  // The same slots and counts in slot order, without the words' copies (a trainer pushing every
  // 16k words would otherwise copy and sort its whole vocabulary each time): WordAt gives each
  // slot's word. Waits for queued training.
  void AdmittedSlotsBySlot(std::vector<uint32_t>* slots, std::vector<double>* counts) const;
  // AdmittedSlotsBySlot without waiting for the queued training: the workers only train rows,
  // and the vocabulary (words, counts, admissions, evictions) changes only on the thread that
  // feeds the learner, so that thread reads it as it stands (CharDistiller's draws).
  void AdmittedSlotsNoWait(std::vector<uint32_t>* slots, std::vector<double>* counts) const;
  // The word holding `slot` (a slot AdmittedSlotsBySlot gave, or any other below the slots in
  // use: SV_CHECK; empty for a free one), valid until the next call that trains, loads or
  // destroys the learner.
  std::string_view WordAt(uint32_t slot) const;
  // The group seam (issue 20): the vocabulary and the noise distribution of a trainer in a group
  // follow the whole group's stream, not only its own share. A held word's count is then its own
  // space-saving count plus `others`, the occurrences the rest of the group counted (what the
  // parameter node counts, less what this trainer pushed): a word is admitted once its own
  // guaranteed count plus others reaches min_count, and the adaptive unigram table weighs it by
  // (count + others)^ns_exponent (Kaji & Kobayashi 2017, Algorithm 2, with the others' increase
  // as one weighted update). Subsampling and eviction keep the own counts (space-saving's bounds
  // hold for the stream this learner counted). SetGroupCounts turns it on and gives the function
  // asked for the others' count of a word when it takes a slot (new, or after an eviction; 0
  // when unknown), or with an empty function turns it off (the others' counts are dropped;
  // admission and the table's weights are the own counts' again, the table's entries are
  // overwritten by the tokens that follow); SetGroupCount raises a held word's (a decrease is
  // ignored: the table cannot take entries back) and returns whether it changed. On the thread
  // that feeds text, between micro-batches. Off by default and not saved in a state: a lone
  // learner is unchanged, and an owner that loads a state sets it again (the counts come back
  // with the node's next publications).
  using GroupCountFn = std::function<double(std::string_view word)>;
  void SetGroupCounts(GroupCountFn others);
  bool SetGroupCount(std::string_view word, double others);
  // The others' count of `word` (0 if not held or off).
  double GroupCount(std::string_view word) const;
  // The slot holding `word` (admitted or not), or -1.
  int64_t SlotOf(std::string_view word) const;
  // The row tables, to be read and written in place between micro-batches: slot s's input
  // vector is input[s * stride .. + dim), its output vector output[s * stride .. + dim); the
  // floats past dim are padding (they may hold the row's Adagrad accumulator: leave them).
  // Waits for queued training first, so nothing else writes the rows until the next call that
  // trains. Null tables with a CUDA device (the rows live there).
  struct RowTables {
    float* input = nullptr;
    float* output = nullptr;
    size_t stride = 0;   // floats a row
    uint32_t slots = 0;  // rows of each table (the vocabulary capacity)
  };
  RowTables MutableRowTables();
  // Word-seeded initialisation (the distributed seam): when on, a word's fresh input row is
  // drawn from an RNG seeded with HashWord(word) ^ options().seed instead of the learner's
  // stream, so every trainer of one parameter space starts a word at the same row and their
  // deltas stay in one coordinate system (model averaging needs a shared start; McMahan et al.
  // 2017, section 2). Off by default (a lone learner stays bit-identical); not saved in a state:
  // the owner sets it again after LoadState.
  void SetWordSeededInit(bool on);
  // The other half of the distributed seam: when set, a word given a slot (admitted anew, or
  // taking an evicted word's slot) first asks `init(word, slot, input, output)` for its rows
  // (dim floats each, written in place); returning true keeps them (a trainer starts the word
  // from the parameter node's newest row), false falls back to the usual initialisation.
  // Called on the thread that feeds text, between its own training steps. Not saved in a
  // state. Unset with an empty function.
  using RowInitializer =
      std::function<bool(std::string_view word, uint32_t slot, float* input, float* output)>;
  void SetRowInitializer(RowInitializer init);

  // The running (decayed) count of `word`, 0 if it is not held; and whether it is admitted.
  double Count(std::string_view word) const;
  bool Admitted(std::string_view word) const;
  // Input row of an admitted word, nullptr otherwise: PaddedStride(dim) floats, the first dim
  // the vector (the padding may hold the row's Adagrad accumulator).
  const float* InputRow(std::string_view word) const;
  // InputRow without waiting for the queued training (threads > 1): the row as the workers have
  // it now, read while they may write it (Hogwild's races, Recht et al. 2011; only the calling
  // thread re-initialises rows, so the row stays the word's while it reads). Where the rows
  // live on a device, the same as InputRow. For readers that want a recent row, not one that
  // covers every word seen (CharDistiller's targets).
  const float* InputRowNoWait(std::string_view word) const;
  // Probability that the noise table draws `word` (for tests): entries / table size.
  double NoiseProbability(std::string_view word) const;
  // Bytes held for rows, optimizer state, noise table and vocabulary (bounded by the capacity).
  size_t MemoryBytes() const;

  // Writes the whole learner (options, vocabulary with counts, rows, optimizer state, noise
  // table, RNG state, words seen) as entries to `sink`; rows go in chunks of at most 256 KiB
  // and the noise table in chunks of 1 MiB (small values keep a store's buffers small).
  // Call at a sentence boundary (FinishStream) to keep the partial sentence: text pending inside
  // a sentence is not saved.
  Status SaveState(const StateSink& sink) const;
  // Whether the device of options().cuda_device could be opened (Ok on the CPU). A learner whose
  // device failed trains on the calling thread instead.
  Status device_status() const;

  // Rebuilds a learner from saved entries; its options are the saved ones except `isa`,
  // `threads` and `cuda_device` (properties of the machine, not of the model). Corruption names the entry that is
  // missing or malformed.
  static StatusOr<std::unique_ptr<StreamingLearner>> LoadState(const StateSource& source,
                                                               Isa isa = Isa::kPortable,
                                                               int threads = 1,
                                                               int cuda_device = -1);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The per-row Adagrad update used by the learner, exposed for tests: G += mean(g_j^2) over the
// dim components of the ascent direction g, then row += eta / sqrt(G + epsilon) * g.
void AdagradRowUpdate(float* row, const float* gradient, int dim, float* accumulator, float eta,
                      float epsilon);

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_STREAMING_LEARNER_H_

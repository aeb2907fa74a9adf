// A character-level word model: a word's characters -> its vector (docs/char-model.md).
//
// C2W (Ling et al. 2015, "Finding Function in Form", section 2.1): the word's Unicode code
// points, between a begin mark and an end mark, are looked up in a character embedding table
// (char_dim), read by an LSTM (forward, and with `bidirectional` also backward over the reversed
// sequence; cell in lstm_cell.h), and the final hidden states are projected linearly to `dim`:
//   v(w) = P [h_fwd; h_bwd] + p
// MIMICK (Pinter et al. 2017, "Mimicking Word Embeddings using Subword RNNs", section 2) trains
// such a model on word types to reproduce existing vectors (CharModel::DistillStep); the
// parameters are updated with Adam (Kingma & Ba 2015, Algorithm 1).
//
// Batched: the words of a call are grouped by length (in code points, marks included) and each
// group runs as one matrix product per time step (Eigen), each distinct word once per call as the
// caller passes it.
//
// Input: valid UTF-8 only (CharIds rejects the rest, so invalid bytes never reach the model).
// Words longer than `max_word_chars` code points are cut to their first max_word_chars.
//
// Thread safety: the const methods (Encode, ComputeGradient, Serialize) may run from any number
// of threads at once (on a device they take turns); AdamStep, DistillStep, mutable_parameters and
// UseCudaDevice need exclusive access.
#ifndef STREAMVEC_CHARMODEL_CHAR_MODEL_H_
#define STREAMVEC_CHARMODEL_CHAR_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec {

// The snapshot entry that holds a serving character model (CharModel::Serialize without the
// optimizer): written by the trainer with `--char-distill`, read by `serve` for words outside the
// vocabulary.
inline constexpr char kCharModelEntry[] = "embedding/charmodel";

struct CharModelOptions {
  int dim = 100;              // output vector size (the word vectors' --dim)
  int char_dim = 20;          // character embedding size (--char-dim; MIMICK's 20)
  int hidden = 50;            // LSTM hidden size per direction (--char-hidden; MIMICK's 50)
  bool bidirectional = true;  // a backward LSTM too (--char-bidirectional)
  // Rows of the character embedding table: 2 marks (begin, end) + buckets - 2 code point rows.
  // Code point c has row 2 + c % (buckets - 2): below buckets - 2 every code point has a row of
  // its own (Latin, Greek, Cyrillic, Hebrew, Arabic with the default), higher ones share rows.
  int buckets = 2048;
  int max_word_chars = 32;      // code points read at most; longer words are cut (--max-word-chars)
  float learning_rate = 3e-3f;  // Adam step size (alpha; --char-lr)
  float beta1 = 0.9f;           // Adam first moment decay
  float beta2 = 0.999f;         // Adam second moment decay
  float adam_epsilon = 1e-8f;   // Adam epsilon
  uint64_t seed = 1;            // initialisation RNG seed
  // The bag of character n-grams (--char-ngram-buckets; 0: none): rows of dim floats, one per
  // hashed n-gram of 3 to 6 code points of the word between its marks (fastText's n-grams,
  // Bojanowski et al. 2017, section 3.2); the mean of a word's rows is added to the LSTM's
  // output. Bag of Subwords (Zhao et al. 2018, "Generalizing Word Embeddings using Bag of
  // Subwords", EMNLP, section 2) distils such a bag from existing vectors: it gives the model a
  // row per n-gram to remember rare words by, where the LSTM has some 10^5 parameters in all.
  // Rows start at zero and are trained by DistillStep only, with row-wise Adagrad.
  int ngram_buckets = 0;
  float ngram_rate = 0.3f;  // the bag's Adagrad base rate (--char-ngram-lr)
};

// Checks ranges; InvalidArgument names the flag (--char-dim, --char-hidden, --max-word-chars...).
Status ValidateCharModelOptions(const CharModelOptions& options);

// Row ids of the character table for `word`: begin mark (0), one id per code point (at most
// max_word_chars, see CharModelOptions::buckets), end mark (1). Errors, InvalidArgument: an
// empty word, invalid UTF-8 (naming the byte offset), a control character (Unicode category Cc,
// naming the code point).
StatusOr<std::vector<int32_t>> CharIds(std::string_view word, int buckets, int max_word_chars);

// Rows of the n-gram bag for `word` (CharModelOptions::ngram_buckets): every run of 3 to 6
// symbols of [begin mark, the first max_word_chars code points, end mark], hashed (FNV-1a over
// the symbols' 32-bit values, the marks outside Unicode) modulo ngram_buckets, in order of length
// then position; repeats kept (a word's mean counts an n-gram as often as it occurs). At least
// one row for any word. Errors as CharIds.
StatusOr<std::vector<int32_t>> CharNgramIds(std::string_view word, int ngram_buckets,
                                            int max_word_chars);

class CharModel {
 public:
  // Options must be valid (ValidateCharModelOptions). Parameters drawn from options.seed:
  // embeddings and LSTM weights uniform in [-1/sqrt(H), 1/sqrt(H)), forget-gate biases 1,
  // projection uniform Glorot.
  explicit CharModel(const CharModelOptions& options);
  CharModel(const CharModel& other);
  CharModel& operator=(const CharModel& other);
  ~CharModel();

  const CharModelOptions& options() const;

  // Vectors of `words` into out (words.size() x dim, row-major; resized). InvalidArgument
  // naming the first word CharIds refuses (nothing is written then).
  Status Encode(const std::vector<std::string_view>& words, std::vector<float>* out) const;

  // A loss over a batch's outputs: given outputs (n x dim, row-major), writes dL/doutputs (n x
  // dim) and returns L.
  using LossFunction = std::function<double(const float* outputs, size_t n, float* d_outputs)>;

  // Forward over `words`, `loss` on the outputs, backward: ADDS dL/dparameters into *gradient
  // (num_parameters() floats; resized and zeroed when it has another size) and returns L.
  // Errors as Encode (nothing added then). The n-gram bag's rows are not among the parameters:
  // its outputs include their mean, but only DistillStep trains them.
  StatusOr<double> ComputeGradient(const std::vector<std::string_view>& words,
                                   const LossFunction& loss, std::vector<float>* gradient) const;

  // ComputeGradient in two halves, for a caller that knows dL/doutputs only later (CharSgns: once
  // SGNS has trained the batch). Forward encodes `words` into out (words.size() x dim, as
  // Encode) and keeps what the backward pass needs (the steps' gates and states: about 2.8 KB
  // per word and code point with the defaults, both directions); Backward ADDS dL/dparameters for
  // d_out (words.size() x dim) into *gradient (resized and zeroed when it has another size). The
  // parameters must not change in between. Errors: Forward as Encode; Backward only on a device
  // (Internal naming a CUDA error; FailedPrecondition when the pass was back-propagated already
  // or the parameters changed since its Forward: a device pass runs backward once).
  struct Pass;
  StatusOr<std::shared_ptr<const Pass>> Forward(const std::vector<std::string_view>& words,
                                                std::vector<float>* out) const;
  Status Backward(const Pass& pass, const float* d_out, std::vector<float>* gradient) const;

  // Encode, Forward and Backward run on CUDA device `ordinal` from now on (ordinal < 0: on the
  // CPU again): the words of a pass sorted by length so that each step is one cuBLAS product
  // over the words still reading, the unit math of lstm_element.h in a kernel (docs/gpu.md,
  // "The character model"). The parameters and Adam stay on the host and go up before the first
  // pass after they change (about 0.3 MB at the defaults). Results match the CPU's to float
  // rounding, not bit for bit. A copy of the model runs on the CPU. Errors: FailedPrecondition
  // naming the cause (a build without CUDA, no device `ordinal`, ...); the model stays where it
  // was then.
  Status UseCudaDevice(int ordinal);
  int cuda_device() const;  // -1: the CPU

  // One Adam step down `gradient` (num_parameters() floats).
  void AdamStep(const std::vector<float>& gradient);

  // MIMICK: one Adam step on L = sum_i weight_i ||v(word_i) - target_i||^2 / sum_i weight_i
  // (targets: words.size() x dim, row-major; weights: one per word, >= 0, not all 0). Returns L
  // before the step. Errors as Encode, InvalidArgument for mismatched sizes (nothing changes).
  // With an n-gram bag, also row-wise Adagrad steps of the bag's rows the words read, down the
  // gradient of sum_i weight_i ||v(word_i) - target_i||^2 (Adagrad makes the scale moot), one
  // word at a time as fastText's SGD (Bojanowski et al. 2017, section 4.2): for word i in
  // order, v_i = the LSTM's output + the mean of its n_i rows as the words before it left them;
  // each row r of its n-grams steps down g = 2 weight_i (v_i - t_i) / n_i: G_r += mean_j g_j^2,
  // row_r -= ngram_rate g / sqrt(G_r + 1e-8). A row read k times in the batch takes k steps. L
  // and the LSTM's gradient use these v_i. (One word's rows are read once, from memory, for
  // both its forward and its step: the bag's cost is memory latency.)
  StatusOr<double> DistillStep(const std::vector<std::string_view>& words, const float* targets,
                               const std::vector<float>& weights);

  // All parameters, one flat array: embeddings (buckets x char_dim), then per direction Wx
  // (char_dim x 4H), Wh (H x 4H), b (4H), then P (dirs*H x dim) and p (dim); row-major.
  size_t num_parameters() const;
  const float* parameters() const;
  float* mutable_parameters();  // changes must be made before the next Encode / Forward
  uint64_t adam_steps() const;  // AdamStep calls so far
  // The n-gram bag: ngram_buckets x dim floats, row-major (empty without one).
  const std::vector<float>& ngram_rows() const;

  // The model as bytes (host byte order): a versioned header with the options, the parameters
  // and, with `with_optimizer`, Adam's moments and step count (what resuming training needs;
  // serving needs only the parameters). Format 1 without an n-gram bag (what builds before the
  // bag wrote); format 2 with one: its options after format 1's header, its rows after the
  // parameters and its Adagrad accumulators after Adam's state. 4 x ngram_buckets x dim bytes
  // more (40 MB for 100,000 rows of 100 floats).
  std::string Serialize(bool with_optimizer) const;
  // Errors: Corruption naming what is wrong (magic, version, options out of range, size).
  static StatusOr<std::unique_ptr<CharModel>> Deserialize(std::string_view bytes);

 private:
  // Forward without the bag's mean: the LSTM's outputs into out, the pass (with each word's
  // n-gram rows) into *pass. Errors as Encode.
  Status ForwardLstm(const std::vector<std::string_view>& words, Pass* pass,
                     std::vector<float>* out) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_CHARMODEL_CHAR_MODEL_H_

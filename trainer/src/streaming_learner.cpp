#include "streamvec/trainer/streaming_learner.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "adagrad_step.h"
#include "streamvec/base/rng.h"
#include "streamvec/base/word_slot_index.h"
#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/cuda_sgns.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"
#include "streamvec/trainer/vocabulary.h"

namespace streamvec {

Status ValidateStreamingOptions(const StreamingOptions& o) {
  auto bad = [](const std::string& flag, const std::string& what) {
    return Status::InvalidArgument(flag + " " + what);
  };
  if (o.dim <= 0 || o.dim > 10000) return bad("--dim", "must be in [1, 10000]");
  if (o.window <= 0 || o.window > 255) return bad("--window", "must be in [1, 255]");
  if (o.negative < 0 || o.negative >= kMaxTargets) {
    return bad("--negative", "must be in [0, " + std::to_string(kMaxTargets - 1) + "]");
  }
  if (!(o.sample >= 0.0)) return bad("--sample", "must be >= 0");
  if (o.vocab_capacity < 2 || o.vocab_capacity > (1u << 30)) {
    return bad("--vocab-capacity", "must be in [2, 2^30]");
  }
  if (o.min_count < 1) return bad("--min-count", "must be >= 1");
  if (!(o.ns_exponent >= 0.0)) return bad("--ns-exponent", "must be >= 0");
  if (o.noise_table_size < 1 || o.noise_table_size > (1u << 30)) {
    return bad("--noise-table-size", "must be in [1, 2^30]");
  }
  if (!(o.eta > 0.0f)) return bad("--eta", "must be > 0");
  if (!(o.epsilon > 0.0f)) return bad("--epsilon", "must be > 0");
  if (!(o.alpha > 0.0f)) return bad("--alpha", "must be > 0");
  if (o.max_sentence_length < 2) return bad("max_sentence_length", "must be >= 2");
  if (o.threads < 1 || o.threads > 256) return bad("--threads", "must be in [1, 256]");
  if (o.negative_share < 0 || o.negative_share > 2) {
    return bad("--negative-share", "must be 0, 1 or 2 with --stream");
  }
  if (o.negative_pool < 0 || o.negative_pool > (1 << 20)) {
    return bad("--negative-pool", "must be in [0, 2^20]");
  }
  if (o.cuda_device >= 0) {
    if (o.optimizer != StreamOptimizer::kAdagrad) {
      return bad("--device", "cuda trains the streaming learner with --optimizer adagrad only");
    }
    if (o.dim > kCudaMaxDim) {
      return bad("--dim", "must be <= " + std::to_string(kCudaMaxDim) + " with --device cuda");
    }
  }
  return Status::Ok();
}

int EffectiveStreamShare(const StreamingOptions& o) {
  if (o.negative_share != 0) return o.negative_share;
  return o.window <= kPairWindowMax ? 2 : 1;
}

void AdagradRowUpdate(float* row, const float* gradient, int dim, float* accumulator, float eta,
                      float epsilon) {
  float sq = 0.0f;
  for (int j = 0; j < dim; ++j) sq += gradient[j] * gradient[j];
  *accumulator += sq / static_cast<float>(dim);
  const float lr = eta / std::sqrt(*accumulator + epsilon);
  for (int j = 0; j < dim; ++j) row[j] += lr * gradient[j];
}

namespace {

// Reserves n elements and writes them once, so that their pages are resident from the start.
template <typename V>
void ReserveResident(V& v, size_t n) {
  v.reserve(n);
  v.resize(n);
  v.clear();
}

// Counts double every `half_life` words; stored counts grow instead of old ones shrinking
// (stored = count * 2^(n / half_life)), and everything is rescaled by exactly 2^-kRescaleBits
// (a power of two: the order of counts is kept bit for bit) once n reaches kRescaleBits
// half-lives.
constexpr int kRescaleBits = 64;
// Loss is computed on one sentence in this many (it costs a log per pair).
constexpr uint64_t kLossSampleEvery = 64;
constexpr char kStateMagic[] = "streamvec-streaming-learner-v1";

// Little-endian POD serialisation with bounds-checked reads.
class Writer {
 public:
  template <typename T>
  void Put(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void PutBytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const std::string& data, std::string name) : data_(data), name_(std::move(name)) {}
  template <typename T>
  bool Get(T* v) {
    return GetBytes(v, sizeof *v);
  }
  bool GetBytes(void* p, size_t n) {
    if (data_.size() - pos_ < n) return false;
    std::memcpy(p, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == data_.size(); }
  Status Bad() const { return Status::Corruption("state entry '" + name_ + "' is malformed"); }

 private:
  const std::string& data_;
  std::string name_;
  size_t pos_ = 0;
};

// Rows per "input/" and "output/" entry of SaveState (defined with it below).
size_t RowsPerChunk(size_t stride);

}  // namespace

struct StreamingLearner::Impl {
  explicit Impl(const StreamingOptions& o)
      : opt(o),
        stride(PaddedStride(o.dim)),
        share(static_cast<size_t>(EffectiveStreamShare(o))),
        acc_in_rows(o.optimizer == StreamOptimizer::kAdagrad &&
                    stride >= static_cast<size_t>(o.dim) + 2),
        rng(o.seed),
        tokenizer(o.tokenizer) {
    SV_CHECK(ValidateStreamingOptions(o).ok());
    input.Resize(static_cast<size_t>(o.vocab_capacity) * stride);
    output.Resize(static_cast<size_t>(o.vocab_capacity) * stride);
    if (acc_in_rows) {
      acc_in_at = input.data() + o.dim;
      acc_out_at = output.data() + o.dim + 1;
      acc_stride = stride;
    } else {
      acc_in.assign(o.vocab_capacity, 0.0f);
      acc_out.assign(o.vocab_capacity, 0.0f);
      acc_in_at = acc_in.data();
      acc_out_at = acc_out.data();
    }
    // Everything that grows with the vocabulary or the table is reserved up front and its
    // pages touched (ReserveResident): memory does not grow with the stream, resident memory
    // included (the noise table alone is 16 MiB by default and fills over most of a stream).
    ReserveResident(words, o.vocab_capacity);
    ReserveResident(counts, o.vocab_capacity);
    ReserveResident(errors, o.vocab_capacity);
    ReserveResident(powers, o.vocab_capacity);
    ReserveResident(group, o.vocab_capacity);
    admitted_flags.assign(o.vocab_capacity, 0);
    ReserveResident(generations, o.vocab_capacity);
    ReserveResident(heap, o.vocab_capacity);
    index.Init(o.vocab_capacity);
    ReserveResident(noise, o.noise_table_size);
    FillSigmoidTable(sigmoid);
    if (o.optimizer == StreamOptimizer::kConstant) {
      kernel = MakeCpuKernel(o.isa);
      SV_CHECK(kernel != nullptr);
    }
    scratch.Resize(kAdagradScratchRows * stride);
    if (o.cuda_device >= 0) {
      StatusOr<std::unique_ptr<CudaSgnsModel>> d =
          CudaSgnsModel::Create(o.cuda_device, o.vocab_capacity, o.dim);
      if (d.ok()) {
        device = std::move(d).value();
        workers.emplace_back([this] { WorkerLoop(); });  // the one thread feeding the device
        return;
      }
      device_error = d.status();  // trains on the calling thread (the caller checks first)
      return;
    }
    if (o.threads > 1) {
      for (int t = 0; t < o.threads; ++t) workers.emplace_back([this] { WorkerLoop(); });
    }
  }
  ~Impl() { StopWorkers(); }

  // ---- state (all of it is saved) ----
  StreamingOptions opt;
  size_t stride;
  size_t share;                         // EffectiveStreamShare(opt)
  AlignedFloats input, output;          // capacity x stride
  // Adagrad accumulators, one per row (AccIn, AccOut). Where the rows have two padding floats
  // (stride >= dim + 2; dim 100: 12) they live there, input row s's in its float `dim` and
  // output row s's in its float `dim + 1` (the step masks padding out of its sums), so an update
  // touches no cache line beyond the row's own: with the two Hogwild workers updating the same
  // frequent rows, separate arrays cost a line transfer per update. Otherwise in these arrays.
  // Row s's accumulators are acc_in_at[s * acc_stride] and acc_out_at[s * acc_stride], as the
  // Adagrad step addresses them (AdagradSentenceArgs).
  const bool acc_in_rows;
  std::vector<float> acc_in, acc_out;
  float* acc_in_at = nullptr;
  float* acc_out_at = nullptr;
  size_t acc_stride = 1;
  float& AccIn(uint32_t s) { return acc_in_at[s * acc_stride]; }
  float& AccOut(uint32_t s) { return acc_out_at[s * acc_stride]; }
  float AccIn(uint32_t s) const { return acc_in_at[s * acc_stride]; }
  float AccOut(uint32_t s) const { return acc_out_at[s * acc_stride]; }
  std::vector<std::string> words;       // slot -> word
  std::vector<double> counts;           // slot -> stored (scaled) count
  std::vector<double> errors;           // slot -> space-saving error (count inherited)
  std::vector<uint32_t> generations;    // slot -> times the slot changed word
  std::vector<uint32_t> noise;          // adaptive unigram table (slot ids)
  double noise_mass = 0.0;              // z: sum of stored count^power added to the table
  double total = 0.0;                   // stored (scaled) words seen
  uint64_t decay_words = 0;             // words since the last rescale (decay on)
  Rng rng;
  bool word_seeded_init = false;                     // SetWordSeededInit
  StreamingLearner::RowInitializer row_initializer;  // SetRowInitializer
  StreamingLearner::GroupCountFn group_count_fn;     // SetGroupCounts
  uint64_t words_seen = 0, words_trained = 0, sentences = 0, evictions = 0;
  uint64_t prior_bytes = 0, prior_invalid = 0;  // tokenizer figures before this process
  std::vector<uint32_t> pool;                   // the pool of negatives (slots; RedrawPool)
  uint64_t pool_left = 0;  // kept tokens that may still draw from it; 0: redraw first

  // ---- derived or transient ----
  std::vector<double> powers;  // slot -> NoisePow(counts[slot] + group[slot]), kept with
                               // every count change
  // slot -> the rest of the group's (scaled) occurrences of the slot's word (SetGroupCount);
  // all zero while group_on is false (a lone learner never reads it).
  std::vector<double> group;
  bool group_on = false;
  std::vector<uint8_t> admitted_flags;  // slot -> AdmittedSlot (kept with every count change;
                                        // exact without decay, where AdmittedNow reads it)
  uint64_t admitted_count = 0;          // flags set
  WordSlotIndex index;                  // word -> slot (hashes: HashWord)
  std::vector<uint32_t> heap;      // min-heap of slots by (count, slot)
  std::vector<uint32_t> heap_pos;  // slot -> position in heap
  WhitespaceTokenizer tokenizer;
  std::string pending_arena;                          // words of the current sentence
  std::vector<std::pair<uint32_t, uint32_t>> pending;  // (offset, length) in pending_arena
  float sigmoid[kSigmoidTableSize];
  std::unique_ptr<SgnsKernel> kernel;
  AlignedFloats scratch;  // kAdagradScratchRows x stride: the calling thread's step
  std::vector<uint32_t> sent_slots, sent_gens, tokens, offsets, negatives, draws, redraw;
  std::vector<uint64_t> hashes;  // HashWord of each word of the sentence being counted
  std::vector<uint32_t> picks, missing, refill;  // DrawNegatives
  std::vector<uint8_t> windows;
  double loss_sum = 0.0;
  uint64_t loss_pairs = 0;

  double Scale() const {
    return opt.count_half_life == 0
               ? 1.0
               : std::exp2(static_cast<double>(decay_words) / opt.count_half_life);
  }
  // The admitted slots in slot order, once the workers are drained (into *slots, its memory
  // reused).
  void AdmittedBySlot(std::vector<uint32_t>* slots) {
    Quiesce();
    AdmittedBySlotNoWait(slots);
  }
  void AdmittedBySlotNoWait(std::vector<uint32_t>* slots) const {
    const double scale = Scale();
    slots->clear();
    for (uint32_t s = 0; s < words.size(); ++s) {
      if (AdmittedSlot(s, scale)) slots->push_back(s);
    }
  }
  // The admitted slots, most frequent first (ties: slot order), once the workers are drained.
  std::vector<uint32_t> AdmittedByCount() {
    std::vector<uint32_t> order;
    AdmittedBySlot(&order);
    std::sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
      return counts[a] > counts[b] || (counts[a] == counts[b] && a < b);
    });
    return order;
  }

  bool AdmittedSlot(uint32_t s, double scale) const {
    const double guaranteed = counts[s] - errors[s] + (group_on ? group[s] : 0.0);
    return guaranteed >= static_cast<double>(opt.min_count) * scale;
  }
  // The count the noise distribution weighs a slot by: its own and, in a group, the others'.
  double NoiseCount(uint32_t s) const { return group_on ? counts[s] + group[s] : counts[s]; }
  // The group's count of a word taking slot s, from SetGroupCounts' function (stored units).
  double GroupCountOf(std::string_view word, double scale) const {
    if (!group_on || !group_count_fn) return 0.0;
    const double c = group_count_fn(word);
    return c > 0.0 && std::isfinite(c) ? c * scale : 0.0;
  }
  bool Less(uint32_t a, uint32_t b) const {
    return counts[a] < counts[b] || (counts[a] == counts[b] && a < b);
  }
  void HeapSwap(size_t i, size_t j) {
    std::swap(heap[i], heap[j]);
    heap_pos[heap[i]] = static_cast<uint32_t>(i);
    heap_pos[heap[j]] = static_cast<uint32_t>(j);
  }
  void SiftUp(size_t i) {
    while (i > 0) {
      const size_t p = (i - 1) / 2;
      if (!Less(heap[i], heap[p])) break;
      HeapSwap(i, p);
      i = p;
    }
  }
  void SiftDown(size_t i) {
    const size_t n = heap.size();
    for (;;) {
      size_t m = i;
      const size_t l = 2 * i + 1, r = l + 1;
      if (l < n && Less(heap[l], heap[m])) m = l;
      if (r < n && Less(heap[r], heap[m])) m = r;
      if (m == i) return;
      HeapSwap(i, m);
      i = m;
    }
  }
  void RebuildDerived() {
    index.Init(opt.vocab_capacity);
    heap.clear();
    powers.clear();
    group.assign(words.size(), 0.0);
    heap_pos.assign(opt.vocab_capacity, 0);
    std::fill(admitted_flags.begin(), admitted_flags.end(), 0);
    admitted_count = 0;
    const double scale = Scale();
    for (uint32_t s = 0; s < words.size(); ++s) {
      powers.push_back(NoisePow(NoiseCount(s)));
      SetAdmittedFlag(s, AdmittedSlot(s, scale));
      // A word held twice is left out of the index; LoadState reports it (size mismatch).
      const uint64_t h = HashWord(words[s]);
      if (index.Find(words[s], h, words) == WordSlotIndex::kNone) index.Insert(h, s);
      heap.push_back(s);
      heap_pos[s] = s;
      SiftUp(s);
    }
  }

  // word2vec.c's initialisation: input uniform in [-0.5/dim, 0.5/dim), output zero.
  void InitRows(uint32_t s) {
    float* in = input.data() + static_cast<size_t>(s) * stride;
    float* out = output.data() + static_cast<size_t>(s) * stride;
    const float scale = 1.0f / static_cast<float>(opt.dim);
    if (row_initializer && row_initializer(words[s], s, in, out)) {
      // the rows came from elsewhere (the parameter node)
    } else if (word_seeded_init) {
      Rng word_rng(HashWord(words[s]) ^ opt.seed);
      for (int j = 0; j < opt.dim; ++j) in[j] = (word_rng.Uniform() - 0.5f) * scale;
      std::fill(out, out + opt.dim, 0.0f);
    } else {
      for (int j = 0; j < opt.dim; ++j) in[j] = (rng.Uniform() - 0.5f) * scale;
      std::fill(out, out + opt.dim, 0.0f);
    }
    AccIn(s) = 0.0f;
    AccOut(s) = 0.0f;
    if (device) {  // goes up with the job that is being filled, before its sentences train
      job.init_slots.push_back(s);
      job.init_rows.insert(job.init_rows.end(), in, in + opt.dim);
    }
  }

  uint64_t ProbRound(double x) {
    const double f = std::floor(x);
    return static_cast<uint64_t>(f) + (rng.Uniform() < x - f ? 1 : 0);
  }

  void Rescale() {
    const double factor = std::ldexp(1.0, -kRescaleBits);
    for (double& c : counts) c *= factor;
    for (double& e : errors) e *= factor;
    for (double& g : group) g *= factor;
    total *= factor;
    noise_mass *= std::pow(factor, opt.ns_exponent);
    for (uint32_t s = 0; s < counts.size(); ++s) powers[s] = NoisePow(NoiseCount(s));
    decay_words -= static_cast<uint64_t>(kRescaleBits) * opt.count_half_life;
  }

  // Counts one occurrence of `word` (space-saving), updates the noise table; returns the slot.
  uint32_t CountWord(std::string_view word, uint64_t hash) {
    ++words_seen;
    if (opt.count_half_life != 0) {
      ++decay_words;
      if (decay_words >= static_cast<uint64_t>(kRescaleBits) * opt.count_half_life) Rescale();
    }
    const double inc = Scale();
    total += inc;
    uint32_t s;
    double before;  // NoisePow of the slot's count before this word
    if (const uint32_t found = index.Find(word, hash, words); found != WordSlotIndex::kNone) {
      s = found;
      before = powers[s];
      counts[s] += inc;
      SiftDown(heap_pos[s]);
    } else if (words.size() < opt.vocab_capacity) {
      s = static_cast<uint32_t>(words.size());
      words.emplace_back(word);
      counts.push_back(inc);
      powers.push_back(0.0);
      group.push_back(GroupCountOf(word, inc));
      errors.push_back(0.0);
      generations.push_back(0);
      index.Insert(hash, s);
      heap.push_back(s);
      heap_pos[s] = static_cast<uint32_t>(heap.size() - 1);
      SiftUp(heap.size() - 1);
      InitRows(s);
      before = 0.0;
    } else {
      // Space-saving: the word with the smallest count gives its slot to the new word, which
      // inherits that count as its error bound (Metwally et al. 2005, May et al. 2017).
      s = heap[0];
      index.Erase(HashWord(words[s]), s);
      words[s].assign(word);
      index.Insert(hash, s);
      before = powers[s];
      errors[s] = counts[s];
      counts[s] += inc;
      group[s] = GroupCountOf(word, inc);
      ++generations[s];
      ++evictions;
      SiftDown(0);
      InitRows(s);
    }
    powers[s] = NoisePow(NoiseCount(s));
    SetAdmittedFlag(s, AdmittedSlot(s, inc));
    UpdateNoise(s, powers[s] - before, inc);
    return s;
  }

  // count^ns_exponent. The default 0.75 as sqrt(x) * sqrt(sqrt(x)) (three correctly rounded
  // operations, within 2 ulp of pow and several times cheaper: this runs per token). A pure
  // function of x, so a resumed run computes the same values.
  double NoisePow(double x) const {
    if (opt.ns_exponent == 0.75) {
      const double r = std::sqrt(x);
      return r * std::sqrt(r);
    }
    return std::pow(x, opt.ns_exponent);
  }

  // Kaji & Kobayashi 2017, Algorithm 2: the word's share of count^power grows by
  // F = after^p - before^p; while the table is not full, F copies are appended (in unscaled
  // units); once full, each of M*F/z random entries becomes the word, z the total mass.
  // A word whose weight fell (a slot taken over by a word the group counts less) only lowers
  // the mass: the table keeps its entries until other words overwrite them.
  void UpdateNoise(uint32_t s, double f, double scale) {
    if (f < 0.0) {
      noise_mass = std::max(0.0, noise_mass + f);
      return;
    }
    noise_mass += f;
    if (noise.size() < opt.noise_table_size) {
      uint64_t copies = ProbRound(scale == 1.0 ? f : f / NoisePow(scale));
      while (copies-- > 0 && noise.size() < opt.noise_table_size) noise.push_back(s);
    } else if (noise_mass > 0.0) {
      uint64_t k = ProbRound(static_cast<double>(opt.noise_table_size) * f / noise_mass);
      while (k-- > 0) noise[rng.Below(opt.noise_table_size)] = s;
    }
  }

  void SetAdmittedFlag(uint32_t s, bool admitted) {
    if (admitted == (admitted_flags[s] != 0)) return;
    if (admitted) {
      ++admitted_count;
    } else {
      --admitted_count;
    }
    admitted_flags[s] = admitted ? 1 : 0;
  }

  // AdmittedSlot from the flag kept per slot (no decay: admission changes only with the slot's
  // own count), or from the counts (with decay the threshold moves with the clock).
  bool AdmittedNow(uint32_t s, double scale) const {
    return opt.count_half_life == 0 ? admitted_flags[s] != 0 : AdmittedSlot(s, scale);
  }

  static constexpr uint32_t kNoDraw = 0xFFFFFFFFu;

  // out[0..m): slots drawn from the noise table, each redrawn up to 3 times while it lands on a
  // word not admitted, else kNoDraw. Done in rounds: every draw of a round is made, and its
  // table entry prefetched, before any is read (the table, 16 MiB by default, is read at random:
  // these misses dominated the counting thread); the next round redraws those that landed on
  // words not admitted. Needs a non-empty table.
  void TableDraws(uint32_t* out, size_t m, double scale) {
    const uint32_t size = static_cast<uint32_t>(noise.size());
    draws.resize(m);
    redraw.resize(m);
    for (size_t j = 0; j < m; ++j) {
      redraw[j] = static_cast<uint32_t>(j);
      out[j] = kNoDraw;
    }
    size_t left = m;
    for (int round = 0; round < 4 && left > 0; ++round) {
      for (size_t r = 0; r < left; ++r) {
        draws[r] = rng.Below(size);
        __builtin_prefetch(noise.data() + draws[r]);
      }
      size_t still = 0;
      for (size_t r = 0; r < left; ++r) {
        const uint32_t s = noise[draws[r]];
        if (AdmittedNow(s, scale)) {
          out[redraw[r]] = s;
        } else {
          redraw[still++] = redraw[r];
        }
      }
      left = still;
    }
  }

  // The pool of negatives (StreamingOptions::negative_pool): opt.negative_pool draws from the
  // table, those that found no admitted word left out.
  void RedrawPool(double scale) {
    pool.resize(static_cast<size_t>(opt.negative_pool));
    TableDraws(pool.data(), pool.size(), scale);
    pool.erase(std::remove(pool.begin(), pool.end(), kNoDraw), pool.end());
    pool_left = kNegativePoolPeriod;
  }

  // negatives[i * K + k] for the n kept tokens. Positions come in groups of `share` that take
  // one draw of K (the first position's); a draw is K uniform picks from the pool (redrawn from
  // the table for a pick whose word is no longer admitted), or K table draws without a pool. A
  // negative that found no admitted word is the position's centre (which the step skips).
  void DrawNegatives(size_t n, double scale) {
    const size_t K = static_cast<size_t>(opt.negative);
    if (K == 0) return;
    if (noise.empty()) {
      for (size_t j = 0; j < n * K; ++j) negatives[j] = tokens[j / K];
      return;
    }
    const size_t heads = (n + share - 1) / share;
    const size_t m = heads * K;
    picks.resize(m);
    if (opt.negative_pool > 0) {
      if (pool_left == 0) RedrawPool(scale);
      pool_left -= std::min<uint64_t>(pool_left, n);
    }
    if (!pool.empty()) {
      const uint32_t p = static_cast<uint32_t>(pool.size());
      missing.clear();
      for (size_t j = 0; j < m; ++j) {
        const uint32_t s = pool[rng.Below(p)];
        if (AdmittedNow(s, scale)) {
          picks[j] = s;
        } else {
          missing.push_back(static_cast<uint32_t>(j));
        }
      }
      if (!missing.empty()) {
        refill.resize(missing.size());
        TableDraws(refill.data(), refill.size(), scale);
        for (size_t r = 0; r < missing.size(); ++r) picks[missing[r]] = refill[r];
      }
    } else {
      TableDraws(picks.data(), m, scale);
    }
    for (size_t i = 0; i < n; ++i) {
      const uint32_t* from = picks.data() + (i / share) * K;
      uint32_t* to = negatives.data() + i * K;
      for (size_t k = 0; k < K; ++k) to[k] = from[k] == kNoDraw ? tokens[i] : from[k];
    }
  }

  std::string_view PendingWord(size_t i) const {
    return std::string_view(pending_arena.data() + pending[i].first, pending[i].second);
  }

  void OnToken(std::string_view word) {
    pending.emplace_back(static_cast<uint32_t>(pending_arena.size()),
                         static_cast<uint32_t>(word.size()));
    pending_arena.append(word);
    if (pending.size() >= static_cast<size_t>(opt.max_sentence_length)) EndSentence();
  }

  void EndSentence() {
    if (pending.empty()) return;
    ++sentences;
    sent_slots.clear();
    sent_gens.clear();
    // Hash every word first and prefetch its home bucket; a few words ahead, the slot's word
    // (the index and the words are read at random; a prefetch is only a hint, so a bucket that
    // changes meanwhile is harmless).
    const size_t nw = pending.size();
    hashes.resize(nw);
    for (size_t i = 0; i < nw; ++i) {
      hashes[i] = HashWord(PendingWord(i));
      index.PrefetchHome(hashes[i]);
    }
    constexpr size_t kWordLead = 4;
    for (size_t i = 0; i < nw; ++i) {
      if (i + kWordLead < nw) {
        const uint32_t slot = index.HomeSlot(hashes[i + kWordLead]);
        if (slot != WordSlotIndex::kNone) {
          __builtin_prefetch(words.data() + slot);
          __builtin_prefetch(counts.data() + slot);
          __builtin_prefetch(powers.data() + slot);
          __builtin_prefetch(heap_pos.data() + slot);
        }
      }
      const uint32_t s = CountWord(PendingWord(i), hashes[i]);
      sent_slots.push_back(s);
      sent_gens.push_back(generations[s]);
    }
    pending.clear();
    pending_arena.clear();
    // A slot that changed word after its token was counted no longer holds that word: drop it.
    const double scale = Scale();
    tokens.clear();
    for (size_t i = 0; i < sent_slots.size(); ++i) {
      const uint32_t s = sent_slots[i];
      if (generations[s] != sent_gens[i] || !AdmittedSlot(s, scale)) continue;
      if (opt.sample > 0.0) {
        const double ratio = opt.sample * total / counts[s];  // t / f
        const double keep = std::sqrt(ratio) + ratio;
        if (keep < 1.0 && rng.Uniform() >= keep) continue;
      }
      tokens.push_back(s);
    }
    if (tokens.size() < 2) return;
    words_trained += tokens.size();
    const size_t n = tokens.size();
    windows.resize(n);
    negatives.resize(n * opt.negative);
    for (size_t i = 0; i < n; ++i) {
      windows[i] = static_cast<uint8_t>(opt.window - rng.Below(opt.window));
    }
    DrawNegatives(n, scale);
    const bool want_loss = sentences % kLossSampleEvery == 0;
    if (workers.empty()) {
      TrainSentence(tokens.data(), static_cast<int>(n), windows.data(), negatives.data(),
                    want_loss, kernel.get(), scratch.data(), &loss_sum, &loss_pairs);
      return;
    }
    // Hand the sentence to the workers, in jobs of about kJobTokens words.
    job.tokens.insert(job.tokens.end(), tokens.begin(), tokens.end());
    job.windows.insert(job.windows.end(), windows.begin(), windows.end());
    job.negatives.insert(job.negatives.end(), negatives.begin(), negatives.end());
    job.offsets.push_back(static_cast<uint32_t>(job.tokens.size()));
    job.want_loss.push_back(want_loss);
    if (job.tokens.size() >= (device ? kDeviceJobTokens : kJobTokens)) PushJob();
  }

  // ---- worker threads (opt.threads > 1): Hogwild over the shared rows ----
  struct Job {
    std::vector<uint32_t> tokens, negatives, offsets{0};
    std::vector<uint8_t> windows;
    std::vector<bool> want_loss;
    // With a device: slots admitted while the job filled and their fresh input rows (dim floats
    // each), set on the device before the job's sentences train.
    std::vector<uint32_t> init_slots;
    std::vector<float> init_rows;
    int max_warps = 0;  // sentences on the device at once: one per 16 words held
  };
  static constexpr size_t kJobTokens = 4096;
  // A device job: enough sentences (about 256 of 1000 words) for the device's warps.
  static constexpr size_t kDeviceJobTokens = size_t{1} << 18;
  Job job;                                 // being filled by the counting thread
  std::vector<std::thread> workers;
  mutable std::mutex mu;
  std::condition_variable cv_work, cv_done;
  std::deque<Job> queue;                   // GUARDED_BY(mu)
  int busy = 0;                            // GUARDED_BY(mu): jobs being trained
  bool stopping = false;                   // GUARDED_BY(mu)

  void PushJob() {
    if (job.tokens.empty() && job.init_slots.empty()) return;
    job.max_warps = static_cast<int>(std::max<size_t>(1, words.size() / 16));
    std::unique_lock<std::mutex> lock(mu);
    // Bounded: the counting thread runs at most two jobs per worker ahead.
    cv_done.wait(lock, [this] { return queue.size() < 2 * workers.size(); });
    queue.push_back(std::move(job));
    job = Job();
    cv_work.notify_one();
  }

  // Trains everything handed over so far; afterwards the rows are quiescent.
  void Drain() {
    if (workers.empty()) return;
    PushJob();
    std::unique_lock<std::mutex> lock(mu);
    cv_done.wait(lock, [this] { return queue.empty() && busy == 0; });
  }

  void WorkerLoop() {
    std::unique_ptr<SgnsKernel> k =
        opt.optimizer == StreamOptimizer::kConstant ? MakeCpuKernel(opt.isa) : nullptr;
    AlignedFloats local_scratch(kAdagradScratchRows * stride);
    for (;;) {
      Job j;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv_work.wait(lock, [this] { return stopping || !queue.empty(); });
        if (queue.empty()) return;  // stopping
        j = std::move(queue.front());
        queue.pop_front();
        ++busy;
        cv_done.notify_all();  // room in the queue
      }
      double local_loss = 0.0;
      uint64_t local_pairs = 0;
      if (device) TrainOnDevice(j, &local_loss, &local_pairs);
      for (size_t s = 0; !device && s + 1 < j.offsets.size(); ++s) {
        const uint32_t b = j.offsets[s], e = j.offsets[s + 1];
        TrainSentence(j.tokens.data() + b, static_cast<int>(e - b), j.windows.data() + b,
                      j.negatives.data() + static_cast<size_t>(b) * opt.negative,
                      j.want_loss[s], k.get(), local_scratch.data(), &local_loss,
                      &local_pairs);
      }
      std::lock_guard<std::mutex> lock(mu);
      loss_sum += local_loss;
      loss_pairs += local_pairs;
      --busy;
      cv_done.notify_all();
    }
  }

  // ---- the device (opt.cuda_device >= 0): one worker hands the jobs over in order ----
  std::unique_ptr<CudaSgnsModel> device;
  Status device_error;
  bool host_stale = false;  // GUARDED_BY(mu): the device's rows are newer than the host's

  // Enqueues the job's fresh rows and sentences on the device (the copies of one job overlap
  // the previous job's kernel); when no job waits behind it, waits for the device, so that a
  // drained learner has an idle device. Adds the statistics of the steps that finished.
  void TrainOnDevice(const Job& j, double* loss, uint64_t* pairs) {
    MicroBatch b;
    b.tokens = j.tokens.data();
    b.sentence_offsets = j.offsets.data();
    b.num_sentences = static_cast<int>(j.offsets.size()) - 1;
    b.windows = j.windows.data();
    b.negatives = j.negatives.data();
    b.negative = opt.negative;
    const bool want_loss =
        std::find(j.want_loss.begin(), j.want_loss.end(), true) != j.want_loss.end();
    StepStats stats;
    Status st = device->EnqueueAdagradStep(b, j.init_slots.data(), j.init_slots.size(),
                                           j.init_rows.data(), static_cast<int>(share), opt.eta,
                                           opt.epsilon, want_loss, j.max_warps, &stats);
    bool idle;
    {
      std::lock_guard<std::mutex> lock(mu);
      idle = queue.empty();
    }
    if (st.ok() && idle) st = device->FinishSteps(&stats);
    *loss += stats.loss;
    *pairs += stats.pairs;
    std::lock_guard<std::mutex> lock(mu);
    host_stale = true;
    if (!st.ok() && device_error.ok()) device_error = st;
  }

  // Drains the workers and, with a device, brings its rows and accumulators back into the host
  // tables (their layout: the accumulators maybe in the rows' padding). Before any read of rows.
  void Quiesce() {
    Drain();
    if (!device) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!host_stale) return;
      host_stale = false;
    }
    const size_t rows = words.size();  // the slots in use: 0 .. words.size() - 1
    if (rows == 0) return;
    // Straight into the host tables (the device's padding is zero, so accumulators kept in the
    // rows' padding are written back after), the accumulators packed beside.
    std::vector<float> a_in(rows), a_out(rows);
    Status st = device->Download(input.data(), output.data(), rows);
    if (st.ok()) st = device->DownloadAccumulators(a_in.data(), a_out.data(), rows);
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (device_error.ok()) device_error = st;
      return;
    }
    for (uint32_t s = 0; s < rows; ++s) {
      AccIn(s) = a_in[s];
      AccOut(s) = a_out[s];
    }
  }

  // The host tables up to the device (after LoadState): padding zero, accumulators packed.
  Status UploadAll() {
    const size_t rows = words.size();
    if (rows == 0) return Status::Ok();
    AlignedFloats in(rows * stride), out(rows * stride);
    std::vector<float> a_in(rows, 0.0f), a_out(rows, 0.0f);
    for (uint32_t s = 0; s < words.size(); ++s) {
      std::copy(input.data() + s * stride, input.data() + s * stride + opt.dim,
                in.data() + s * stride);
      std::copy(output.data() + s * stride, output.data() + s * stride + opt.dim,
                out.data() + s * stride);
      a_in[s] = AccIn(s);
      a_out[s] = AccOut(s);
    }
    SV_RETURN_IF_ERROR(device->Upload(in.data(), out.data(), rows));
    return device->UploadAccumulators(a_in.data(), a_out.data(), rows);
  }

  void StopWorkers() {
    if (workers.empty()) return;
    Drain();
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    cv_work.notify_all();
    for (std::thread& t : workers) t.join();
    workers.clear();
  }

  // One sentence of kept tokens with its window radii and negatives: the constant-rate kernel
  // or the Adagrad step. Reads and writes the shared rows only (safe to run on several threads
  // at once, racily, as Hogwild).
  void TrainSentence(const uint32_t* toks, int n, const uint8_t* wins, const uint32_t* negs,
                     bool want_loss, SgnsKernel* k, float* scratch_buf, double* loss_out,
                     uint64_t* pairs_out) {
    if (opt.optimizer == StreamOptimizer::kConstant) {
      const uint32_t offs[2] = {0, static_cast<uint32_t>(n)};
      MicroBatch batch;
      batch.tokens = toks;
      batch.sentence_offsets = offs;
      batch.num_sentences = 1;
      batch.windows = wins;
      batch.negatives = negs;
      batch.negative = opt.negative;
      StepStats stats;
      k->SkipGram(ModelRows{input.data(), output.data(), stride, opt.dim}, batch, opt.alpha,
                  want_loss ? &stats : nullptr);
      *loss_out += stats.loss;
      *pairs_out += stats.pairs;
      return;
    }
    AdagradSentenceArgs a;
    a.input = input.data();
    a.output = output.data();
    a.acc_in = acc_in_at;
    a.acc_out = acc_out_at;
    a.acc_stride = acc_stride;
    a.stride = stride;
    a.dim = opt.dim;
    a.tokens = toks;
    a.n = n;
    a.windows = wins;
    a.negatives = negs;
    a.negative = opt.negative;
    a.negative_share = static_cast<int>(share);
    a.eta = opt.eta;
    a.epsilon = opt.epsilon;
    a.sigmoid = sigmoid;
    a.scratch = scratch_buf;
    a.want_loss = want_loss;
    a.loss_sum = loss_out;
    a.loss_pairs = pairs_out;
    AdagradSentence(opt.isa, a);
  }

  StreamingStats Stats() const {
    StreamingStats st;
    st.words_seen = words_seen;
    st.words_trained = words_trained;
    st.sentences = sentences;
    st.evictions = evictions;
    const double scale = Scale();
    if (opt.count_half_life == 0) {
      st.admitted = admitted_count;  // kept with the flags (stats() is called per input chunk)
    } else {
      for (uint32_t s = 0; s < words.size(); ++s) st.admitted += AdmittedSlot(s, scale) ? 1 : 0;
    }
    st.vocab_size = words.size();
    const TokenizerStats& ts = tokenizer.stats();
    st.invalid_tokens = prior_invalid + ts.invalid_utf8_tokens + ts.overlong_tokens;
    st.bytes = prior_bytes + ts.bytes;
    st.loss = loss_pairs ? loss_sum / static_cast<double>(loss_pairs) : 0.0;
    return st;
  }

  uint32_t Find(std::string_view word) const {
    return index.Find(word, HashWord(word), words);  // WordSlotIndex::kNone if absent
  }
};

StreamingLearner::StreamingLearner(const StreamingOptions& options)
    : impl_(std::make_unique<Impl>(options)) {
  impl_->heap_pos.assign(options.vocab_capacity, 0);
}

StreamingLearner::~StreamingLearner() = default;

Status StreamingLearner::TrainMicroBatch(const std::vector<std::string_view>& sentences) {
  Impl& m = *impl_;
  auto on_token = [&m](std::string_view w) { m.OnToken(w); };
  auto on_line = [&m] { m.EndSentence(); };
  // Completes text pending from TrainChunk, without waiting for the workers (FinishStream
  // drains them): with threads > 1 the caller prepares the next micro-batch (a Kafka consumer
  // fetches and parses it) while this one trains.
  m.tokenizer.Finish(on_token);
  m.EndSentence();
  for (std::string_view s : sentences) {
    m.tokenizer.Feed(s, on_token, on_line);
    m.tokenizer.Finish(on_token);
    m.EndSentence();
  }
  return Status::Ok();
}

Status StreamingLearner::TrainChunk(std::string_view chunk) {
  Impl& m = *impl_;
  m.tokenizer.Feed(
      chunk, [&m](std::string_view w) { m.OnToken(w); }, [&m] { m.EndSentence(); });
  return Status::Ok();
}

Status StreamingLearner::FinishStream() {
  Impl& m = *impl_;
  m.tokenizer.Finish([&m](std::string_view w) { m.OnToken(w); });
  m.EndSentence();
  m.Drain();
  return Status::Ok();
}

StreamingStats StreamingLearner::stats() const {
  // No Drain: every figure but the loss belongs to the calling thread; the loss is the workers'
  // so far. Draining here stalled the pipeline at every call (the CLI calls it per chunk).
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->Stats();
}

double StreamingLearner::TakeLoss() {
  Impl& m = *impl_;
  m.Drain();
  const double loss = m.loss_pairs ? m.loss_sum / static_cast<double>(m.loss_pairs) : 0.0;
  m.loss_sum = 0.0;
  m.loss_pairs = 0;
  return loss;
}

const StreamingOptions& StreamingLearner::options() const { return impl_->opt; }

Status StreamingLearner::device_status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->device_error;
}

void StreamingLearner::ExportRows(std::vector<std::string>* words,
                                  std::vector<const float*>* rows) const {
  const std::vector<uint32_t> order = impl_->AdmittedByCount();  // drains
  const Impl& m = *impl_;
  words->clear();
  rows->clear();
  words->reserve(order.size());
  rows->reserve(order.size());
  for (uint32_t s : order) {
    words->push_back(m.words[s]);
    rows->push_back(m.input.data() + static_cast<size_t>(s) * m.stride);
  }
}

void StreamingLearner::ExportRowsBySlot(std::vector<std::string>* words,
                                        std::vector<uint32_t>* slots,
                                        std::vector<const float*>* slot_rows, int* stride,
                                        size_t* rows_per_chunk) const {
  *slots = impl_->AdmittedByCount();  // drains
  const Impl& m = *impl_;
  words->clear();
  words->reserve(slots->size());
  for (uint32_t s : *slots) words->push_back(m.words[s]);
  slot_rows->resize(m.words.size());
  for (size_t s = 0; s < m.words.size(); ++s) (*slot_rows)[s] = m.input.data() + s * m.stride;
  *stride = static_cast<int>(m.stride);
  *rows_per_chunk = RowsPerChunk(m.stride);
}

void StreamingLearner::ExportVectors(std::vector<std::string>* words,
                                     std::vector<float>* vectors) const {
  std::vector<const float*> rows;
  ExportRows(words, &rows);
  const int dim = impl_->opt.dim;
  vectors->assign(rows.size() * static_cast<size_t>(dim), 0.0f);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy(rows[i], rows[i] + dim, vectors->data() + i * dim);
  }
}

void StreamingLearner::AdmittedSlots(std::vector<std::string>* words,
                                     std::vector<uint32_t>* slots,
                                     std::vector<double>* counts) const {
  *slots = impl_->AdmittedByCount();  // drains
  const Impl& m = *impl_;
  const double scale = m.Scale();
  words->clear();
  counts->clear();
  words->reserve(slots->size());
  counts->reserve(slots->size());
  for (uint32_t s : *slots) {
    words->push_back(m.words[s]);
    counts->push_back(m.counts[s] / scale);
  }
}

void StreamingLearner::AdmittedSlotsBySlot(std::vector<uint32_t>* slots,
                                           std::vector<double>* counts) const {
  impl_->Quiesce();
  AdmittedSlotsNoWait(slots, counts);
}

void StreamingLearner::AdmittedSlotsNoWait(std::vector<uint32_t>* slots,
                                           std::vector<double>* counts) const {
  const Impl& m = *impl_;
  m.AdmittedBySlotNoWait(slots);
  const double scale = m.Scale();
  counts->clear();
  for (const uint32_t s : *slots) counts->push_back(m.counts[s] / scale);
}

std::string_view StreamingLearner::WordAt(uint32_t slot) const {
  SV_CHECK(slot < impl_->words.size());
  return impl_->words[slot];
}

void StreamingLearner::SetGroupCounts(GroupCountFn counts) {
  Impl& m = *impl_;
  const bool on = static_cast<bool>(counts);
  m.group_count_fn = std::move(counts);
  if (on == m.group_on) return;
  m.group_on = on;
  if (on) return;  // the counts come with the next SetGroupCount calls
  // Off: own counts again. The table's mass is the sum of the slots' powers (every update adds
  // a slot's new power less its old one); its entries keep what the group's counts put in
  // until new tokens overwrite them.
  const double scale = m.Scale();
  m.noise_mass = 0.0;
  for (uint32_t s = 0; s < m.words.size(); ++s) {
    m.group[s] = 0.0;
    m.powers[s] = m.NoisePow(m.counts[s]);
    m.noise_mass += m.powers[s];
    m.SetAdmittedFlag(s, m.AdmittedSlot(s, scale));
  }
}

bool StreamingLearner::SetGroupCount(std::string_view word, double others) {
  Impl& m = *impl_;
  if (!m.group_on || !(others >= 0.0) || !std::isfinite(others)) return false;
  const uint32_t s = m.Find(word);
  if (s == WordSlotIndex::kNone) return false;
  const double scale = m.Scale();
  const double stored = others * scale;
  if (!(stored > m.group[s])) return false;  // counts only grow
  const double before = m.powers[s];
  m.group[s] = stored;
  m.powers[s] = m.NoisePow(m.NoiseCount(s));
  m.SetAdmittedFlag(s, m.AdmittedSlot(s, scale));
  m.UpdateNoise(s, m.powers[s] - before, scale);
  return true;
}

double StreamingLearner::GroupCount(std::string_view word) const {
  const Impl& m = *impl_;
  const uint32_t s = m.Find(word);
  if (s == WordSlotIndex::kNone || !m.group_on) return 0.0;
  return m.group[s] / m.Scale();
}

int64_t StreamingLearner::SlotOf(std::string_view word) const {
  const uint32_t s = impl_->Find(word);
  return s == WordSlotIndex::kNone ? -1 : static_cast<int64_t>(s);
}

StreamingLearner::RowTables StreamingLearner::MutableRowTables() {
  Impl& m = *impl_;
  m.Quiesce();
  if (m.device) return {};
  return {.input = m.input.data(), .output = m.output.data(), .stride = m.stride,
          .slots = m.opt.vocab_capacity};
}

void StreamingLearner::SetWordSeededInit(bool on) { impl_->word_seeded_init = on; }

void StreamingLearner::SetRowInitializer(RowInitializer init) {
  impl_->row_initializer = std::move(init);
}

double StreamingLearner::Count(std::string_view word) const {
  const uint32_t s = impl_->Find(word);
  return s == WordSlotIndex::kNone ? 0.0 : impl_->counts[s] / impl_->Scale();
}

bool StreamingLearner::Admitted(std::string_view word) const {
  const uint32_t s = impl_->Find(word);
  return s != WordSlotIndex::kNone && impl_->AdmittedSlot(s, impl_->Scale());
}

const float* StreamingLearner::InputRow(std::string_view word) const {
  impl_->Quiesce();
  return InputRowNoWait(word);
}

const float* StreamingLearner::InputRowNoWait(std::string_view word) const {
  if (impl_->device) impl_->Quiesce();  // the host's rows are stale until then
  const uint32_t s = impl_->Find(word);
  if (s == WordSlotIndex::kNone || !impl_->AdmittedSlot(s, impl_->Scale())) return nullptr;
  return impl_->input.data() + static_cast<size_t>(s) * impl_->stride;
}

double StreamingLearner::NoiseProbability(std::string_view word) const {
  const uint32_t s = impl_->Find(word);
  if (s == WordSlotIndex::kNone || impl_->noise.empty()) return 0.0;
  const auto n = std::count(impl_->noise.begin(), impl_->noise.end(), s);
  return static_cast<double>(n) / static_cast<double>(impl_->noise.size());
}

size_t StreamingLearner::MemoryBytes() const {
  const Impl& m = *impl_;
  size_t bytes = 2 * m.input.size() * sizeof(float);
  bytes += (m.acc_in.capacity() + m.acc_out.capacity()) * sizeof(float);
  bytes += m.noise.capacity() * sizeof(uint32_t);
  bytes += m.words.capacity() * sizeof(std::string) +
           (m.counts.capacity() + m.errors.capacity() + m.powers.capacity()) * sizeof(double) +
           (m.generations.capacity() + m.heap.capacity() + m.heap_pos.capacity()) *
               sizeof(uint32_t);
  for (const std::string& w : m.words) bytes += w.capacity() > 15 ? w.capacity() + 1 : 0;
  bytes += m.index.MemoryBytes();
  return bytes;
}

// ---- state ----

namespace {

std::string ConfigText(const StreamingOptions& o) {
  std::ostringstream s;
  s.precision(17);
  s << "magic=" << kStateMagic << "\n"
    << "dim=" << o.dim << "\nwindow=" << o.window << "\nnegative=" << o.negative
    << "\nsample=" << o.sample << "\nvocab_capacity=" << o.vocab_capacity
    << "\nmin_count=" << o.min_count << "\ncount_half_life=" << o.count_half_life
    << "\nns_exponent=" << o.ns_exponent << "\nnoise_table_size=" << o.noise_table_size
    << "\noptimizer=" << (o.optimizer == StreamOptimizer::kAdagrad ? "adagrad" : "constant")
    << "\neta=" << o.eta << "\nepsilon=" << o.epsilon << "\nalpha=" << o.alpha
    << "\nseed=" << o.seed << "\nmax_sentence_length=" << o.max_sentence_length
    << "\nmax_token_bytes=" << o.tokenizer.max_token_bytes << "\nnegative_pool=" << o.negative_pool
    << "\nnegative_share=" << EffectiveStreamShare(o) << "\n";
  return s.str();
}

Status ParseConfig(const std::string& text, StreamingOptions* o) {
  std::istringstream in(text);
  std::string line;
  std::unordered_map<std::string, std::string> kv;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return Status::Corruption("state entry 'config' is malformed");
    kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  if (kv["magic"] != kStateMagic) {
    return Status::Corruption("state 'config' is not a " + std::string(kStateMagic) + " state");
  }
  try {
    o->dim = std::stoi(kv.at("dim"));
    o->window = std::stoi(kv.at("window"));
    o->negative = std::stoi(kv.at("negative"));
    o->sample = std::stod(kv.at("sample"));
    o->vocab_capacity = static_cast<uint32_t>(std::stoul(kv.at("vocab_capacity")));
    o->min_count = std::stoull(kv.at("min_count"));
    o->count_half_life = std::stoull(kv.at("count_half_life"));
    o->ns_exponent = std::stod(kv.at("ns_exponent"));
    o->noise_table_size = static_cast<uint32_t>(std::stoul(kv.at("noise_table_size")));
    o->optimizer = kv.at("optimizer") == "constant" ? StreamOptimizer::kConstant
                                                    : StreamOptimizer::kAdagrad;
    o->eta = std::stof(kv.at("eta"));
    o->epsilon = std::stof(kv.at("epsilon"));
    o->alpha = std::stof(kv.at("alpha"));
    o->seed = std::stoull(kv.at("seed"));
    o->max_sentence_length = std::stoi(kv.at("max_sentence_length"));
    o->tokenizer.max_token_bytes = std::stoull(kv.at("max_token_bytes"));
    // States written before the pool and the shared draws trained without them.
    o->negative_pool = kv.count("negative_pool") ? std::stoi(kv.at("negative_pool")) : 0;
    o->negative_share = kv.count("negative_share") ? std::stoi(kv.at("negative_share")) : 1;
  } catch (const std::exception&) {
    return Status::Corruption("state entry 'config' is malformed");
  }
  Status v = ValidateStreamingOptions(*o);
  if (!v.ok()) return Status::Corruption("state entry 'config' holds bad options: " + v.message());
  return Status::Ok();
}

std::string ChunkKey(const char* table, size_t chunk) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s/%08zu", table, chunk);
  return buf;
}

// Entries are kept small (32 KiB of rows, 1 MiB of noise table): RocksDB holds a value whole
// in its write batch, its memtable and one table block, so 4-16 MiB values showed up as
// resident-memory spikes at every snapshot; and the state store writes again only the entries
// whose bytes changed, so a few dozen rows an entry keep a slow stream's snapshots small.
// LoadState accepts any chunking (states written with the earlier 4 MiB and 256 KiB row chunks
// and one 'noise' entry load too).
size_t RowsPerChunk(size_t stride) {
  return std::max<size_t>(1, (size_t{32} << 10) / (stride * sizeof(float)));
}
constexpr size_t kNoisePerChunk = (size_t{1} << 20) / sizeof(uint32_t);

}  // namespace

Status StreamingLearner::SaveState(const StateSink& sink) const {
  impl_->Quiesce();  // the rows must be quiescent (and back from a device)
  const Impl& m = *impl_;
  SV_RETURN_IF_ERROR(sink("config", ConfigText(m.opt)));
  {
    Writer w;
    uint64_t rng_state[4];
    m.rng.GetState(rng_state);
    w.PutBytes(rng_state, sizeof rng_state);
    const TokenizerStats& ts = m.tokenizer.stats();
    const uint64_t bytes = m.prior_bytes + ts.bytes;
    const uint64_t invalid = m.prior_invalid + ts.invalid_utf8_tokens + ts.overlong_tokens;
    for (uint64_t v : {m.words_seen, m.words_trained, m.sentences, m.evictions, bytes, invalid,
                       m.decay_words}) {
      w.Put(v);
    }
    w.Put(m.total);
    w.Put(m.noise_mass);
    SV_RETURN_IF_ERROR(sink("scalars", w.str()));
  }
  {
    Writer w;
    w.Put(m.pool_left);
    w.Put(static_cast<uint64_t>(m.pool.size()));
    if (!m.pool.empty()) w.PutBytes(m.pool.data(), m.pool.size() * sizeof(uint32_t));
    SV_RETURN_IF_ERROR(sink("negative_pool", w.str()));
  }
  {
    Writer w;
    w.Put(static_cast<uint64_t>(m.words.size()));
    for (size_t s = 0; s < m.words.size(); ++s) {
      w.Put(static_cast<uint32_t>(m.words[s].size()));
      w.PutBytes(m.words[s].data(), m.words[s].size());
      w.Put(m.counts[s]);
      w.Put(m.errors[s]);
      w.Put(m.generations[s]);
      w.Put(m.AccIn(static_cast<uint32_t>(s)));
      w.Put(m.AccOut(static_cast<uint32_t>(s)));
    }
    SV_RETURN_IF_ERROR(sink("vocab", w.str()));
  }
  SV_RETURN_IF_ERROR(sink("noise_size", std::to_string(m.noise.size())));
  for (size_t c = 0; c * kNoisePerChunk < m.noise.size(); ++c) {
    const size_t n = std::min(kNoisePerChunk, m.noise.size() - c * kNoisePerChunk);
    SV_RETURN_IF_ERROR(sink(ChunkKey("noise", c),
                            std::string_view(reinterpret_cast<const char*>(
                                                 m.noise.data() + c * kNoisePerChunk),
                                             n * sizeof(uint32_t))));
  }
  const size_t per = RowsPerChunk(m.stride);
  const size_t rows = m.words.size();
  for (size_t c = 0; c * per < rows; ++c) {
    const size_t n = std::min(per, rows - c * per) * m.stride * sizeof(float);
    const size_t off = c * per * m.stride;
    SV_RETURN_IF_ERROR(
        sink(ChunkKey("input", c),
             std::string_view(reinterpret_cast<const char*>(m.input.data() + off), n)));
    SV_RETURN_IF_ERROR(
        sink(ChunkKey("output", c),
             std::string_view(reinterpret_cast<const char*>(m.output.data() + off), n)));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<StreamingLearner>> StreamingLearner::LoadState(const StateSource& source,
                                                                        Isa isa, int threads,
                                                                        int cuda_device) {
  auto get = [&source](const std::string& key) -> StatusOr<std::string> {
    StatusOr<std::string> v = source(key);
    if (!v.ok() && v.status().code() == StatusCode::kNotFound) {
      return Status::Corruption("state entry '" + key + "' is missing");
    }
    return v;
  };
  StatusOr<std::string> config = get("config");
  if (!config.ok()) return config.status();
  StreamingOptions o;
  SV_RETURN_IF_ERROR(ParseConfig(*config, &o));
  o.isa = isa;
  o.threads = threads;
  o.cuda_device = cuda_device;
  SV_RETURN_IF_ERROR(ValidateStreamingOptions(o));
  auto learner = std::make_unique<StreamingLearner>(o);
  SV_RETURN_IF_ERROR(learner->device_status());
  Impl& m = *learner->impl_;
  {
    StatusOr<std::string> data = get("scalars");
    if (!data.ok()) return data.status();
    Reader r(*data, "scalars");
    uint64_t rng_state[4];
    bool ok = r.GetBytes(rng_state, sizeof rng_state);
    for (uint64_t* v : {&m.words_seen, &m.words_trained, &m.sentences, &m.evictions,
                        &m.prior_bytes, &m.prior_invalid, &m.decay_words}) {
      ok = ok && r.Get(v);
    }
    ok = ok && r.Get(&m.total) && r.Get(&m.noise_mass) && r.done();
    if (!ok) return r.Bad();
    m.rng.SetState(rng_state);
  }
  // The accumulators as the vocabulary entry holds them: set after the rows are read, which may
  // hold them too (in their padding, AccIn) or not (a state written with separate arrays).
  std::vector<std::pair<float, float>> accumulators;
  {
    StatusOr<std::string> data = get("vocab");
    if (!data.ok()) return data.status();
    Reader r(*data, "vocab");
    uint64_t n = 0;
    if (!r.Get(&n) || n > o.vocab_capacity) return r.Bad();
    for (uint64_t s = 0; s < n; ++s) {
      uint32_t len = 0;
      if (!r.Get(&len) || len > (1u << 20)) return r.Bad();
      std::string word(len, '\0');
      double count = 0, error = 0;
      uint32_t gen = 0;
      float ai = 0, ao = 0;
      if (!r.GetBytes(word.data(), len) || !r.Get(&count) || !r.Get(&error) || !r.Get(&gen) ||
          !r.Get(&ai) || !r.Get(&ao)) {
        return r.Bad();
      }
      m.words.push_back(std::move(word));
      m.counts.push_back(count);
      m.errors.push_back(error);
      m.generations.push_back(gen);
      accumulators.emplace_back(ai, ao);
    }
    if (!r.done()) return r.Bad();
    m.RebuildDerived();
    if (m.index.size() != m.words.size()) {
      return Status::Corruption("state entry 'vocab' holds a word twice");
    }
  }
  {
    // The noise table: 'noise_size' and chunks 'noise/<n>', or one 'noise' entry (earlier
    // states).
    StatusOr<std::string> size_text = source("noise_size");
    size_t entries = 0;
    if (size_text.ok()) {
      try {
        size_t used = 0;
        entries = std::stoull(*size_text, &used);
        if (used != size_text->size()) throw std::invalid_argument("noise_size");
      } catch (const std::exception&) {
        return Status::Corruption("state entry 'noise_size' is malformed");
      }
      if (entries > o.noise_table_size) {
        return Status::Corruption("state entry 'noise_size' is malformed");
      }
      m.noise.resize(entries);
      for (size_t c = 0; c * kNoisePerChunk < entries; ++c) {
        const size_t n = std::min(kNoisePerChunk, entries - c * kNoisePerChunk);
        StatusOr<std::string> data = get(ChunkKey("noise", c));
        if (!data.ok()) return data.status();
        if (data->size() != n * sizeof(uint32_t)) {
          return Status::Corruption("state entry '" + ChunkKey("noise", c) +
                                    "' has the wrong size");
        }
        std::memcpy(m.noise.data() + c * kNoisePerChunk, data->data(), data->size());
      }
    } else if (size_text.status().code() == StatusCode::kNotFound) {
      StatusOr<std::string> data = get("noise");
      if (!data.ok()) return data.status();
      if (data->size() % sizeof(uint32_t) != 0 ||
          data->size() / sizeof(uint32_t) > o.noise_table_size) {
        return Status::Corruption("state entry 'noise' is malformed");
      }
      m.noise.resize(data->size() / sizeof(uint32_t));
      std::memcpy(m.noise.data(), data->data(), data->size());
    } else {
      return size_text.status();
    }
    for (uint32_t s : m.noise) {
      if (s >= m.words.size()) return Status::Corruption("state entry 'noise' is malformed");
    }
  }
  {
    // The pool of negatives (absent in states written before it: drawn afresh).
    StatusOr<std::string> data = source("negative_pool");
    if (data.ok()) {
      Reader r(*data, "negative_pool");
      uint64_t size = 0;
      if (!r.Get(&m.pool_left) || !r.Get(&size) || size > static_cast<uint64_t>(o.negative_pool) ||
          m.pool_left > kNegativePoolPeriod) {
        return r.Bad();
      }
      m.pool.resize(size);
      if ((size > 0 && !r.GetBytes(m.pool.data(), size * sizeof(uint32_t))) || !r.done()) {
        return r.Bad();
      }
      for (uint32_t s : m.pool) {
        if (s >= m.words.size()) return r.Bad();
      }
    } else if (data.status().code() != StatusCode::kNotFound) {
      return data.status();
    }
  }
  // Rows in chunks of whole rows, in order, of any size (RowsPerChunk when written here).
  const size_t row_bytes = m.stride * sizeof(float);
  const size_t rows = m.words.size();
  for (auto [table, dest] : {std::pair{"input", m.input.data()}, {"output", m.output.data()}}) {
    size_t have = 0;  // rows read
    for (size_t c = 0; have < rows; ++c) {
      StatusOr<std::string> data = get(ChunkKey(table, c));
      if (!data.ok()) return data.status();
      if (data->empty() || data->size() % row_bytes != 0 ||
          data->size() / row_bytes > rows - have) {
        return Status::Corruption("state entry '" + ChunkKey(table, c) + "' has the wrong size");
      }
      std::memcpy(dest + have * m.stride, data->data(), data->size());
      have += data->size() / row_bytes;
    }
  }
  for (uint32_t s = 0; s < accumulators.size(); ++s) {
    m.AccIn(s) = accumulators[s].first;
    m.AccOut(s) = accumulators[s].second;
  }
  if (m.device) SV_RETURN_IF_ERROR(m.UploadAll());
  return learner;
}

}  // namespace streamvec

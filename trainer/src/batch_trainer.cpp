#include "streamvec/trainer/batch_trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "streamvec/base/rng.h"
#include "streamvec/trainer/sampling.h"

namespace streamvec {

Status ValidateTrainOptions(const TrainOptions& o) {
  auto bad = [](const std::string& flag, const std::string& what) {
    return Status::InvalidArgument(flag + " " + what);
  };
  if (o.dim <= 0 || o.dim > 10000) return bad("--dim", "must be in [1, 10000]");
  if (o.window <= 0 || o.window > 255) return bad("--window", "must be in [1, 255]");
  if (o.negative < 0 || o.negative >= kMaxTargets) {
    return bad("--negative", "must be in [0, " + std::to_string(kMaxTargets - 1) + "]");
  }
  if (!(o.sample >= 0.0)) return bad("--sample", "must be >= 0");
  if (o.epochs <= 0) return bad("--epochs", "must be >= 1");
  if (o.threads <= 0 || o.threads > 1024) return bad("--threads", "must be in [1, 1024]");
  if (!(o.alpha > 0.0f)) return bad("--alpha", "must be > 0");
  if (!(o.min_alpha >= 0.0f) || o.min_alpha > o.alpha) {
    return bad("--min-alpha", "must be in [0, --alpha]");
  }
  if (!(o.ns_exponent >= 0.0)) return bad("--ns-exponent", "must be >= 0");
  if (o.negative_share < 0 || o.negative_share > 64) {
    return bad("--negative-share", "must be in [0, 64]");
  }
  if (o.negative_pool < 0 || o.negative_pool > (1 << 20)) {
    return bad("--negative-pool", "must be in [0, 1048576]");
  }
  if (o.replica_sync < -1) return bad("--replica-sync", "must be >= 0 (0: no replicas)");
  if (o.replica_cold_period < 1) return Status::InvalidArgument("replica_cold_period must be >= 1");
  if (o.batch_tokens <= 0 || o.loss_sample_every <= 0) {
    return Status::InvalidArgument("batch_tokens and loss_sample_every must be positive");
  }
  return Status::Ok();
}

BatchTrainer::BatchTrainer(const Corpus& corpus, const TrainOptions& options)
    : corpus_(corpus), options_(options), stride_(PaddedStride(options.dim)) {
  SV_CHECK(ValidateTrainOptions(options_).ok());
  const size_t rows = corpus_.vocab.size();
  input_.Resize(rows * stride_);
  output_.Resize(rows * stride_);
  // word2vec.c: syn0 uniform in [-0.5/dim, 0.5/dim), syn1neg zero.
  Rng rng(options_.seed);
  const float scale = 1.0f / static_cast<float>(options_.dim);
  for (size_t r = 0; r < rows; ++r) {
    float* row = input_.data() + r * stride_;
    for (int j = 0; j < options_.dim; ++j) row[j] = (rng.Uniform() - 0.5f) * scale;
  }
}

namespace {

// Shared between the worker threads and the reporting thread.
struct SharedProgress {
  std::atomic<uint64_t> words_done{0};
  std::atomic<double> loss_sum{0.0};
  std::atomic<uint64_t> loss_pairs{0};
};

float CurrentAlpha(const TrainOptions& o, uint64_t done, uint64_t total) {
  const double p = total == 0 ? 1.0 : std::min(1.0, static_cast<double>(done) / total);
  return static_cast<float>(o.alpha - (o.alpha - o.min_alpha) * p);
}

// One thread's replica of the first rows of the shared output table (TrainOptions::replica_sync):
// the kernel reads and writes `local`; `base` is what local held after the row's last merge.
// Each Merge() covers the hot rows (the first hot_rows) and one of `cold_period` chunks of the
// remaining rows, in turn (TrainOptions::replica_hot_rows).
class OutputReplica {
 public:
  OutputReplica(float* shared, size_t rows, size_t stride, size_t hot_rows, int cold_period,
                std::mutex* merge_mutex)
      : shared_(shared),
        size_(rows * stride),
        hot_(std::min(rows, hot_rows) * stride),
        stride_(stride),
        cold_period_(static_cast<size_t>(std::max(1, cold_period))),
        mutex_(merge_mutex) {
    local_.ResizeForOverwrite(size_);
    base_.ResizeForOverwrite(size_);
    std::lock_guard<std::mutex> lock(*mutex_);
    std::copy(shared_, shared_ + size_, local_.data());
    std::copy(local_.data(), local_.data() + size_, base_.data());
  }
  float* data() { return local_.data(); }

  // Push and fetch the hot rows and the next cold chunk (see MergeRange).
  void Merge() {
    const size_t cold_rows = (size_ - hot_) / stride_;
    const size_t chunk_rows = (cold_rows + cold_period_ - 1) / cold_period_;
    const size_t k = merges_++ % cold_period_;
    const size_t begin = hot_ + std::min(cold_rows, k * chunk_rows) * stride_;
    const size_t end = hot_ + std::min(cold_rows, (k + 1) * chunk_rows) * stride_;
    std::lock_guard<std::mutex> lock(*mutex_);
    MergeRange(0, hot_);
    MergeRange(begin, end);
  }
  // Push and fetch every row (at the end of training).
  void MergeAll() {
    std::lock_guard<std::mutex> lock(*mutex_);
    MergeRange(0, size_);
  }

 private:
  // Push and fetch in one pass over floats [begin, end): shared += local - base (what this
  // thread learnt since the last merge), then local = base = shared (with what the other threads
  // pushed meanwhile). The caller holds the merge mutex: merges are serialised, so no pushed
  // update is lost; the kernels of the other threads go on meanwhile.
  void MergeRange(size_t begin, size_t end) {
    float* shared = shared_;
    float* local = local_.data();
    float* base = base_.data();
    for (size_t i = begin; i < end; ++i) {
      const float v = shared[i] + (local[i] - base[i]);
      shared[i] = v;
      local[i] = v;
      base[i] = v;
    }
  }

  float* shared_;
  size_t size_, hot_, stride_, cold_period_;
  uint64_t merges_ = 0;
  std::mutex* mutex_;
  AlignedFloats local_, base_;
};

}  // namespace

int EffectiveReplicaSync(const TrainOptions& o) {
  if (o.threads <= 1) return 0;
  if (o.replica_sync >= 0) return o.replica_sync;
  return o.threads <= kMaxDefaultReplicaThreads ? kDefaultReplicaSync : 0;
}

int EffectiveNegativeShare(const TrainOptions& o) {
  if (o.negative_share > 0) return o.negative_share;
  return o.model == TrainModel::kSkipGram && o.window > kCombinedWindowMax ? 1 : 2;
}

TrainSummary BatchTrainer::Train(const std::function<void(const TrainProgress&)>& progress,
                                 double progress_interval_s) {
  const TrainOptions& o = options_;
  const Corpus& corpus = corpus_;
  UnigramTable noise;
  noise.Build(corpus.vocab.counts(), o.ns_exponent);
  const std::vector<uint64_t> keep =
      SubsampleThresholds(corpus.vocab.counts(), corpus.vocab.total_count(), o.sample);
  const uint64_t total_words = static_cast<uint64_t>(o.epochs) * corpus.tokens.size();

  // Contiguous sentence ranges with about equal word counts, one per thread.
  const size_t num_sentences = corpus.num_sentences();
  std::vector<size_t> bounds(o.threads + 1, num_sentences);
  bounds[0] = 0;
  {
    size_t s = 0;
    for (int t = 1; t < o.threads; ++t) {
      const uint64_t target = corpus.tokens.size() * t / o.threads;
      while (s < num_sentences && corpus.sentence_offsets[s] < target) ++s;
      bounds[t] = s;
    }
  }

  const int negative_share = EffectiveNegativeShare(o);
  SharedProgress shared;
  ModelRows model = rows();
  std::string kernel_name;
  {
    auto probe = o.reference_kernel ? MakeReferenceKernel() : MakeCpuKernel(o.isa);
    SV_CHECK(probe != nullptr);
    kernel_name = probe->name();
  }

  const int replica_sync = EffectiveReplicaSync(o);
  const size_t replica_rows = std::min(corpus.vocab.size(), o.replica_rows);
  std::mutex merge_mutex;

  auto worker = [&, model](int t) {
    Rng rng(o.seed + static_cast<uint64_t>(t));
    ModelRows m = model;
    std::unique_ptr<OutputReplica> replica;
    if (replica_sync > 0 && replica_rows > 0) {
      replica =
          std::make_unique<OutputReplica>(model.output, replica_rows, model.stride,
                                          o.replica_hot_rows, o.replica_cold_period, &merge_mutex);
      m.output_replica = replica->data();
      m.output_replica_rows = static_cast<uint32_t>(replica_rows);
    }
    std::unique_ptr<SgnsKernel> kernel =
        o.reference_kernel ? MakeReferenceKernel() : MakeCpuKernel(o.isa);
    std::vector<uint32_t> tokens, negatives, pool;
    std::vector<uint32_t> offsets;
    std::vector<uint8_t> windows;
    tokens.reserve(o.batch_tokens + 1024);
    uint64_t batches = 0;
    uint64_t local_done = 0;  // words this thread has processed, flushed to shared in batches
    float alpha = o.alpha;
    for (int epoch = 0; epoch < o.epochs; ++epoch) {
      size_t s = bounds[t];
      const size_t last = bounds[t + 1];
      while (s < last) {
        size_t n = 0;  // kept words in tokens[0, n)
        offsets.assign(1, 0);
        uint64_t raw = 0;
        while (s < last && n < static_cast<size_t>(o.batch_tokens)) {
          const uint64_t begin = corpus.sentence_offsets[s], end = corpus.sentence_offsets[s + 1];
          if (tokens.size() < n + (end - begin)) tokens.resize(n + (end - begin));
          // Subsampling without a branch: every word is written, and kept by advancing past it
          // (a kept-or-not branch on a frequent word mispredicts about half the time).
          uint32_t* const first = tokens.data() + n;
          uint32_t* out = first;
          for (uint64_t i = begin; i < end; ++i) {
            const uint32_t w = corpus.tokens[i];
            *out = w;
            out += (rng.Next() >> 32) < keep[w] ? 1 : 0;
          }
          raw += end - begin;
          if (out - first >= 2) {  // nothing to learn from fewer than two words
            n += static_cast<size_t>(out - first);
            offsets.push_back(static_cast<uint32_t>(n));
          }
          ++s;
        }
        windows.resize(n);
        negatives.resize(n * o.negative);
        for (size_t i = 0; i < n; ++i) {
          windows[i] = static_cast<uint8_t>(o.window - rng.Below(o.window));
        }
        // One draw of K negatives per `negative_share` consecutive kept positions (default 2;
        // see TrainOptions::negative_share): CBOW finds the rows of a shared draw still in L1
        // for the second position, skip-gram trains the two positions as one window. The draws
        // come from a pool of `negative_pool` noise words per micro-batch (see there).
        DrawNegatives(noise, rng, n, o.negative, negative_share, o.negative_pool, &pool,
                      negatives.data());
        if (n > 0) {
          MicroBatch batch;
          batch.tokens = tokens.data();
          batch.sentence_offsets = offsets.data();
          batch.num_sentences = static_cast<int>(offsets.size() - 1);
          batch.windows = windows.data();
          batch.negatives = negatives.data();
          batch.negative = o.negative;
          StepStats stats;
          StepStats* stats_ptr = (batches++ % o.loss_sample_every == 0) ? &stats : nullptr;
          if (o.model == TrainModel::kSkipGram) {
            kernel->SkipGram(m, batch, alpha, stats_ptr);
          } else {
            kernel->Cbow(m, batch, alpha, stats_ptr);
          }
          if (replica && batches % static_cast<uint64_t>(replica_sync) == 0) replica->Merge();
          if (stats_ptr && stats.pairs > 0) {
            shared.loss_sum.fetch_add(stats.loss, std::memory_order_relaxed);
            shared.loss_pairs.fetch_add(stats.pairs, std::memory_order_relaxed);
          }
        }
        local_done += raw;
        const uint64_t global = shared.words_done.fetch_add(raw, std::memory_order_relaxed) + raw;
        // With one thread the global count is this thread's own: training stays deterministic.
        alpha = CurrentAlpha(o, global, total_words);
      }
    }
    if (replica) replica->MergeAll();
  };

  const auto start = std::chrono::steady_clock::now();
  auto seconds_since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<std::thread> threads;
  std::atomic<int> running{o.threads};
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      worker(t);
      running.fetch_sub(1);
    });
  }
  double last_loss = 0.0;
  double last_loss_sum = 0.0;
  uint64_t last_loss_pairs = 0;
  auto report = [&] {
    const double loss_sum = shared.loss_sum.load();
    const uint64_t loss_pairs = shared.loss_pairs.load();
    if (loss_pairs > last_loss_pairs) {
      last_loss = (loss_sum - last_loss_sum) / static_cast<double>(loss_pairs - last_loss_pairs);
      last_loss_sum = loss_sum;
      last_loss_pairs = loss_pairs;
    }
    TrainProgress p;
    p.words_done = shared.words_done.load();
    p.fraction = total_words ? std::min(1.0, static_cast<double>(p.words_done) / total_words) : 1.0;
    p.seconds = seconds_since_start();
    p.words_per_second = p.seconds > 0 ? p.words_done / p.seconds : 0.0;
    p.loss = last_loss;
    p.alpha = CurrentAlpha(o, p.words_done, total_words);
    return p;
  };
  if (progress) {
    const auto interval = std::chrono::duration<double>(progress_interval_s);
    auto last = std::chrono::steady_clock::now();
    while (running.load() > 0) {
      std::this_thread::sleep_for(std::min(interval, std::chrono::duration<double>(0.02)));
      if (std::chrono::steady_clock::now() - last >= interval) {
        last = std::chrono::steady_clock::now();
        progress(report());
      }
    }
  }
  for (auto& th : threads) th.join();
  TrainProgress final_progress = report();
  if (progress) progress(final_progress);
  TrainSummary summary;
  summary.words_done = final_progress.words_done;
  summary.seconds = final_progress.seconds;
  summary.words_per_second = final_progress.words_per_second;
  summary.loss = final_progress.loss;
  summary.kernel = kernel_name;
  return summary;
}

}  // namespace streamvec

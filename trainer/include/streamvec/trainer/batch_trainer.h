// The batch trainer: word2vec SGNS / CBOW over an in-memory corpus, several epochs, many threads.
//
// Semantics follow word2vec.c (Mikolov et al. 2013): per position a random window radius drawn
// uniformly in [1, window] ("random window shrink"), subsampling of frequent words
// (sampling.h), K negatives per centre from count^0.75 (sampling.h), and a learning rate that
// decays linearly with progress from alpha to min_alpha over epochs x corpus words. Threads split
// the corpus into contiguous parts and share the tables without locks (Hogwild; Recht et al.
// 2011). The step itself is the HogBatch kernel (kernels/sgns_kernel.h; Ji et al. 2016).
// With threads = 1 and a fixed seed, training is deterministic.
#ifndef STREAMVEC_TRAINER_BATCH_TRAINER_H_
#define STREAMVEC_TRAINER_BATCH_TRAINER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "streamvec/base/cpu_features.h"
#include "streamvec/base/status.h"
#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/trainer/corpus.h"

namespace streamvec {

struct TrainOptions {
  TrainModel model = TrainModel::kSkipGram;  // skip-gram or CBOW
  int dim = 100;                 // vector size
  int window = 5;                // maximum context radius; each position draws [1, window]
  int negative = 5;              // noise words per centre (shared by its window), < kMaxTargets
  double sample = 1e-3;          // subsampling threshold t (0 disables)
  int epochs = 5;                // passes over the corpus
  int threads = 1;               // training threads
  float alpha = 0.025f;          // initial learning rate
  float min_alpha = 0.0001f;     // learning rate at the end of the last epoch
  uint64_t seed = 1;             // thread t uses seed + t
  double ns_exponent = 0.75;     // noise distribution exponent
  Isa isa = Isa::kPortable;      // kernel; callers usually pass DetectBestIsa()
  bool reference_kernel = false;  // use the scalar reference kernel (slow; for checks)
  // Consecutive kept positions (within a micro-batch) that share one draw of `negative` noise
  // words; 0: the default (EffectiveNegativeShare): 2, except 1 for skip-gram with window >
  // kCombinedWindowMax; 1: word2vec's own draw per position. Each position's negatives are still
  // distributed as count^ns_exponent; sharing only correlates neighbours' draws. CBOW: the shared
  // rows are cache-resident for the second position (a CBOW step is bound by cache misses on the
  // output table); our extension of HogBatch's sharing of negatives within a window (Ji et al.
  // 2016, section 3) to neighbouring windows. Skip-gram: two neighbours with one draw train as one
  // window over the union of their contexts (context combining, Rengasamy et al. 2017;
  // SgnsKernel::SkipGram), about 12% fewer logits and 12-21% more words/s at the same WS-353 and
  // analogy scores on the benchmark corpus (docs/training.md; 3 positions per draw lowered analogy
  // by about 1.3 points). With window 10 the pair was 10-15% faster but lowered analogy by
  // about 1.2 points (two wide windows share most of their words, which then meet fewer distinct
  // negatives), hence the default.
  int negative_share = 0;
  // With threads > 1: each thread trains its own replica of the output table (of its first
  // replica_rows rows, the most frequent words) and every replica_sync micro-batches pushes what
  // it learnt since the last merge (replica - replica at the last merge) into the shared table
  // and fetches the merged rows: Downpour SGD's push and fetch (Dean et al. 2012, "Large Scale
  // Distributed Deep Networks", section 4.1) between threads instead of machines. On a
  // shared table (Hogwild) every write to a row that the other cores hold costs a cache-line
  // transfer between cores; the replicas keep those rows core-private between merges (2
  // threads: training phase about 25% shorter for CBOW, 15-20% for skip-gram, whose step does
  // about 2 x window times more work per output row written; docs/training.md). 0: no replicas
  // (Hogwild on the shared output table, word2vec's way); -1: the default (EffectiveReplicaSync:
  // kDefaultReplicaSync with two threads, 0 with more). The input table
  // is always shared (a replica of its first rows was 6% faster for skip-gram but lowered the
  // analogy score: docs/training.md). Memory: 2 x replica_rows x stride
  // floats per thread (29 MB at dim 100): the 32768 most frequent words take 92% of the negative
  // draws on the benchmark corpus (count^0.75), and most centres; rarer rows, seldom written by two
  // cores in a row, stay shared (replicating all 68k rows of the benchmark corpus was no faster:
  // more fresh memory to fault in and copy).
  int replica_sync = -1;
  // Each micro-batch draws negative_pool words from the noise distribution, and each position's
  // negatives are drawn uniformly from them (DrawNegatives): a negative keeps its count^0.75
  // distribution, and a micro-batch's negatives touch negative_pool output rows (1024 x 448
  // bytes at dim 100: within L2) instead of ~10k random rows of a table far beyond the caches.
  // Random output rows were the skip-gram step's main cost: with 2 threads its training phase
  // went from 5.98-6.35M to 7.47-7.98M words/s, at WS-353 0.527-0.540 against 0.539-0.542 and
  // analogy 13.5-13.8% against 12.5-13.0% (docs/training.md). 0: every negative drawn from the
  // whole distribution (word2vec's way).
  int negative_pool = 1024;
  size_t replica_rows = size_t{1} << 15;
  // Each merge covers the first replica_hot_rows rows of the replica and, in turn, one of
  // replica_cold_period chunks of the others: a row below replica_hot_rows is merged every
  // replica_sync micro-batches, the rest every replica_sync x replica_cold_period. A merge reads
  // and writes three tables (shared, replica, replica at the last merge), all of it beyond the
  // caches: merging all 32768 rows every 32 micro-batches cost about 5% of CBOW's training phase.
  // The 8192 most frequent words take 71% of the negative draws on the benchmark corpus; the
  // rarer rows change little between merges. Our choice, measured in docs/training.md.
  size_t replica_hot_rows = 8192;
  int replica_cold_period = 4;
  int batch_tokens = 2048;       // kept words per kernel call (micro-batch of sentences)
  // Compute the loss on one micro-batch in this many (for the progress line and the summary):
  // its exact terms (log1p, exp) took about 6% of the skip-gram training phase at 16.
  int loss_sample_every = 64;
};

// Micro-batches between merges of the per-thread output replicas by default.
inline constexpr int kDefaultReplicaSync = 32;

// Threads above which the default (replica_sync -1) is the shared table: every thread's replica
// starts from the same merge and pushes its whole delta, so a hot row moves by the sum of the
// threads' deltas, each computed without the others' (Downpour's staleness, Dean et al. 2012,
// section 4.1). With 2 threads that is harmless; with 4 the skip-gram loss on the benchmark
// corpus rose from 2.58 to 4.09, with 8 and 16 training diverged (loss > 1000, WS-353 0.16-0.24
// against 0.53; docs/training.md).
inline constexpr int kMaxDefaultReplicaThreads = 2;

// The replica_sync a training run uses: 0 with one thread (nothing to share), else replica_sync,
// or for -1 kDefaultReplicaSync with up to kMaxDefaultReplicaThreads threads and 0 (the shared
// table, Hogwild) with more.
int EffectiveReplicaSync(const TrainOptions& options);

// Skip-gram's default shares a draw of negatives between two positions (trained as one window)
// up to this --window: the kernels' blocked pair path covers two windows of radius <= 5.
inline constexpr int kCombinedWindowMax = 5;

// The number of consecutive positions per draw of negatives: options.negative_share, or for 0
// the default: 2, except 1 for skip-gram with window > kCombinedWindowMax
// (TrainOptions::negative_share).
int EffectiveNegativeShare(const TrainOptions& options);

// Checks ranges; InvalidArgument names the flag (--dim, --window, ...).
Status ValidateTrainOptions(const TrainOptions& options);

struct TrainProgress {
  double fraction = 0.0;        // of all epochs, in [0, 1]
  uint64_t words_done = 0;      // corpus words processed (before subsampling), all epochs
  double seconds = 0.0;         // since training started
  double words_per_second = 0.0;
  double loss = 0.0;            // mean loss per positive pair over the recent sample, nats
  float alpha = 0.0f;           // current learning rate
};

struct TrainSummary {
  uint64_t words_done = 0;
  double seconds = 0.0;
  double words_per_second = 0.0;  // corpus words (before subsampling) per second
  double loss = 0.0;              // mean sampled loss per positive pair, latest report
  std::string kernel;             // kernel name ("avx512", ...)
};

class BatchTrainer {
 public:
  // The corpus must outlive the trainer. Options must be valid (ValidateTrainOptions).
  BatchTrainer(const Corpus& corpus, const TrainOptions& options);

  // Trains all epochs. `progress` (may be empty) is called on the calling thread about every
  // progress_interval_s seconds and once at the end.
  TrainSummary Train(const std::function<void(const TrainProgress&)>& progress = {},
                     double progress_interval_s = 0.25);

  // Trained tables, rows = vocabulary ids, PaddedStride(dim) floats per row.
  ModelRows rows() { return ModelRows{input_.data(), output_.data(), stride_, options_.dim}; }
  size_t stride() const { return stride_; }
  const float* input() const { return input_.data(); }
  const float* output() const { return output_.data(); }

 private:
  const Corpus& corpus_;
  TrainOptions options_;
  size_t stride_;
  AlignedFloats input_, output_;
};

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_BATCH_TRAINER_H_

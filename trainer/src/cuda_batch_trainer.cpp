#include "streamvec/trainer/cuda_batch_trainer.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "streamvec/kernels/cuda_sgns.h"
#include "streamvec/trainer/sampling.h"

namespace streamvec {

StatusOr<TrainSummary> TrainBatchOnCuda(const Corpus& corpus, const TrainOptions& o, int ordinal,
                                        const ModelRows& rows,
                                        const std::function<void(const TrainProgress&)>& progress,
                                        double progress_interval_s) {
  const size_t vocab = corpus.vocab.size();
  StatusOr<std::unique_ptr<CudaSgnsModel>> model_or = CudaSgnsModel::Create(ordinal, vocab, o.dim);
  if (!model_or.ok()) return model_or.status();
  CudaSgnsModel& model = *model_or.value();

  UnigramTable noise;
  noise.Build(corpus.vocab.counts(), o.ns_exponent);
  const std::vector<uint64_t> keep =
      SubsampleThresholds(corpus.vocab.counts(), corpus.vocab.total_count(), o.sample);
  CudaCorpus c;
  c.tokens = corpus.tokens.data();
  c.num_tokens = corpus.tokens.size();
  c.sentence_offsets = corpus.sentence_offsets.data();
  c.num_sentences = corpus.num_sentences();
  c.keep_thresholds = keep.data();
  c.vocab_size = keep.size();
  c.noise_entries = noise.entries();
  c.noise_size = noise.size();
  if (Status s = model.Upload(rows.input, rows.output); !s.ok()) return s;
  if (Status s = model.SetCorpus(c); !s.ok()) return s;

  CudaTrainOptions co;
  co.model = o.model;
  co.window = o.window;
  co.negative = o.negative;
  co.negative_share = EffectiveNegativeShare(o);
  co.epochs = o.epochs;
  co.alpha = o.alpha;
  co.min_alpha = o.min_alpha;
  co.seed = o.seed;
  co.loss_sample_every = o.loss_sample_every;

  const uint64_t total_words = static_cast<uint64_t>(o.epochs) * corpus.tokens.size();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto last_report = start;
  TrainProgress p;
  StepStats last_stats;
  auto update = [&](uint64_t words_done, const StepStats& stats) {
    p.words_done = words_done;
    p.fraction = total_words ? std::min(1.0, static_cast<double>(words_done) / total_words) : 1.0;
    p.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    p.words_per_second = p.seconds > 0 ? words_done / p.seconds : 0.0;
    if (stats.pairs > last_stats.pairs) {
      p.loss = (stats.loss - last_stats.loss) / static_cast<double>(stats.pairs - last_stats.pairs);
      last_stats = stats;
    }
    p.alpha = static_cast<float>(o.alpha - (o.alpha - o.min_alpha) * p.fraction);
  };
  Status trained = model.TrainCorpus(co, [&](uint64_t words_done, const StepStats& stats) {
    update(words_done, stats);
    const auto now = Clock::now();
    const double since_report = std::chrono::duration<double>(now - last_report).count();
    if (progress && since_report >= progress_interval_s) {
      last_report = now;
      progress(p);
    }
  });
  if (!trained.ok()) return trained;
  if (Status s = model.Download(rows.input, rows.output); !s.ok()) return s;
  update(total_words, last_stats);
  if (progress) progress(p);
  TrainSummary summary;
  summary.words_done = p.words_done;
  summary.seconds = p.seconds;
  summary.words_per_second = p.words_per_second;
  summary.loss = p.loss;
  summary.kernel = "cuda:" + std::to_string(ordinal) + " (" + model.device().name + ")";
  return summary;
}

}  // namespace streamvec

#include "streamvec/trainer/char_distiller.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace streamvec {

using json = nlohmann::json;

Status ValidateCharDistillOptions(const CharDistillOptions& o) {
  SV_RETURN_IF_ERROR(ValidateCharModelOptions(o.model));
  if (o.batch_types < 1 || o.batch_types > 65536) {
    return Status::InvalidArgument("--char-distill-batch must be in [1, 65536]");
  }
  if (o.every_words < 1) return Status::InvalidArgument("--char-distill-every must be >= 1");
  if (!(o.count_exponent >= 0 && o.count_exponent <= 1)) {
    return Status::InvalidArgument("char distillation count exponent must be in [0, 1]");
  }
  if (o.refresh_steps < 1 || o.max_steps_per_call < 1) {
    return Status::InvalidArgument(
        "char distillation: refresh_steps and max_steps_per_call "
        "must be >= 1");
  }
  return Status::Ok();
}

CharDistiller::CharDistiller(const CharDistillOptions& options)
    : options_(options), model_(options.model), rng_(options.model.seed + 0x9e3779b97f4a7c15ull) {
  SV_CHECK(ValidateCharDistillOptions(options).ok());
  next_words_ = options.every_words;  // the first step once that many words were seen
}

CharDistiller::~CharDistiller() {
  Finish();
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
}

void CharDistiller::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_
    std::function<Status()> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const Status s = job();
    lock.lock();
    if (!s.ok() && failed_.ok()) failed_ = s;
    --in_flight_;
    cv_.notify_all();
  }
}

void CharDistiller::Finish() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return in_flight_ == 0; });
}

Status CharDistiller::TakeError() {
  std::lock_guard<std::mutex> lock(mu_);
  const Status s = failed_;
  failed_ = Status::Ok();
  return s;
}

void CharDistiller::Refresh(const StreamingLearner& learner) {
  std::vector<uint32_t> slots;
  std::vector<double> counts;
  learner.AdmittedSlotsNoWait(&slots, &counts);  // the vocabulary is this thread's: no drain
  words_.clear();
  cumulative_.clear();
  words_.reserve(slots.size());
  cumulative_.reserve(slots.size());
  double total = 0.0;
  for (size_t i = 0; i < slots.size(); ++i) {
    const double weight = std::pow(std::max(counts[i], 0.0), options_.count_exponent);
    if (!(weight > 0.0) || !std::isfinite(weight)) continue;
    total += weight;
    words_.emplace_back(learner.WordAt(slots[i]));
    cumulative_.push_back(total);
  }
  have_words_ = !words_.empty();
  refreshed_at_step_ = launched_steps_;
}

Status CharDistiller::Step(const StreamingLearner& learner) {
  SV_RETURN_IF_ERROR(TakeError());  // a background step's
  const auto t0 = std::chrono::steady_clock::now();
  if (!have_words_ || launched_steps_ - refreshed_at_step_ >= uint64_t(options_.refresh_steps)) {
    Refresh(learner);
  }
  if (!have_words_) return Status::Ok();
  // batch_types draws by weight: uniform points on [0, total) sorted and matched to the words'
  // cumulative weights in one pass; a word drawn k times is one entry of weight k. Then the
  // entries in random order (the step is SGD over them, one word after another).
  std::vector<double> points(static_cast<size_t>(options_.batch_types));
  std::uniform_real_distribution<double> unit(0.0, cumulative_.back());
  for (double& p : points) p = unit(rng_);
  std::sort(points.begin(), points.end());
  std::vector<std::pair<size_t, float>> drawn;  // (index into words_, draws)
  size_t w = 0;
  for (const double p : points) {
    while (w + 1 < cumulative_.size() && cumulative_[w] <= p) ++w;
    if (!drawn.empty() && drawn.back().first == w) {
      drawn.back().second += 1.0f;
    } else {
      drawn.emplace_back(w, 1.0f);
    }
  }
  std::shuffle(drawn.begin(), drawn.end(), rng_);
  const int dim = options_.model.dim;
  // The batch is copied out of the learner (its rows keep moving, its words may be evicted),
  // so the step can run beside the learner.
  auto batch = std::make_shared<Batch>();
  batch->words.reserve(drawn.size());
  batch->targets.reserve(drawn.size() * dim);
  for (const auto& [index, draws] : drawn) {
    const std::string& word = words_[index];
    const float* row = learner.InputRowNoWait(word);
    if (row == nullptr) continue;  // evicted (or no longer admitted) since the last refresh
    if (!CharIds(word, options_.model.buckets, options_.model.max_word_chars).ok()) continue;
    double norm = 0;
    for (int j = 0; j < dim; ++j) norm += double(row[j]) * row[j];
    norm = std::sqrt(norm);
    if (!(norm > 0) || !std::isfinite(norm)) continue;
    batch->words.push_back(word);
    for (int j = 0; j < dim; ++j) batch->targets.push_back(static_cast<float>(row[j] / norm));
    batch->weights.push_back(draws);
  }
  if (batch->words.empty()) {
    have_words_ = false;  // all gone: re-read next time
    return Status::Ok();
  }
  ++launched_steps_;
  const double gather_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto run = [this, batch, gather_s]() -> Status {
    const auto t1 = std::chrono::steady_clock::now();
    const std::vector<std::string_view> views(batch->words.begin(), batch->words.end());
    StatusOr<double> loss = model_.DistillStep(views, batch->targets.data(), batch->weights);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.seconds += gather_s + s;
    if (!loss.ok()) return loss.status();
    ++stats_.steps;
    stats_.types += batch->words.size();
    stats_.loss = *loss;
    return Status::Ok();
  };
  if (!options_.background) return run();
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  {
    // At most max_steps_per_call steps queued or running: the learner runs that far ahead.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return in_flight_ < options_.max_steps_per_call; });
    queue_.push_back(std::move(run));
    ++in_flight_;
  }
  cv_.notify_all();
  return Status::Ok();
}

Status CharDistiller::MaybeStep(const StreamingLearner& learner) {
  const uint64_t seen = learner.stats().words_seen;
  int taken = 0;
  for (; taken < options_.max_steps_per_call && seen >= next_words_; ++taken) {
    SV_RETURN_IF_ERROR(Step(learner));
    next_words_ += options_.every_words;
  }
  // Far behind (a huge micro-batch): the missed steps are dropped, not owed.
  if (taken == options_.max_steps_per_call && seen >= next_words_) {
    const uint64_t missed = (seen - next_words_) / options_.every_words + 1;
    next_words_ = seen + options_.every_words;
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.skipped += missed;
  }
  return Status::Ok();
}

Status CharDistiller::Wait() {
  Finish();
  return TakeError();
}

CharDistillStats CharDistiller::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

const CharModel& CharDistiller::model() const {
  Finish();
  return model_;
}

std::string CharDistiller::MetadataJson() const {
  Finish();
  const CharModelOptions& m = options_.model;
  return json{{"steps", stats_.steps},
              {"types", stats_.types},
              {"loss", stats_.loss},
              {"char_dim", m.char_dim},
              {"char_hidden", m.hidden},
              {"char_bidirectional", m.bidirectional},
              {"max_word_chars", m.max_word_chars},
              {"char_ngram_buckets", m.ngram_buckets},
              {"batch_types", options_.batch_types},
              {"every_words", options_.every_words}}
      .dump();
}

Status CharDistiller::Save(const StateSink& sink, bool checkpoint) const {
  Finish();  // a failed step is reported by the next Step; the model is saved as it stands
  SV_RETURN_IF_ERROR(sink(kCharModelEntry, model_.Serialize(/*with_optimizer=*/false)));
  if (!checkpoint) return Status::Ok();
  have_words_ = false;
  SV_RETURN_IF_ERROR(sink(kCharModelStateEntry, model_.Serialize(/*with_optimizer=*/true)));
  std::ostringstream rng;
  rng << rng_;
  const json j = {{"batch_types", options_.batch_types},
                  {"every_words", options_.every_words},
                  {"count_exponent", options_.count_exponent},
                  {"refresh_steps", options_.refresh_steps},
                  {"max_steps_per_call", options_.max_steps_per_call},
                  {"next_words", next_words_},
                  {"steps", stats_.steps},
                  {"types", stats_.types},
                  {"loss", stats_.loss},
                  {"rng", rng.str()}};
  return sink(kCharDistillEntry, j.dump());
}

StatusOr<std::unique_ptr<CharModel>> LoadCharModelState(const StateSource& source) {
  StatusOr<std::string> state = source(kCharModelStateEntry);
  if (!state.ok()) return state.status();
  StatusOr<std::unique_ptr<CharModel>> model = CharModel::Deserialize(*state);
  if (!model.ok()) {
    return Status::Corruption(std::string(kCharModelStateEntry) + ": " + model.status().message());
  }
  return model;
}

StatusOr<std::unique_ptr<CharDistiller>> CharDistiller::Load(const StateSource& source) {
  StatusOr<std::unique_ptr<CharModel>> model = LoadCharModelState(source);
  if (!model.ok()) return model.status();
  StatusOr<std::string> distill = source(kCharDistillEntry);
  if (!distill.ok()) {
    if (distill.status().code() == StatusCode::kNotFound) {
      return Status::Corruption(std::string(kCharDistillEntry) + " is missing");
    }
    return distill.status();
  }
  try {
    const json j = json::parse(*distill);
    CharDistillOptions o;
    o.model = (*model)->options();
    o.batch_types = j.at("batch_types").get<int>();
    o.every_words = j.at("every_words").get<uint64_t>();
    o.count_exponent = j.at("count_exponent").get<double>();
    o.refresh_steps = j.at("refresh_steps").get<int>();
    o.max_steps_per_call = j.at("max_steps_per_call").get<int>();
    if (Status s = ValidateCharDistillOptions(o); !s.ok()) {
      return Status::Corruption(std::string(kCharDistillEntry) + ": " + s.message());
    }
    auto d = std::make_unique<CharDistiller>(o);
    d->model_ = **model;
    d->next_words_ = j.at("next_words").get<uint64_t>();
    d->stats_.steps = j.at("steps").get<uint64_t>();
    d->stats_.types = j.at("types").get<uint64_t>();
    d->stats_.loss = j.at("loss").get<double>();
    std::istringstream rng(j.at("rng").get<std::string>());
    rng >> d->rng_;
    if (rng.fail()) return Status::Corruption(std::string(kCharDistillEntry) + ": bad rng state");
    // The admitted words are re-read at the first step (as after a refresh).
    d->launched_steps_ = d->stats_.steps;
    d->refreshed_at_step_ = d->stats_.steps;
    return d;
  } catch (const std::exception& e) {
    return Status::Corruption(std::string(kCharDistillEntry) + ": " + e.what());
  }
}

}  // namespace streamvec

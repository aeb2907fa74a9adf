#include "streamvec/trainer/char_sgns.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "streamvec/base/heap.h"
#include "streamvec/tokenizer/whitespace_tokenizer.h"
#include "streamvec/trainer/char_distiller.h"
#include "streamvec/trainer/kafka_trainer.h"

namespace streamvec {

using json = nlohmann::json;

namespace {

// A piece's backward pass keeps every step's gates and states (CharModel::Forward: about 95 MB
// for a 20k-word piece at the defaults), freed when the piece is done. glibc's default
// thresholds hand those blocks back to the kernel (mmap for the larger ones, trimming for the
// rest) and every piece faults them in again, zeroed: 13% of the time in the kernel in `perf`,
// and the next piece's allocations pay it again. Keeping freed memory for reuse (blocks under
// 32 MiB from the heap, the heap trimmed only past 256 MiB free) makes --model char-lstm 1.1-1.3x
// faster. Process-wide, set once when the first character model trainer is made.
void KeepCharModelMemoryForReuse() {
  static const bool once = [] {
    KeepFreedMemoryForReuse(size_t{256} << 20);
    return true;
  }();
  (void)once;
}

}  // namespace

bool ParseCharMode(std::string_view s, CharMode* mode) {
  if (s == "replace") {
    *mode = CharMode::kReplace;
  } else if (s == "sum") {
    *mode = CharMode::kSum;
  } else {
    return false;
  }
  return true;
}

const char* CharModeName(CharMode mode) { return mode == CharMode::kSum ? "sum" : "replace"; }

CharSgns::CharSgns(const CharSgnsOptions& options, int threads)
    : options_(options), threads_(std::max(1, threads)), model_(options.model) {
  SV_CHECK(ValidateCharModelOptions(options.model).ok());
  KeepCharModelMemoryForReuse();
  if (options.mode == CharMode::kSum) {
    // The projection P and its bias p are the last parameters (CharModel::num_parameters):
    // zero, so C(w) = 0 and sum mode starts as plain SGNS.
    const CharModelOptions& m = options.model;
    const size_t dirs = m.bidirectional ? 2 : 1;
    const size_t proj = dirs * m.hidden * m.dim + m.dim;
    std::fill(model_.mutable_parameters() + model_.num_parameters() - proj,
              model_.mutable_parameters() + model_.num_parameters(), 0.f);
  }
}

CharSgns::~CharSgns() = default;

namespace {

// Runs fn(t) for t in [0, parts) on parts threads (the caller's thread for one).
template <typename Fn>
void OnThreads(size_t parts, Fn&& fn) {
  if (parts <= 1) {
    fn(size_t{0});
    return;
  }
  std::vector<std::thread> pool;
  for (size_t t = 0; t < parts; ++t) pool.emplace_back([&fn, t] { fn(t); });
  for (std::thread& th : pool) th.join();
}

bool IsSpace(char c) {  // the tokenizer's whitespace
  return (internal::kByteClass[static_cast<unsigned char>(c)] & internal::kSpaceClass) != 0;
}

// `texts` cut into at most `parts` runs of about equal bytes, in order, each a list of texts or
// their pieces; a text is cut only before a whitespace byte, so the runs hold the same tokens.
std::vector<std::vector<std::string_view>> CutForThreads(const std::vector<std::string_view>& texts,
                                                         size_t parts) {
  size_t total = 0;
  for (std::string_view t : texts) total += t.size();
  const size_t target = std::max<size_t>(1, (total + parts - 1) / parts);
  std::vector<std::vector<std::string_view>> out(1);
  size_t in_part = 0;
  for (std::string_view text : texts) {
    while (!text.empty()) {
      if (in_part >= target && out.size() < parts) {
        out.emplace_back();
        in_part = 0;
      }
      size_t take = out.size() == parts ? text.size() : std::min(text.size(), target - in_part);
      while (take < text.size() && !IsSpace(text[take])) ++take;
      out.back().push_back(text.substr(0, take));
      in_part += take;
      text.remove_prefix(take);
    }
  }
  return out;
}

}  // namespace

void CharSgns::ScanWords(const StreamingLearner& learner,
                         const std::vector<std::string_view>& texts,
                         std::vector<std::string>* words, std::vector<uint32_t>* slots) {
  const CharModelOptions& mo = options_.model;
  const size_t capacity = learner.options().vocab_capacity;
  size_t bytes = 0;
  for (std::string_view t : texts) bytes += t.size();
  // A thread for every 64 KB of text, up to the learner's threads.
  const size_t parts = std::max<size_t>(1, std::min<size_t>(threads_, bytes >> 16));
  // A word is looked at once per piece and run: its slot is stamped with the piece's number (no
  // allocation per token), in the run's own stamps, then in seen_ when the runs' finds are
  // merged in text order.
  if (seen_.size() != capacity) seen_.assign(capacity, 0);
  if (part_seen_.size() < parts) part_seen_.resize(parts);
  for (size_t t = 0; t < parts; ++t) {
    if (part_seen_[t].size() != capacity) part_seen_[t].assign(capacity, 0);
  }
  if (++piece_ == 0) {  // wrapped: forget every stamp
    std::fill(seen_.begin(), seen_.end(), 0);
    for (auto& stamps : part_seen_) std::fill(stamps.begin(), stamps.end(), 0);
    piece_ = 1;
  }
  const std::vector<std::vector<std::string_view>> runs = CutForThreads(texts, parts);
  std::vector<std::vector<std::string>> found_words(runs.size());
  std::vector<std::vector<uint32_t>> found_slots(runs.size());
  OnThreads(runs.size(), [&](size_t t) {
    std::vector<uint32_t>& stamps = part_seen_[t];
    WhitespaceTokenizer tokenizer(learner.options().tokenizer);
    auto on_token = [&](std::string_view w) {
      const int64_t slot = learner.SlotOf(w);
      if (slot < 0 || stamps[size_t(slot)] == piece_) return;
      stamps[size_t(slot)] = piece_;
      if (!learner.Admitted(w) || !CharIds(w, mo.buckets, mo.max_word_chars).ok()) return;
      found_words[t].emplace_back(w);
      found_slots[t].push_back(static_cast<uint32_t>(slot));
    };
    for (std::string_view text : runs[t]) {
      tokenizer.Feed(text, on_token, [] {});
      tokenizer.Finish(on_token);
    }
  });
  for (size_t t = 0; t < runs.size(); ++t) {
    for (size_t i = 0; i < found_slots[t].size(); ++i) {
      const uint32_t slot = found_slots[t][i];
      if (seen_[slot] == piece_) continue;
      seen_[slot] = piece_;
      words->push_back(std::move(found_words[t][i]));
      slots->push_back(slot);
    }
  }
}

Status CharSgns::UseCudaDevice(int ordinal) { return model_.UseCudaDevice(ordinal); }

size_t CharSgns::Parts(size_t words) const {
  if (model_.cuda_device() >= 0) return 1;  // the device takes one pass at a time
  return std::max<size_t>(1, std::min<size_t>(threads_, (words + 255) / 256));
}

Status CharSgns::EncodeParallel(const std::vector<std::string_view>& words, std::vector<float>* out,
                                Passes* passes) const {
  const size_t dim = options_.model.dim;
  out->assign(words.size() * dim, 0.f);
  const size_t parts = Parts(words.size());
  std::vector<Status> status(parts);
  if (passes != nullptr) passes->assign(parts, nullptr);
  OnThreads(parts, [&](size_t t) {
    const size_t begin = words.size() * t / parts, end = words.size() * (t + 1) / parts;
    std::vector<std::string_view> part(words.begin() + begin, words.begin() + end);
    std::vector<float> v;
    if (passes != nullptr) {
      StatusOr<std::shared_ptr<const CharModel::Pass>> pass = model_.Forward(part, &v);
      status[t] = pass.status();
      if (pass.ok()) (*passes)[t] = std::move(pass).value();
    } else {
      status[t] = model_.Encode(part, &v);
    }
    if (status[t].ok()) std::copy(v.begin(), v.end(), out->begin() + begin * dim);
  });
  for (const Status& s : status) SV_RETURN_IF_ERROR(s);
  return Status::Ok();
}

template <typename TrainFn>
Status CharSgns::Step(StreamingLearner* learner, const std::vector<std::string_view>& texts,
                      TrainFn&& train) {
  const auto t0 = std::chrono::steady_clock::now();
  const CharModelOptions& mo = options_.model;
  const int dim = mo.dim;
  // 1. The distinct admitted words, in first-seen order (deterministic).
  std::vector<std::string> words;
  std::vector<uint32_t> slots;
  ScanWords(*learner, texts, &words, &slots);
  const auto t_scan = std::chrono::steady_clock::now();
  const double scan_s = std::chrono::duration<double>(t_scan - t0).count();
  stats_.scan_seconds += scan_s;
  if (words.empty()) {
    stats_.seconds += scan_s;
    return train();
  }
  std::vector<std::string_view> views(words.begin(), words.end());
  // 2. v(w) into the input rows.
  std::vector<float> encoded;
  Passes passes;
  SV_RETURN_IF_ERROR(EncodeParallel(views, &encoded, &passes));
  const bool sum = options_.mode == CharMode::kSum;
  std::vector<float> written(words.size() * size_t(dim));
  {
    StreamingLearner::RowTables rows = learner->MutableRowTables();
    if (rows.input == nullptr) {
      return Status::FailedPrecondition(
          "--model char-lstm needs the learner's rows on the host (its learner on the CPU)");
    }
    for (size_t i = 0; i < words.size(); ++i) {
      float* row = rows.input + size_t(slots[i]) * rows.stride;
      float* x = written.data() + i * dim;
      const float* c = encoded.data() + i * dim;
      for (int j = 0; j < dim; ++j) x[j] = sum ? row[j] + c[j] : c[j];
      std::copy(x, x + dim, row);
    }
  }
  const double encode_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.encode_seconds += encode_s - scan_s;
  // 3. The learner trains the batch.
  SV_RETURN_IF_ERROR(train());
  const auto t1 = std::chrono::steady_clock::now();
  // 4. The rows' changes; sum mode puts e(w) + d(w) back. A word evicted during the piece
  // (its slot re-initialised) keeps a zero gradient.
  std::vector<float> d_out(words.size() * size_t(dim), 0.f);
  size_t trained = 0;
  {
    StreamingLearner::RowTables rows = learner->MutableRowTables();
    for (size_t i = 0; i < words.size(); ++i) {
      if (learner->SlotOf(views[i]) != int64_t(slots[i])) continue;
      float* row = rows.input + size_t(slots[i]) * rows.stride;
      const float* x = written.data() + i * dim;
      const float* c = encoded.data() + i * dim;
      float* g = d_out.data() + i * dim;
      ++trained;
      for (int j = 0; j < dim; ++j) {
        const float d = row[j] - x[j];
        g[j] = -d;
        if (sum) row[j] = (x[j] - c[j]) + d;
      }
    }
  }
  if (trained == 0) {
    stats_.seconds += encode_s;
    return Status::Ok();
  }
  // 5. -d(w) back through the kept forward passes, gradients summed in a fixed order.
  const size_t parts = passes.size();
  std::vector<std::vector<float>> gradients(parts);
  std::vector<Status> status(parts);
  OnThreads(parts, [&](size_t t) {
    const size_t begin = words.size() * t / parts;
    status[t] = model_.Backward(*passes[t], d_out.data() + begin * dim, &gradients[t]);
  });
  passes.clear();
  for (const Status& s : status) SV_RETURN_IF_ERROR(s);
  for (size_t t = 1; t < parts; ++t) {
    for (size_t k = 0; k < gradients[0].size(); ++k) gradients[0][k] += gradients[t][k];
  }
  model_.AdamStep(gradients[0]);
  ++stats_.steps;
  stats_.types += trained;
  const double backward_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  stats_.backward_seconds += backward_s;
  stats_.seconds += encode_s + backward_s;
  return Status::Ok();
}

namespace {

// Words (runs of non-whitespace) in `text`; with `stop_at`, *end is where the stop_at-th word
// ends (text.size() if it has fewer).
uint64_t CountWords(std::string_view text, uint64_t stop_at, size_t* end) {
  uint64_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool space = IsSpace(text[i]);
    if (!space && !in_word) ++words;
    if (space && in_word && words == stop_at) {
      *end = i;
      return words;
    }
    in_word = !space;
  }
  *end = text.size();
  return words;
}

}  // namespace

Status CharSgns::TrainMicroBatch(StreamingLearner* learner,
                                 const std::vector<std::string_view>& texts) {
  // Whole documents, in pieces of at least batch_words words.
  size_t begin = 0;
  uint64_t words = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    size_t end = 0;
    words += CountWords(texts[i], 0, &end);
    if (words >= options_.batch_words || i + 1 == texts.size()) {
      const std::vector<std::string_view> piece(texts.begin() + begin, texts.begin() + i + 1);
      SV_RETURN_IF_ERROR(Step(learner, piece, [&] { return learner->TrainMicroBatch(piece); }));
      begin = i + 1;
      words = 0;
    }
  }
  return Status::Ok();
}

Status CharSgns::TrainChunk(StreamingLearner* learner, std::string_view chunk) {
  carry_.append(chunk);
  size_t cut = carry_.find_last_of(" \t\n\r\v\f");
  if (cut == std::string::npos) {
    if (carry_.size() < (size_t{1} << 20)) return Status::Ok();
    cut = carry_.size() - 1;  // one huge token: the learner skips it as overlong
  }
  const std::string text = carry_.substr(0, cut + 1);
  carry_.erase(0, cut + 1);
  return TrainPieces(learner, text);
}

Status CharSgns::TrainPieces(StreamingLearner* learner, std::string_view text) {
  while (!text.empty()) {
    size_t end = 0;
    CountWords(text, options_.batch_words, &end);
    const std::string_view piece = text.substr(0, end);
    const std::vector<std::string_view> texts{piece};
    SV_RETURN_IF_ERROR(Step(learner, texts, [&] { return learner->TrainChunk(piece); }));
    text.remove_prefix(end);
  }
  return Status::Ok();
}

Status CharSgns::FinishStream(StreamingLearner* learner) {
  if (!carry_.empty()) {
    const std::string text = std::move(carry_);
    carry_.clear();
    SV_RETURN_IF_ERROR(TrainPieces(learner, text));
  }
  return learner->FinishStream();
}

Status CharSgns::ServedVectors(const StreamingLearner& learner,
                               const std::vector<std::string>& words,
                               std::vector<float>* vectors) const {
  std::vector<std::string_view> views;
  std::vector<size_t> encodable;
  const CharModelOptions& mo = options_.model;
  for (size_t i = 0; i < words.size(); ++i) {
    if (!CharIds(words[i], mo.buckets, mo.max_word_chars).ok()) continue;
    views.emplace_back(words[i]);
    encodable.push_back(i);
  }
  std::vector<float> encoded;
  SV_RETURN_IF_ERROR(EncodeParallel(views, &encoded, nullptr));
  const size_t dim = mo.dim;
  const bool sum = options_.mode == CharMode::kSum;
  vectors->assign(words.size() * dim, 0.f);
  for (size_t i = 0; i < words.size(); ++i) {
    const float* row = learner.InputRow(words[i]);
    if (row != nullptr) std::copy(row, row + dim, vectors->begin() + i * dim);
  }
  for (size_t k = 0; k < encodable.size(); ++k) {
    float* v = vectors->data() + encodable[k] * dim;
    const float* c = encoded.data() + k * dim;
    for (size_t j = 0; j < dim; ++j) v[j] = sum ? v[j] + c[j] : c[j];
  }
  return Status::Ok();
}

Status CharSgns::ExportVectors(const StreamingLearner& learner, std::vector<std::string>* words,
                               std::vector<float>* vectors) const {
  std::vector<uint32_t> slots;
  std::vector<double> counts;
  learner.AdmittedSlots(words, &slots, &counts);
  return ServedVectors(learner, *words, vectors);
}

Status CharSgns::WriteServingEntries(const StreamingLearner& learner,
                                     const SnapshotSink& sink) const {
  std::vector<std::string> words;
  std::vector<uint32_t> slots;
  std::vector<const float*> slot_rows;
  int stride = 0;
  size_t rows_per_chunk = 0;
  learner.ExportRowsBySlot(&words, &slots, &slot_rows, &stride, &rows_per_chunk);
  std::vector<float> vectors;
  SV_RETURN_IF_ERROR(ServedVectors(learner, words, &vectors));
  // v(w) replaces each admitted word's row (a copy in the learner's row layout).
  const size_t dim = options_.model.dim;
  std::vector<float> table(words.size() * size_t(stride), 0.f);
  for (size_t i = 0; i < words.size(); ++i) {
    float* row = table.data() + i * size_t(stride);
    std::copy(vectors.begin() + i * dim, vectors.begin() + (i + 1) * dim, row);
    slot_rows[slots[i]] = row;
  }
  return streamvec::WriteServingEntries(learner, words, slots, slot_rows, stride, rows_per_chunk,
                                        sink);
}

std::string CharSgns::MetadataJson() const {
  const CharModelOptions& m = options_.model;
  return json{{"char_mode", CharModeName(options_.mode)},
              {"batch_words", options_.batch_words},
              {"steps", stats_.steps},
              {"types", stats_.types},
              {"char_dim", m.char_dim},
              {"char_hidden", m.hidden},
              {"char_bidirectional", m.bidirectional},
              {"max_word_chars", m.max_word_chars}}
      .dump();
}

Status CharSgns::Save(const SnapshotSink& sink, bool checkpoint) const {
  SV_RETURN_IF_ERROR(sink(kCharModelEntry, model_.Serialize(/*with_optimizer=*/false)));
  if (!checkpoint) return Status::Ok();
  SV_RETURN_IF_ERROR(sink(kCharModelStateEntry, model_.Serialize(/*with_optimizer=*/true)));
  const json j = {{"char_mode", CharModeName(options_.mode)},
                  {"batch_words", options_.batch_words},
                  {"steps", stats_.steps},
                  {"types", stats_.types}};
  return sink(kCharSgnsEntry, j.dump());
}

StatusOr<std::unique_ptr<CharSgns>> CharSgns::Load(const StateSource& source, int threads) {
  StatusOr<std::string> entry = source(kCharSgnsEntry);
  if (!entry.ok()) return entry.status();
  StatusOr<std::unique_ptr<CharModel>> model = LoadCharModelState(source);
  if (!model.ok()) {
    if (model.status().code() == StatusCode::kNotFound) {
      return Status::Corruption(std::string(kCharModelStateEntry) + " is missing");
    }
    return model.status();
  }
  try {
    const json j = json::parse(*entry);
    CharSgnsOptions o;
    o.model = (*model)->options();
    if (!ParseCharMode(j.at("char_mode").get<std::string>(), &o.mode)) {
      return Status::Corruption(std::string(kCharSgnsEntry) + ": bad char_mode");
    }
    o.batch_words = j.at("batch_words").get<uint64_t>();
    if (o.batch_words < 1)
      return Status::Corruption(std::string(kCharSgnsEntry) + ": batch_words 0");
    auto t = std::make_unique<CharSgns>(o, threads);
    t->model_ = **model;
    t->stats_.steps = j.at("steps").get<uint64_t>();
    t->stats_.types = j.at("types").get<uint64_t>();
    return t;
  } catch (const std::exception& e) {
    return Status::Corruption(std::string(kCharSgnsEntry) + ": " + e.what());
  }
}

}  // namespace streamvec

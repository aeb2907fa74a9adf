#include "service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>

#include "streamvec/base/thread_priority.h"

namespace streamvec::api {
namespace {

using nlohmann::json;

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void Service::LowerPriority(const char* thread) const {
  if (Status s = LowerThreadPriority(options_.index_nice, options_.index_policy); !s.ok()) {
    spdlog::warn("serve: {} thread keeps its priority: {}", thread, s.ToString());
  }
}

std::string DefaultWebRoot() {
  // An installed binary (PREFIX/bin/streamvec) serves PREFIX/share/streamvec/web (CMake's
  // install rules put the page, its script and the chart library there); one run from a build
  // tree serves the source tree's web/.
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "streamvec" / "web";
    if (fs::exists(installed / "index.html", ec)) return installed.string();
  }
  return STREAMVEC_WEB_ROOT;
}

Service::Service(const ServeOptions& options, std::shared_ptr<SnapshotSource> source)
    : options_(options),
      source_(std::move(source)),
      retained_(source_, options.pinned_snapshots),
      routes_(RouteContext{[this] { return current_.load(); }, source_, &options_,
                           [this] { return Metrics(); },
                           [this](uint64_t v) { return EvaluationOf(v); }, &retained_}) {}

Service::~Service() { StopPolling(); }

json Service::EvaluationOf(uint64_t version) const {
  std::lock_guard<std::mutex> lock(evaluations_mu_);
  const auto it = evaluations_.find(version);
  return it == evaluations_.end() ? json(nullptr) : it->second;
}

void Service::PollOnce() {
  const std::shared_ptr<const Served> old = current_.load();
  const uint64_t served_version = old ? old->snapshot->version() : 0;
  StatusOr<std::shared_ptr<const ServingSnapshot>> next = Status::Internal("not loaded");
  std::shared_ptr<const Served> prepared;
  try {
    next = source_->LoadNewerThan(std::max(served_version, rejected_version_));
    // The previous index is carried over; a new one is built on the index thread (IndexOnce).
    if (next.ok() && *next != nullptr) {
      prepared = PrepareServed(*next, old.get(), options_);
    }
  } catch (const std::exception& e) {  // e.g. bad_alloc for a huge embedding
    next = Status::Internal(std::string("loading a snapshot: ") + e.what());
  }
  if (!next.ok()) {
    ++load_errors_;
    if (next.status().message() != last_error_) {
      last_error_ = next.status().message();
      spdlog::warn("serve: {} (still serving snapshot {})", next.status().ToString(),
                   served_version);
    }
    return;
  }
  last_error_.clear();
  if (prepared == nullptr) return;
  const uint64_t version = prepared->snapshot->version();
  json evaluation = {{"quality", prepared->quality}, {"promoted", true}};
  // The quality gate: the first similarity file's Spearman may not fall by more than the margin.
  if (options_.quality_gate_drop >= 0 && old && old->gate_score && prepared->gate_score &&
      std::isfinite(*old->gate_score)) {
    const double before = *old->gate_score, after = *prepared->gate_score;
    if (!std::isfinite(after) || after < before - options_.quality_gate_drop) {
      rejected_version_ = version;
      ++gate_rejections_;
      const std::string reason = "quality gate: Spearman on " + options_.similarity_files[0] +
                                 " fell from " + std::to_string(before) + " to " +
                                 std::to_string(after) + " (more than " +
                                 std::to_string(options_.quality_gate_drop) + ")";
      spdlog::warn("serve: not serving snapshot {}: {}; still serving snapshot {}", version, reason,
                   served_version);
      evaluation["promoted"] = false;
      evaluation["rejected"] = reason;
      std::lock_guard<std::mutex> lock(evaluations_mu_);
      evaluations_[version] = std::move(evaluation);
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(evaluations_mu_);
    evaluations_[version] = std::move(evaluation);
    while (evaluations_.size() > 1000) evaluations_.erase(evaluations_.begin());
  }
  {
    // An index attached while this snapshot was being prepared is carried over too.
    std::lock_guard<std::mutex> swap(swap_mu_);
    const std::shared_ptr<const Served> latest = current_.load();
    if (latest != old && latest != nullptr && latest->index != nullptr &&
        prepared->snapshot->rows() > options_.exact_max_words) {
      prepared = WithIndex(*prepared, latest->index, latest->index_snapshot);
      std::lock_guard<std::mutex> lock(evaluations_mu_);
      evaluations_[version]["quality"]["index"] = prepared->quality["index"];
    }
    current_.store(prepared);
  }
  // The replaced snapshot is freed here at the next swap, not by whichever request thread
  // happens to drop the last reference to it (tens of MB and a hash map for 100k words).
  retired_ = old;
  spdlog::info("serve: now serving snapshot {} ({} words x {}, {} search, prepared in {:.2f} s)",
               version, prepared->snapshot->rows(), prepared->snapshot->dim(),
               !prepared->index           ? "exact"
               : prepared->IndexCarried() ? "hnsw (carried over)"
                                          : "hnsw",
               prepared->quality.value("prepare_seconds", 0.0));
  ++snapshots_loaded_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index_pending_ = true;
  }
  wake_.notify_all();
}

void Service::IndexOnce() {
  const std::shared_ptr<const Served> served = current_.load();
  if (!served || served->snapshot->rows() <= options_.exact_max_words) return;
  if (served->index && !served->IndexCarried()) return;  // built for the served snapshot
  const auto now = std::chrono::steady_clock::now();
  // Carried over until the next build is due; sooner when many words are new since the last
  // build (each query scans them exactly).
  const bool churned =
      served->unindexed_rows.size() > served->snapshot->rows() / 50 || served->exact_until_indexed;
  if (served->index && now < (churned ? next_early_build_ : next_build_)) return;
  // While the trainer is saturated the build waits (bounded), the queries scan what no index
  // holds.
  if (options_.defer_index_builds && options_.defer_index_builds()) {
    if (!deferring_since_) deferring_since_ = now;
    if (now - *deferring_since_ <
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(options_.index_max_defer_s))) {
      ++index_builds_deferred_;
      return;
    }
  }
  deferring_since_.reset();
  const uint64_t version = served->snapshot->version();
  if (served->index) {
    // The carried index at its stalest, just before it is replaced.
    const double recall = MeasureRecallAt10(*served, options_.recall_queries);
    index_recall_ = recall;
    std::lock_guard<std::mutex> lock(evaluations_mu_);
    auto it = evaluations_.find(version);
    if (it != evaluations_.end()) it->second["quality"]["index"]["recall_at_10"] = recall;
  }
  std::shared_ptr<const AnnIndex> index;
  bool from_disk = false;
  if (!options_.index_dir.empty()) {
    StatusOr<std::shared_ptr<const AnnIndex>> saved = LoadSavedIndex(served->snapshot, options_);
    if (saved.ok()) {
      index = std::move(saved).value();
      from_disk = true;
      index_loads_++;
    } else if (saved.status().code() != StatusCode::kNotFound) {
      // Expected at every rebuild (the saved index is the last build's): said once, at start.
      spdlog::log(served->index ? spdlog::level::debug : spdlog::level::info,
                  "serve: the index in {} is not used: {}", options_.index_dir,
                  saved.status().ToString());
    }
  }
  try {
    if (!index) index = BuildIndex(served->snapshot, options_, &cancel_index_);
  } catch (const std::exception& e) {
    spdlog::warn("serve: building the index of snapshot {} failed: {}", version, e.what());
    next_build_ = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(options_.index_rebuild_interval_s));
    return;
  }
  if (!index) {
    spdlog::info("serve: index build of snapshot {} cancelled (stopping)", version);
    return;
  }
  // The next build waits at least as long as this one took: indexing takes at most half a core
  // (index_rebuild_interval_s unless more than 2% of the served words are not indexed).
  const auto built = std::chrono::steady_clock::now();
  const std::chrono::duration<double> pause =
      std::max(std::chrono::duration<double>(options_.index_rebuild_interval_s),
               std::chrono::duration<double>(built - now));
  next_build_ = built + std::chrono::duration_cast<std::chrono::steady_clock::duration>(pause);
  next_early_build_ = built + (built - now);
  if (!from_disk) {
    index_builds_++;
    if (!options_.index_dir.empty()) {
      if (Status saved = index->Save(IndexPath(options_), *served->snapshot); !saved.ok()) {
        spdlog::warn("serve: cannot save the index: {}", saved.ToString());
      }
    }
  }
  std::shared_ptr<const Served> indexed;
  {
    std::lock_guard<std::mutex> swap(swap_mu_);
    const std::shared_ptr<const Served> latest = current_.load();
    indexed = WithIndex(*latest, index, served->snapshot);
    current_.store(indexed);
  }
  index_recall_ = indexed->IndexCarried() ? MeasureRecallAt10(*indexed, options_.recall_queries)
                                          : index->recall_at_10();
  {
    std::lock_guard<std::mutex> lock(evaluations_mu_);
    auto it = evaluations_.find(indexed->snapshot->version());
    if (it != evaluations_.end()) {
      it->second["quality"]["index"] = indexed->quality["index"];
      it->second["quality"]["index"]["recall_at_10"] = index_recall_.load();
    }
  }
  spdlog::info(
      "serve: HNSW index over snapshot {} {} in {:.1f} s, serving snapshot {} "
      "(recall@10 {:.3f})",
      version, from_disk ? "loaded" : "built", index->build_seconds(), indexed->snapshot->version(),
      index_recall_.load());
}

void Service::IndexLoop() {
  LowerPriority("index");
  const auto interval = std::chrono::duration<double>(options_.poll_interval_s);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, interval, [this] { return stopping_ || index_pending_; });
    if (stopping_) break;
    index_pending_ = false;
    lock.unlock();
    IndexOnce();
    lock.lock();
  }
}

void Service::StartPolling() {
  poller_ = std::thread([this] { PollLoop(); });
  indexer_ = std::thread([this] { IndexLoop(); });
}

void Service::PollLoop() {
  // Loading and preparing a snapshot (0.3-0.5 s of CPU for 80k words, every few seconds under
  // `run`) is background work too: requests first.
  LowerPriority("polling");
  const auto interval = std::chrono::duration<double>(options_.poll_interval_s);
  std::unique_lock<std::mutex> lock(mu_);
  while (!poll_wake_.wait_for(lock, interval, [this] { return stopping_; })) {
    lock.unlock();
    PollOnce();
    lock.lock();
  }
}

void Service::StopPolling() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cancel_index_ = true;  // a build under way gives up (a stop within a moment, not its seconds)
  wake_.notify_all();
  poll_wake_.notify_all();
  if (poller_.joinable()) poller_.join();
  if (indexer_.joinable()) indexer_.join();
}

uint64_t Service::snapshot_version() const {
  const std::shared_ptr<const Served> s = current_.load();
  return s ? s->snapshot->version() : 0;
}

HttpReply Service::Handle(const HttpCall& call) {
  const auto start = std::chrono::steady_clock::now();
  HttpReply reply;
  try {
    reply = routes_.Handle(call);
  } catch (const std::exception& e) {
    reply.status = 500;
    reply.body = json{{"error", std::string("internal error: ") + e.what()}}.dump(
        -1, ' ', false, json::error_handler_t::replace);
    reply.error_kind = "internal";
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  request_metrics_.Observe(reply.route, reply.status, reply.error_kind, seconds);
  return reply;
}

std::string Service::Metrics() const {
  std::string out;
  const std::shared_ptr<const Served> s = current_.load();
  AppendMetric(&out, "streamvec_snapshot_version", "gauge",
               "Version of the snapshot being served (0: none yet).",
               s ? static_cast<double>(s->snapshot->version()) : 0);
  AppendMetric(&out, "streamvec_snapshots_damaged", "gauge",
               "Published snapshots skipped because they are damaged (metadata, or a database "
               "that does not open or read back).",
               static_cast<double>(source_->damaged()));
  if (s) {
    const ServingSnapshot& snap = *s->snapshot;
    AppendMetric(&out, "streamvec_snapshot_age_seconds", "gauge",
                 "Seconds since the served snapshot was committed by its trainer.",
                 std::max(0.0, UnixNow() - snap.info().created_at));
    AppendMetric(&out, "streamvec_snapshot_created_timestamp_seconds", "gauge",
                 "Unix time the served snapshot was committed.", snap.info().created_at);
    AppendMetric(&out, "streamvec_vocabulary_size", "gauge", "Words in the served snapshot.",
                 static_cast<double>(snap.rows()));
    AppendMetric(&out, "streamvec_embedding_dimension", "gauge",
                 "Vector size of the served snapshot.", snap.dim());
    const json meta = json::parse(snap.info().metadata_json, nullptr, false);
    if (meta.is_object()) {
      const std::pair<const char*, const char*> fields[] = {
          {"words_trained", "Words trained on, as of the served snapshot (its metadata)."},
          {"words_seen", "Words read, as of the served snapshot (its metadata)."},
          {"evictions", "Vocabulary evictions, as of the served snapshot (its metadata)."}};
      for (const auto& [key, help] : fields) {
        if (meta.contains(key) && meta[key].is_number()) {
          AppendMetric(&out, std::string("streamvec_snapshot_") + key, "gauge", help,
                       meta[key].get<double>());
        }
      }
    }
    const json& q = s->quality;
    AppendMetric(&out, "streamvec_index_hnsw", "gauge",
                 "1 when neighbour queries use an HNSW index, 0 for the exact scan (also while "
                 "a carried-over index is under --min-carried-recall on the served snapshot).",
                 s->UsesIndex() ? 1 : 0);
    AppendMetric(&out, "streamvec_index_recall_at_10", "gauge",
                 "Recall@10 of neighbour queries against the exact scan on sampled words, last "
                 "measured (when an index is built, and when a carried-over index is about to be "
                 "replaced; 1 for the exact scan).",
                 s->UsesIndex() ? index_recall_.load() : 1.0);
    AppendMetric(&out, "streamvec_index_build_seconds", "gauge",
                 "Seconds building the index that serves neighbour queries.",
                 s->index ? s->index->build_seconds() : 0.0);
    AppendMetric(&out, "streamvec_index_snapshot_version", "gauge",
                 "Version of the snapshot the index was built over (older than the served one "
                 "when carried over; 0: no index).",
                 s->index ? static_cast<double>(s->index_snapshot->version()) : 0.0);
    AppendMetric(&out, "streamvec_index_words", "gauge",
                 "Words in the index (those of the snapshot it was built over; 0: no index).",
                 s->index ? static_cast<double>(s->index_snapshot->rows()) : 0.0);
    AppendMetric(&out, "streamvec_index_unindexed_words", "gauge",
                 "Served words a carried-over index lacks, scanned exactly on each query.",
                 static_cast<double>(s->unindexed_rows.size()));
    AppendMetric(&out, "streamvec_index_builds_total", "counter",
                 "HNSW indexes built since the server started.",
                 static_cast<double>(index_builds_.load()));
    AppendMetric(&out, "streamvec_index_loads_total", "counter",
                 "HNSW indexes loaded from --index-dir instead of built, since the server "
                 "started.",
                 static_cast<double>(index_loads_.load()));
    AppendMetric(&out, "streamvec_index_builds_deferred_total", "counter",
                 "Times an index build waited because the trainer of this process was "
                 "saturated (words no index holds are scanned exactly meanwhile).",
                 static_cast<double>(index_builds_deferred_.load()));
    AppendMetric(&out, "streamvec_snapshot_prepare_seconds", "gauge",
                 "Seconds preparing the served snapshot (index, quality, alignment).",
                 q.value("prepare_seconds", 0.0));
    if (q.contains("similarity")) {
      for (const char* stat : {"spearman", "pearson"}) {
        const std::string name = std::string("streamvec_quality_similarity_") + stat;
        AppendMetricHeader(&out, name, "gauge",
                           "Correlation of the served snapshot's cosines with human scores on a "
                           "word-pair file (as streamvec eval).");
        for (const json& f : q["similarity"]) {
          const double v = f.contains(stat) && f[stat].is_number() ? f[stat].get<double>() : NAN;
          out +=
              name + "{file=\"" + EscapeLabel(f.value("file", "")) + "\"} " + PromNumber(v) + "\n";
        }
      }
    }
    if (q.contains("analogy") && q["analogy"].contains("accuracy")) {
      AppendMetric(&out, "streamvec_quality_analogy_accuracy", "gauge",
                   "3CosAdd analogy accuracy of the served snapshot (as streamvec eval).",
                   q["analogy"]["accuracy"].get<double>(),
                   "file=\"" + EscapeLabel(q["analogy"].value("file", "")) + "\"");
    }
    if (q.contains("pip") && q["pip"]["normalized"].is_number()) {
      AppendMetric(&out, "streamvec_quality_pip_loss_normalized", "gauge",
                   "PIP loss (Yin & Shen 2018) of the served snapshot against the previous one "
                   "over shared words, each scaled to unit PIP norm, in [0, sqrt 2].",
                   q["pip"]["normalized"].get<double>());
    }
  }
  AppendMetric(&out, "streamvec_snapshots_loaded_total", "counter",
               "Snapshots swapped in since the server started.",
               static_cast<double>(snapshots_loaded_.load()));
  AppendMetric(&out, "streamvec_snapshot_load_errors_total", "counter",
               "Failed checks for or loads of a newer snapshot.",
               static_cast<double>(load_errors_.load()));
  AppendMetric(&out, "streamvec_quality_gate_rejections_total", "counter",
               "Snapshots refused because their similarity score fell more than the gate allows.",
               static_cast<double>(gate_rejections_.load()));
  AppendMetric(&out, "streamvec_pinned_snapshots_loaded", "gauge",
               "Older snapshots loaded for ?snapshot=N requests and held now (beside the served "
               "one and its history).",
               static_cast<double>(retained_.cached()));
  AppendMetric(&out, "streamvec_pinned_snapshot_loads_total", "counter",
               "Older snapshots loaded from the source for ?snapshot=N requests.",
               static_cast<double>(retained_.loads()));
  request_metrics_.AppendPrometheus(&out);
  if (options_.extra_metrics) {
    std::string extra = options_.extra_metrics();
    if (!extra.empty() && extra.back() != '\n') extra += '\n';
    out += extra;
  }
  return out;
}

}  // namespace streamvec::api

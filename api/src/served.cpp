// PrepareServed: index, quality (eval/), PIP loss and alignments for a snapshot about to be served.
#include "served.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "streamvec/eval/analogy.h"
#include "streamvec/eval/pip.h"
#include "streamvec/eval/similarity.h"

namespace streamvec::api {
namespace {

using nlohmann::json;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

json Finite(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

}  // namespace

std::vector<ServingSnapshot::Neighbor> Served::Nearest(const float* unit_query, size_t k,
                                                       std::span<const size_t> exclude,
                                                       size_t limit_rows) const {
  if (index && limit_rows >= snapshot->rows()) return index->Search(unit_query, k, exclude);
  return snapshot->NearestToVector(unit_query, k, exclude, limit_rows);
}

std::shared_ptr<const Served> WithIndex(const Served& served, const ServeOptions& options) {
  auto copy = std::make_shared<Served>(served);
  AnnOptions ann;
  ann.m = options.hnsw_m;
  ann.ef_construction = options.hnsw_ef_construction;
  ann.ef_search = options.hnsw_ef_search;
  ann.threads = options.index_threads;
  ann.recall_queries = options.recall_queries;
  copy->index = AnnIndex::Build(*served.snapshot, ann);
  copy->quality["index"] = {{"kind", "hnsw"},
                            {"recall_at_10", copy->index->recall_at_10()},
                            {"build_seconds", copy->index->build_seconds()}};
  return copy;
}

std::shared_ptr<const Served> PrepareServed(std::shared_ptr<const ServingSnapshot> next,
                                            const Served* previous, const ServeOptions& options,
                                            bool build_index) {
  const auto start = std::chrono::steady_clock::now();
  auto served = std::make_shared<Served>();
  served->snapshot = next;
  const ServingSnapshot& s = *next;

  served->quality["index"] = {{"kind", "exact"}, {"recall_at_10", 1.0}, {"build_seconds", 0.0}};
  if (build_index && s.rows() > options.exact_max_words) {
    served = std::const_pointer_cast<Served>(WithIndex(*served, options));
  }

  // Quality on the configured sets: the same calls (and defaults) as `streamvec eval`.
  json similarity = json::array();
  for (size_t i = 0; i < options.similarity_files.size(); ++i) {
    const std::string& path = options.similarity_files[i];
    const std::string name = std::filesystem::path(path).filename().string();
    StatusOr<eval::SimilarityResult> r = eval::EvaluateWordPairs(s.embeddings(), path);
    if (!r.ok()) {
      similarity.push_back({{"file", name}, {"error", r.status().ToString()}});
      if (i == 0) served->gate_score = std::nan("");
      continue;
    }
    similarity.push_back({{"file", name},
                          {"spearman", Finite(r->spearman)},
                          {"pearson", Finite(r->pearson)},
                          {"pairs", r->pairs},
                          {"oov_ratio", r->oov_ratio}});
    if (i == 0) served->gate_score = r->spearman;
  }
  if (!similarity.empty()) served->quality["similarity"] = std::move(similarity);
  if (!options.analogy_file.empty()) {
    eval::AnalogyOptions ao;
    ao.restrict_vocab = options.analogy_restrict_vocab;
    ao.threads = std::max(options.eval_threads, 1);
    const std::string name = std::filesystem::path(options.analogy_file).filename().string();
    StatusOr<eval::AnalogyResult> r =
        eval::EvaluateAnalogies(s.embeddings(), options.analogy_file, ao);
    if (r.ok()) {
      served->quality["analogy"] = {{"file", name},
                                    {"accuracy", r->accuracy()},
                                    {"correct", r->correct},
                                    {"total", r->total},
                                    {"oov_ratio", r->oov_ratio()}};
    } else {
      served->quality["analogy"] = {{"file", name}, {"error", r.status().ToString()}};
    }
  }

  if (previous != nullptr) {
    const ServingSnapshot& p = *previous->snapshot;
    const eval::PipResult pip =
        eval::PipLoss(p.embeddings(), s.embeddings(), options.pip_top_words);
    served->quality["pip"] = {{"previous", p.version()},
                              {"words", pip.words},
                              {"loss", Finite(pip.loss)},
                              {"relative", Finite(pip.relative)},
                              {"normalized", Finite(pip.normalized)}};
    // History: previous's own history plus previous, the newest options.history_snapshots.
    std::vector<std::shared_ptr<const ServingSnapshot>> keep;
    for (const HistoryEntry& h : previous->history) keep.push_back(h.snapshot);
    keep.push_back(previous->snapshot);
    if (keep.size() > options.history_snapshots) {
      keep.erase(keep.begin(), keep.end() - static_cast<std::ptrdiff_t>(options.history_snapshots));
    }
    for (auto& old : keep) {
      if (old->dim() != s.dim()) continue;  // a different model: not comparable
      served->history.push_back({old, AlignProcrustes(*old, s, options.procrustes_top_words)});
    }
  }
  served->quality["prepare_seconds"] = SecondsSince(start);
  return served;
}

}  // namespace streamvec::api

// PrepareServed: index, quality (eval/), PIP loss and alignments for a snapshot about to be served.
#include "served.h"

#include <spdlog/spdlog.h>

#include <algorithm>
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

// quality["index"]: how neighbour queries over the whole vocabulary are answered. recall_at_10
// is the index's own (measured when it was built); a carried index's recall on this snapshot is
// measured later by the server's index thread (Service) and replaces it in the evaluation.
void IndexQuality(Served* served) {
  if (!served->index) {
    served->quality["index"] = {{"kind", "exact"}, {"recall_at_10", 1.0}, {"build_seconds", 0.0}};
    return;
  }
  if (served->exact_until_indexed) {
    // The carried index fell under ServeOptions::min_carried_recall on this snapshot.
    served->quality["index"] = {{"kind", "exact"},
                                {"recall_at_10", 1.0},
                                {"build_seconds", 0.0},
                                {"carried_index_below_recall", true},
                                {"built_on_snapshot", served->index_snapshot->version()}};
    return;
  }
  served->quality["index"] = {{"kind", "hnsw"},
                              {"recall_at_10", served->index->recall_at_10()},
                              {"build_seconds", served->index->build_seconds()},
                              {"built_on_snapshot", served->index_snapshot->version()},
                              {"carried", served->IndexCarried()},
                              {"unindexed_words", served->unindexed_rows.size()}};
}

}  // namespace

std::vector<ServingSnapshot::Neighbor> Served::Nearest(const float* unit_query, size_t k,
                                                       std::span<const size_t> exclude,
                                                       size_t limit_rows,
                                                       std::optional<size_t> query_row) const {
  if (!UsesIndex() || limit_rows < snapshot->rows()) {
    return snapshot->NearestToVector(unit_query, k, exclude, limit_rows);
  }
  // The index proposes candidates, the best kRescored x (k + excluded) of its ef by their SQ8
  // cosines (within a few 1e-3 of the float ones), and the served snapshot scores them with its
  // float rows (exact cosines, the scan's ranking among them; each a cache miss of dim floats, so
  // not all ef); a carried index maps its rows to the served ones, and the rows it lacks are
  // scored too.
  std::vector<ServingSnapshot::Neighbor> out;
  if (k == 0) return out;
  constexpr size_t kRescored = 4;
  const size_t wanted = k + exclude.size();
  const size_t ask = std::max(wanted, std::min(index->ef_search(), kRescored * wanted));
  auto excluded = [&exclude](size_t r) {
    return std::find(exclude.begin(), exclude.end(), r) != exclude.end();
  };
  const bool carried = IndexCarried();
  out.reserve(ask + unindexed_rows.size());
  // A carried index numbers its rows after the older snapshot: its search starts at the entry
  // point.
  if (carried) query_row.reset();
  // The candidates' float rows are fetched together (one cache miss each, overlapped), then
  // scored.
  for (const ServingSnapshot::Neighbor& c : index->Search(unit_query, ask, query_row)) {
    const uint32_t row = carried ? row_of_index_row[c.row] : static_cast<uint32_t>(c.row);
    if (row == kNoRow || excluded(row)) continue;
    snapshot->PrefetchRow(row);
    out.push_back({row, 0.0f});
  }
  for (ServingSnapshot::Neighbor& n : out) n.similarity = snapshot->UnitDot(n.row, unit_query);
  if (unindexed) {
    for (const ServingSnapshot::Neighbor& n :
         unindexed->NearestToVector(unit_query, k + exclude.size(), {}, unindexed->rows())) {
      const uint32_t row = unindexed_rows[n.row];
      if (!excluded(row)) out.push_back({row, n.similarity});
    }
  }
  std::erase_if(out, [](const ServingSnapshot::Neighbor& n) { return std::isnan(n.similarity); });
  const size_t keep = std::min(k, out.size());
  std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(keep), out.end(),
                    ServingSnapshot::Neighbor::Better);
  out.resize(keep);
  return out;
}

void CarryIndex(const Served& from, Served* to) {
  to->index.reset();
  to->index_snapshot.reset();
  to->row_of_index_row.clear();
  to->unindexed_rows.clear();
  to->unindexed.reset();
  if (!from.index || !from.index_snapshot) return;
  const ServingSnapshot& old = *from.index_snapshot;
  const ServingSnapshot& now = *to->snapshot;
  if (old.dim() != now.dim()) return;
  if (from.index_snapshot == to->snapshot) {
    to->index = from.index;
    to->index_snapshot = from.index_snapshot;
    return;
  }
  std::vector<uint32_t> unindexed;
  for (size_t r = 0; r < now.rows(); ++r) {
    if (!old.Find(now.word(r))) unindexed.push_back(static_cast<uint32_t>(r));
  }
  if (unindexed.size() > now.rows() / 4) return;  // mostly new words: the exact scan serves
  std::vector<uint32_t> map(old.rows(), Served::kNoRow);
  for (size_t r = 0; r < old.rows(); ++r) {
    if (const std::optional<size_t> row = now.Find(old.word(r))) {
      map[r] = static_cast<uint32_t>(*row);
    }
  }
  to->index = from.index;
  to->index_snapshot = from.index_snapshot;
  if (!unindexed.empty()) {
    // The same vectors as `now`'s rows, so the scan gives the same cosines as now's own scan.
    Embeddings e;
    e.dim = now.dim();
    e.words.reserve(unindexed.size());
    e.vectors.reserve(unindexed.size() * static_cast<size_t>(now.dim()));
    for (const uint32_t r : unindexed) {
      e.words.push_back(now.word(r));
      e.vectors.insert(e.vectors.end(), now.vector(r), now.vector(r) + now.dim());
    }
    to->unindexed = std::make_shared<const ServingSnapshot>(std::move(e), SnapshotInfo{});
  }
  to->row_of_index_row = std::move(map);
  to->unindexed_rows = std::move(unindexed);
}

double MeasureRecallAt10(const Served& served, size_t queries) {
  const ServingSnapshot& s = *served.snapshot;
  const size_t rows = s.rows();
  queries = std::min(queries, rows);
  if (!served.UsesIndex() || queries == 0) return 1.0;
  double hits = 0, wanted = 0;
  std::vector<float> unit(static_cast<size_t>(s.dim()));
  for (size_t q = 0; q < queries; ++q) {
    const size_t row = q * rows / queries;
    s.UnitVector(row, unit.data());
    const size_t self[] = {row};
    const auto exact = s.NearestToVector(unit.data(), 10, self, rows);
    const auto approx = served.Nearest(unit.data(), 10, self, rows, row);
    for (const auto& e : exact) {
      for (const auto& a : approx) {
        if (a.row == e.row) {
          hits += 1;
          break;
        }
      }
    }
    wanted += static_cast<double>(exact.size());
  }
  return wanted > 0 ? hits / wanted : 1.0;
}

std::shared_ptr<const AnnIndex> BuildIndex(std::shared_ptr<const ServingSnapshot> snapshot,
                                           const ServeOptions& options,
                                           const std::atomic<bool>* cancel) {
  AnnOptions ann;
  ann.cancel = cancel;
  ann.m = options.hnsw_m;
  ann.ef_construction = options.hnsw_ef_construction;
  ann.ef_search = options.hnsw_ef_search;
  ann.threads = options.index_threads;
  std::unique_ptr<AnnIndex> index = AnnIndex::Build(*snapshot, ann);
  if (!index) return nullptr;  // cancelled
  Served probe;
  probe.snapshot = snapshot;
  probe.index_snapshot = snapshot;
  probe.index = std::shared_ptr<const AnnIndex>(index.get(), [](const AnnIndex*) {});
  index->set_recall_at_10(MeasureRecallAt10(probe, options.recall_queries));
  return index;
}

std::string IndexPath(const ServeOptions& options) {
  return (std::filesystem::path(options.index_dir) / "streamvec-index.hnsw").string();
}

StatusOr<std::shared_ptr<const AnnIndex>> LoadSavedIndex(
    std::shared_ptr<const ServingSnapshot> snapshot, const ServeOptions& options) {
  if (options.index_dir.empty()) return Status::NotFound("no index directory");
  AnnOptions ann;
  ann.ef_search = options.hnsw_ef_search;
  StatusOr<std::unique_ptr<AnnIndex>> loaded = AnnIndex::Load(IndexPath(options), *snapshot, ann);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<AnnIndex> index = std::move(loaded).value();
  Served probe;
  probe.snapshot = snapshot;
  probe.index_snapshot = snapshot;
  probe.index = index;
  const double recall = MeasureRecallAt10(probe, options.recall_queries);
  if (recall < options.min_carried_recall) {
    return Status::FailedPrecondition("the saved index's recall@10 on snapshot " +
                                      std::to_string(snapshot->version()) + " is " +
                                      std::to_string(recall));
  }
  index->set_recall_at_10(recall);
  return std::shared_ptr<const AnnIndex>(std::move(index));
}

std::shared_ptr<const Served> WithIndex(const Served& served,
                                        std::shared_ptr<const AnnIndex> index,
                                        std::shared_ptr<const ServingSnapshot> index_snapshot) {
  auto copy = std::make_shared<Served>(served);
  copy->exact_until_indexed = false;  // a fresh index (built for this snapshot or a near one)
  Served holder;
  holder.index = std::move(index);
  holder.index_snapshot = std::move(index_snapshot);
  CarryIndex(holder, copy.get());
  IndexQuality(copy.get());
  return copy;
}

std::shared_ptr<const Served> PrepareServed(std::shared_ptr<const ServingSnapshot> next,
                                            const Served* previous, const ServeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto served = std::make_shared<Served>();
  served->snapshot = next;
  const ServingSnapshot& s = *next;

  if (s.rows() > options.exact_max_words && previous != nullptr) {
    CarryIndex(*previous, served.get());
    if (served->IndexCarried() && options.min_carried_recall > 0 &&
        MeasureRecallAt10(*served, options.carried_recall_queries) < options.min_carried_recall) {
      served->exact_until_indexed = true;
    }
  }
  IndexQuality(served.get());

  // First snapshot of each word's run: carried over from `previous` for the words it held.
  auto first_seen = std::make_shared<FirstSeen>(s.rows(), s.version());
  if (previous != nullptr && previous->first_seen != nullptr) {
    const ServingSnapshot& p = *previous->snapshot;
    for (size_t r = 0; r < s.rows(); ++r) {
      if (const std::optional<size_t> old = p.Find(s.word(r))) {
        (*first_seen)[r] = (*previous->first_seen)[*old];
      }
    }
  }
  served->first_seen = std::move(first_seen);
  served->first_loaded = previous != nullptr ? previous->first_loaded : s.version();

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
    std::vector<HistoryEntry> keep;  // alignments to `next` are fitted below
    for (const HistoryEntry& h : previous->history) keep.push_back({h.snapshot, {}, h.first_seen});
    keep.push_back({previous->snapshot, {}, previous->first_seen});
    if (keep.size() > options.history_snapshots) {
      keep.erase(keep.begin(), keep.end() - static_cast<std::ptrdiff_t>(options.history_snapshots));
    }
    for (HistoryEntry& h : keep) {
      if (h.snapshot->dim() != s.dim()) continue;  // a different model: not comparable
      h.alignment = AlignProcrustes(*h.snapshot, s, options.procrustes_top_words);
      served->history.push_back(std::move(h));
    }
  }
  served->quality["prepare_seconds"] = SecondsSince(start);
  return served;
}

}  // namespace streamvec::api

// What a request reads: one snapshot together with what was prepared for it in the background
// before it was swapped in (neighbour index, quality figures, alignments to older snapshots).
// Private to api/.
#ifndef STREAMVEC_API_SRC_SERVED_H_
#define STREAMVEC_API_SRC_SERVED_H_

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ann_index.h"
#include "procrustes.h"
#include "streamvec/api/server.h"
#include "streamvec/api/serving_snapshot.h"

namespace streamvec::api {

// An older snapshot kept for GET /v1/words/{w}/history, with the rotation into the served one.
struct HistoryEntry {
  std::shared_ptr<const ServingSnapshot> snapshot;
  Alignment alignment;  // from `snapshot` into the served snapshot's space
};

// Immutable after Prepare: shared by request threads through shared_ptr<const Served>.
struct Served {
  std::shared_ptr<const ServingSnapshot> snapshot;
  std::shared_ptr<const AnnIndex> index;  // null: exact scan (small vocabulary)
  // {"similarity":[{file,spearman,pearson,pairs,oov_ratio}...], "analogy":{...}, "pip":{...},
  //  "index":{kind, recall_at_10, build_seconds}, "prepare_seconds"}; see api/README.md.
  nlohmann::json quality = nlohmann::json::object();
  std::optional<double> gate_score;   // Spearman on the first similarity file (NaN: absent)
  std::vector<HistoryEntry> history;  // older snapshots, oldest first (same dim only)

  // Top k by cosine to `unit_query` among the first `limit_rows` rows, `exclude` skipped: the
  // HNSW index when there is one and the whole vocabulary is searched, else the exact scan.
  std::vector<ServingSnapshot::Neighbor> Nearest(const float* unit_query, size_t k,
                                                 std::span<const size_t> exclude,
                                                 size_t limit_rows) const;
};

// Builds what `next` needs to be served: the index (above options.exact_max_words, only when
// `build_index`; otherwise it is served by exact scan until WithIndex attaches one), quality on
// the configured files, PIP loss against `previous` (if any) over their shared words, and
// Procrustes alignments of the retained older snapshots (previous's history + previous itself,
// at most options.history_snapshots). Runs on the polling thread; seconds to minutes.
std::shared_ptr<const Served> PrepareServed(std::shared_ptr<const ServingSnapshot> next,
                                            const Served* previous, const ServeOptions& options,
                                            bool build_index = true);

// A copy of `served` with an HNSW index over its snapshot (seconds for tens of thousands of
// words): built after the snapshot is already served, so a new snapshot is never held back.
std::shared_ptr<const Served> WithIndex(const Served& served, const ServeOptions& options);

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_SERVED_H_

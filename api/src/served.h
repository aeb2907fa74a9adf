// What a request reads: one snapshot together with what was prepared for it in the background
// before it was swapped in (neighbour index, quality figures, alignments to older snapshots).
// Private to api/.
#ifndef STREAMVEC_API_SRC_SERVED_H_
#define STREAMVEC_API_SRC_SERVED_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
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

// Per row of a snapshot: the version of the first snapshot of the unbroken run of snapshots this
// server served, up to that one, that all held the row's word (GET /v1/words/{w}).
using FirstSeen = std::vector<uint64_t>;

// An older snapshot kept for GET /v1/words/{w}/history (and ?snapshot=N), with the rotation into
// the served one.
struct HistoryEntry {
  std::shared_ptr<const ServingSnapshot> snapshot;
  Alignment alignment;  // from `snapshot` into the served snapshot's space
  std::shared_ptr<const FirstSeen> first_seen;  // as Served::first_seen when it was served
};

// Immutable after Prepare: shared by request threads through shared_ptr<const Served>.
//
// The index may be *carried over* from an older snapshot: building an HNSW graph takes seconds to
// minutes, snapshots of a live stream come every few seconds, so each new snapshot is served at
// once with the newest index built so far. A carried index only proposes candidates: their words
// are mapped to this snapshot's rows and re-ranked by exact cosine on this snapshot's vectors,
// words the index does not hold (admitted since it was built) are scanned exactly, and words this
// snapshot no longer holds are dropped. Results are therefore always this snapshot's words and
// cosines; only recall depends on how far the vectors moved since the build (measured:
// streamvec_index_recall_at_10).
struct Served {
  std::shared_ptr<const ServingSnapshot> snapshot;
  std::shared_ptr<const AnnIndex> index;  // null: exact scan (small vocabulary)
  // The snapshot `index` was built over: == snapshot when built for it, older when carried over.
  std::shared_ptr<const ServingSnapshot> index_snapshot;
  // Carried index only: snapshot row of each index row's word (kNoRow: the word left), the rows
  // whose words the index lacks (ascending), and those rows' vectors laid out for the exact scan
  // (row i of `unindexed` is snapshot row unindexed_rows[i]; null when there are none).
  static constexpr uint32_t kNoRow = 0xffffffffu;
  std::vector<uint32_t> row_of_index_row;
  std::vector<uint32_t> unindexed_rows;
  std::shared_ptr<const ServingSnapshot> unindexed;
  // {"similarity":[{file,spearman,pearson,pairs,oov_ratio}...], "analogy":{...}, "pip":{...},
  //  "index":{kind, recall_at_10, build_seconds}, "prepare_seconds"}; see api/README.md.
  nlohmann::json quality = nlohmann::json::object();
  std::optional<double> gate_score;   // Spearman on the first similarity file (NaN: absent)
  std::vector<HistoryEntry> history;  // older snapshots, oldest first (same dim only)
  // See FirstSeen; null for a snapshot loaded on demand for a pinned request (outside the chain
  // of served snapshots).
  std::shared_ptr<const FirstSeen> first_seen;
  // Version of the first snapshot this server loaded: a first_seen equal to it only says the
  // word was held since then or earlier (this server did not see the snapshots before).
  uint64_t first_loaded = 0;

  // Top k by cosine to `unit_query` among the first `limit_rows` rows, `exclude` skipped: the
  // HNSW index when there is one (carried or not, see above) and the whole vocabulary is
  // searched, else the exact scan. Sorted by similarity descending, ties by row ascending.
  // `query_row`: the row whose unit vector `unit_query` is (one word's neighbours), where the
  // index's search starts (AnnIndex::Search's start_row) instead of its entry point.
  std::vector<ServingSnapshot::Neighbor> Nearest(const float* unit_query, size_t k,
                                                 std::span<const size_t> exclude, size_t limit_rows,
                                                 std::optional<size_t> query_row = {}) const;
  // True when the index was built over an older snapshot (see above).
  bool IndexCarried() const { return index != nullptr && index_snapshot != snapshot; }
  // The carried index's recall@10 on this snapshot was under ServeOptions::min_carried_recall:
  // Nearest scans exactly until an index built for a newer snapshot is attached (WithIndex).
  bool exact_until_indexed = false;
  // Whether queries over the whole vocabulary use the index (else the exact scan).
  bool UsesIndex() const { return index != nullptr && !exact_until_indexed; }
};

// Gives `to` the index of `from` (built over from.index_snapshot), carried over as described at
// Served: maps the index's words to `to`'s rows and lists `to`'s words the index lacks. Cost: one
// hash lookup per row of either snapshot (tens of ms for 100k words). No index is attached when
// `from` has none, the dimensions differ, or more than a quarter of `to`'s rows are not indexed
// (the exact scan is then as fast).
void CarryIndex(const Served& from, Served* to);

// Mean recall@10 of to.Nearest against the exact scan of to.snapshot over `queries` rows spread
// evenly over the vocabulary (each row excluded from its own list), in [0, 1]; 1 without an index.
// Cost: `queries` exact scans.
double MeasureRecallAt10(const Served& served, size_t queries);

// Builds what `next` needs to be served: `previous`'s index carried over (above
// options.exact_max_words; without one the exact scan serves until WithIndex attaches an index
// built on the index thread), quality on the configured files, PIP loss against `previous` (if
// any) over their shared words, Procrustes alignments of the retained older snapshots
// (previous's history + previous itself, at most options.history_snapshots) and first_seen (one
// hash lookup per row in `previous`). Runs on the polling thread; up to seconds for 100k words
// with analogies configured.
std::shared_ptr<const Served> PrepareServed(std::shared_ptr<const ServingSnapshot> next,
                                            const Served* previous, const ServeOptions& options);

// An HNSW index over `snapshot` (seconds for tens of thousands of words, about a minute for 200k
// on one core): built on the server's index thread while snapshots keep being served.
// Its recall_at_10 is measured (options.recall_queries rows) before it is returned. nullptr when
// `cancel` (may be null) was set during the build (the server stopping).
std::shared_ptr<const AnnIndex> BuildIndex(std::shared_ptr<const ServingSnapshot> snapshot,
                                           const ServeOptions& options,
                                           const std::atomic<bool>* cancel = nullptr);

// The index options.index_dir holds for `snapshot` (IndexPath), if its recall@10 on the
// snapshot (options.recall_queries rows, measured here) is at least options.min_carried_recall.
// Errors: NotFound (options.index_dir unset, or no index saved), InvalidArgument (saved for
// another snapshot), Corruption (AnnIndex::Load), FailedPrecondition (its recall is too low).
StatusOr<std::shared_ptr<const AnnIndex>> LoadSavedIndex(
    std::shared_ptr<const ServingSnapshot> snapshot, const ServeOptions& options);

// Where options.index_dir keeps the index (one: each save replaces it).
std::string IndexPath(const ServeOptions& options);

// A copy of `served` searched by `index`, which was built over `index_snapshot` (carried over
// when that is not served.snapshot). quality["index"] describes it.
std::shared_ptr<const Served> WithIndex(const Served& served,
                                        std::shared_ptr<const AnnIndex> index,
                                        std::shared_ptr<const ServingSnapshot> index_snapshot);

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_SERVED_H_

// Approximate cosine neighbours for large vocabularies: an HNSW graph (Malkov & Yashunin 2018,
// "Efficient and robust approximate nearest neighbor search using Hierarchical Navigable Small
// World graphs", algorithms 1-5) over a snapshot's unit rows: hnswlib's graph, which streamvec
// inserts into and searches with its own loops over hnswlib's structures (Insert and SearchGraph
// in ann_index.cpp: hnswlib's steps with a faster layer-0 search). The graph holds
// each row scalar-quantised (SQ8: int8 codes and one float step, a quarter of the float bytes),
// so its answers are candidates that the caller re-scores with the float rows (Served::Nearest).
// Private to api/: the hnswlib type stays in ann_index.cpp.
#ifndef STREAMVEC_API_SRC_ANN_INDEX_H_
#define STREAMVEC_API_SRC_ANN_INDEX_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "streamvec/api/serving_snapshot.h"
#include "streamvec/base/status.h"

namespace streamvec::api {

struct AnnOptions {
  int m = 16;                   // HNSW links per node (M)
  int ef_construction = 100;    // candidate list while inserting
  int ef_search = 100;          // candidate list while searching (raised to k when k is larger)
  int threads = 1;              // threads inserting rows while building
  // Insert rows with hnswlib's own addPoint instead of streamvec's insertion (the same steps
  // with SearchLayer0 on layer 0, about half the build time): tests and benchmarks compare them.
  bool hnswlib_insert = false;
  // Set (by another thread) to give up a build: Build returns nullptr soon after (each inserting
  // thread checks it between rows). Null: never cancelled.
  const std::atomic<bool>* cancel = nullptr;
};

// Immutable once built: Search is safe from any number of threads at once (hnswlib's searchKnn
// only reads the graph; its visited-list pool has its own lock).
class AnnIndex {
 public:
  // Builds the graph over every row of `snapshot` (labels are its rows; the index keeps its own
  // SQ8 copy of the unit rows, dim + 4 bytes each). Cost: about rows x log(rows) x M distance
  // computations (about 13 s for 220k x 100 at two threads; hnswlib's own addPoint about 19 s).
  // nullptr when options.cancel was set during the build.
  static std::unique_ptr<AnnIndex> Build(const ServingSnapshot& snapshot,
                                         const AnnOptions& options);
  ~AnnIndex();

  // Writes the graph to `path` (hnswlib's format, with its SQ8 rows: about rows x (dim + 4 +
  // 2 M x 4) bytes) and beside it `path`.json: the snapshot it was built for (version, rows,
  // dim, a hash of its words), the options, the recall and the file's size and XXH64. Both go
  // through temporary files renamed into place, the JSON last; the directory is created if it
  // is missing. Errors: IoError.
  Status Save(const std::string& path, const ServingSnapshot& snapshot) const;
  // Reads a graph Save wrote for `snapshot` (the same version, rows, dim and words), with
  // options.ef_search for its searches. Errors: NotFound (no such files), InvalidArgument (saved
  // for another snapshot: which field differs), Corruption (a size or checksum that does not
  // match, or a file hnswlib cannot read). The caller still checks its recall on the snapshot.
  static StatusOr<std::unique_ptr<AnnIndex>> Load(const std::string& path,
                                                  const ServingSnapshot& snapshot,
                                                  const AnnOptions& options);

  // Candidates for the rows closest in cosine to `unit_query` (dim floats, unit length): the
  // best `count` of the graph search's max(ef_search, count) candidates, best first, each with
  // its SQ8 cosine (within a few 1e-3 of the float one; re-score them with the snapshot's rows
  // before ranking). Fewer than `count` for a small vocabulary. Cost: about ef_search x M SQ8
  // distances (tens of microseconds at 200k rows).
  // `start_row`: a row at or near the query (the query word's own row for one word's
  // neighbours): the layer-0 search starts there instead of descending from the entry point
  // through the upper layers. Same recall@10, about 8% less time at 220k rows
  // (bench/knn/search_bench.sh); ignored when the row is not indexed.
  // The search is ours over hnswlib's graph (SearchGraph in ann_index.cpp: hnswlib's steps, with
  // every unvisited neighbour's code prefetched before its distance is computed, and a visited
  // set of one bit a node).
  std::vector<ServingSnapshot::Neighbor> Search(const float* unit_query, size_t count,
                                                std::optional<size_t> start_row = {}) const;
  // The same search by hnswlib's own searchKnn: Search must answer exactly as it does (tests,
  // and the benchmark that compares the two).
  std::vector<ServingSnapshot::Neighbor> SearchWithHnswlib(const float* unit_query,
                                                           size_t count) const;

  // Recall@10 against the exact scan over the snapshot it was built for, as measured by the
  // builder (MeasureRecallAt10 in served.h) and recorded with set_recall_at_10; 0 until then.
  double recall_at_10() const { return recall_at_10_; }
  void set_recall_at_10(double recall) { recall_at_10_ = recall; }
  double build_seconds() const { return build_seconds_; }
  // The search candidate list length (AnnOptions::ef_search, at least 10).
  size_t ef_search() const { return ef_search_; }

 private:
  struct Impl;
  explicit AnnIndex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  double recall_at_10_ = 0;
  double build_seconds_ = 0;
  size_t ef_search_ = 10;
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_ANN_INDEX_H_

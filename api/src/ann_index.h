// Approximate cosine neighbours for large vocabularies: an HNSW graph (Malkov & Yashunin 2018,
// "Efficient and robust approximate nearest neighbor search using Hierarchical Navigable Small
// World graphs", algorithms 1-5) over a snapshot's unit rows, built by hnswlib. Private to api/:
// the hnswlib type stays in ann_index.cpp.
#ifndef STREAMVEC_API_SRC_ANN_INDEX_H_
#define STREAMVEC_API_SRC_ANN_INDEX_H_

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "streamvec/api/serving_snapshot.h"

namespace streamvec::api {

struct AnnOptions {
  int m = 16;                   // HNSW links per node (M)
  int ef_construction = 100;    // candidate list while inserting
  int ef_search = 100;          // candidate list while searching (raised to k when k is larger)
  int threads = 1;              // threads inserting rows while building
  size_t recall_queries = 200;  // rows sampled to measure recall@10 against the exact scan
};

// Immutable once built: Search is safe from any number of threads at once (hnswlib's searchKnn
// only reads the graph; its visited-list pool has its own lock).
class AnnIndex {
 public:
  // Builds the graph over every row of `snapshot` (kept alive by the caller for as long as the
  // index), then measures recall@10 on options.recall_queries rows spread over the vocabulary.
  // Cost: about rows x log(rows) x M distance computations (tens of seconds for 200k x 100).
  static std::unique_ptr<AnnIndex> Build(const ServingSnapshot& snapshot,
                                         const AnnOptions& options);
  ~AnnIndex();

  // The (about) k rows closest in cosine to `unit_query` (dim floats, unit length), rows in
  // `exclude` skipped, best first (ties: row ascending). Fewer than k for a small vocabulary.
  std::vector<ServingSnapshot::Neighbor> Search(const float* unit_query, size_t k,
                                                std::span<const size_t> exclude) const;

  // Mean over sampled rows of |approximate top 10 ∩ exact top 10| / 10 (each row excluded from
  // its own list), in [0, 1].
  double recall_at_10() const { return recall_at_10_; }
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

// Exact cosine nearest neighbours: a full scan of unit-length rows (no approximate index), so
// results are the reference any approximate search is compared with.
#ifndef STREAMVEC_EVAL_NEIGHBORS_H_
#define STREAMVEC_EVAL_NEIGHBORS_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec::eval {

struct Neighbor {
  size_t row = 0;        // row index in the table
  float similarity = 0;  // cosine similarity with the query, in [-1, 1]
};

// Copies rows x dim row-major `vectors` scaled to unit L2 norm (float32, like gensim's
// vectors / norms); all-zero rows stay zero. Shape: rows x dim -> rows x dim.
std::vector<float> NormalizeRows(const float* vectors, size_t rows, int dim);

// The k rows of `unit_rows` (rows x dim, unit length) with the highest dot product with `query`
// (dim floats; pass a unit vector to get cosines), rows listed in `exclude` skipped. Sorted by
// similarity descending, ties by row ascending; fewer than k when the table is smaller.
std::vector<Neighbor> TopKByDot(const float* unit_rows, size_t rows, int dim, const float* query,
                                size_t k, std::span<const size_t> exclude = {});

// A table ready for neighbour queries: unit rows plus an exact word -> row map (first row wins
// for duplicate words). Immutable after construction: const methods are safe from any thread.
class NeighborIndex {
 public:
  explicit NeighborIndex(const Embeddings& embeddings);

  // The k words closest in cosine to `word`, the word itself excluded.
  // Errors: NotFound naming the word when it is not in the table (exact, case-sensitive match).
  StatusOr<std::vector<Neighbor>> Nearest(std::string_view word, size_t k) const;
  // The k rows closest in cosine to `vector` (dim floats, any length; zero -> all similarities 0).
  std::vector<Neighbor> NearestToVector(const float* vector, size_t k) const;

  const std::string& word(size_t row) const { return words_[row]; }
  size_t rows() const { return words_.size(); }
  int dim() const { return dim_; }

 private:
  int dim_;
  std::vector<std::string> words_;
  std::vector<float> unit_rows_;
  std::unordered_map<std::string, size_t> row_of_;
};

}  // namespace streamvec::eval

#endif  // STREAMVEC_EVAL_NEIGHBORS_H_

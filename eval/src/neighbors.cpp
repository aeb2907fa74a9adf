// Exact cosine nearest neighbours by a full scan (see neighbors.h).
#include "streamvec/eval/neighbors.h"

#include <algorithm>
#include <cmath>

namespace streamvec::eval {
namespace {

float Norm(const float* v, int dim) {
  double sum = 0;
  for (int i = 0; i < dim; ++i) sum += static_cast<double>(v[i]) * v[i];
  return static_cast<float>(std::sqrt(sum));
}

bool Better(const Neighbor& x, const Neighbor& y) {
  return x.similarity > y.similarity || (x.similarity == y.similarity && x.row < y.row);
}

}  // namespace

std::vector<float> NormalizeRows(const float* vectors, size_t rows, int dim) {
  std::vector<float> out(vectors, vectors + rows * static_cast<size_t>(dim));
  for (size_t i = 0; i < rows; ++i) {
    float* row = out.data() + i * static_cast<size_t>(dim);
    const float norm = Norm(row, dim);
    if (norm > 0) {
      for (int d = 0; d < dim; ++d) row[d] /= norm;
    }
  }
  return out;
}

std::vector<Neighbor> TopKByDot(const float* unit_rows, size_t rows, int dim, const float* query,
                                size_t k, std::span<const size_t> exclude) {
  std::vector<Neighbor> heap;  // min-heap on Better: heap.front() is the worst kept
  if (k == 0) return heap;
  heap.reserve(k + 1);
  auto worse_first = [](const Neighbor& x, const Neighbor& y) { return Better(x, y); };
  for (size_t i = 0; i < rows; ++i) {
    if (std::find(exclude.begin(), exclude.end(), i) != exclude.end()) continue;
    const float* row = unit_rows + i * static_cast<size_t>(dim);
    float dot = 0;
    for (int d = 0; d < dim; ++d) dot += row[d] * query[d];
    if (std::isnan(dot)) continue;
    const Neighbor candidate{i, dot};
    if (heap.size() < k) {
      heap.push_back(candidate);
      std::push_heap(heap.begin(), heap.end(), worse_first);
    } else if (Better(candidate, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), worse_first);
      heap.back() = candidate;
      std::push_heap(heap.begin(), heap.end(), worse_first);
    }
  }
  std::sort(heap.begin(), heap.end(), Better);
  return heap;
}

NeighborIndex::NeighborIndex(const Embeddings& embeddings)
    : dim_(embeddings.dim),
      words_(embeddings.words),
      unit_rows_(NormalizeRows(embeddings.vectors.data(), embeddings.rows(), embeddings.dim)) {
  row_of_.reserve(words_.size());
  for (size_t i = 0; i < words_.size(); ++i) row_of_.emplace(words_[i], i);
}

StatusOr<std::vector<Neighbor>> NeighborIndex::Nearest(std::string_view word, size_t k) const {
  const auto it = row_of_.find(std::string(word));
  if (it == row_of_.end()) {
    return Status::NotFound("word '" + std::string(word) + "' is not in the vectors (" +
                            std::to_string(words_.size()) + " words, exact match)");
  }
  const size_t self[] = {it->second};
  return TopKByDot(unit_rows_.data(), words_.size(), dim_,
                   unit_rows_.data() + it->second * static_cast<size_t>(dim_), k, self);
}

std::vector<Neighbor> NeighborIndex::NearestToVector(const float* vector, size_t k) const {
  std::vector<float> unit(vector, vector + dim_);
  const float norm = Norm(unit.data(), dim_);
  if (norm > 0) {
    for (float& v : unit) v /= norm;
  }
  return TopKByDot(unit_rows_.data(), words_.size(), dim_, unit.data(), k);
}

}  // namespace streamvec::eval

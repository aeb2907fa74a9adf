#include "ngram_bag.h"

#include <cmath>
#include <cstddef>

#include "streamvec/charmodel/char_model.h"

namespace streamvec::internal {
namespace {

constexpr float kEpsilon = 1e-8f;

}  // namespace

NgramBag::NgramBag(int buckets, int dim, float rate, int max_word_chars)
    : buckets_(buckets), dim_(dim), max_word_chars_(max_word_chars), rate_(rate) {
  rows_.assign(size_t(buckets) * size_t(dim), 0.f);
  accumulators_.assign(size_t(buckets), 0.f);
}

std::vector<std::vector<int32_t>> NgramBag::Ids(const std::vector<std::string_view>& words) const {
  std::vector<std::vector<int32_t>> ids;
  if (empty()) return ids;
  ids.resize(words.size());
  for (size_t i = 0; i < words.size(); ++i) {
    auto r = CharNgramIds(words[i], buckets_, max_word_chars_);
    SV_CHECK(r.ok());
    ids[i] = std::move(r).value();
  }
  return ids;
}

void NgramBag::AddMean(const std::vector<int32_t>& ids, float* y) const {
  const size_t dim = size_t(dim_);
  const float inv = 1.f / static_cast<float>(ids.size());
  for (int32_t r : ids) {
    const float* row = rows_.data() + size_t(r) * dim;
    for (size_t j = 0; j < dim; ++j) y[j] += inv * row[j];
  }
}

void NgramBag::AddMeans(const std::vector<std::vector<int32_t>>& ids, float* out) const {
  for (size_t i = 0; i < ids.size(); ++i) AddMean(ids[i], out + i * size_t(dim_));
}

void NgramBag::Prefetch(const std::vector<int32_t>& ids) const {
  const size_t bytes = size_t(dim_) * sizeof(float);
  for (int32_t r : ids) {
    const char* row = reinterpret_cast<const char*>(rows_.data() + size_t(r) * size_t(dim_));
    for (size_t at = 0; at < bytes; at += 64) __builtin_prefetch(row + at);
    __builtin_prefetch(row + bytes - 1);
    // GCC deletes a loop of prefetches alone (C++'s forward-progress rule, -ffinite-loops:
    // prefetches are no side effect); an empty volatile asm keeps it.
    asm volatile("" : : "r"(row));
  }
}

void NgramBag::Step(const std::vector<int32_t>& ids, const float* d) {
  const size_t dim = size_t(dim_);
  const float inv = 1.f / static_cast<float>(ids.size());
  double mean2 = 0;
  for (size_t j = 0; j < dim; ++j) mean2 += double(d[j]) * d[j];
  const float g2 = static_cast<float>(mean2 / double(dim)) * inv * inv;
  for (int32_t r : ids) {
    float& acc = accumulators_[size_t(r)];
    acc += g2;
    const float step = rate_ * inv / std::sqrt(acc + kEpsilon);
    float* row = rows_.data() + size_t(r) * dim;
    for (size_t j = 0; j < dim; ++j) row[j] -= step * d[j];
  }
}

}  // namespace streamvec::internal

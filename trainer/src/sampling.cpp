#include "streamvec/trainer/sampling.h"

#include <algorithm>
#include <cmath>

#include "streamvec/base/status.h"

namespace streamvec {

void UnigramTable::Build(const std::vector<uint64_t>& counts, double power) {
  SV_CHECK(!counts.empty() && counts.size() < 0xFFFFFFFFull);
  size_ = static_cast<uint32_t>(counts.size());
  std::vector<double> p(size_);
  double sum = 0.0;
  for (uint32_t i = 0; i < size_; ++i) {
    p[i] = counts[i] == 0 ? 0.0 : std::pow(static_cast<double>(counts[i]), power);
    sum += p[i];
  }
  SV_CHECK(sum > 0.0);
  // Vose's alias method: scale to mean 1, pair each under-full column with an over-full one.
  std::vector<uint32_t> small, large;
  for (uint32_t i = 0; i < size_; ++i) {
    p[i] = p[i] * size_ / sum;
    (p[i] < 1.0 ? small : large).push_back(i);
  }
  entries_.assign(size_, Entry{0xFFFFFFFFu, 0});
  auto to_threshold = [](double q) -> uint32_t {
    const double t = std::ldexp(q, 32);
    return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
  };
  while (!small.empty() && !large.empty()) {
    const uint32_t s = small.back();
    small.pop_back();
    const uint32_t l = large.back();
    entries_[s] = Entry{to_threshold(p[s]), l};
    p[l] = (p[l] + p[s]) - 1.0;
    if (p[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // Left-overs are full columns (up to rounding): always keep themselves.
  for (uint32_t i : large) entries_[i] = Entry{0xFFFFFFFFu, i};
  for (uint32_t i : small) entries_[i] = Entry{0xFFFFFFFFu, i};
}

double UnigramTable::Probability(uint32_t id) const {
  double mass = 0.0;
  for (uint32_t i = 0; i < size_; ++i) {
    const double keep = entries_[i].threshold == 0xFFFFFFFFu
                            ? 1.0
                            : std::ldexp(static_cast<double>(entries_[i].threshold), -32);
    if (i == id) mass += keep;
    if (entries_[i].alias == id && entries_[i].alias != i) mass += 1.0 - keep;
  }
  return mass / size_;
}

void DrawNegatives(const UnigramTable& noise, Rng& rng, size_t n, int K, int share, int pool_size,
                   std::vector<uint32_t>* pool, uint32_t* out) {
  SV_CHECK(K >= 0 && share >= 1 && pool_size >= 0);
  if (n == 0 || K == 0) return;
  const size_t k_count = static_cast<size_t>(K);
  const size_t s = static_cast<size_t>(share);
  if (pool_size > 0) {
    pool->resize(static_cast<size_t>(pool_size));
    for (uint32_t& w : *pool) w = noise.Sample(rng.Next());
  }
  const uint32_t p = static_cast<uint32_t>(pool_size);
  const uint32_t* from = pool_size > 0 ? pool->data() : nullptr;
  for (size_t i = 0; i < n; ++i) {
    uint32_t* dst = out + i * k_count;
    if (i % s != 0) {
      std::copy(dst - k_count, dst, dst);
    } else if (from != nullptr) {
      for (size_t k = 0; k < k_count; ++k) dst[k] = from[rng.Below(p)];
    } else {
      for (size_t k = 0; k < k_count; ++k) dst[k] = noise.Sample(rng.Next());
    }
  }
}

double SubsampleKeepProbability(uint64_t count, uint64_t total, double sample) {
  if (sample <= 0.0 || count == 0 || total == 0) return 1.0;
  const double ratio = sample * static_cast<double>(total) / static_cast<double>(count);  // t/f
  const double keep = std::sqrt(ratio) + ratio;
  return keep < 1.0 ? keep : 1.0;
}

std::vector<uint64_t> SubsampleThresholds(const std::vector<uint64_t>& counts, uint64_t total,
                                          double sample) {
  std::vector<uint64_t> thresholds(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    const double keep = SubsampleKeepProbability(counts[i], total, sample);
    thresholds[i] = keep >= 1.0 ? (uint64_t{1} << 32) : static_cast<uint64_t>(std::ldexp(keep, 32));
  }
  return thresholds;
}

}  // namespace streamvec

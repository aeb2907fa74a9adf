#include "streamvec/param/merge.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>

namespace streamvec {

std::string_view MergeRuleName(MergeRule rule) {
  switch (rule) {
    case MergeRule::kDownpour: return "downpour";
    case MergeRule::kAverage: return "average";
    case MergeRule::kSum: return "sum";
    case MergeRule::kAdaSum: return "adasum";
    case MergeRule::kScaledSum:
      return "scaled";
  }
  return "unknown";
}

StatusOr<MergeRule> ParseMergeRule(std::string_view name) {
  for (MergeRule r : {MergeRule::kDownpour, MergeRule::kAverage, MergeRule::kSum,
                      MergeRule::kAdaSum, MergeRule::kScaledSum}) {
    if (name == MergeRuleName(r)) return r;
  }
  return Status::InvalidArgument(
      "--merge must be one of downpour, average, sum, adasum, scaled, not '" + std::string(name) +
      "'");
}

StatusOr<double> ParseMergeScale(std::string_view text) {
  if (text == "auto") return 0.0;
  const std::string s(text);
  char* end = nullptr;
  const double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v > 0.0) || v > 1.0) {
    return Status::InvalidArgument("--merge-scale must be auto or a number in (0, 1], not '" + s +
                                   "'");
  }
  return v;
}

void AdaSumPair(const double* a, const double* b, int dim, double* out) {
  double dot = 0.0, aa = 0.0, bb = 0.0;
  for (int j = 0; j < dim; ++j) {
    dot += a[j] * b[j];
    aa += a[j] * a[j];
    bb += b[j] * b[j];
  }
  const double ca = aa > 0.0 ? 1.0 - dot / (2.0 * aa) : 1.0;
  const double cb = bb > 0.0 ? 1.0 - dot / (2.0 * bb) : 1.0;
  for (int j = 0; j < dim; ++j) out[j] = ca * a[j] + cb * b[j];
}

void AdaSumRound(double* vectors, size_t n, int dim) {
  const size_t d = static_cast<size_t>(dim);
  while (n > 1) {
    size_t kept = 0;
    for (size_t i = 0; i < n; i += 2, ++kept) {
      double* dst = vectors + kept * d;
      if (i + 1 < n) {
        AdaSumPair(vectors + i * d, vectors + (i + 1) * d, dim, dst);
      } else if (dst != vectors + i * d) {
        std::copy(vectors + i * d, vectors + (i + 1) * d, dst);
      }
    }
    n = kept;
  }
}

namespace {

// row[j] += post(sum over the deltas of delta[j]), the sum in double from 0.0 in the deltas'
// order: one or two deltas (most rounds) in loops the compiler vectorises.
template <class Post>
void AddSummed(std::span<const float* const> deltas, size_t d, float* row, Post post) {
  if (deltas.size() == 1) {
    const float* g = deltas[0];
    for (size_t j = 0; j < d; ++j) row[j] = static_cast<float>(row[j] + post(0.0 + g[j]));
    return;
  }
  if (deltas.size() == 2) {
    const float* a = deltas[0];
    const float* b = deltas[1];
    for (size_t j = 0; j < d; ++j) {
      row[j] = static_cast<float>(row[j] + post(0.0 + a[j] + b[j]));
    }
    return;
  }
  for (size_t j = 0; j < d; ++j) {
    double sum = 0.0;
    for (const float* g : deltas) sum += g[j];
    row[j] = static_cast<float>(row[j] + post(sum));
  }
}

}  // namespace

void MergeRound(const MergeOptions& options, std::span<const float* const> deltas, int dim,
                NodeRowRef row) {
  if (deltas.empty()) return;
  const size_t d = static_cast<size_t>(dim);
  if (options.rule == MergeRule::kDownpour) {
    for (const float* g : deltas) {
      double sq = 0.0;
      for (size_t j = 0; j < d; ++j) sq += static_cast<double>(g[j]) * g[j];
      // Capped at float's largest value so that a huge finite delta cannot make G infinite
      // (which would freeze the row for good); its step is then tiny instead.
      const double acc = std::min<double>(*row.accumulator + sq / dim, FLT_MAX);
      *row.accumulator = static_cast<float>(acc);
      const double lr = options.eta / std::sqrt(acc + options.epsilon);
      for (size_t j = 0; j < d; ++j) row.row[j] = static_cast<float>(row.row[j] + lr * g[j]);
    }
    return;
  }
  if (options.rule == MergeRule::kAdaSum && deltas.size() > 1) {
    std::vector<double> all(deltas.size() * d);
    for (size_t i = 0; i < deltas.size(); ++i) {
      std::copy(deltas[i], deltas[i] + d, all.begin() + i * d);
    }
    AdaSumRound(all.data(), deltas.size(), dim);
    for (size_t j = 0; j < d; ++j) row.row[j] = static_cast<float>(row.row[j] + all[j]);
    return;
  }
  // The sum of the deltas, component by component in double (in consumption order), then
  // averaged or scaled: no buffer, so that the node's hottest loop allocates nothing per row.
  switch (options.rule) {
    case MergeRule::kAverage: {
      const double n = static_cast<double>(deltas.size());
      AddSummed(deltas, d, row.row, [n](double x) { return x / n; });
      break;
    }
    case MergeRule::kScaledSum: {
      const double scale = options.scale;
      AddSummed(deltas, d, row.row, [scale](double x) { return x * scale; });
      break;
    }
    default:
      AddSummed(deltas, d, row.row, [](double x) { return x; });
  }
}

MergeBatch::MergeBatch(int dim) : dim_(dim) { SV_CHECK(dim >= 1); }

void MergeBatch::Add(uint64_t key, uint32_t sender, std::span<const float> delta) {
  SV_CHECK(delta.size() == static_cast<size_t>(dim_));
  size_t index;
  if (key < kDenseKeys) {
    if (key >= round_of_key_.size()) {
      round_of_key_.resize(std::max<size_t>(key + 1, 2 * round_of_key_.size()), 0);
    }
    uint32_t& slot = round_of_key_[key];
    if (slot == 0) {
      SV_CHECK(rounds_.size() < UINT32_MAX);
      rounds_.push_back(Round{key, kNoPart, kNoPart});
      slot = static_cast<uint32_t>(rounds_.size());
    }
    index = slot - 1;
  } else {
    auto [it, fresh] = by_key_.try_emplace(key, rounds_.size());
    if (fresh) rounds_.push_back(Round{key, kNoPart, kNoPart});
    index = it->second;
  }
  Round& round = rounds_[index];
  for (uint32_t p = round.head; p != kNoPart; p = parts_[p].next) {
    if (parts_[p].sender != sender) continue;
    float* acc = pool_.data() + parts_[p].offset;
    for (int j = 0; j < dim_; ++j) acc[j] += delta[j];
    return;
  }
  SV_CHECK(parts_.size() < kNoPart);
  const uint32_t part = static_cast<uint32_t>(parts_.size());
  parts_.push_back(Part{sender, kNoPart, pool_.size()});
  if (round.tail == kNoPart) {
    round.head = part;
  } else {
    parts_[round.tail].next = part;
  }
  round.tail = part;
  pool_.insert(pool_.end(), delta.begin(), delta.end());
  ++contributions_;
}

void MergeBatch::Apply(const MergeOptions& options,
                       const std::function<NodeRowRef(uint64_t key)>& row_of) {
  // The rows first, then the merges, each row prefetched a few rounds ahead: a node's rows are
  // tens of MB, and a round's row is a random one of them (a cache miss per line otherwise).
  targets_.clear();
  for (const Round& round : rounds_) targets_.push_back(row_of(round.key));
  constexpr size_t kAhead = 4;
  const size_t row_bytes = static_cast<size_t>(dim_) * sizeof(float);
  const auto prefetch = [&](const NodeRowRef& ref) {
    const char* p = reinterpret_cast<const char*>(ref.row);
    for (size_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(p + b, 1);
    if (ref.accumulator != nullptr) __builtin_prefetch(ref.accumulator, 1);
  };
  for (size_t i = 0; i < std::min(kAhead, targets_.size()); ++i) prefetch(targets_[i]);
  for (size_t i = 0; i < rounds_.size(); ++i) {
    if (i + kAhead < targets_.size()) prefetch(targets_[i + kAhead]);
    deltas_.clear();
    for (uint32_t p = rounds_[i].head; p != kNoPart; p = parts_[p].next) {
      deltas_.push_back(pool_.data() + parts_[p].offset);
    }
    MergeRound(options, deltas_, dim_, targets_[i]);
  }
  Clear();
}

void MergeBatch::Clear() {
  for (const Round& round : rounds_) {
    if (round.key < kDenseKeys) round_of_key_[round.key] = 0;
  }
  rounds_.clear();
  parts_.clear();
  by_key_.clear();
  pool_.clear();
  contributions_ = 0;
}

}  // namespace streamvec

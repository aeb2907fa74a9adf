#include "streamvec/param/count_summary.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_set>

namespace streamvec {

CountSummary::CountSummary(size_t capacity) : capacity_(capacity) {
  SV_CHECK(capacity >= 2);
  index_.reserve(capacity);
}

void CountSummary::MarkChanged(Index::iterator it) {
  if (it->second.changed) return;
  it->second.changed = true;
  changed_words_.push_back(it->first);
}

void CountSummary::Insert(const std::string& word, double count, double error) {
  MarkChanged(index_.emplace(word, Held{count, error}).first);
  by_count_.emplace(count, word);
  removed_.erase(word);
}

void CountSummary::Add(std::string_view word, double weight) {
  SV_CHECK(weight > 0.0 && std::isfinite(weight));
  total_ += weight;
  if (auto it = index_.find(word); it != index_.end()) {
    it->second.count += weight;  // its by_count_ entry is left behind (re-filed at an eviction)
    MarkChanged(it);
    return;
  }
  if (index_.size() >= capacity_) {
    // Space-saving: the smallest counter is evicted and its count becomes the floor (every held
    // count is >= the floor, so this never lowers it). by_count_'s counts are the words' counts
    // when last filed, at most their counts now (counts only grow): a first entry whose count
    // moved since is re-filed under its count and the first entry looked at again; one that did
    // not move is below or equal to every other word's count now, ties in word order: the victim.
    auto victim = by_count_.begin();
    for (auto held = index_.find(victim->second); held->second.count != victim->first;
         victim = by_count_.begin(), held = index_.find(victim->second)) {
      auto node = by_count_.extract(victim);
      node.value().first = held->second.count;
      by_count_.insert(std::move(node));
    }
    floor_ = std::max(floor_, victim->first);
    index_.erase(victim->second);
    removed_.insert(victim->second);
    by_count_.erase(victim);
  }
  Insert(std::string(word), floor_ + weight, floor_);
}

Status CountSummary::AddPushed(std::span<const ParamRecord> records) {
  for (size_t i = 0; i < records.size(); ++i) {
    const ParamRecord& r = records[i];
    if (!r.has_count) continue;
    if (r.count_error != 0.0 || !std::isfinite(r.count) || r.count < 0.0) {
      return Status::InvalidArgument("record " + std::to_string(i) + " (word '" + r.word +
                                     "'): a pushed count must be an exact, finite, non-negative "
                                     "occurrence count with error 0");
    }
  }
  for (const ParamRecord& r : records) {
    if (r.has_count && r.count > 0.0) Add(r.word, r.count);
  }
  return Status::Ok();
}

void CountSummary::Merge(const CountSummary& other_in) {
  // The bound's proof needs the other's floor to be backed by at least k counters' worth of
  // weight (its own invariant with k' >= k).
  SV_CHECK(other_in.capacity_ >= capacity_);
  const CountSummary copy = &other_in == this ? other_in : CountSummary(2);
  const CountSummary& other = &other_in == this ? copy : other_in;

  // Per word of the union: G = the Misra-Gries counters (c - m) summed, L = the guaranteed
  // counts (c - e) summed.
  struct Merged {
    double g = 0.0;
    double lower = 0.0;
  };
  std::unordered_map<std::string, Merged> merged;
  merged.reserve(index_.size() + other.index_.size());
  for (const CountSummary* s : {static_cast<const CountSummary*>(this), &other}) {
    for (const auto& [word, held] : s->index_) {
      Merged& m = merged[word];
      m.g += held.count - s->floor_;
      m.lower += held.count - held.error;
    }
  }
  // C: the k-th largest G (0 when fewer than k words): after subtracting it at most k - 1
  // counters stay positive.
  double c_k = 0.0;
  if (merged.size() >= capacity_) {
    std::vector<double> gs;
    gs.reserve(merged.size());
    for (const auto& [word, m] : merged) gs.push_back(m.g);
    std::nth_element(gs.begin(), gs.begin() + static_cast<std::ptrdiff_t>(capacity_ - 1),
                     gs.end(), std::greater<double>());
    c_k = gs[capacity_ - 1];
  }
  const double floor = floor_ + other.floor_ + c_k;
  for (const auto& [word, held] : index_) {  // every word held before may leave (Insert: stays)
    removed_.insert(word);
  }
  changed_words_.clear();  // every word kept is inserted again, and marked
  index_.clear();
  by_count_.clear();
  for (const auto& [word, m] : merged) {
    const double g = m.g - c_k;
    if (!(g > 0.0)) continue;
    const double count = g + floor;
    const double lower = std::max(m.lower, g);
    Insert(word, count, std::clamp(count - lower, 0.0, floor));
  }
  total_ += other.total_;
  floor_ = floor;
}

double CountSummary::Estimate(std::string_view word) const {
  auto it = index_.find(word);
  return it == index_.end() ? floor_ : it->second.count;
}

double CountSummary::Guaranteed(std::string_view word) const {
  auto it = index_.find(word);
  return it == index_.end() ? 0.0 : it->second.count - it->second.error;
}

void CountSummary::CountOf(std::string_view word, double* count, double* error) const {
  auto it = index_.find(word);
  *count = it == index_.end() ? floor_ : it->second.count;
  *error = it == index_.end() ? floor_ : it->second.error;
}

std::vector<CountEntry> CountSummary::Entries() const {
  std::vector<CountEntry> out;
  out.reserve(index_.size());
  for (const auto& [word, h] : index_) out.push_back(CountEntry{word, h.count, h.error});
  std::sort(out.begin(), out.end(), [](const CountEntry& a, const CountEntry& b) {
    return a.count > b.count || (a.count == b.count && a.word < b.word);
  });
  return out;
}

std::vector<ParamRecord> CountSummary::TakeChanges(double min_growth) {
  std::sort(changed_words_.begin(), changed_words_.end());
  changed_words_.erase(std::unique(changed_words_.begin(), changed_words_.end()),
                       changed_words_.end());
  std::vector<ParamRecord> records;
  records.reserve(changed_words_.size() + removed_.size());
  auto changed = changed_words_.begin();
  auto removed = removed_.begin();
  // Both lists are ordered: merge them into one word-ordered list.
  while (changed != changed_words_.end() || removed != removed_.end()) {
    ParamRecord r;
    if (removed == removed_.end() || (changed != changed_words_.end() && *changed < *removed)) {
      const auto it = index_.find(*changed);
      if (it == index_.end() || !it->second.changed) {  // evicted since it was marked
        ++changed;
        continue;
      }
      it->second.changed = false;
      const double last = it->second.reported;
      if (min_growth > 0.0 && last > 0.0 && it->second.count >= last &&
          it->second.count < last * (1.0 + min_growth)) {
        ++changed;  // not grown enough since its last report: the next change looks again
        continue;
      }
      it->second.reported = it->second.count;
      r.word = std::move(*changed++);
      r.has_count = true;
      r.count = it->second.count;
      r.count_error = it->second.error;
    } else {
      r.word = *removed++;
      r.removed = true;
    }
    records.push_back(std::move(r));
  }
  changed_words_.clear();
  removed_.clear();
  return records;
}

std::vector<std::string> CountSummary::TakeRemoved() {
  std::vector<std::string> words(removed_.begin(), removed_.end());
  removed_.clear();
  return words;
}

std::vector<ParamRecord> CountSummary::ToRecords() const {
  std::vector<ParamRecord> records;
  for (CountEntry& e : Entries()) {
    ParamRecord r;
    r.word = std::move(e.word);
    r.has_count = true;
    r.count = e.count;
    r.count_error = e.error;
    records.push_back(std::move(r));
  }
  return records;
}

StatusOr<CountSummary> CountSummary::FromEntries(size_t capacity,
                                                 std::span<const CountEntry> entries,
                                                 double total, double floor) {
  if (capacity < 2) return Status::InvalidArgument("capacity must be >= 2");
  if (entries.size() > capacity) {
    return Status::InvalidArgument(std::to_string(entries.size()) + " entries exceed capacity " +
                                   std::to_string(capacity));
  }
  if (!std::isfinite(total) || !std::isfinite(floor) || total < 0.0 || floor < 0.0) {
    return Status::InvalidArgument("total and floor must be finite and >= 0");
  }
  CountSummary s(capacity);
  double excess = 0.0;  // sum of (c - m)
  for (size_t i = 0; i < entries.size(); ++i) {
    const CountEntry& e = entries[i];
    const std::string name = "entry " + std::to_string(i) + " (word '" + e.word + "')";
    if (e.word.empty()) {
      return Status::InvalidArgument("entry " + std::to_string(i) + ": empty word");
    }
    if (!std::isfinite(e.count) || !std::isfinite(e.error)) {
      return Status::InvalidArgument(name + ": count or error is not finite");
    }
    if (e.error < 0.0 || e.error > floor) {
      return Status::InvalidArgument(name + ": error " + std::to_string(e.error) +
                                     " is outside [0, floor " + std::to_string(floor) + "]");
    }
    if (e.count < floor || e.count <= 0.0) {
      return Status::InvalidArgument(name + ": count " + std::to_string(e.count) +
                                     " is not positive or is below the floor " +
                                     std::to_string(floor));
    }
    if (s.index_.count(e.word) != 0) return Status::InvalidArgument(name + ": repeated");
    s.Insert(e.word, e.count, e.error);
    excess += e.count - floor;
  }
  // P = n - sum(c - m) - k m >= 0, up to rounding of non-integer weights.
  const double p = total - excess - static_cast<double>(capacity) * floor;
  if (p < -1e-9 * std::max(1.0, total)) {
    return Status::InvalidArgument("total " + std::to_string(total) +
                                   " is too small for the counts and floor " +
                                   std::to_string(floor) + " it summarises");
  }
  s.total_ = total;
  s.floor_ = floor;
  return s;
}

}  // namespace streamvec

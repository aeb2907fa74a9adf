#include "streamvec/param/count_summary.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>

#include "streamvec/base/hash_word.h"

namespace streamvec {

CountSummary::CountSummary(size_t capacity) : capacity_(capacity) {
  SV_CHECK(capacity >= 2 && capacity < WordSlotIndex::kNone);
  Clear();
}

void CountSummary::Clear() {
  index_.Init(static_cast<uint32_t>(capacity_));
  words_.clear();
  held_.clear();
  free_.clear();
  heap_.clear();
  changed_.clear();
}

uint32_t CountSummary::Find(std::string_view word) const {
  return index_.Find(word, HashWord(word), words_);
}

void CountSummary::MarkChanged(uint32_t slot) {
  if (held_[slot].changed) return;
  held_[slot].changed = true;
  changed_.push_back(slot);
}

bool CountSummary::HeapLess(uint32_t a, uint32_t b) const {
  return held_[a].filed < held_[b].filed ||
         (held_[a].filed == held_[b].filed && words_[a] < words_[b]);
}

void CountSummary::SiftUp(size_t pos) {
  const uint32_t slot = heap_[pos];
  while (pos > 0) {
    const size_t parent = (pos - 1) / 2;
    if (!HeapLess(slot, heap_[parent])) break;
    heap_[pos] = heap_[parent];
    pos = parent;
  }
  heap_[pos] = slot;
}

void CountSummary::SiftDown(size_t pos) {
  const uint32_t slot = heap_[pos];
  const size_t n = heap_.size();
  while (true) {
    size_t child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && HeapLess(heap_[child + 1], heap_[child])) ++child;
    if (!HeapLess(heap_[child], slot)) break;
    heap_[pos] = heap_[child];
    pos = child;
  }
  heap_[pos] = slot;
}

void CountSummary::Insert(std::string_view word, uint64_t hash, double count, double error) {
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
    words_[slot].assign(word);
    held_[slot] = Held{};
  } else {
    slot = static_cast<uint32_t>(words_.size());
    words_.emplace_back(word);
    held_.emplace_back();
  }
  Held& h = held_[slot];
  h.in_use = true;
  h.count = count;
  h.error = error;
  h.filed = count;
  index_.Insert(hash, slot);
  heap_.push_back(slot);
  SiftUp(heap_.size() - 1);
  MarkChanged(slot);
  removed_.erase(words_[slot]);
}

void CountSummary::Add(std::string_view word, double weight) {
  SV_CHECK(weight > 0.0 && std::isfinite(weight));
  total_ += weight;
  const uint64_t hash = HashWord(word);
  if (const uint32_t slot = index_.Find(word, hash, words_); slot != WordSlotIndex::kNone) {
    held_[slot].count += weight;  // its filed count is left behind (re-filed at an eviction)
    MarkChanged(slot);
    return;
  }
  if (index_.size() >= capacity_) {
    // Space-saving: the smallest counter is evicted and its count becomes the floor (every held
    // count is >= the floor, so this never lowers it). Filed counts are the words' counts when
    // last filed, at most their counts now (counts only grow): a first slot whose count moved
    // since is re-filed under its count and the first slot looked at again; one that did not
    // move is below or equal to every other word's count now, ties in word order: the victim.
    uint32_t victim = heap_.front();
    while (held_[victim].count != held_[victim].filed) {
      held_[victim].filed = held_[victim].count;
      SiftDown(0);
      victim = heap_.front();
    }
    floor_ = std::max(floor_, held_[victim].filed);
    index_.Erase(HashWord(words_[victim]), victim);
    const uint32_t last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) {
      heap_[0] = last;
      SiftDown(0);
    }
    held_[victim].changed = false;
    held_[victim].in_use = false;
    removed_.insert(std::move(words_[victim]));
    words_[victim].clear();
    free_.push_back(victim);
  }
  Insert(word, hash, floor_ + weight, floor_);
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
    for (size_t slot = 0; slot < s->words_.size(); ++slot) {
      if (!s->held_[slot].in_use) continue;
      const Held& held = s->held_[slot];
      Merged& m = merged[s->words_[slot]];
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
  for (size_t slot = 0; slot < words_.size(); ++slot) {  // every word held before may leave
    if (held_[slot].in_use) removed_.insert(std::move(words_[slot]));  // (Insert: stays)
  }
  Clear();  // every word kept is inserted again, and marked
  for (const auto& [word, m] : merged) {
    const double g = m.g - c_k;
    if (!(g > 0.0)) continue;
    const double count = g + floor;
    const double lower = std::max(m.lower, g);
    Insert(word, HashWord(word), count, std::clamp(count - lower, 0.0, floor));
  }
  total_ += other.total_;
  floor_ = floor;
}

double CountSummary::Estimate(std::string_view word) const {
  const uint32_t slot = Find(word);
  return slot == WordSlotIndex::kNone ? floor_ : held_[slot].count;
}

double CountSummary::Guaranteed(std::string_view word) const {
  const uint32_t slot = Find(word);
  return slot == WordSlotIndex::kNone ? 0.0 : held_[slot].count - held_[slot].error;
}

void CountSummary::CountOf(std::string_view word, double* count, double* error) const {
  const uint32_t slot = Find(word);
  *count = slot == WordSlotIndex::kNone ? floor_ : held_[slot].count;
  *error = slot == WordSlotIndex::kNone ? floor_ : held_[slot].error;
}

std::vector<CountEntry> CountSummary::Entries() const {
  std::vector<CountEntry> out;
  out.reserve(index_.size());
  for (size_t slot = 0; slot < words_.size(); ++slot) {
    if (!held_[slot].in_use) continue;
    out.push_back(CountEntry{words_[slot], held_[slot].count, held_[slot].error});
  }
  std::sort(out.begin(), out.end(), [](const CountEntry& a, const CountEntry& b) {
    return a.count > b.count || (a.count == b.count && a.word < b.word);
  });
  return out;
}

std::vector<ParamRecord> CountSummary::TakeChanges(double min_growth) {
  // The flagged slots (a slot evicted since it was listed is unflagged; one listed twice, after
  // an eviction and a new word, is taken once), in word order.
  std::vector<uint32_t> slots;
  slots.reserve(changed_.size());
  for (const uint32_t slot : changed_) {
    if (!held_[slot].changed) continue;
    held_[slot].changed = false;
    slots.push_back(slot);
  }
  changed_.clear();
  std::sort(slots.begin(), slots.end(),
            [this](uint32_t a, uint32_t b) { return words_[a] < words_[b]; });
  std::vector<ParamRecord> records;
  records.reserve(slots.size() + removed_.size());
  auto changed = slots.begin();
  auto removed = removed_.begin();
  // Both lists are ordered: merge them into one word-ordered list.
  while (changed != slots.end() || removed != removed_.end()) {
    ParamRecord r;
    if (removed == removed_.end() || (changed != slots.end() && words_[*changed] < *removed)) {
      Held& h = held_[*changed];
      const double last = h.reported;
      if (min_growth > 0.0 && last > 0.0 && h.count >= last &&
          h.count < last * (1.0 + min_growth)) {
        ++changed;  // not grown enough since its last report: the next change looks again
        continue;
      }
      h.reported = h.count;
      r.word = words_[*changed++];
      r.has_count = true;
      r.count = h.count;
      r.count_error = h.error;
    } else {
      r.word = *removed++;
      r.removed = true;
    }
    records.push_back(std::move(r));
  }
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
    if (s.Find(e.word) != WordSlotIndex::kNone) {
      return Status::InvalidArgument(name + ": repeated");
    }
    s.Insert(e.word, HashWord(e.word), e.count, e.error);
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

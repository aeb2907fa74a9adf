// A bounded, mergeable summary of word counts: the node's global vocabulary counts, built from
// the trainers' pushed count deltas and from other summaries (issue 20).
//
// Space-saving (Metwally, Agrawal & El Abbadi 2005) with weights, merged as Agarwal et al. 2012,
// "Mergeable Summaries" (section 2: the Misra-Gries merge, and the isomorphism between
// space-saving with k counters and Misra-Gries with k - 1). A summary of capacity k holds at
// most k words, each with a count c (an over-estimate) and an error e (c - e is a guaranteed
// under-estimate), plus two figures of the whole summary: total n (the weight summarised) and
// floor m (no word that is not held has a true count above m). For every word w with true
// count f(w) in the summarised stream:
//
//   held:      c - e <= f(w) <= c,   0 <= e <= m,   c >= m
//   not held:  f(w) <= m
//   always:    m <= (n - sum over held words of (c - m)) / k  <=  n / k
//
// so every word with f(w) > n / k is held, and every estimate is within n / k of the truth.
// Proof sketch (the invariant P = n - sum(c - m) - k m >= 0): a weighted space-saving update
// leaves P unchanged (a hit adds w to n and to one c; an insertion into free room adds w to both;
// an eviction of the smallest counter c_min raises m to c_min and every held c - m falls by
// c_min - m, the new word entering at c_min + w); a merge is the Misra-Gries merge of the
// summaries' c - m counters (add them, subtract the k-th largest C, drop the non-positive), which
// lowers their sum by at least k C while m grows by C (Agarwal et al.'s argument for k - 1
// counters), and the merged floor is m_A + m_B + C.
//
// Counts are doubles: integer weights are exact up to 2^53, and decayed (scaled) counts work as
// well. Memory is O(k) words; a look-up is one probe of a flat hash table, an update O(1), an
// eviction O(log k) (a binary heap with lazily re-filed counts). Not thread-safe: one thread
// drives an instance.
#ifndef STREAMVEC_PARAM_COUNT_SUMMARY_H_
#define STREAMVEC_PARAM_COUNT_SUMMARY_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/base/word_slot_index.h"
#include "streamvec/param/protocol.h"

namespace streamvec {

// One held word: count c and error e (c - e <= f <= c).
struct CountEntry {
  std::string word;
  double count = 0.0;
  double error = 0.0;
};

class CountSummary {
 public:
  // capacity >= 2 words (SV_CHECK).
  explicit CountSummary(size_t capacity);

  // Counts `weight` > 0 (finite; SV_CHECK) more occurrences of `word`: weighted space-saving.
  // A word not held enters at floor + weight with error floor, evicting the held word with the
  // smallest count (ties: the smallest word, bytewise) when the summary is full. O(log k).
  void Add(std::string_view word, double weight = 1.0);

  // Adds the count records of a push (exact occurrences since the trainer's previous push,
  // count_error 0, as ParamRecord carries them): Add(word, count) for each record with a
  // positive count. The result is a summary of this stream followed by the pushed words, with
  // every bound above. InvalidArgument (and nothing added) if a record's count_error is not 0.
  Status AddPushed(std::span<const ParamRecord> records);

  // Merges `other` (a summary of another stream, of capacity >= this one's: SV_CHECK) into this
  // one: afterwards this is a summary of both streams with this capacity and the bounds above
  // (Agarwal et al. 2012, section 2). Holds at most k - 1 words after a merge that had to drop
  // some. O((k + k') log k).
  void Merge(const CountSummary& other);

  // The upper estimate c of `word` (floor() when not held) and the guaranteed count c - e (0 when
  // not held).
  double Estimate(std::string_view word) const;
  double Guaranteed(std::string_view word) const;
  bool Contains(std::string_view word) const { return Find(word) != WordSlotIndex::kNone; }
  // Estimate and Guaranteed in one look-up: c and its error e = c - (c - e) of a held word, or
  // floor() and floor() for a word not held (what the two give for it).
  void CountOf(std::string_view word, double* count, double* error) const;

  size_t size() const { return index_.size(); }
  size_t capacity() const { return capacity_; }
  double total() const { return total_; }  // n: the weight summarised
  double floor() const { return floor_; }  // m: bound on any word not held, and on every error

  // The held words, largest count first (ties: by word).
  std::vector<CountEntry> Entries() const;
  // The held words as vocabulary records for `<prefix>.params` (count and count_error set).
  std::vector<ParamRecord> ToRecords() const;

  // What changed since the last call (or since construction), as vocabulary records for
  // `<prefix>.params`: a count record (count, count_error) for every held word whose count
  // changed, a removed record for every word held at some point since and not now (evicted, or
  // dropped by a merge) that TakeRemoved has not taken, in word order; then forgets them. A word
  // evicted and added back in the interval gets a count record; after FromEntries every held
  // word counts as changed (a restored node republishes its vocabulary). Memory: one entry per
  // change until the call (a word's count changes are marked on the word, once).
  // With min_growth g > 0, a word whose count was reported before is reported again only once
  // its count reached (1 + g) times the count last reported, or fell (a merge) below it (a
  // frequent word's count changes at every call, and a receiver that weighs words by count
  // needs it to a relative precision); a word held anew (entered, or back after an eviction)
  // and every removal are always reported.
  std::vector<ParamRecord> TakeChanges(double min_growth = 0.0);

  // The words that left since the last TakeRemoved or TakeChanges (evicted, or dropped by a
  // merge, and not held now), in word order, and forgets them: TakeChanges then reports counts
  // only. For a receiver that must act on removals at once (a node shard drops an evicted
  // word's rows before it merges the next batch) and publishes count changes less often.
  std::vector<std::string> TakeRemoved();

  // Rebuilds a summary from Entries(), total() and floor() (a snapshot, or a summary sent whole).
  // InvalidArgument naming the entry for anything that breaks the invariants above: more
  // entries than capacity, an empty or repeated word, a non-finite or negative figure, error
  // outside [0, floor], count below floor, or a total too small for the floor.
  static StatusOr<CountSummary> FromEntries(size_t capacity, std::span<const CountEntry> entries,
                                            double total, double floor);

 private:
  // A held word's figures, in the slot the word holds (words_[slot] is the word; a slot not in
  // use is listed in free_).
  struct Held {
    bool in_use = false;
    double count = 0.0;
    double error = 0.0;
    double reported = 0.0;  // the count TakeChanges last reported (0: not since it was held)
    double filed = 0.0;     // its count as of its last filing in the eviction heap (<= count)
    bool changed = false;   // listed in changed_ since the last TakeChanges
  };
  uint32_t Find(std::string_view word) const;
  void MarkChanged(uint32_t slot);
  // Holds `word` (not held; `hash` its HashWord) with count and error, marked changed.
  void Insert(std::string_view word, uint64_t hash, double count, double error);
  void Clear();
  // heap_ ordered by (filed, word), the smallest first: the eviction order.
  bool HeapLess(uint32_t a, uint32_t b) const;
  void SiftUp(size_t pos);
  void SiftDown(size_t pos);
  size_t capacity_;
  double total_ = 0.0;
  double floor_ = 0.0;
  // Word -> slot (a flat open-addressing table, base/word_slot_index.h), and the slots.
  WordSlotIndex index_;
  std::vector<std::string> words_;
  std::vector<Held> held_;
  std::vector<uint32_t> free_;
  // A binary min-heap of the held slots by (filed count, word). A word's filed count is its count
  // when last filed (Insert, or an eviction that found it stale; an Add does not re-file it), at
  // most its count now: Add evicts the first slot whose filed count is current (see Add).
  std::vector<uint32_t> heap_;
  // Since the last TakeChanges: slots whose count changed (each once while its flag is set; a
  // slot evicted since is unflagged, and listed again if a new word takes it), and words that
  // left.
  std::vector<uint32_t> changed_;
  std::set<std::string> removed_;
};

}  // namespace streamvec

#endif  // STREAMVEC_PARAM_COUNT_SUMMARY_H_

// A word -> slot index over a slot -> word vector the owner keeps (the streaming learner's
// vocabulary, a parameter node's rows): open addressing with linear probing and backward-shift
// deletion (Knuth, TAOCP vol. 3, 6.4, Algorithm R), in one flat array of 8-byte buckets at load
// <= 1/2. It replaces a node-based std::unordered_map: one lookup per token is the learner's
// counting thread's hottest operation, one per pushed row a node's, and a flat table costs one
// cache miss where the node map cost two or three.
//
// Hashes are HashWord's (base/hash_word.h), computed by the caller. The index holds slot numbers
// only; the words themselves stay in the owner's slot -> word vector, which Find compares against.
// Not thread-safe.
#ifndef STREAMVEC_BASE_WORD_SLOT_INDEX_H_
#define STREAMVEC_BASE_WORD_SLOT_INDEX_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace streamvec {

class WordSlotIndex {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  // Room for `capacity` words without growing; empties the index. The buckets are written once
  // here (resident). Call it before any other method.
  void Init(uint32_t capacity) {
    size_t buckets = 16;
    while (buckets < 2 * static_cast<size_t>(capacity)) buckets *= 2;
    buckets_.assign(buckets, Bucket{0, kNone});
    mask_ = static_cast<uint32_t>(buckets - 1);
    size_ = 0;
  }

  // The slot of `word` (whose HashWord is `hash`), or kNone; words[slot] is the word of each slot.
  uint32_t Find(std::string_view word, uint64_t hash, const std::vector<std::string>& words) const {
    const uint32_t h = static_cast<uint32_t>(hash);
    for (uint32_t i = h & mask_;; i = (i + 1) & mask_) {
      const Bucket& b = buckets_[i];
      if (b.slot == kNone) return kNone;
      if (b.hash == h && words[b.slot] == word) return b.slot;
    }
  }

  // Adds `slot` under `hash`; the word must not be present. Past Init's capacity the buckets
  // double (every entry moved once: amortised O(1)).
  void Insert(uint64_t hash, uint32_t slot) {
    if (2 * (size_ + 1) > buckets_.size()) Grow();
    const uint32_t h = static_cast<uint32_t>(hash);
    uint32_t i = h & mask_;
    while (buckets_[i].slot != kNone) i = (i + 1) & mask_;
    buckets_[i] = Bucket{h, slot};
    ++size_;
  }

  // Removes `slot`, present under `hash`.
  void Erase(uint64_t hash, uint32_t slot) {
    uint32_t i = static_cast<uint32_t>(hash) & mask_;
    while (buckets_[i].slot != slot) i = (i + 1) & mask_;
    // Backward shift: move later entries of the probe run into the hole where that keeps each
    // reachable from its home bucket.
    for (uint32_t j = (i + 1) & mask_; buckets_[j].slot != kNone; j = (j + 1) & mask_) {
      const uint32_t home = buckets_[j].hash & mask_;
      // Entry j may move to i unless its home lies cyclically in (i, j].
      const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stays) {
        buckets_[i] = buckets_[j];
        i = j;
      }
    }
    buckets_[i] = Bucket{0, kNone};
    --size_;
  }

  // Hints for a lookup to come: prefetch the home bucket of `hash`; the slot in it (kNone if
  // empty), which is the word's slot unless another word's probe run occupies the bucket.
  void PrefetchHome(uint64_t hash) const {
    __builtin_prefetch(buckets_.data() + (static_cast<uint32_t>(hash) & mask_));
  }
  uint32_t HomeSlot(uint64_t hash) const {
    return buckets_[static_cast<uint32_t>(hash) & mask_].slot;
  }

  size_t size() const { return size_; }
  size_t MemoryBytes() const { return buckets_.capacity() * sizeof(Bucket); }

 private:
  void Grow() {
    std::vector<Bucket> old = std::move(buckets_);
    const size_t size = size_;
    Init(static_cast<uint32_t>(std::max<size_t>(old.size(), 8)));  // twice the buckets
    for (const Bucket& b : old) {
      if (b.slot == kNone) continue;
      uint32_t i = b.hash & mask_;
      while (buckets_[i].slot != kNone) i = (i + 1) & mask_;
      buckets_[i] = b;
    }
    size_ = size;
  }
  struct Bucket {
    uint32_t hash;  // low 32 bits of Hash(word): the home bucket and a cheap first compare
    uint32_t slot;  // kNone: empty
  };
  std::vector<Bucket> buckets_;
  uint32_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace streamvec

#endif  // STREAMVEC_BASE_WORD_SLOT_INDEX_H_

// FilteredWordMap: words -> values, with a one-bit-a-word filter in front of the map (private
// to trainer/; ParamClient keeps the shards' published rows and counts in two of them). Most
// words a trainer asks for are rare ones no shard has published, and the filter answers those
// without the map's cache misses (a Bloom filter with one hash: Bloom 1970).
// Not thread-safe.
#ifndef STREAMVEC_TRAINER_SRC_FILTERED_WORD_MAP_H_
#define STREAMVEC_TRAINER_SRC_FILTERED_WORD_MAP_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "streamvec/base/hash_word.h"

namespace streamvec {

// One bit a word (the low bits of HashWord), 256 KiB: MayContain is false for a word never
// added since the last Clear, and true for one added (and for a few others).
class WordFilter {
 public:
  void Add(std::string_view word) {
    const size_t b = Bit(word);
    bits_[b >> 6] |= uint64_t{1} << (b & 63);
  }
  bool MayContain(std::string_view word) const {
    const size_t b = Bit(word);
    return (bits_[b >> 6] >> (b & 63)) & 1u;
  }
  void Clear() { std::fill(bits_.begin(), bits_.end(), 0); }

 private:
  static constexpr size_t kBits = size_t{1} << 21;
  static size_t Bit(std::string_view word) {
    return static_cast<size_t>(HashWord(word)) & (kBits - 1);
  }
  std::vector<uint64_t> bits_ = std::vector<uint64_t>(kBits / 64, 0);
};

// Words -> V, at most capacity() words, looked up by string_view (std::hash of a string and of
// its view agree: a look-up costs no string allocation). Most look-ups of absent words stop at
// a WordFilter, without the map's cache misses. A word that leaves the map keeps its bit (a false
// positive costs one map look-up); the filter is rebuilt from the map once the words added since
// the last rebuild outnumber twice the map's size.
template <typename V>
class FilteredWordMap {
 public:
  void set_capacity(size_t words) { capacity_ = words; }
  size_t capacity() const { return capacity_; }
  size_t size() const { return map_.size(); }
  // `word`'s value, or nullptr.
  V* Find(std::string_view word) {
    if (!filter_.MayContain(word)) return nullptr;
    const auto it = map_.find(word);
    return it == map_.end() ? nullptr : &it->second;
  }
  // `word`'s value, added value-initialised if absent while the map holds fewer than
  // capacity() words; nullptr if absent and the map is full.
  V* FindOrAdd(std::string_view word) {
    if (V* v = Find(word)) return v;
    if (map_.size() >= capacity_) return nullptr;
    V* v = &map_.emplace(std::string(word), V()).first->second;
    if (++adds_ > 2 * std::max<size_t>(map_.size(), 4096)) {
      filter_.Clear();
      for (const auto& [w, value] : map_) filter_.Add(w);
      adds_ = 0;
    }
    filter_.Add(word);
    return v;
  }
  void Erase(std::string_view word) {
    if (!filter_.MayContain(word)) return;
    const auto it = map_.find(word);
    if (it != map_.end()) map_.erase(it);
  }
  void Clear() {
    map_.clear();
    filter_.Clear();
    adds_ = 0;
  }

 private:
  struct WordHash {
    using is_transparent = void;
    size_t operator()(std::string_view w) const { return std::hash<std::string_view>{}(w); }
  };
  std::unordered_map<std::string, V, WordHash, std::equal_to<>> map_;
  WordFilter filter_;
  size_t adds_ = 0;
  size_t capacity_ = 0;
};

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_SRC_FILTERED_WORD_MAP_H_

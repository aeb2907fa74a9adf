#include "streamvec/trainer/vocabulary.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "streamvec/base/hash_word.h"
#include "streamvec/base/status.h"

namespace streamvec {

void WordIndex::Reserve(size_t words) {
  size_t slots = std::max<size_t>(16, slots_.size());
  while ((words + 1) * 2 > slots) slots *= 2;
  if (slots != slots_.size()) Rehash(slots);
}

void WordIndex::Insert(std::string_view word, uint32_t id) {
  if ((size_ + 1) * 2 > slots_.size()) Rehash(std::max<size_t>(16, slots_.size() * 2));
  const uint64_t h = HashWord(word);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i].id != kNotFound) i = (i + 1) & mask;
  slots_[i] = Slot{h, word.data(), static_cast<uint32_t>(word.size()), id};
  ++size_;
}

uint32_t WordIndex::Find(std::string_view word) const {
  if (slots_.empty()) return kNotFound;
  const uint64_t h = HashWord(word);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id == kNotFound) return kNotFound;
    if (s.hash == h && std::string_view(s.data, s.length) == word) return s.id;
  }
}

void WordIndex::Rehash(size_t slots) {
  BigVector<Slot> old = std::move(slots_);
  slots_.assign(slots, Slot{0, nullptr, 0, kNotFound});
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.id == kNotFound) continue;
    size_t i = s.hash & mask;
    while (slots_[i].id != kNotFound) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

Vocabulary::Vocabulary(std::vector<std::string> words, std::vector<uint64_t> counts)
    : words_(std::move(words)), counts_(std::move(counts)) {
  SV_CHECK(words_.size() == counts_.size());
  total_ = std::accumulate(counts_.begin(), counts_.end(), uint64_t{0});
  index_.Reserve(words_.size());
  for (size_t i = 0; i < words_.size(); ++i) index_.Insert(words_[i], static_cast<uint32_t>(i));
}

VocabularyBuilder::VocabularyBuilder() : slots_(1 << 16, 0) {
  // 4 MiB each, so that BigVector backs them with 2 MiB pages from the start (only the pages
  // that get written are ever backed): 131k words before the first reallocation.
  entries_.reserve((size_t{4} << 20) / sizeof(Entry));
  arena_.reserve(size_t{4} << 20);
}

uint64_t VocabularyBuilder::ShortWord(std::string_view word) {
  return LoadUpTo8(word.data(), std::min<size_t>(word.size(), 8));
}

uint32_t VocabularyBuilder::AddCount(std::string_view word, uint64_t count) {
  const uint32_t id = Add(word);
  entries_[id].count += count - 1;
  return id;
}

uint32_t VocabularyBuilder::Add(std::string_view word) { return AddHashed(word, HashWord(word)); }

void VocabularyBuilder::AddBatch(const std::string_view* words, size_t n, uint32_t* ids) {
  constexpr size_t kMaxBatch = 64;
  uint64_t hashes[kMaxBatch];
  for (size_t begin = 0; begin < n; begin += kMaxBatch) {
    const size_t m = std::min(kMaxBatch, n - begin);
    const size_t mask = slots_.size() - 1;
    for (size_t i = 0; i < m; ++i) {
      hashes[i] = HashWord(words[begin + i]);
      __builtin_prefetch(&slots_[hashes[i] & mask]);
    }
    for (size_t i = 0; i < m; ++i) {
      const uint32_t s = slots_[hashes[i] & mask];
      if (s != 0) __builtin_prefetch(&entries_[s - 1]);
    }
    for (size_t i = 0; i < m; ++i) ids[begin + i] = AddHashed(words[begin + i], hashes[i]);
  }
}

uint32_t VocabularyBuilder::AddHashed(std::string_view word, uint64_t h) {
  size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (true) {
    const uint32_t s = slots_[i];
    if (s == 0) break;
    Entry& e = entries_[s - 1];
    if (e.hash == h && e.length == word.size() &&
        (word.size() <= 8 ? e.short_word == ShortWord(word)
                          : std::memcmp(arena_.data() + e.offset, word.data(), word.size()) == 0)) {
      ++e.count;
      return s - 1;
    }
    i = (i + 1) & mask;
  }
  SV_CHECK(arena_.size() + word.size() < 0xFFFFFFFFull);
  const uint32_t id = static_cast<uint32_t>(entries_.size());
  entries_.push_back(Entry{h, 1, static_cast<uint32_t>(arena_.size()),
                           static_cast<uint32_t>(word.size()),
                           word.size() <= 8 ? ShortWord(word) : 0});
  arena_.insert(arena_.end(), word.begin(), word.end());
  slots_[i] = id + 1;
  if (entries_.size() * 2 > slots_.size()) Grow();
  return id;
}

void VocabularyBuilder::Grow() {
  slots_.assign(slots_.size() * 2, 0);
  const size_t mask = slots_.size() - 1;
  for (uint32_t id = 0; id < entries_.size(); ++id) {
    size_t i = entries_[id].hash & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = id + 1;
  }
}

Vocabulary VocabularyBuilder::Build(uint64_t min_count, std::vector<uint32_t>* remap) const {
  std::vector<uint32_t> order;
  order.reserve(entries_.size());
  for (uint32_t id = 0; id < entries_.size(); ++id) {
    if (entries_[id].count >= min_count) order.push_back(id);
  }
  // Provisional ids are in first-occurrence order, so a stable sort keeps ties in that order.
  std::stable_sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
    return entries_[a].count > entries_[b].count;
  });
  std::vector<std::string> words;
  std::vector<uint64_t> counts;
  words.reserve(order.size());
  counts.reserve(order.size());
  if (remap) remap->assign(entries_.size(), kDropped);
  for (uint32_t final_id = 0; final_id < order.size(); ++final_id) {
    const uint32_t id = order[final_id];
    words.emplace_back(word(id));
    counts.push_back(entries_[id].count);
    if (remap) (*remap)[id] = final_id;
  }
  return Vocabulary(std::move(words), std::move(counts));
}

}  // namespace streamvec

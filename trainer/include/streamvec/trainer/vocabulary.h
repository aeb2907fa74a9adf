// Vocabulary counting and the frozen, frequency-ordered vocabulary of the batch trainer.
//
// VocabularyBuilder is an open-addressing hash table from word to provisional id (ids in order of
// first occurrence) with counts; Build() sorts by count, most frequent first, ties by first
// occurrence (gensim's order), and drops words below min_count (word2vec.c `min_count`).
// Not thread-safe.
#ifndef STREAMVEC_TRAINER_VOCABULARY_H_
#define STREAMVEC_TRAINER_VOCABULARY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "streamvec/base/big_array.h"
#include "streamvec/base/hash_word.h"

namespace streamvec {

// A word -> id map over words stored elsewhere (callers keep the strings alive).
class WordIndex {
 public:
  static constexpr uint32_t kNotFound = 0xFFFFFFFFu;
  // Sizes the table for `words` words at once (no rehash while they are inserted).
  void Reserve(size_t words);
  // Inserts word with id (word must not be present).
  void Insert(std::string_view word, uint32_t id);
  uint32_t Find(std::string_view word) const;
  size_t size() const { return size_; }

 private:
  struct Slot {  // trivial, for BigVector; id kNotFound: empty
    uint64_t hash;
    const char* data;
    uint32_t length;
    uint32_t id;
  };
  void Rehash(size_t slots);
  BigVector<Slot> slots_;  // 2 MiB pages from 4 MiB on (a 100k-word vocabulary: 4 MiB)
  size_t size_ = 0;
};

// Frequency-ordered vocabulary: id 0 is the most frequent word.
class Vocabulary {
 public:
  Vocabulary() = default;
  Vocabulary(std::vector<std::string> words, std::vector<uint64_t> counts);
  Vocabulary(Vocabulary&&) = default;
  Vocabulary& operator=(Vocabulary&&) = default;

  size_t size() const { return words_.size(); }
  const std::string& word(uint32_t id) const { return words_[id]; }
  uint64_t count(uint32_t id) const { return counts_[id]; }
  const std::vector<std::string>& words() const { return words_; }
  const std::vector<uint64_t>& counts() const { return counts_; }
  // Sum of all counts (word2vec's train_words).
  uint64_t total_count() const { return total_; }
  // Id of `word` or WordIndex::kNotFound.
  uint32_t Find(std::string_view word) const { return index_.Find(word); }

 private:
  std::vector<std::string> words_;
  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
  WordIndex index_;  // views into words_ (std::string storage does not move on vector move)
};

class VocabularyBuilder {
 public:
  static constexpr uint32_t kDropped = 0xFFFFFFFFu;

  VocabularyBuilder();
  // Counts one occurrence of `word`; returns its provisional id (first-occurrence order).
  uint32_t Add(std::string_view word);
  // Add() for n words at once, ids[i] receiving words[i]'s id: the same result as n calls, faster
  // because the table lines of the whole batch are prefetched before they are probed.
  void AddBatch(const std::string_view* words, size_t n, uint32_t* ids);
  // Counts `count` (>= 1) occurrences at once (merging builders).
  uint32_t AddCount(std::string_view word, uint64_t count);
  size_t size() const { return entries_.size(); }
  std::string_view word(uint32_t id) const {
    return std::string_view(arena_.data() + entries_[id].offset, entries_[id].length);
  }
  uint64_t count(uint32_t id) const { return entries_[id].count; }

  // The vocabulary of words with count >= min_count, most frequent first (ties: first
  // occurrence). remap (optional) receives, per provisional id, the final id or kDropped.
  Vocabulary Build(uint64_t min_count, std::vector<uint32_t>* remap) const;

 private:
  struct Entry {
    uint64_t hash;
    uint64_t count;
    uint32_t offset;      // into arena_
    uint32_t length;
    uint64_t short_word;  // words of <= 8 bytes, zero-padded: compared without touching arena_
  };
  static uint64_t ShortWord(std::string_view word);
  uint32_t AddHashed(std::string_view word, uint64_t h);
  void Grow();
  // BigVector: the tables of a 100M-word corpus reach tens of MB per builder, grown by doubling;
  // 2 MiB pages save thousands of page faults, which cost ~10 us each on a VM.
  BigVector<Entry> entries_;
  BigVector<uint32_t> slots_;  // entry index + 1; 0 = empty
  BigVector<char> arena_;      // all distinct words, concatenated
};

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_VOCABULARY_H_

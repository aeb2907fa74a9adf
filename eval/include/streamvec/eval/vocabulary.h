// Word lookup for evaluation, as gensim 4.2's KeyedVectors.evaluate_word_pairs /
// evaluate_word_analogies build it (`ok_vocab`): only the first `restrict_vocab` rows count (the
// most frequent words, since streamvec and gensim write the most frequent word first), and with
// case folding every word is compared upper-cased, the earliest (most frequent) row winning when
// several rows fold to the same key ("Paris" and "paris").
#ifndef STREAMVEC_EVAL_VOCABULARY_H_
#define STREAMVEC_EVAL_VOCABULARY_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "streamvec/store/word2vec_format.h"

namespace streamvec::eval {

// Upper-cases UTF-8 text like Python's str.upper(): utf8proc's per-code-point mapping plus the
// Latin one-to-many mappings ("ß" -> "SS", "ﬁ" -> "FI"); Greek and Armenian one-to-many
// mappings are not applied. Invalid UTF-8 bytes are copied unchanged.
std::string UpperCase(std::string_view utf8);

class EvalVocabulary {
 public:
  // Indexes rows [0, min(restrict_vocab, embeddings.rows())). `embeddings` is only read here.
  EvalVocabulary(const Embeddings& embeddings, size_t restrict_vocab, bool case_insensitive);

  // Row of `word` (already folded with Key() by the caller), or nullopt when it is not among the
  // first size() rows.
  std::optional<size_t> Find(const std::string& key) const;
  // The lookup key of a word from an eval file: UpperCase(word) or the word itself.
  std::string Key(std::string_view word) const;
  // Key of row `row` (< size()).
  const std::string& RowKey(size_t row) const { return row_keys_[row]; }
  // Number of rows searched: min(restrict_vocab, rows).
  size_t size() const { return row_keys_.size(); }

 private:
  bool case_insensitive_;
  std::vector<std::string> row_keys_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace streamvec::eval

#endif  // STREAMVEC_EVAL_VOCABULARY_H_

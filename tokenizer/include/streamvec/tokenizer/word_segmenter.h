// Word boundaries inside a whitespace token of a script written without spaces between words
// (Chinese, Japanese, Thai, Lao, Khmer, Myanmar; Amharic, whose words end at U+1361): Unicode text segmentation's word boundaries
// (UAX #29) with ICU's dictionary segmentation for those scripts (ICU BreakIterator, word
// instance of the root locale). Used by WhitespaceTokenizer for the tokens that need it; tokens
// of other scripts keep the byte-scanning path.
#ifndef STREAMVEC_TOKENIZER_WORD_SEGMENTER_H_
#define STREAMVEC_TOKENIZER_WORD_SEGMENTER_H_

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace streamvec {

// True if code point `cp` is a letter of a script written without spaces (the ranges below).
bool WrittenWithoutSpaces(char32_t cp);

// True if valid UTF-8 `token` holds a letter of a script written without spaces: Han, Hiragana,
// Katakana (and their half-width forms), Thai, Lao, Khmer, Myanmar, Ethiopic.
bool NeedsWordSegmentation(std::string_view token);

// Splits valid UTF-8 text into words: the [begin, end) byte ranges of the segments ICU marks as
// words, numbers, kana or ideographs (punctuation and spaces between them are dropped), in order.
// A URL (http://, https:// or www. up to the next space or character outside ASCII) is one
// range, never split. Not thread-safe (one per tokenizer); O(n) in the text's length.
class WordSegmenter {
 public:
  WordSegmenter();
  ~WordSegmenter();
  WordSegmenter(const WordSegmenter&) = delete;
  WordSegmenter& operator=(const WordSegmenter&) = delete;

  // Appends the word ranges of `text` to *ranges (cleared first). False if ICU failed (its data
  // missing): the caller keeps the whole token.
  bool Split(std::string_view text, std::vector<std::pair<size_t, size_t>>* ranges);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_TOKENIZER_WORD_SEGMENTER_H_

#include "streamvec/tokenizer/word_segmenter.h"

#include <unicode/brkiter.h>
#include <unicode/locid.h>
#include <unicode/utext.h>
#include <utf8proc.h>

#include <cctype>
#include <cstring>

namespace streamvec {

bool WrittenWithoutSpaces(char32_t cp) {
  return (cp >= 0x3040 && cp <= 0x30FF) ||    // Hiragana, Katakana
         (cp >= 0x31F0 && cp <= 0x31FF) ||    // Katakana phonetic extensions
         (cp >= 0x3400 && cp <= 0x4DBF) ||    // CJK extension A
         (cp >= 0x4E00 && cp <= 0x9FFF) ||    // CJK unified ideographs
         (cp >= 0xF900 && cp <= 0xFAFF) ||    // CJK compatibility ideographs
         (cp >= 0xFF66 && cp <= 0xFF9F) ||    // half-width Katakana
         (cp >= 0x20000 && cp <= 0x3134F) ||  // CJK extensions B-G
         (cp >= 0x0E00 && cp <= 0x0EFF) ||    // Thai, Lao
         (cp >= 0x1000 && cp <= 0x109F) ||    // Myanmar
         (cp >= 0x1780 && cp <= 0x17FF) ||    // Khmer
         (cp >= 0x19E0 && cp <= 0x19FF) ||    // Khmer symbols
         (cp >= 0x1200 && cp <= 0x139F) ||    // Ethiopic (words end at U+1361, not a space)
         (cp >= 0x2D80 && cp <= 0x2DDF) || (cp >= 0xAB00 && cp <= 0xAB2F);
}

namespace {

// The length of a URL starting at text[i] (0 if none starts there): a scheme or "www." and then
// ASCII bytes up to the next space or non-ASCII byte.
size_t UrlAt(std::string_view text, size_t i) {
  const std::string_view rest = text.substr(i);
  if (!(rest.starts_with("http://") || rest.starts_with("https://") ||
        rest.starts_with("www."))) {
    return 0;
  }
  size_t j = i;
  while (j < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[j]);
    if (c >= 0x80 || c <= ' ') break;
    ++j;
  }
  return j - i;
}

}  // namespace

bool NeedsWordSegmentation(std::string_view token) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(token.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(token.size());
  while (left > 0) {
    if (*p < 0x80) {
      ++p;
      --left;
      continue;
    }
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) return false;
    if (WrittenWithoutSpaces(static_cast<char32_t>(cp))) return true;
    p += n;
    left -= n;
  }
  return false;
}

struct WordSegmenter::Impl {
  std::unique_ptr<icu::BreakIterator> words;
  UText* text = nullptr;
  bool failed = false;
  ~Impl() {
    if (text) utext_close(text);
  }

  // Word ranges of text[begin, end) (no URL inside), offset to the whole text.
  bool SplitSpan(std::string_view whole, size_t begin, size_t end,
                 std::vector<std::pair<size_t, size_t>>* ranges) {
    UErrorCode status = U_ZERO_ERROR;
    text = utext_openUTF8(text, whole.data() + begin, static_cast<int64_t>(end - begin), &status);
    if (U_FAILURE(status)) return false;
    words->setText(text, status);
    if (U_FAILURE(status)) return false;
    int32_t start = words->first();
    for (int32_t stop = words->next(); stop != icu::BreakIterator::DONE;
         start = stop, stop = words->next()) {
      if (words->getRuleStatus() >= UBRK_WORD_NONE_LIMIT) {  // a word, number, kana or ideograph
        ranges->emplace_back(begin + static_cast<size_t>(start), begin + static_cast<size_t>(stop));
      }
    }
    return true;
  }
};

WordSegmenter::WordSegmenter() : impl_(std::make_unique<Impl>()) {
  UErrorCode status = U_ZERO_ERROR;
  impl_->words.reset(icu::BreakIterator::createWordInstance(icu::Locale::getRoot(), status));
  impl_->failed = U_FAILURE(status) || impl_->words == nullptr;
}

WordSegmenter::~WordSegmenter() = default;

bool WordSegmenter::Split(std::string_view text, std::vector<std::pair<size_t, size_t>>* ranges) {
  ranges->clear();
  if (impl_->failed) return false;
  // URLs are cut out first and kept whole; ICU splits the spans between them.
  size_t span = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t url = (i == 0 || static_cast<unsigned char>(text[i - 1]) >= 0x80 ||
                        !std::isalnum(static_cast<unsigned char>(text[i - 1])))
                           ? UrlAt(text, i)
                           : 0;
    if (url == 0) continue;
    if (i > span && !impl_->SplitSpan(text, span, i, ranges)) return false;
    ranges->emplace_back(i, i + url);
    i += url - 1;
    span = i + 1;
  }
  if (span < text.size() && !impl_->SplitSpan(text, span, text.size(), ranges)) return false;
  return true;
}

}  // namespace streamvec

// Splits a byte stream into words at ASCII whitespace and reports line ends, validating UTF-8.
//
// The stream may arrive in chunks of any size (a token or a multi-byte character may straddle two
// chunks). A token that is not valid UTF-8 (checked with utf8proc), contains a NUL byte, or is
// longer than max_token_bytes is skipped and counted, never fatal; the byte offset of the first
// such token is kept for the error message. This is the tokenisation of word2vec.c (words are runs
// of non-whitespace; a newline ends a sentence) without its 100-byte truncation.
//
// Not thread-safe; one tokenizer per stream.
#ifndef STREAMVEC_TOKENIZER_WHITESPACE_TOKENIZER_H_
#define STREAMVEC_TOKENIZER_WHITESPACE_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "streamvec/tokenizer/word_segmenter.h"

namespace streamvec {

struct TokenizerOptions {
  size_t max_token_bytes = 1000;  // longer tokens are skipped (counted in overlong_tokens)
  // A whitespace token holding a letter of a script written without spaces (Chinese, Japanese,
  // Thai, Lao, Khmer, Myanmar, Ethiopic: NeedsWordSegmentation) is split into its words (WordSegmenter:
  // UAX #29 with ICU's dictionaries; punctuation between them dropped, URLs kept whole), if it is
  // at most max_segment_bytes long; each word obeys max_token_bytes. Other tokens, ASCII ones
  // included, are not looked at twice.
  bool segment_words = true;
  size_t max_segment_bytes = size_t{1} << 20;
};

struct TokenizerStats {
  uint64_t bytes = 0;                 // bytes consumed
  uint64_t tokens = 0;                // valid tokens emitted
  uint64_t lines = 0;                 // newline characters seen
  uint64_t invalid_utf8_tokens = 0;   // skipped: invalid UTF-8 or NUL byte
  uint64_t overlong_tokens = 0;       // skipped: longer than max_token_bytes
  // Byte offset (from the start of the stream) of the first skipped token, or kNoOffset.
  static constexpr uint64_t kNoOffset = std::numeric_limits<uint64_t>::max();
  uint64_t first_skipped_offset = kNoOffset;
};

namespace internal {
// Byte classes of WhitespaceTokenizer's scan (one table load per byte): whitespace, and bytes that
// call for a UTF-8 check (non-ASCII, NUL), gathered while a token is scanned so that an ASCII
// token is not read twice.
inline constexpr uint8_t kSpaceClass = 1, kCheckClass = 2;
inline constexpr std::array<uint8_t, 256> kByteClass = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
    t[c] = space ? kSpaceClass : (c >= 0x80 || c == 0) ? kCheckClass : 0;
  }
  return t;
}();
}  // namespace internal

// True for the bytes that separate tokens: ' ', '\t', '\n', '\v', '\f', '\r' (ASCII whitespace).
inline bool IsTokenSeparator(unsigned char c) {
  return (internal::kByteClass[c] & internal::kSpaceClass) != 0;
}

// True if `s` is valid UTF-8 without NUL bytes (ASCII fast path, utf8proc otherwise).
bool IsValidToken(std::string_view s);

// One pass over a token with non-ASCII bytes: invalid (as IsValidToken), valid, or valid and
// holding a letter of a script written without spaces (NeedsWordSegmentation).
enum class TokenCheck { kInvalid, kValid, kNeedsSegmentation };
TokenCheck CheckToken(std::string_view s);

class WhitespaceTokenizer {
 public:
  explicit WhitespaceTokenizer(TokenizerOptions options = {}) : options_(options) {}

  // Feeds the next chunk. on_token(std::string_view word) is called for every complete valid
  // token; on_line_end() after each newline. A token cut by the chunk end is kept until the next
  // Feed or Finish. The string_view passed to on_token points into `chunk` or into the
  // tokenizer, and stays valid until the next call to Feed or Finish (or until `chunk` changes),
  // so callers may batch tokens within one call.
  template <typename OnToken, typename OnLineEnd>
  void Feed(std::string_view chunk, OnToken&& on_token, OnLineEnd&& on_line_end);

  // Flushes a pending token at the end of the stream.
  template <typename OnToken>
  void Finish(OnToken&& on_token);

  const TokenizerStats& stats() const { return stats_; }

 private:
  static bool IsSpace(unsigned char c) { return IsTokenSeparator(c); }
  template <typename OnToken>
  void Emit(std::string_view token, uint64_t offset, OnToken&& on_token);
  // Emit for a token whose bytes the caller has classified: `check` if any needs a UTF-8 check.
  template <typename OnToken>
  void EmitClassified(std::string_view token, bool check, uint64_t offset, OnToken&& on_token);

  // Emits the words of a valid token that needs segmentation.
  template <typename OnToken>
  void EmitWords(std::string_view token, uint64_t offset, OnToken&& on_token);
  void Skip(uint64_t* counter, uint64_t offset) {
    ++*counter;
    if (stats_.first_skipped_offset == TokenizerStats::kNoOffset) {
      stats_.first_skipped_offset = offset;
    }
  }
  // Bytes of a token kept across chunks: enough to know it is too long.
  size_t CarryBytes() const {
    return std::max(options_.max_token_bytes,
                    options_.segment_words ? options_.max_segment_bytes : size_t{0}) + 1;
  }

  // The segmenter, made on first use; a copied tokenizer makes its own.
  struct SegmenterSlot {
    SegmenterSlot() = default;
    SegmenterSlot(const SegmenterSlot&) {}
    SegmenterSlot& operator=(const SegmenterSlot&) { return *this; }
    SegmenterSlot(SegmenterSlot&&) noexcept = default;
    SegmenterSlot& operator=(SegmenterSlot&&) noexcept = default;
    WordSegmenter& Get() {
      if (!p) p = std::make_unique<WordSegmenter>();
      return *p;
    }
    std::unique_ptr<WordSegmenter> p;
  };

  TokenizerOptions options_;
  TokenizerStats stats_;
  SegmenterSlot segmenter_;
  std::vector<std::pair<size_t, size_t>> ranges_;  // EmitWords' scratch
  std::string pending_;          // partial token carried over from the previous chunk
  std::string completed_;        // the last completed carried-over token (see Feed)
  uint64_t pending_offset_ = 0;  // stream offset of pending_'s first byte
};

template <typename OnToken>
void WhitespaceTokenizer::Emit(std::string_view token, uint64_t offset, OnToken&& on_token) {
  bool check = false;
  for (unsigned char c : token) {
    check |= (internal::kByteClass[c] & internal::kCheckClass) != 0;
  }
  EmitClassified(token, check, offset, on_token);
}

template <typename OnToken>
void WhitespaceTokenizer::EmitClassified(std::string_view token, bool check, uint64_t offset,
                                         OnToken&& on_token) {
  if (check && options_.segment_words && token.size() <= options_.max_segment_bytes) {
    const TokenCheck kind = CheckToken(token);  // one decoding for both questions
    if (kind == TokenCheck::kInvalid) return Skip(&stats_.invalid_utf8_tokens, offset);
    if (kind == TokenCheck::kNeedsSegmentation) return EmitWords(token, offset, on_token);
    check = false;  // valid
  }
  if (token.size() > options_.max_token_bytes) return Skip(&stats_.overlong_tokens, offset);
  if (check && !IsValidToken(token)) return Skip(&stats_.invalid_utf8_tokens, offset);
  ++stats_.tokens;
  on_token(token);
}

template <typename OnToken>
void WhitespaceTokenizer::EmitWords(std::string_view token, uint64_t offset, OnToken&& on_token) {
  if (!segmenter_.Get().Split(token, &ranges_)) {  // no ICU data: the token as it is
    if (token.size() > options_.max_token_bytes) return Skip(&stats_.overlong_tokens, offset);
    ++stats_.tokens;
    on_token(token);
    return;
  }
  for (const auto& [begin, end] : ranges_) {
    if (end - begin > options_.max_token_bytes) {
      Skip(&stats_.overlong_tokens, offset + begin);
      continue;
    }
    ++stats_.tokens;
    on_token(token.substr(begin, end - begin));
  }
}

template <typename OnToken, typename OnLineEnd>
void WhitespaceTokenizer::Feed(std::string_view chunk, OnToken&& on_token,
                               OnLineEnd&& on_line_end) {
  const uint64_t base = stats_.bytes;
  stats_.bytes += chunk.size();
  const char* p = chunk.data();
  const size_t n = chunk.size();
  size_t i = 0;
  if (!pending_.empty()) {
    // Continue the token cut at the end of the previous chunk.
    while (i < n && !IsSpace(static_cast<unsigned char>(p[i]))) ++i;
    if (pending_.size() < CarryBytes()) {
      pending_.append(p, std::min(i, CarryBytes() - pending_.size()));
    }
    if (i == n) return;  // still inside the token
    // The completed token moves to completed_, so its view stays valid until the next call.
    completed_.swap(pending_);
    pending_.clear();
    Emit(completed_, pending_offset_, on_token);
  }
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(p[i]);
    if (IsSpace(c)) {
      if (c == '\n') {
        ++stats_.lines;
        on_line_end();
      }
      ++i;
      continue;
    }
    const size_t start = i;
    uint8_t classes = 0;
    for (; i < n; ++i) {
      const uint8_t k = internal::kByteClass[static_cast<unsigned char>(p[i])];
      if (k & internal::kSpaceClass) break;
      classes |= k;
    }
    if (i == n) {
      // Keep at most CarryBytes(): enough to know the token is too long.
      pending_.assign(p + start, std::min(n - start, CarryBytes()));
      pending_offset_ = base + start;
      return;
    }
    EmitClassified(std::string_view(p + start, i - start),
                   (classes & internal::kCheckClass) != 0, base + start, on_token);
  }
}

template <typename OnToken>
void WhitespaceTokenizer::Finish(OnToken&& on_token) {
  if (!pending_.empty()) {
    completed_.swap(pending_);
    pending_.clear();
    Emit(completed_, pending_offset_, on_token);
  }
}

}  // namespace streamvec

#endif  // STREAMVEC_TOKENIZER_WHITESPACE_TOKENIZER_H_

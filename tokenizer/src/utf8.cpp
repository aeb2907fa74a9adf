#include "streamvec/tokenizer/utf8.h"

#include <cstdint>
#include <cstring>

#include <utf8proc.h>

namespace streamvec {

size_t FindInvalidUtf8(std::string_view text) {
  const auto* begin = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  const auto* p = begin;
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
    // Eight ASCII bytes at a time: most text is ASCII, and this runs on every ingested line.
    if (left >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        p += 8;
        left -= 8;
        continue;
      }
    }
    if (*p < 0x80) {
      ++p;
      --left;
      continue;
    }
    utf8proc_int32_t cp;
    const utf8proc_ssize_t len = utf8proc_iterate(p, left, &cp);
    if (len <= 0 || cp < 0) return static_cast<size_t>(p - begin);
    p += len;
    left -= len;
  }
  return std::string_view::npos;
}

size_t FindControlByte(std::string_view text) {
  auto is_control = [](unsigned char c) {
    return (c < 0x20 && (c < 0x09 || c > 0x0D)) || c == 0x7F;
  };
  // Eight bytes at a time (it runs on every ingested line): a word with no byte below 0x20 and
  // no DEL is skipped; one with a candidate (a tab, a control byte) is looked at byte by byte.
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, text.data() + i, 8);
    const uint64_t below_space = (w - 0x20 * kOnes) & ~w & kHigh;
    const uint64_t del = w ^ (0x7F * kOnes);
    const uint64_t has_del = (del - kOnes) & ~del & kHigh;
    if ((below_space | has_del) == 0) continue;
    for (size_t j = i; j < i + 8; ++j) {
      if (is_control(static_cast<unsigned char>(text[j]))) return j;
    }
  }
  for (; i < text.size(); ++i) {
    if (is_control(static_cast<unsigned char>(text[i]))) return i;
  }
  return std::string_view::npos;
}

}  // namespace streamvec

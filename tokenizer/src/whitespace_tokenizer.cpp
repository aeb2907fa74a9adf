#include "streamvec/tokenizer/whitespace_tokenizer.h"

#include <utf8proc.h>

namespace streamvec {

bool IsValidToken(std::string_view s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    if (*p < 0x80) {
      if (*p == 0) return false;
      ++p;
      --left;
      continue;
    }
    utf8proc_int32_t cp;
    const utf8proc_ssize_t len = utf8proc_iterate(p, left, &cp);
    if (len <= 0 || cp < 0) return false;
    p += len;
    left -= len;
  }
  return true;
}

TokenCheck CheckToken(std::string_view s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  bool segment = false;
  while (left > 0) {
    if (*p < 0x80) {
      if (*p == 0) return TokenCheck::kInvalid;
      ++p;
      --left;
      continue;
    }
    utf8proc_int32_t cp;
    const utf8proc_ssize_t len = utf8proc_iterate(p, left, &cp);
    if (len <= 0 || cp < 0) return TokenCheck::kInvalid;
    segment = segment || WrittenWithoutSpaces(cp);
    p += len;
    left -= len;
  }
  return segment ? TokenCheck::kNeedsSegmentation : TokenCheck::kValid;
}

}  // namespace streamvec

#include "streamvec/tokenizer/utf8.h"

#include <utf8proc.h>

namespace streamvec {

size_t FindInvalidUtf8(std::string_view text) {
  const auto* begin = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  const auto* p = begin;
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
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

}  // namespace streamvec

#include "streamvec/tokenizer/normalize.h"

#include <utf8proc.h>

#include <vector>

namespace streamvec {
namespace {

enum class Kind { kWord, kJoiner, kSpace, kNewline };

Kind Classify(utf8proc_int32_t cp) {
  if (cp == '\n') return Kind::kNewline;
  if (cp == '\'' || cp == 0x2019 /* right single quote */ || cp == '-' ) return Kind::kJoiner;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return Kind::kWord;
    default:
      return Kind::kSpace;  // punctuation, symbols, separators, controls, unassigned
  }
}

}  // namespace

std::string NormalizeText(std::string_view text) {
  // Decode once, so that a joiner can look at its neighbours.
  std::vector<utf8proc_int32_t> cps;
  cps.reserve(text.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {  // invalid byte: a space, then resynchronise on the next byte
      cp = ' ';
      n = 1;
    }
    cps.push_back(cp);
    p += n;
    left -= n;
  }
  std::string out;
  out.reserve(text.size());
  utf8proc_uint8_t buf[4];
  for (size_t i = 0; i < cps.size(); ++i) {
    utf8proc_int32_t cp = cps[i];
    switch (Classify(cp)) {
      case Kind::kWord:
        cp = utf8proc_tolower(cp);
        break;
      case Kind::kJoiner: {
        const bool inside = i > 0 && i + 1 < cps.size() && Classify(cps[i - 1]) == Kind::kWord &&
                            Classify(cps[i + 1]) == Kind::kWord;
        cp = !inside ? ' ' : (cp == 0x2019 ? '\'' : cp);
        break;
      }
      case Kind::kNewline:
        break;
      case Kind::kSpace:
        cp = ' ';
        break;
    }
    const utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
  }
  return out;
}

}  // namespace streamvec

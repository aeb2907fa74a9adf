#include "streamvec/tokenizer/normalize.h"

#include <utf8proc.h>

#include <cctype>
#include <cstdlib>
#include <string>

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

// Kind and lowercase of each ASCII code point, taken from utf8proc once: most feed text is
// ASCII, and a table lookup per byte is several times faster than utf8proc's per-code-point
// decoding, category lookup and encoding (Wikipedia paragraphs: 56 -> 289 MB/s here).
struct AsciiTable {
  Kind kind[128];
  char lower[128];
};

const AsciiTable& Ascii() {
  static const AsciiTable table = [] {
    AsciiTable t{};
    for (utf8proc_int32_t cp = 0; cp < 128; ++cp) {
      t.kind[cp] = Classify(cp);
      t.lower[cp] = static_cast<char>(utf8proc_tolower(cp));
    }
    return t;
  }();
  return table;
}

// The code point at p (left > 0 bytes): ASCII directly, the rest through utf8proc; an invalid
// byte decodes as a space of length 1 (then resynchronises on the next byte).
inline utf8proc_int32_t Decode(const utf8proc_uint8_t* p, utf8proc_ssize_t left,
                               utf8proc_ssize_t* length) {
  if (p[0] < 0x80) {
    *length = 1;
    return p[0];
  }
  utf8proc_int32_t cp = 0;
  const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
  if (n <= 0) {
    *length = 1;
    return ' ';
  }
  *length = n;
  return cp;
}

inline Kind KindOf(utf8proc_int32_t cp, const AsciiTable& ascii) {
  return cp < 128 ? ascii.kind[cp] : Classify(cp);
}

// NFKC with Unicode case folding (utf8proc_map: compatibility decomposition, canonical
// composition, full case folding) of the non-ASCII runs of `text`, each with the ASCII letter or
// digit before it (a combining mark composes with its base: "e" U+0301 is "é"); ASCII is copied.
// A run that is not valid UTF-8 is copied as it is (the caller turns its bad bytes into spaces).
// Full-width and compatibility forms become their plain letters ("ＡＢＣ" abc, "ﬁ" fi), "Straße"
// is "strasse".
std::string FoldCompatibility(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      out.push_back(text[i++]);
      continue;
    }
    size_t start = i, j = i;
    while (j < text.size() && static_cast<unsigned char>(text[j]) >= 0x80) ++j;
    if (start > 0 && !out.empty() && std::isalnum(static_cast<unsigned char>(text[start - 1]))) {
      out.pop_back();  // the base goes through the map with its marks
      --start;
    }
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(
        reinterpret_cast<const utf8proc_uint8_t*>(text.data() + start),
        static_cast<utf8proc_ssize_t>(j - start), &mapped,
        static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                                       UTF8PROC_CASEFOLD));
    if (n >= 0) {
      out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
    } else {
      out.append(text.data() + start, j - start);
    }
    std::free(mapped);
    i = j;
  }
  return out;
}

bool HasNonAscii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return true;
  }
  return false;
}

}  // namespace

// The per-code-point pass over text already folded (or pure ASCII).
static std::string NormalizeFolded(std::string_view text) {
  const AsciiTable& ascii = Ascii();
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  const auto* const end = p + text.size();
  bool prev_word = false;  // the previous code point (as read, not as written) is a kWord
  utf8proc_uint8_t buf[4];
  auto put = [&out, &buf](utf8proc_int32_t cp) {
    if (cp < 128) {
      out.push_back(static_cast<char>(cp));
    } else {
      const utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
      out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
    }
  };
  while (p < end) {
    utf8proc_ssize_t n = 1;
    utf8proc_int32_t cp = Decode(p, end - p, &n);
    const Kind kind = KindOf(cp, ascii);
    switch (kind) {
      case Kind::kWord:
        put(cp < 128 ? ascii.lower[cp] : utf8proc_tolower(cp));
        break;
      case Kind::kJoiner: {
        bool inside = false;
        if (prev_word && p + n < end) {
          utf8proc_ssize_t next_n = 1;
          inside = KindOf(Decode(p + n, end - p - n, &next_n), ascii) == Kind::kWord;
        }
        put(!inside ? ' ' : (cp == 0x2019 ? '\'' : cp));
        break;
      }
      case Kind::kNewline:
        put(cp);
        break;
      case Kind::kSpace:
        put(' ');
        break;
    }
    prev_word = kind == Kind::kWord;
    p += n;
  }
  return out;
}

std::string NormalizeText(std::string_view text) {
  if (HasNonAscii(text)) {
    const std::string folded = FoldCompatibility(text);
    return NormalizeFolded(folded);
  }
  return NormalizeFolded(text);
}

}  // namespace streamvec

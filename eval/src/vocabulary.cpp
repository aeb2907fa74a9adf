// EvalVocabulary: gensim's `ok_vocab` (see vocabulary.h).
#include "streamvec/eval/vocabulary.h"

#include <utf8proc.h>

#include <algorithm>

namespace streamvec::eval {
namespace {

// Python's str.upper() uses the full mappings of Unicode's SpecialCasing.txt where one letter
// becomes several; these are the Latin ones (Greek and Armenian ones are not covered).
const char* FullUpperCase(utf8proc_int32_t cp) {
  switch (cp) {
    case 0x00DF:
      return "SS";  // ß
    case 0x0149:
      return "\xCA\xBCN";  // ŉ
    case 0xFB00:
      return "FF";
    case 0xFB01:
      return "FI";
    case 0xFB02:
      return "FL";
    case 0xFB03:
      return "FFI";
    case 0xFB04:
      return "FFL";
    case 0xFB05:
    case 0xFB06:
      return "ST";
    default:
      return nullptr;
  }
}

}  // namespace

std::string UpperCase(std::string_view utf8) {
  std::string out;
  out.reserve(utf8.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(utf8.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(utf8.size());
  while (left > 0) {
    if (*p < 0x80) {  // ASCII fast path
      const char c = static_cast<char>(*p);
      out.push_back(c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c);
      ++p;
      --left;
      continue;
    }
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {  // invalid byte: keep it
      out.push_back(static_cast<char>(*p));
      ++p;
      --left;
      continue;
    }
    if (const char* full = FullUpperCase(cp)) {
      out += full;
      p += n;
      left -= n;
      continue;
    }
    utf8proc_uint8_t buf[4];
    const utf8proc_ssize_t m = utf8proc_encode_char(utf8proc_toupper(cp), buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(m));
    p += n;
    left -= n;
  }
  return out;
}

EvalVocabulary::EvalVocabulary(const Embeddings& embeddings, size_t restrict_vocab,
                               bool case_insensitive)
    : case_insensitive_(case_insensitive) {
  const size_t n = std::min(restrict_vocab, embeddings.rows());
  row_keys_.reserve(n);
  index_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    row_keys_.push_back(Key(embeddings.words[i]));
    index_.emplace(row_keys_.back(), i);  // keeps the earliest row for a repeated key
  }
}

std::optional<size_t> EvalVocabulary::Find(const std::string& key) const {
  const auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

std::string EvalVocabulary::Key(std::string_view word) const {
  return case_insensitive_ ? UpperCase(word) : std::string(word);
}

}  // namespace streamvec::eval

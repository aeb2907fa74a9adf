#include "encoding.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "ascii.h"
#include "streamvec/tokenizer/utf8.h"

namespace streamvec::crawler::internal {
namespace {

// BOM sniffing. Returns the encoding name or "" and sets *skip for UTF-8.
std::string FromBom(std::string_view body, size_t* skip) {
  *skip = 0;
  if (body.size() >= 3 && body.substr(0, 3) == "\xEF\xBB\xBF") {
    *skip = 3;
    return "UTF-8";
  }
  if (body.size() >= 2 && body.substr(0, 2) == "\xFF\xFE") return "UTF-16LE";
  if (body.size() >= 2 && body.substr(0, 2) == "\xFE\xFF") return "UTF-16BE";
  return "";
}

// Value of `name="X"` / `name='X'` / name=X after position `from` in `text` (case-insensitive
// name), or "".
std::string AttributeAfter(std::string_view lower_text, std::string_view original,
                           std::string_view name) {
  size_t pos = lower_text.find(name);
  while (pos != std::string_view::npos) {
    size_t i = pos + name.size();
    while (i < lower_text.size() && std::isspace(static_cast<unsigned char>(lower_text[i]))) ++i;
    if (i < lower_text.size() && lower_text[i] == '=') {
      ++i;
      while (i < lower_text.size() && std::isspace(static_cast<unsigned char>(lower_text[i]))) ++i;
      char quote = 0;
      if (i < lower_text.size() && (lower_text[i] == '"' || lower_text[i] == '\'')) {
        quote = lower_text[i++];
      }
      size_t end = i;
      while (end < lower_text.size() &&
             (quote ? lower_text[end] != quote
                    : !(std::isspace(static_cast<unsigned char>(lower_text[end])) ||
                        lower_text[end] == ';' || lower_text[end] == '>' ||
                        lower_text[end] == '"' || lower_text[end] == '\''))) {
        ++end;
      }
      if (end > i) return std::string(original.substr(i, end - i));
    }
    pos = lower_text.find(name, pos + 1);
  }
  return "";
}

}  // namespace

std::string NormalizeCharset(std::string_view label) {
  std::string l = AsciiLower(label);
  l.erase(0, l.find_first_not_of(" \t\"'"));
  while (!l.empty() && (l.back() == ' ' || l.back() == '\t' || l.back() == '"' || l.back() == '\''))
    l.pop_back();
  if (l.empty() || l.size() > 40) return "";
  for (char c : l) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
          c == ':')) {
      return "";
    }
  }
  if (l == "iso-8859-1" || l == "iso8859-1" || l == "iso_8859-1" || l == "latin1" ||
      l == "latin-1" || l == "l1" || l == "us-ascii" || l == "ascii" || l == "cp1252" ||
      l == "windows-1252" || l == "x-cp1252" || l == "cp819" || l == "ibm819") {
    return "WINDOWS-1252";
  }
  if (l == "utf8" || l == "utf-8" || l == "unicode-1-1-utf-8") return "UTF-8";
  std::string upper = l;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return upper;
}

std::string CharsetFromContentType(std::string_view content_type) {
  const std::string lower = AsciiLower(content_type);
  const size_t semi = lower.find(';');
  if (semi == std::string::npos) return "";
  return AttributeAfter(std::string_view(lower).substr(semi), content_type.substr(semi),
                        "charset");
}

std::string ChooseXmlEncoding(std::string_view body, std::string_view http_charset,
                              size_t* skip) {
  std::string bom = FromBom(body, skip);
  if (!bom.empty()) return bom;
  if (std::string c = NormalizeCharset(http_charset); !c.empty()) return c;
  // The XML declaration, if the document starts with one.
  std::string_view head = body.substr(0, std::min<size_t>(body.size(), 512));
  if (head.substr(0, 5) == "<?xml") {
    const size_t end = head.find("?>");
    std::string_view decl = head.substr(0, end == std::string_view::npos ? head.size() : end);
    const std::string lower = AsciiLower(decl);
    const std::string declared = AttributeAfter(lower, decl, "encoding");
    if (std::string c = NormalizeCharset(declared); !c.empty()) return c;
  }
  // XML 1.0 section 4.3.3: undeclared means UTF-8; other bytes are a fatal error, reported.
  return "UTF-8";
}

std::string ChooseHtmlEncoding(std::string_view body, std::string_view http_charset,
                               size_t* skip) {
  std::string bom = FromBom(body, skip);
  if (!bom.empty()) return bom;
  if (std::string c = NormalizeCharset(http_charset); !c.empty()) return c;
  std::string_view head = body.substr(0, std::min<size_t>(body.size(), 4096));
  const std::string lower = AsciiLower(head);
  size_t meta = lower.find("<meta");
  while (meta != std::string::npos) {
    const size_t end = lower.find('>', meta);
    const std::string_view tag_lower =
        std::string_view(lower).substr(meta, end == std::string::npos ? end : end - meta);
    const std::string_view tag = head.substr(meta, tag_lower.size());
    std::string label = AttributeAfter(tag_lower, tag, "charset");
    if (std::string c = NormalizeCharset(label); !c.empty()) {
      // A UTF-16 label in an ASCII-compatible page is a lie (WHATWG): read it as UTF-8. So is a
      // legacy label on bytes that are valid multi-byte UTF-8 (pages re-saved as UTF-8 keep
      // their old <meta>; such byte runs are vanishingly rare in legacy encodings).
      if (c.rfind("UTF-16", 0) == 0) return "UTF-8";
      if (c != "UTF-8" && FindInvalidUtf8(body) == std::string_view::npos &&
          std::any_of(body.begin(), body.end(), [](char ch) { return ch & 0x80; })) {
        return "UTF-8";
      }
      return c;
    }
    meta = lower.find("<meta", meta + 5);
  }
  return FindInvalidUtf8(body) == std::string_view::npos ? "UTF-8" : "WINDOWS-1252";
}

}  // namespace streamvec::crawler::internal

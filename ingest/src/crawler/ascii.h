// ASCII string helpers shared by the crawler's parsers (HTTP headers, charset labels, robots.txt
// fields, feed text). Private to the crawler.
#ifndef STREAMVEC_INGEST_SRC_CRAWLER_ASCII_H_
#define STREAMVEC_INGEST_SRC_CRAWLER_ASCII_H_

#include <string>
#include <string_view>

namespace streamvec::crawler::internal {

// `s` with A-Z lowered to a-z; every other byte (UTF-8 included) unchanged.
inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// `s` without leading and trailing spaces, tabs, CRs and LFs.
inline std::string TrimAsciiWhitespace(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return std::string();
  return std::string(s.substr(begin, s.find_last_not_of(kSpace) - begin + 1));
}

}  // namespace streamvec::crawler::internal

#endif  // STREAMVEC_INGEST_SRC_CRAWLER_ASCII_H_

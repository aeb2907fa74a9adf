// libFuzzer target: ParseFeed (and, through it, HtmlToText on item bodies) on arbitrary bytes.
// The first byte picks an HTTP charset so the encoding paths are fuzzed too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "streamvec/ingest/crawler/feed.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kCharsets[] = {"", "utf-8", "iso-8859-1", "windows-1252", "utf-16"};
  std::string_view charset = size > 0 ? kCharsets[data[0] % 5] : "";
  std::string_view body(reinterpret_cast<const char*>(data), size);
  if (!body.empty()) body.remove_prefix(1);
  (void)streamvec::crawler::ParseFeed(body, "http://example.com/feed", charset);
  (void)streamvec::crawler::NormalizeDate(body.substr(0, 80));
  return 0;
}

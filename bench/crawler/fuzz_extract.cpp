// libFuzzer target: ExtractArticle (libxml2's HTML parser + the readability heuristic).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "streamvec/ingest/crawler/extract.h"
#include "streamvec/ingest/crawler/robots.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view html(reinterpret_cast<const char*>(data), size);
  (void)streamvec::crawler::ExtractArticle(html);
  // robots.txt parsing and matching ride along (a pathological '*' pattern must stay cheap).
  const auto rules = streamvec::crawler::RobotsRules::Parse(html, "streamvec-crawler");
  (void)rules.Allowed(html.substr(0, 200));
  return 0;
}

// libFuzzer target: ParseDocument on arbitrary bytes (a message of <prefix>.docs as the trainer
// reads it). It must never crash; every rejection names its reason; an accepted document written
// again by DocumentToJson parses back to the same fields; SplitText cuts its text into non-empty
// in-range pieces of at most max_bytes (the last input byte picks max_bytes, 1..64).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "streamvec/kafka/document.h"

namespace {

bool Same(const streamvec::Document& a, const streamvec::Document& b) {
  return a.id == b.id && a.source == b.source && a.url == b.url && a.title == b.title &&
         a.text == b.text && a.lang == b.lang && a.published_at == b.published_at &&
         a.fetched_at == b.fetched_at && a.offset == b.offset && a.start == b.start;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  streamvec::StatusOr<streamvec::Document> doc = streamvec::ParseDocument(json);
  if (!doc.ok()) {
    if (doc.status().message().empty()) std::abort();  // every rejection names its reason
    return 0;
  }
  if (doc->id.empty() || doc->source.empty() || doc->text.empty()) std::abort();
  if (doc->start >= 0 && doc->start > doc->offset) std::abort();
  streamvec::StatusOr<streamvec::Document> again =
      streamvec::ParseDocument(streamvec::DocumentToJson(*doc));
  if (!again.ok() || !Same(*doc, *again)) std::abort();
  const size_t max_bytes = 1 + data[size - 1] % 64;
  size_t previous_end = 0;
  for (const auto& [start, length] : streamvec::SplitText(doc->text, max_bytes)) {
    if (length == 0 || length > max_bytes || start < previous_end ||
        start + length > doc->text.size()) {
      std::abort();
    }
    previous_end = start + length;
  }
  return 0;
}

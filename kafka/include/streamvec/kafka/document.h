// The wire format of topic `<prefix>.docs`: one document per message, JSON, keyed by source id.
//
//   {"id": "...", "source": "...", "url": "...", "title": "...", "text": "...", "lang": "en",
//    "published_at": "2026-11-22T10:00:00Z", "fetched_at": "2026-11-22T10:00:05Z",
//    "offset": 12345}
//
// "id" and "text" are required non-empty strings; "source" is required (the key of the message:
// all documents of one source go to one partition, in order). The other fields are optional
// strings (absent, null or a string). "offset" is optional: a non-negative integer, the byte
// position in the source just past this document, which the trainer records in its snapshot so
// that a restarted connector resumes there (at least once). "start" is optional too: where the
// source range the document covers begins (see Document::start); start <= offset. Unknown fields
// are ignored.
#ifndef STREAMVEC_KAFKA_DOCUMENT_H_
#define STREAMVEC_KAFKA_DOCUMENT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec {

// Longest "text" a document may carry, in bytes. Longer input is cut at whitespace into several
// documents (SplitText). 256 KiB keeps a message well under the mock broker's 5 MiB ring per
// partition and under Kafka's default 1 MB message size.
inline constexpr size_t kMaxDocumentTextBytes = size_t{256} << 10;
// Longest serialized message accepted from the topic (text plus fields and JSON escaping).
inline constexpr size_t kMaxDocumentMessageBytes = size_t{1} << 20;

struct Document {
  std::string id;            // unique within the source (feed GUID, "<path>:<offset>", ...)
  std::string source;        // source id: a file path, a feed URL, "stdin"
  std::string url;           // optional
  std::string title;         // optional
  std::string text;          // the body to train on, UTF-8
  std::string lang;          // optional, BCP 47 ("en")
  std::string published_at;  // optional, RFC 3339
  std::string fetched_at;    // optional, RFC 3339
  int64_t offset = -1;       // byte position in the source past this document; -1: none
  int64_t start = -1;        // byte position where the source range this document covers begins:
                             // the previous document's `offset` (blank or rejected lines in
                             // between are covered too); -1: none. [start, offset) ranges let a
                             // trainer that sees a source's documents out of order (they are
                             // spread over partitions) record only a contiguous trained prefix.
};

// Serializes to one JSON object (empty optional fields and offset -1 are left out).
std::string DocumentToJson(const Document& doc);

// Parses and validates one message. InvalidArgument names what is wrong: "not JSON (...)",
// "not a JSON object", "field 'text' is missing", "field 'id' must be a string", "message is
// 1048577 bytes, over the limit of 1048576", ... (JSON strings must be valid UTF-8)
StatusOr<Document> ParseDocument(std::string_view json);

// Cuts `text` into pieces of at most `max_bytes` bytes, at whitespace where possible (a single
// word longer than max_bytes is cut at a UTF-8 character boundary). Pieces carry no leading or
// trailing whitespace; empty pieces are dropped. Returns {start, length} byte ranges into text.
std::vector<std::pair<size_t, size_t>> SplitText(std::string_view text,
                                                 size_t max_bytes = kMaxDocumentTextBytes);

// A message for `<prefix>.rejected`: {"reason": ..., "origin": ..., "payload": ...}. `origin` says
// where the input was ("streamvec.docs/3@1234" for a message, "/data/a.txt:5678" for a line);
// `payload` is the start of the rejected bytes (at most 4 KiB, invalid UTF-8 replaced).
std::string RejectionToJson(const std::string& reason, const std::string& origin,
                            std::string_view payload);

// The end of each source's contiguous covered prefix, from [start, end) byte ranges given in any
// order: documents of one source are spread over partitions, so a trainer trains them, and a
// producer sees their deliveries acknowledged, out of order. A range that begins after the prefix
// is kept until the gap before it is covered; a range with start < 0 (a producer that sends a
// source in order, on one partition) moves the prefix to its end. Positions never move back.
// The trainer records the trained prefix in its snapshots; `ingest --offsets-file` records the
// delivered one. Not thread-safe.
class SourcePositions {
 public:
  SourcePositions() = default;
  // Starts from known prefixes (a snapshot's or an offsets file's), source id -> byte offset.
  explicit SourcePositions(std::map<std::string, int64_t> positions)
      : positions_(std::move(positions)) {}

  // Marks [start, end) of `source` as covered (end >= start; start < 0: see above).
  void Cover(const std::string& source, int64_t start, int64_t end);

  // Starts `source` over at `position` (its file was replaced or truncated, or it is resumed
  // there): ranges kept beyond its old prefix are dropped.
  void Reset(const std::string& source, int64_t position);

  // Source id -> end of its contiguous covered prefix (sources seen or seeded only).
  const std::map<std::string, int64_t>& positions() const { return positions_; }

 private:
  std::map<std::string, int64_t> positions_;
  // Per source, covered ranges beyond its prefix: start -> end.
  std::map<std::string, std::map<int64_t, int64_t>> ahead_;
};

// Topic names for a prefix ("streamvec" -> "streamvec.docs", "streamvec.rejected").
std::string DocsTopic(const std::string& prefix);
std::string RejectedTopic(const std::string& prefix);
// The trainers' consumer group: "<prefix>.trainers".
std::string TrainersGroup(const std::string& prefix);

}  // namespace streamvec

#endif  // STREAMVEC_KAFKA_DOCUMENT_H_

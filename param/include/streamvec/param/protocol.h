// The wire format between trainers and parameter-node shards (issue 20).
//
// Two topics per prefix: `<prefix>.updates` (trainer -> node: pushes of row deltas and exact
// count deltas; partition = the words' shard, ShardOf) and `<prefix>.params` (node -> trainers:
// fresh rows and vocabulary changes). Every message is binary, little-endian, and starts with a
// fixed 48-byte header:
//
//   offset size  field
//        0    4  magic "SVPM" (bytes 53 56 50 4D)
//        4    2  protocol version (kParamProtocolVersion; a decoder refuses a newer one)
//        6    1  message kind (ParamMessageKind)
//        7    1  model kind (ParamModelKind)
//        8    1  precision of the vectors (ParamPrecision: fp32, or fp16 as IEEE binary16)
//        9    3  reserved, zero
//       12    4  dim: floats per vector
//       16    4  sender id: the trainer's id (pushes) or the shard's index (publications)
//       20    4  record count
//       24    8  sequence number of the message, per sender
//       32    8  sender clock: words the sender had trained (trainer) or merged (node) when it
//                wrote the message
//       40    8  base clock: in a push, the node clock of the newest publication the trainer
//                had applied when it computed the deltas (staleness = node clock - base clock,
//                Li et al. 2014, bounded delay); in a publication, the shard's merged
//                watermark: the next offset of its `.updates` partition it has not merged, so
//                every push written below it is in the rows the message carries (a trainer
//                takes a published row only once the watermark passes its own last push of
//                that row: an older row would undo what it pushed)
//
// then `record count` records, each:
//
//   2  word length L (1..kMaxParamWordBytes)     L  the word, UTF-8 without NUL
//   1  fields: bit 0 count, bit 1 input row, bit 2 output row, bit 3 removed, bit 4 initial;
//      others zero
//   16 if count: count (f64), then its error (f64), 0 <= error <= count, both finite
//   dim x 4 or 2 bytes if input row: the input (word) vector        } a delta in pushes,
//   dim x 4 or 2 bytes if output row: the output (context) vector   } the row in publications
//
// and nothing after the last record. Which fields a record may carry depends on the kind:
// push: any non-empty subset of count / input / output, never removed; count is the exact number
// of occurrences since the sender's previous push (error 0) and a row is a delta (row - base,
// RowDeltaTracker::Export); initial (with a row) marks the sender's whole rows of a word new to
// it (RowDeltaTracker::MarkFresh: a random initialisation and what the sender learned since):
// a shard that does not hold the word starts it from them, one that does merges them as a step.
// rows: at least one row (a count with them is the node's count and error). vocabulary: exactly one
// of count (the node's count and error for an admitted word) or removed (the word left the node's
// vocabulary).
//
// gap (added in version 1 as a fourth kind; an older reader rejects it as an unknown kind): no
// records. The shard found offsets [sender_clock, base_clock) of its `.updates` partition gone
// before it read them (the broker dropped them: the embedded broker's ring of about 5 MiB, or a
// cluster's retention), so the pushes they held were never merged; base_clock is the merged
// watermark as in the other publications (everything below it is merged or lost) and
// sender_clock < base_clock. A trainer pushes again its messages at those offsets.
//
// Thread safety: free functions on values; safe from any thread.
#ifndef STREAMVEC_PARAM_PROTOCOL_H_
#define STREAMVEC_PARAM_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec {

// The version this build writes and the newest it reads.
inline constexpr uint16_t kParamProtocolVersion = 1;
// "SVPM" read as a little-endian u32.
inline constexpr uint32_t kParamMagic = 0x4D505653u;
// Bytes of the fixed header.
inline constexpr size_t kParamHeaderBytes = 48;
// Longest word a record may carry, in bytes (the tokenizer's longest token).
inline constexpr size_t kMaxParamWordBytes = 1000;
// Largest dim a message may declare (StreamingOptions' --dim bound).
inline constexpr uint32_t kMaxParamDim = 10000;
// Default bound on an encoded message, in bytes: under Kafka's default message.max.bytes
// (1 MB + overhead) and a fifth of the embedded broker's ~5 MiB ring per partition.
inline constexpr size_t kDefaultMaxParamMessageBytes = size_t{1} << 20;
// max.partition.fetch.bytes of the consumers of <prefix>.updates (a node shard) and
// <prefix>.params (a trainer): more than the embedded broker's ring holds, so that one fetch
// takes all of it. librdkafka's default (1 MiB a partition a fetch) read publications slower
// than a shard published them near-synchronously, and the ring overwrote those not yet read.
inline constexpr size_t kParamFetchBytes = size_t{8} << 20;

enum class ParamMessageKind : uint8_t {
  kPush = 1,        // trainer -> node, on <prefix>.updates
  kRows = 2,        // node -> trainers, on <prefix>.params: fresh rows
  kVocabulary = 3,  // node -> trainers, on <prefix>.params: count changes and removals
  kGap = 4,         // node -> trainers, on <prefix>.params: pushes lost before the shard read
                    // them (no records; the header comment above)
};

enum class ParamModelKind : uint8_t {
  kSgns = 1,      // word2vec skip-gram with negative sampling: input and output rows per word
  kCharLstm = 2,  // reserved for the char-LSTM model of issue 21 (no records defined yet)
};

enum class ParamPrecision : uint8_t {
  kFp32 = 1,  // IEEE binary32
  kFp16 = 2,  // IEEE binary16 (Eigen::half, round to nearest even); halves the bytes of a row
};

// "push", "rows", "vocabulary", "gap"; "sgns", "char-lstm"; "fp32", "fp16" (as --delta-precision
// takes them). Unknown values give "unknown(N)".
std::string ParamMessageKindName(ParamMessageKind kind);
std::string ParamModelKindName(ParamModelKind model);
std::string ParamPrecisionName(ParamPrecision precision);
// The inverse of ParamPrecisionName; InvalidArgument names the value (callers prefix the flag).
StatusOr<ParamPrecision> ParseParamPrecision(std::string_view name);

struct ParamMessageHeader {
  uint16_t version = kParamProtocolVersion;  // set by the encoder; the decoder reports the read one
  ParamMessageKind kind = ParamMessageKind::kPush;
  ParamModelKind model = ParamModelKind::kSgns;
  ParamPrecision precision = ParamPrecision::kFp32;
  uint32_t dim = 0;           // floats per vector, 1..kMaxParamDim
  uint32_t sender = 0;        // trainer id (push) or shard index (publications)
  uint32_t record_count = 0;  // set by the encoder; the decoder reports the read one
  uint64_t sequence = 0;      // per sender; the encoder numbers its messages from this one
  uint64_t sender_clock = 0;  // words trained (trainer) or merged (node) at writing; in a gap,
                              // its first lost offset
  uint64_t base_clock = 0;    // push: node clock the deltas are against; publications: the
                              // merged watermark on .updates (the header comment above)
};

// One word's part of a message. A vector is absent when empty and otherwise holds dim floats.
struct ParamRecord {
  std::string word;
  bool has_count = false;
  double count = 0.0;        // push: exact occurrences since the last push; else the node's count
  double count_error = 0.0;  // 0 <= count_error <= count (space-saving error; 0 in pushes)
  bool removed = false;      // vocabulary: the word left the node's vocabulary
  bool initial = false;      // push, with a row: the sender's whole rows of a word new to it
  std::vector<float> input;  // input (word) vector: delta (push) or row (rows)
  std::vector<float> output; // output (context) vector: delta (push) or row (rows)

  // Back to a default record, keeping the memory of word, input and output for reuse.
  void Reset() {
    word.clear();
    has_count = removed = initial = false;
    count = count_error = 0.0;
    input.clear();
    output.clear();
  }
};

struct ParamMessage {
  ParamMessageHeader header;
  std::vector<ParamRecord> records;
  // Not part of the message: records a longer message decoded into this one held, kept with
  // their memory for the next (DecodeParamMessageInto), in no particular order.
  std::vector<ParamRecord> spare;
};

// What a decoder accepts besides well-formedness: the receiving side's model and dim.
struct ParamExpectations {
  ParamModelKind model = ParamModelKind::kSgns;
  uint32_t dim = 0;  // 0: any dim in 1..kMaxParamDim
};

// Encodes `records` as messages of at most `max_message_bytes` bytes each (records are never
// split; as many as fit go in each message, in order). Message i carries header.sequence + i;
// header.version and record_count are filled in. An empty `records` gives no message, except
// for kGap: exactly one message, without records.
// InvalidArgument (naming the record and the word) for anything the decoder would reject: a
// header field out of range, an empty, too long or invalid UTF-8 word, a vector whose size is
// not dim, a non-finite count or value (or one beyond fp16's range with kFp16), fields the kind
// does not allow, or a record that alone exceeds max_message_bytes.
StatusOr<std::vector<std::string>> EncodeParamMessages(
    const ParamMessageHeader& header, std::span<const ParamRecord> records,
    size_t max_message_bytes = kDefaultMaxParamMessageBytes);

// The record count field of an encoded message's header (what EncodeParamMessages wrote into
// it: which of its records went into each message), without decoding the records; 0 for bytes
// shorter than a header.
uint32_t ParamMessageRecordCount(std::string_view message);

// Bytes one record takes on the wire (word, fields and vectors at `precision`).
size_t ParamRecordBytes(const ParamRecord& record, uint32_t dim, ParamPrecision precision);

// Decodes and validates one message; fp16 vectors come back as floats. InvalidArgument names
// exactly what is wrong, e.g. "truncated at byte 60: record 0 needs 400 bytes of its input row,
// 12 left", "bad magic 0x12345678", "protocol version 3 is newer than supported version 1",
// "dim 50 != expected 100", "model char-lstm != expected sgns", "record 2 (word 'cat'): output
// row component 7 is not finite", "record 1: word is not valid UTF-8 at byte 3", "4 trailing
// bytes after record 9". Never reads past `bytes`; never aborts on any input (fuzzed:
// bench/param/fuzz).
StatusOr<ParamMessage> DecodeParamMessage(std::string_view bytes,
                                          const ParamExpectations& expect = {});
// The same decoding into `out`, whose records' memory (words, rows) is reused: a receiver that
// decodes message after message into the same few ParamMessages allocates only while messages
// grow past the longest so far (records beyond a message's count wait in out.spare). On an
// error `out` holds what was decoded before it (valid objects, to be overwritten).
Status DecodeParamMessageInto(std::string_view bytes, const ParamExpectations& expect,
                              ParamMessage& out);

// Topic names for a prefix beside DocsTopic / RejectedTopic ("streamvec" -> "streamvec.updates",
// "streamvec.params").
std::string UpdatesTopic(const std::string& prefix);
std::string ParamsTopic(const std::string& prefix);
// The consumer group the node shards commit their `.updates` offsets to, once a snapshot covers
// them ("<prefix>.param-nodes"): what trainers' flow control reads.
std::string ParamNodesGroup(const std::string& prefix);
// The consumer group the node shards commit the `.updates` offset they have read and merged to,
// as they go, before any snapshot covers it ("<prefix>.param-nodes.read"): what keeps the
// trainers' pushes within the embedded broker's ring (ParamClientOptions::max_lag_bytes).
std::string ParamNodesReadGroup(const std::string& prefix);

// The shard (0..shards-1) that owns `word`'s rows and count: the high bits of HashWord(word)
// scaled to [0, shards) (Lemire's multiply-shift), so the shard is independent of the low bits
// that the learners' hash tables use and the words spread evenly, frequent ones included.
// It is also the `.updates` partition of the word's pushes. shards must be >= 1.
uint32_t ShardOf(std::string_view word, uint32_t shards);

}  // namespace streamvec

#endif  // STREAMVEC_PARAM_PROTOCOL_H_

#include "streamvec/param/protocol.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "streamvec/base/hash_word.h"
#include "streamvec/kernels/half.h"
#include "streamvec/tokenizer/utf8.h"

namespace streamvec {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the parameter protocol is written with memcpy on a little-endian host");

constexpr uint8_t kFieldCount = 1u << 0;
constexpr uint8_t kFieldInput = 1u << 1;
constexpr uint8_t kFieldOutput = 1u << 2;
constexpr uint8_t kFieldRemoved = 1u << 3;
constexpr uint8_t kFieldInitial = 1u << 4;
constexpr uint8_t kKnownFields =
    kFieldCount | kFieldInput | kFieldOutput | kFieldRemoved | kFieldInitial;

size_t ValueBytes(ParamPrecision p) { return p == ParamPrecision::kFp16 ? 2 : 4; }

// Whether none of v[0..n) is infinite or NaN (exponent bits all ones): branch-free, so that the
// compiler vectorizes it, as it runs on every row received.
bool AllFinite(const float* v, uint32_t n) {
  uint32_t bad = 0;
  for (uint32_t j = 0; j < n; ++j) {
    const uint32_t bits = std::bit_cast<uint32_t>(v[j]);
    bad |= static_cast<uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return bad == 0;
}

bool KnownKind(uint8_t k) { return k >= 1 && k <= 4; }
bool KnownModel(uint8_t m) { return m >= 1 && m <= 2; }
bool KnownPrecision(uint8_t p) { return p >= 1 && p <= 2; }

uint8_t FieldsOf(const ParamRecord& r) {
  return static_cast<uint8_t>(
      (r.has_count ? kFieldCount : 0) | (!r.input.empty() ? kFieldInput : 0) |
      (!r.output.empty() ? kFieldOutput : 0) | (r.removed ? kFieldRemoved : 0) |
      (r.initial ? kFieldInitial : 0));
}

// The fields a kind allows; "" when `fields` is allowed, else why not.
std::string CheckFields(ParamMessageKind kind, uint8_t fields) {
  if ((fields & ~kKnownFields) != 0) return "unknown field bits " + std::to_string(fields);
  const bool rows = (fields & (kFieldInput | kFieldOutput)) != 0;
  const bool count = (fields & kFieldCount) != 0;
  const bool removed = (fields & kFieldRemoved) != 0;
  const bool initial = (fields & kFieldInitial) != 0;
  if (initial && kind != ParamMessageKind::kPush) return "only a push marks initial rows";
  switch (kind) {
    case ParamMessageKind::kPush:
      if (removed) return "a push cannot remove a word";
      if (initial && !rows) return "an initial record carries no row";
      if (!rows && !count) return "a push record carries neither a count nor a row";
      return "";
    case ParamMessageKind::kRows:
      if (removed) return "a rows record cannot remove a word";
      if (!rows) return "a rows record carries no row";
      return "";
    case ParamMessageKind::kVocabulary:
      if (rows) return "a vocabulary record cannot carry a row";
      if (count == removed) return "a vocabulary record needs exactly one of count or removed";
      return "";
    case ParamMessageKind::kGap:
      return "a gap message carries no records";
  }
  return "unknown message kind";
}

std::string CheckCount(double count, double error) {
  if (!std::isfinite(count) || !std::isfinite(error)) return "count or its error is not finite";
  if (count < 0.0) return "count " + std::to_string(count) + " is negative";
  if (error < 0.0 || error > count) {
    return "count error " + std::to_string(error) + " is outside [0, count " +
           std::to_string(count) + "]";
  }
  return "";
}

// Why `word` cannot be a record's word, or "".
std::string CheckWord(std::string_view word) {
  if (word.empty()) return "word is empty";
  if (word.size() > kMaxParamWordBytes) {
    return "word is " + std::to_string(word.size()) + " bytes, over " +
           std::to_string(kMaxParamWordBytes);
  }
  if (const size_t bad = FindInvalidUtf8(word); bad != std::string_view::npos) {
    return "word is not valid UTF-8 at byte " + std::to_string(bad);
  }
  if (word.find('\0') != std::string_view::npos) return "word holds a NUL byte";
  return "";
}

std::string RecordName(size_t i, std::string_view word) {
  std::string s = "record " + std::to_string(i);
  // The word is quoted only once it is known to be printable UTF-8 (callers check first).
  if (!word.empty()) s += " (word '" + std::string(word.substr(0, 64)) + "')";
  return s;
}

template <typename T>
void Put(std::string& out, T v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.append(b, sizeof v);
}

// Appends v (dim floats) at precision p; at fp16, `halves` holds v's halves (CheckVector's).
void PutVector(std::string& out, const std::vector<float>& v, ParamPrecision p,
               const uint16_t* halves) {
  if (p == ParamPrecision::kFp32) {
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    return;
  }
  out.append(reinterpret_cast<const char*>(halves), v.size() * sizeof(uint16_t));
}

std::string PutHeader(const ParamMessageHeader& h, uint32_t records) {
  std::string out;
  out.reserve(kParamHeaderBytes);
  Put(out, kParamMagic);
  Put(out, kParamProtocolVersion);
  Put(out, static_cast<uint8_t>(h.kind));
  Put(out, static_cast<uint8_t>(h.model));
  Put(out, static_cast<uint8_t>(h.precision));
  out.append(3, '\0');
  Put(out, h.dim);
  Put(out, h.sender);
  Put(out, records);
  Put(out, h.sequence);
  Put(out, h.sender_clock);
  Put(out, h.base_clock);
  return out;
}

// Why the vector cannot be sent, or "". At fp16 it converts v into `halves` (dim of them), which
// PutVector then writes: each component is converted once.
std::string CheckVector(const std::vector<float>& v, uint32_t dim, ParamPrecision p,
                        const char* which, uint16_t* halves) {
  if (v.size() != dim) {
    return std::string(which) + " row has " + std::to_string(v.size()) + " floats, not dim " +
           std::to_string(dim);
  }
  if (p == ParamPrecision::kFp16) FloatsToHalves(v.data(), halves, v.size());
  for (size_t j = 0; j < v.size(); ++j) {
    if (!std::isfinite(v[j])) {
      return std::string(which) + " row component " + std::to_string(j) + " is not finite";
    }
    if (p == ParamPrecision::kFp16 && HalfIsNonFinite(halves[j])) {
      return std::string(which) + " row component " + std::to_string(j) + " is beyond fp16's range";
    }
  }
  return "";
}

// Little-endian reads, each after a Has() check; a failed check is "truncated at byte N: ...".
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  size_t pos() const { return pos_; }
  size_t left() const { return in_.size() - pos_; }
  bool Has(size_t n) const { return left() >= n; }
  // The truncation of a read of n bytes of `what` here (when !Has(n)).
  Status Truncated(size_t n, const std::string& what) const {
    return Status::InvalidArgument("truncated at byte " + std::to_string(in_.size()) + ": " +
                                   what + " needs " + std::to_string(n) + " bytes at byte " +
                                   std::to_string(pos_) + ", " + std::to_string(left()) +
                                   " left");
  }
  template <typename T>
  T Get() {  // after Has
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string_view Bytes(size_t n) {  // after Has
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace

std::string ParamMessageKindName(ParamMessageKind kind) {
  switch (kind) {
    case ParamMessageKind::kPush: return "push";
    case ParamMessageKind::kRows: return "rows";
    case ParamMessageKind::kVocabulary: return "vocabulary";
    case ParamMessageKind::kGap:
      return "gap";
  }
  return "unknown(" + std::to_string(static_cast<int>(kind)) + ")";
}

std::string ParamModelKindName(ParamModelKind model) {
  switch (model) {
    case ParamModelKind::kSgns: return "sgns";
    case ParamModelKind::kCharLstm: return "char-lstm";
  }
  return "unknown(" + std::to_string(static_cast<int>(model)) + ")";
}

std::string ParamPrecisionName(ParamPrecision precision) {
  switch (precision) {
    case ParamPrecision::kFp32: return "fp32";
    case ParamPrecision::kFp16: return "fp16";
  }
  return "unknown(" + std::to_string(static_cast<int>(precision)) + ")";
}

StatusOr<ParamPrecision> ParseParamPrecision(std::string_view name) {
  if (name == "fp32") return ParamPrecision::kFp32;
  if (name == "fp16") return ParamPrecision::kFp16;
  return Status::InvalidArgument("a precision must be fp32 or fp16, not '" + std::string(name) +
                                 "'");
}

uint32_t ParamMessageRecordCount(std::string_view message) {
  if (message.size() < kParamHeaderBytes) return 0;
  uint32_t count = 0;  // offset 20, little-endian (the header layout in protocol.h)
  std::memcpy(&count, message.data() + 20, sizeof count);
  return count;
}

size_t ParamRecordBytes(const ParamRecord& r, uint32_t dim, ParamPrecision precision) {
  size_t n = 2 + r.word.size() + 1 + (r.has_count ? 16 : 0);
  const size_t row = static_cast<size_t>(dim) * ValueBytes(precision);
  if (!r.input.empty()) n += row;
  if (!r.output.empty()) n += row;
  return n;
}

StatusOr<std::vector<std::string>> EncodeParamMessages(const ParamMessageHeader& header,
                                                       std::span<const ParamRecord> records,
                                                       size_t max_message_bytes) {
  const ParamMessageHeader& h = header;
  if (!KnownKind(static_cast<uint8_t>(h.kind))) {
    return Status::InvalidArgument("unknown message kind " + ParamMessageKindName(h.kind));
  }
  if (!KnownModel(static_cast<uint8_t>(h.model))) {
    return Status::InvalidArgument("unknown model " + ParamModelKindName(h.model));
  }
  if (!KnownPrecision(static_cast<uint8_t>(h.precision))) {
    return Status::InvalidArgument("unknown precision " + ParamPrecisionName(h.precision));
  }
  if (h.dim < 1 || h.dim > kMaxParamDim) {
    return Status::InvalidArgument("dim " + std::to_string(h.dim) + " is outside [1, " +
                                   std::to_string(kMaxParamDim) + "]");
  }
  std::vector<std::string> messages;
  if (h.kind == ParamMessageKind::kGap) {
    if (!records.empty()) return Status::InvalidArgument("a gap message carries no records");
    if (h.sender_clock >= h.base_clock) {
      return Status::InvalidArgument("a gap's first lost offset " + std::to_string(h.sender_clock) +
                                     " is not below its end " + std::to_string(h.base_clock));
    }
    messages.push_back(PutHeader(h, 0));
    return messages;
  }
  std::string body;
  uint32_t in_body = 0;
  // A record's input and output rows at fp16, converted by CheckVector and written by PutVector
  // (unused at fp32).
  std::vector<uint16_t> halves(2 * size_t{h.dim});
  auto flush = [&] {
    if (in_body == 0) return;
    ParamMessageHeader mh = h;
    mh.sequence = h.sequence + messages.size();
    std::string m = PutHeader(mh, in_body);
    m += body;
    messages.push_back(std::move(m));
    body.clear();
    in_body = 0;
  };
  for (size_t i = 0; i < records.size(); ++i) {
    const ParamRecord& r = records[i];
    if (std::string why = CheckWord(r.word); !why.empty()) {
      return Status::InvalidArgument(RecordName(i, "") + ": " + why);
    }
    const uint8_t fields = FieldsOf(r);
    std::string why = CheckFields(h.kind, fields);
    if (why.empty() && r.has_count) why = CheckCount(r.count, r.count_error);
    if (why.empty() && !r.input.empty()) {
      why = CheckVector(r.input, h.dim, h.precision, "input", halves.data());
    }
    if (why.empty() && !r.output.empty()) {
      why = CheckVector(r.output, h.dim, h.precision, "output", halves.data() + h.dim);
    }
    if (!why.empty()) return Status::InvalidArgument(RecordName(i, r.word) + ": " + why);
    const size_t bytes = ParamRecordBytes(r, h.dim, h.precision);
    if (kParamHeaderBytes + bytes > max_message_bytes) {
      return Status::InvalidArgument(RecordName(i, r.word) + ": " + std::to_string(bytes) +
                                     " bytes do not fit a message of at most " +
                                     std::to_string(max_message_bytes));
    }
    if (kParamHeaderBytes + body.size() + bytes > max_message_bytes) flush();
    Put(body, static_cast<uint16_t>(r.word.size()));
    body += r.word;
    Put(body, fields);
    if (r.has_count) {
      Put(body, r.count);
      Put(body, r.count_error);
    }
    if (!r.input.empty()) PutVector(body, r.input, h.precision, halves.data());
    if (!r.output.empty()) PutVector(body, r.output, h.precision, halves.data() + h.dim);
    ++in_body;
  }
  flush();
  return messages;
}

StatusOr<ParamMessage> DecodeParamMessage(std::string_view bytes, const ParamExpectations& expect) {
  ParamMessage m;
  SV_RETURN_IF_ERROR(DecodeParamMessageInto(bytes, expect, m));
  return m;
}

Status DecodeParamMessageInto(std::string_view bytes, const ParamExpectations& expect,
                              ParamMessage& m) {
  Reader in(bytes);
  m.header = ParamMessageHeader{};
  ParamMessageHeader& h = m.header;
  size_t used = 0;  // records of m decoded so far (the others' memory is kept for reuse)
  if (!in.Has(4)) return in.Truncated(4, "the magic");
  if (const uint32_t magic = in.Get<uint32_t>(); magic != kParamMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08X", magic);
    return Status::InvalidArgument(std::string("bad magic ") + hex + " (expected 0x4D505653, " +
                                   "\"SVPM\")");
  }
  if (!in.Has(2)) return in.Truncated(2, "the protocol version");
  h.version = in.Get<uint16_t>();
  if (h.version > kParamProtocolVersion) {
    return Status::InvalidArgument("protocol version " + std::to_string(h.version) +
                                   " is newer than supported version " +
                                   std::to_string(kParamProtocolVersion));
  }
  if (h.version == 0) return Status::InvalidArgument("protocol version 0 does not exist");
  if (!in.Has(kParamHeaderBytes - 6)) return in.Truncated(kParamHeaderBytes - 6, "the header");
  const uint8_t kind = in.Get<uint8_t>();
  const uint8_t model = in.Get<uint8_t>();
  const uint8_t precision = in.Get<uint8_t>();
  const std::string_view reserved = in.Bytes(3);
  h.dim = in.Get<uint32_t>();
  h.sender = in.Get<uint32_t>();
  h.record_count = in.Get<uint32_t>();
  h.sequence = in.Get<uint64_t>();
  h.sender_clock = in.Get<uint64_t>();
  h.base_clock = in.Get<uint64_t>();
  h.kind = static_cast<ParamMessageKind>(kind);
  h.model = static_cast<ParamModelKind>(model);
  h.precision = static_cast<ParamPrecision>(precision);
  if (!KnownKind(kind)) {
    return Status::InvalidArgument("unknown message kind " + std::to_string(kind));
  }
  if (!KnownModel(model)) {
    return Status::InvalidArgument("unknown model " + std::to_string(model));
  }
  if (!KnownPrecision(precision)) {
    return Status::InvalidArgument("unknown precision " + std::to_string(precision));
  }
  if (reserved != std::string_view("\0\0\0", 3)) {
    return Status::InvalidArgument("reserved header bytes 9..11 are not zero");
  }
  if (h.model != expect.model) {
    return Status::InvalidArgument("model " + ParamModelKindName(h.model) + " != expected " +
                                   ParamModelKindName(expect.model));
  }
  if (h.dim < 1 || h.dim > kMaxParamDim) {
    return Status::InvalidArgument("dim " + std::to_string(h.dim) + " is outside [1, " +
                                   std::to_string(kMaxParamDim) + "]");
  }
  if (expect.dim != 0 && h.dim != expect.dim) {
    return Status::InvalidArgument("dim " + std::to_string(h.dim) + " != expected " +
                                   std::to_string(expect.dim));
  }
  if (h.kind == ParamMessageKind::kGap) {
    if (h.record_count != 0) {
      return Status::InvalidArgument("a gap message carries no records, not " +
                                     std::to_string(h.record_count));
    }
    if (h.sender_clock >= h.base_clock) {
      return Status::InvalidArgument("a gap's first lost offset " + std::to_string(h.sender_clock) +
                                     " is not below its end " + std::to_string(h.base_clock));
    }
  }
  // Every record takes at least 4 bytes: a count beyond what is left is refused before any
  // allocation (a forged count must not reserve gigabytes).
  if (h.record_count > in.left() / 4) {
    return Status::InvalidArgument(
        "truncated at byte " + std::to_string(bytes.size()) + ": " +
        std::to_string(h.record_count) + " records need at least " +
        std::to_string(4 * uint64_t{h.record_count}) + " bytes after the header, " +
        std::to_string(in.left()) + " left");
  }
  const size_t value_bytes = ValueBytes(h.precision);
  const size_t row_bytes = static_cast<size_t>(h.dim) * value_bytes;
  m.records.reserve(h.record_count);
  for (uint32_t i = 0; i < h.record_count; ++i) {
    // (Messages are built only on failure: this loop runs per record of every message.)
    if (!in.Has(2)) return in.Truncated(2, RecordName(i, "") + "'s word length");
    const uint16_t length = in.Get<uint16_t>();
    if (!in.Has(length)) return in.Truncated(length, RecordName(i, "") + "'s word");
    const std::string_view word = in.Bytes(length);
    if (std::string why = CheckWord(word); !why.empty()) {
      return Status::InvalidArgument(RecordName(i, "") + ": " + why);
    }
    if (used == m.records.size()) {
      if (m.spare.empty()) {
        m.records.emplace_back();
      } else {
        m.records.push_back(std::move(m.spare.back()));
        m.spare.pop_back();
      }
    }
    ParamRecord& r = m.records[used++];
    r.Reset();
    r.word.assign(word);
    if (!in.Has(1)) return in.Truncated(1, RecordName(i, word) + "'s fields");
    const uint8_t fields = in.Get<uint8_t>();
    if (std::string why = CheckFields(h.kind, fields); !why.empty()) {
      return Status::InvalidArgument(RecordName(i, word) + ": " + why);
    }
    r.removed = (fields & kFieldRemoved) != 0;
    r.initial = (fields & kFieldInitial) != 0;
    if (fields & kFieldCount) {
      if (!in.Has(16)) return in.Truncated(16, RecordName(i, word) + "'s count");
      r.has_count = true;
      r.count = in.Get<double>();
      r.count_error = in.Get<double>();
      if (std::string why = CheckCount(r.count, r.count_error); !why.empty()) {
        return Status::InvalidArgument(RecordName(i, word) + ": " + why);
      }
    }
    for (int which = 0; which < 2; ++which) {
      if (!(fields & (which == 0 ? kFieldInput : kFieldOutput))) continue;
      const char* label = which == 0 ? "input" : "output";
      if (!in.Has(row_bytes)) {
        return in.Truncated(row_bytes, RecordName(i, word) + "'s " + label + " row");
      }
      std::vector<float>& v = which == 0 ? r.input : r.output;
      v.resize(h.dim);
      const std::string_view raw = in.Bytes(row_bytes);
      if (h.precision == ParamPrecision::kFp32) {
        std::memcpy(v.data(), raw.data(), row_bytes);
      } else {
        uint16_t halves[kMaxParamDim];
        std::memcpy(halves, raw.data(), row_bytes);
        HalvesToFloats(halves, v.data(), h.dim);
      }
      if (!AllFinite(v.data(), h.dim)) {
        uint32_t j = 0;
        while (std::isfinite(v[j])) ++j;
        return Status::InvalidArgument(RecordName(i, word) + ": " + label + " row component " +
                                       std::to_string(j) + " is not finite");
      }
    }
  }
  if (in.left() != 0) {
    return Status::InvalidArgument(std::to_string(in.left()) + " trailing bytes after record " +
                                   (h.record_count == 0 ? std::string("none (0 records)")
                                                        : std::to_string(h.record_count - 1)) +
                                   ", at byte " + std::to_string(in.pos()));
  }
  for (size_t k = used; k < m.records.size(); ++k) m.spare.push_back(std::move(m.records[k]));
  m.records.resize(used);
  return Status::Ok();
}

std::string UpdatesTopic(const std::string& prefix) { return prefix + ".updates"; }
std::string ParamsTopic(const std::string& prefix) { return prefix + ".params"; }

uint32_t ShardOf(std::string_view word, uint32_t shards) {
  SV_CHECK(shards >= 1);
  const unsigned __int128 wide = static_cast<unsigned __int128>(HashWord(word)) * shards;
  return static_cast<uint32_t>(wide >> 64);
}
std::string ParamNodesGroup(const std::string& prefix) { return prefix + ".param-nodes"; }
std::string ParamNodesReadGroup(const std::string& prefix) { return prefix + ".param-nodes.read"; }

}  // namespace streamvec

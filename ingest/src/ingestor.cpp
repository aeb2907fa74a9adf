#include "streamvec/ingest/ingestor.h"

#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "streamvec/ingest/decompress.h"
#include "streamvec/ingest/language.h"
#include "streamvec/kafka/consumer_lag.h"
#include "streamvec/kafka/document.h"
#include "streamvec/kafka/rdkafka_conf.h"
#include "streamvec/tokenizer/utf8.h"

namespace streamvec {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Bytes a record costs the broker beyond its key and value (record and batch headers), counted so
// that many small documents do not overrun the ring while their JSON sizes stay under budget.
constexpr int64_t kRecordOverheadBytes = 80;
constexpr size_t kReadChunkBytes = size_t{1} << 20;
// A line's pending bytes are cut into documents once they exceed this (bounded memory for the
// 100 MB single-line corpora); the pieces are the same as SplitText on the whole line.
constexpr size_t kPendingCutBytes = 2 * kMaxDocumentTextBytes;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One input: a file (followed by path and inode) or stdin.
struct Source {
  std::string id;    // absolute path, or "stdin"
  std::string path;  // "" for stdin
  int fd = -1;       // a plain file's (-1 for a compressed one)
  ino_t inode = 0;
  int64_t pos = 0;            // bytes consumed from the source (decoded bytes if compressed)
  // A compressed file (gzip, xz, zstd: decompress.h): its format, its decoder while decoding goes
  // on (null once it ended or failed), the decoded bytes to skip (a resume position) and, once
  // decoding ended, the file's size and mtime then (follow: a change is decoded again).
  std::string format;
  std::unique_ptr<DecompressingReader> decoder;
  int64_t skip_to = 0;
  int64_t ended_size = -1;
  struct timespec ended_mtime {};
  bool sniffed = true;        // false: too short to tell compressed data yet (follow)
  std::string pending;        // the current line (or file, with doc_per_file), not yet sent
  int64_t pending_start = 0;  // source offset of pending[0]
  int64_t covered = 0;        // end of the source range the documents produced so far cover
                              // (the next document's Document::start)
  bool done = false;          // reached EOF (without follow) or vanished
  bool grew = false;          // follow + doc_per_file: data arrived during the last poll

  ~Source() {
    if (fd > 0) ::close(fd);
  }
};

// What the delivery-report callback updates (librdkafka calls it inside rd_kafka_poll/flush on the
// Run thread; counters are atomic for stats()).
struct DeliveryState {
  std::atomic<int64_t> delivered_docs{0};
  std::atomic<int64_t> acked_bytes{0};  // flow-control bytes of documents acknowledged or failed
  std::atomic<int64_t> retries{0};
  std::mutex mu;
  // Messages whose delivery failed: produced again by Run. Touched only on the Run thread, but
  // guarded anyway since librdkafka documents no thread for the callback.
  // topic, key, value, document id (0: a rejection).
  std::deque<std::tuple<std::string, std::string, std::string, uint64_t>> failed;
  Clock::time_point last_error_log{};
  // Documents produced and not yet acknowledged, by id (the message's opaque): the source range
  // each covers and its flow-control bytes. GUARDED_BY(mu)
  struct InFlight {
    std::string source;
    int64_t start = 0;
    int64_t end = 0;
    int64_t flow = 0;
  };
  std::unordered_map<uint64_t, InFlight> in_flight;
  SourcePositions delivered;       // GUARDED_BY(mu): contiguous acknowledged prefix per source
  bool delivered_changed = false;  // GUARDED_BY(mu): since the offsets file was last written

  // A document's range is done with (acknowledged, or turned into a rejection). Holds mu.
  void Done(uint64_t id) {
    const auto it = in_flight.find(id);
    if (it == in_flight.end()) return;
    delivered.Cover(it->second.source, it->second.start, it->second.end);
    delivered_changed = true;
    in_flight.erase(it);
  }
};

// Flow bytes of a message that is not a document (a rejection: no flow control, no position).
constexpr intptr_t kRejectionTag = -1;

// Writes `text` ({"positions": ...}) to `path` through a temporary file renamed over it, so that
// a crash leaves the old file or the new one, never a torn one.
Status WriteOffsetsFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return Status::IoError("--offsets-file: cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IoError("--offsets-file: cannot rename " + tmp + ": " + ec.message());
  return Status::Ok();
}

// The positions of an offsets file written by WriteOffsetsFile; none when it does not exist.
// Errors: Corruption naming the file when it is not such a file.
StatusOr<std::map<std::string, int64_t>> ReadOffsetsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::map<std::string, int64_t>{};
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&path](const std::string& why) {
    return Status::Corruption("--offsets-file " + path + ": " + why +
                              " (expected {\"positions\": {source: byte offset}})");
  };
  if (j.is_discarded()) return bad("not JSON");
  if (!j.is_object() || !j.contains("positions") || !j["positions"].is_object()) {
    return bad("no \"positions\" object");
  }
  std::map<std::string, int64_t> out;
  for (const auto& [source, pos] : j["positions"].items()) {
    if (!pos.is_number_integer() || pos.get<int64_t>() < 0) {
      return bad("the position of " + source + " is not a non-negative integer");
    }
    out[source] = pos.get<int64_t>();
  }
  return out;
}

}  // namespace

struct Ingestor::Impl {
  IngestOptions options;
  std::string docs_topic;
  std::string rejected_topic;
  std::string group;
  rd_kafka_t* producer = nullptr;
  std::unique_ptr<ConsumerGroupLagProbe> probe;
  DeliveryState delivery;

  // Statistics (atomic: read by stats() from other threads).
  std::atomic<int64_t> produced_docs{0};
  std::atomic<int64_t> rejected{0};
  std::atomic<int64_t> lines{0};
  std::atomic<int64_t> input_bytes{0};
  std::atomic<int64_t> message_bytes{0};
  std::atomic<double> throttled_seconds{0};
  std::atomic<bool> paused{false};  // Pause(): no document is produced while set

  // Flow control state (Run thread only).
  int64_t produced_flow_bytes = 0;  // flow-control bytes of documents produced (incl. retries)
  int64_t produced_flow_msgs = 0;
  int64_t budget_total = 0;         // resolved max_lag_bytes (0 until the topic is known)
  int64_t budget_effective = 0;     // budget_total under the time bound (max_lag_seconds)
  ConsumptionRate rate;             // of the group, from its committed offsets
  Clock::time_point created = Clock::now();
  Clock::time_point last_budget_log{};
  int64_t budget_partition = 0;
  bool lag_known = false;
  int64_t lag_total_bytes = 0;      // at the last query, including unacked bytes then
  std::vector<int64_t> lag_partition_bytes;  // per partition, at the last query (+ unacked)
  int64_t since_query_bytes = 0;    // flow-control bytes produced since the last query
  std::vector<int64_t> sent_since_query;     // per partition, of documents sent to it
  int64_t unplaced_since_query = 0;  // retries left to the partitioner: counted on every partition
  int64_t partition_count = 0;      // partitions of <prefix>.docs (0 until the first lag query)
  uint64_t next_partition = 0;      // round-robin cursor over them
  Clock::time_point last_query_log{};

  std::map<std::string, std::unique_ptr<Source>> sources;  // by path ("" key for stdin)
  uint64_t last_document_id = 0;          // ids of documents in flight (Run thread)
  Clock::time_point last_offsets_save{};  // when the offsets file was last written
  int64_t offsets_file_bytes = 0;         // its size then

  // Rewrites IngestOptions::offsets_file when deliveries moved a position, at most every
  // offsets_flush_ms unless `force`. A failed write is logged (the next one may succeed).
  void MaybeSaveOffsets(bool force) {
    if (options.offsets_file.empty()) return;
    const auto now = Clock::now();
    // At most every offsets_flush_ms, and at most about 1 MB/s of rewrites when many sources
    // make the file large.
    const int64_t interval_ms =
        std::max<int64_t>(options.offsets_flush_ms, offsets_file_bytes / 1000);
    if (!force && now - last_offsets_save < std::chrono::milliseconds(interval_ms)) return;
    nlohmann::json positions = nlohmann::json::object();
    {
      std::lock_guard<std::mutex> lock(delivery.mu);
      if (!delivery.delivered_changed) return;
      delivery.delivered_changed = false;
      for (const auto& [source, pos] : delivery.delivered.positions()) positions[source] = pos;
    }
    last_offsets_save = now;
    const std::string text = nlohmann::json{{"positions", positions}}.dump() + "\n";
    offsets_file_bytes = static_cast<int64_t>(text.size());
    if (Status s = WriteOffsetsFile(options.offsets_file, text); !s.ok()) {
      spdlog::warn("ingest: {}", s.message());
      std::lock_guard<std::mutex> lock(delivery.mu);
      delivery.delivered_changed = true;
    }
  }

  ~Impl() {
    if (producer != nullptr) {
      rd_kafka_flush(producer, 0);
      rd_kafka_destroy(producer);
    }
  }

  int64_t Unacked() const { return produced_flow_bytes - delivery.acked_bytes.load(); }

  // ---- Flow control ----------------------------------------------------------------------

  // Asks the broker for the group's lag; false (logged, rate-limited) when it cannot.
  bool QueryLag() {
    const int64_t unacked = Unacked();  // before the query: double counting errs on the safe side
    StatusOr<GroupLag> lag = probe->Query(docs_topic, 2000);
    if (!lag.ok()) {
      const auto now = Clock::now();
      if (now - last_query_log > std::chrono::seconds(5)) {
        spdlog::warn("ingest: cannot read the lag of group {} on {} ({}); waiting and retrying",
                     group, docs_topic, lag.status().ToString());
        last_query_log = now;
      }
      return false;
    }
    if (budget_total == 0) {
      const int64_t parts = static_cast<int64_t>(lag->partitions.size());
      partition_count = parts;
      budget_total = options.max_lag_bytes > 0 ? options.max_lag_bytes
                                               : parts * kMockPartitionRingBytes * 4 / 5;
      budget_partition = options.max_partition_lag_bytes > 0 ? options.max_partition_lag_bytes
                                                             : kMockPartitionRingBytes * 4 / 5;
      budget_partition = std::min(budget_partition, budget_total);
      spdlog::info("ingest: {} has {} partitions; lag budget {} bytes, {} per partition",
                   docs_topic, parts, budget_total, budget_partition);
    }
    const int64_t avg = produced_flow_msgs > 0 ? produced_flow_bytes / produced_flow_msgs : 1024;
    int64_t committed = 0;
    for (const PartitionLag& pl : lag->partitions) committed += std::max<int64_t>(pl.committed, 0);
    rate.Add(Seconds(Clock::now() - created), committed);
    const double per_s = rate.MessagesPerSecond();
    const int64_t effective =
        TimeBoundedLagBudget(budget_total, std::min(budget_total, 2 * budget_partition),
                             per_s < 0 ? -1.0 : per_s * static_cast<double>(avg),
                             options.max_lag_seconds);
    if (effective != budget_effective && Clock::now() - last_budget_log > std::chrono::seconds(10)) {
      spdlog::info("ingest: group {} consumes {:.0f} messages/s; lag budget {} bytes", group,
                   per_s, effective);
      last_budget_log = Clock::now();
    }
    budget_effective = effective;
    lag_total_bytes = lag->total * avg + unacked;
    lag_partition_bytes.assign(lag->partitions.size(), 0);
    for (const PartitionLag& pl : lag->partitions) {
      lag_partition_bytes[pl.partition] = pl.lag * avg + unacked;
    }
    sent_since_query.assign(lag->partitions.size(), 0);
    since_query_bytes = 0;
    unplaced_since_query = 0;
    lag_known = true;
    return true;
  }

  // The partition the next document of `next` bytes goes to: the first, round robin from the
  // cursor, whose own budget holds it (each partition has its own ring; waiting for the one the
  // trainer happens to read slowest held back all the others), if the total budget holds too;
  // -1 when none does.
  int32_t Fit(int64_t next) const {
    if (!lag_known || partition_count <= 0) return -1;
    const int32_t parts = static_cast<int32_t>(partition_count);
    const int32_t cursor = static_cast<int32_t>(next_partition % static_cast<uint64_t>(parts));
    if (lag_total_bytes + since_query_bytes == 0) return cursor;  // a lone oversize message
    if (lag_total_bytes + since_query_bytes + next > budget_effective) return -1;
    for (int32_t k = 0; k < parts; ++k) {
      const int32_t p = (cursor + k) % parts;
      if (lag_partition_bytes[p] + sent_since_query[p] + unplaced_since_query + next <=
          budget_partition) {
        return p;
      }
    }
    return -1;
  }

  // Waits until `next` more bytes fit the budget of some partition (returned). -1 when stopped
  // first.
  int32_t WaitForBudget(int64_t next, const std::atomic<bool>& stop) {
    // Paused (an operator's POST /v1/admin/ingest/pause): deliveries go on, nothing new is sent.
    while (paused.load() && !stop.load()) {
      rd_kafka_poll(producer, 100);
      ProduceFailedAgain();
      MaybeSaveOffsets(false);
    }
    if (stop.load()) return -1;
    if (const int32_t p = Fit(next); p >= 0) return p;
    const auto start = Clock::now();
    int wait_ms = 2;
    int32_t fits = -1;
    while (!stop.load()) {
      rd_kafka_poll(producer, 0);
      ProduceFailedAgain();
      if (QueryLag() && (fits = Fit(next)) >= 0) break;
      rd_kafka_poll(producer, wait_ms);
      MaybeSaveOffsets(false);
      // Loopback queries are cheap; an unreachable broker is asked less often.
      wait_ms = std::min(lag_known ? 20 : 2000, wait_ms * 2);
    }
    throttled_seconds.store(throttled_seconds.load() + Seconds(Clock::now() - start));
    return fits;
  }

  // ---- Producing -------------------------------------------------------------------------

  // Hands one message to librdkafka, waiting while its queue is full. `flow_bytes` > 0 marks a
  // document (accounted for flow control); rejections pass kRejectionTag.
  // `id`: the document's id in delivery.in_flight (its opaque for the delivery report); 0 for a
  // rejection.
  void ProduceRaw(const std::string& topic, const std::string& key, const std::string& value,
                  intptr_t flow_bytes, int32_t partition = RD_KAFKA_PARTITION_UA, uint64_t id = 0) {
    while (true) {
      const rd_kafka_resp_err_t e = rd_kafka_producev(
          producer, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(partition),
          RD_KAFKA_V_KEY(key.data(), key.size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<uintptr_t>(id))), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(producer, 10);
        continue;
      }
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        // Only invalid arguments (e.g. a message over message.max.bytes) end here: not
        // retriable, so the document is turned into a rejection.
        spdlog::error("ingest: cannot produce to {}: {}", topic, rd_kafka_err2str(e));
        if (flow_bytes != kRejectionTag) {
          if (id != 0) {
            std::lock_guard<std::mutex> lock(delivery.mu);
            delivery.Done(id);  // its range is handled: a rejection
          }
          ++rejected;
          ProduceRaw(rejected_topic, key,
                     RejectionToJson(std::string("not producible: ") + rd_kafka_err2str(e), key,
                                     value),
                     kRejectionTag);
        }
        return;
      }
      break;
    }
    if (flow_bytes != kRejectionTag) {
      produced_flow_bytes += flow_bytes;
      ++produced_flow_msgs;
      since_query_bytes += flow_bytes;
      if (partition >= 0 && static_cast<size_t>(partition) < sent_since_query.size()) {
        sent_since_query[partition] += flow_bytes;
      } else {
        unplaced_since_query += flow_bytes;
      }
    }
    rd_kafka_poll(producer, 0);
  }

  void ProduceFailedAgain() {
    std::deque<std::tuple<std::string, std::string, std::string, uint64_t>> again;
    {
      std::lock_guard<std::mutex> lock(delivery.mu);
      again.swap(delivery.failed);
    }
    for (auto& [topic, key, value, id] : again) {
      ++delivery.retries;
      const intptr_t flow = topic == docs_topic
                                ? static_cast<intptr_t>(key.size() + value.size()) +
                                      kRecordOverheadBytes
                                : kRejectionTag;
      ProduceRaw(topic, key, value, flow, RD_KAFKA_PARTITION_UA, id);
    }
  }

  // False when stopped while waiting for the budget (the document was not produced).
  bool ProduceDocument(Source& src, int64_t start, std::string_view text, int64_t end,
                       const std::atomic<bool>& stop) {
    Document doc;
    doc.id = src.id + ":" + std::to_string(start);
    doc.source = src.id;
    doc.text = std::string(text);
    if (options.detect_language) doc.lang = DetectLanguage(text);
    doc.offset = end;
    doc.start = std::min(src.covered, start);
    const std::string value = DocumentToJson(doc);
    if (value.size() > kMaxDocumentMessageBytes) {
      Reject(src, start, "document is " + std::to_string(value.size()) +
                             " bytes as JSON, over the limit of " +
                             std::to_string(kMaxDocumentMessageBytes), text);
      return true;
    }
    const int64_t flow = static_cast<int64_t>(src.id.size() + value.size()) + kRecordOverheadBytes;
    // Round robin over the partitions with room (a single source, like a one-line 100 MB
    // corpus, would otherwise fill one partition's 5 MiB ring on the mock and be throttled to
    // it); the [start, offset) ranges let the trainer record a contiguous trained prefix per
    // source.
    const int32_t partition = WaitForBudget(flow, stop);
    if (partition < 0) return false;
    next_partition = static_cast<uint64_t>(partition) + 1;
    const uint64_t id = ++last_document_id;
    {
      std::lock_guard<std::mutex> lock(delivery.mu);
      delivery.in_flight[id] = {src.id, doc.start, end, flow};
    }
    ProduceRaw(docs_topic, src.id, value, flow, partition, id);
    MaybeSaveOffsets(false);
    src.covered = std::max(src.covered, end);
    ++produced_docs;
    message_bytes += static_cast<int64_t>(src.id.size() + value.size());
    return true;
  }

  void Reject(const Source& src, int64_t start, const std::string& reason,
              std::string_view payload) {
    const std::string origin = src.id + ":" + std::to_string(start);
    spdlog::warn("ingest: rejected {}: {}", origin, reason);
    ++rejected;
    ProduceRaw(rejected_topic, src.id, RejectionToJson(reason, origin, payload), kRejectionTag);
  }

  // Sends the documents of src.pending. With `final` the pending text is a complete line (or
  // file) ending at `end`; otherwise the last piece is kept back (it may continue) and only the
  // pieces before it are sent. Consumed bytes leave pending. False when stopped.
  bool EmitPending(Source& src, bool final, int64_t end, const std::atomic<bool>& stop) {
    const std::string_view text(src.pending);
    const auto pieces = SplitText(text);
    size_t count = pieces.size();
    size_t consumed = text.size();
    if (!final) {
      if (count > 0) {
        --count;
        consumed = pieces.back().first;
      }
    }
    for (size_t k = 0; k < count; ++k) {
      const auto [first, length] = pieces[k];
      const std::string_view piece = text.substr(first, length);
      const int64_t start = src.pending_start + static_cast<int64_t>(first);
      const int64_t piece_end = (final && k + 1 == count)
                                    ? end
                                    : start + static_cast<int64_t>(length);
      const size_t bad = FindInvalidUtf8(piece);
      if (bad != std::string_view::npos) {
        Reject(src, start, "invalid UTF-8 at byte " + std::to_string(start + bad), piece);
        continue;
      }
      // Binary data given as text (a NUL, an escape): rejected like invalid UTF-8.
      if (const size_t ctl = FindControlByte(piece); ctl != std::string_view::npos) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(piece[ctl]));
        Reject(src, start,
               std::string("control byte ") + hex + " at byte " + std::to_string(start + ctl),
               piece);
        continue;
      }
      if (!ProduceDocument(src, start, piece, piece_end, stop)) {
        // Keep what was not sent, so nothing is reported as consumed past it.
        src.pending.erase(0, first);
        src.pending_start = start;
        return false;
      }
    }
    src.pending.erase(0, consumed);
    src.pending_start += static_cast<int64_t>(consumed);
    return true;
  }

  // Processes newly read bytes of a source (`data` starts at src.pos).
  bool Consume(Source& src, std::string_view data, const std::atomic<bool>& stop) {
    size_t i = 0;
    while (i < data.size()) {
      if (options.doc_per_file) {
        src.pending.append(data.substr(i));
        i = data.size();
      } else {
        const size_t nl = data.find('\n', i);
        const size_t stop_at = nl == std::string_view::npos ? data.size() : nl + 1;
        src.pending.append(data.substr(i, stop_at - i));
        i = stop_at;
        if (nl != std::string_view::npos) {
          ++lines;
          const int64_t end = src.pos + static_cast<int64_t>(stop_at);
          if (!EmitPending(src, /*final=*/true, end, stop)) return false;
          src.pending_start = end;
          continue;
        }
      }
      if (src.pending.size() > kPendingCutBytes && !EmitPending(src, false, 0, stop)) return false;
    }
    src.pos += static_cast<int64_t>(data.size());
    input_bytes += static_cast<int64_t>(data.size());
    return true;
  }

  // ---- Sources ---------------------------------------------------------------------------

  Status Open(Source& src, int64_t start) {
    if (src.fd >= 0) ::close(src.fd);
    src.fd = -1;
    src.decoder.reset();
    src.format.clear();
    src.ended_size = -1;
    src.skip_to = 0;
    // Compressed data is told by its first bytes (decompress.h), whatever the file's name.
    StatusOr<std::unique_ptr<DecompressingReader>> decoder = DecompressingReader::Open(src.path);
    if (!decoder.ok()) return decoder.status();
    struct stat st;
    if (*decoder != nullptr) {
      if (::stat(src.path.c_str(), &st) == 0) src.inode = st.st_ino;
      src.decoder = std::move(decoder).value();
      src.format = std::string(src.decoder->format());
      src.sniffed = true;
      src.skip_to = start;  // decoded and skipped by ReadCompressed
      src.pos = 0;
      src.pending.clear();
      src.pending_start = start;
      src.covered = start;
      ResetPosition(src.id, start);
      return Status::Ok();
    }
    src.fd = ::open(src.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (src.fd < 0) return Status::IoError("cannot open " + src.path + ": " + strerror(errno));
    if (::fstat(src.fd, &st) == 0) {
      src.inode = st.st_ino;
      // Followed and still too short to hold a compressed format's magic number: looked at
      // again once it has (ReadAvailable).
      src.sniffed = !options.follow || start > 0 || st.st_size >= 6;
      if (start > st.st_size) {
        spdlog::warn("ingest: {} is {} bytes, shorter than its resume position {}; reading it "
                     "from the start", src.id, static_cast<int64_t>(st.st_size), start);
        start = 0;
      }
    }
    if (start > 0 && ::lseek(src.fd, start, SEEK_SET) != start) {
      return Status::IoError("cannot seek " + src.path + " to " + std::to_string(start));
    }
    src.pos = start;
    src.pending.clear();
    src.pending_start = start;
    src.covered = start;
    ResetPosition(src.id, start);
    return Status::Ok();
  }

  // A source (re)opened at `start`: its delivered position starts there.
  void ResetPosition(const std::string& id, int64_t start) {
    std::lock_guard<std::mutex> lock(delivery.mu);
    delivery.delivered.Reset(id, start);
    delivery.delivered_changed = true;
  }

  int64_t StartPosition(const std::string& id) const {
    const auto it = options.start_positions.find(id);
    return it == options.start_positions.end() ? 0 : std::max<int64_t>(0, it->second);
  }

  Status AddFile(const fs::path& path) {
    const std::string key = fs::absolute(path).lexically_normal().string();
    if (sources.count(key) > 0) return Status::Ok();
    auto src = std::make_unique<Source>();
    src->id = key;
    src->path = key;
    SV_RETURN_IF_ERROR(Open(*src, StartPosition(key)));
    if (src->pos > 0 || src->skip_to > 0) {
      spdlog::info("ingest: resuming {} at byte {}{}", key, std::max(src->pos, src->skip_to),
                   src->format.empty() ? "" : " of its decoded " + src->format + " data");
    } else if (!src->format.empty()) {
      spdlog::info("ingest: {} is {} data; reading it decoded", key, src->format);
    }
    sources.emplace(key, std::move(src));
    return Status::Ok();
  }

  // Adds the files not seen yet (all of them on the first call).
  Status Scan() {
    if (options.from == "-") {
      if (sources.empty()) {
        auto src = std::make_unique<Source>();
        src->id = "stdin";
        src->fd = 0;
        sources.emplace("", std::move(src));
      }
      return Status::Ok();
    }
    std::error_code ec;
    const fs::path from(options.from);
    if (!fs::is_directory(from, ec)) return AddFile(from);
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(
             from, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec)) files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      Status s = AddFile(f);
      if (!s.ok()) spdlog::warn("ingest: {}", s.message());  // e.g. removed meanwhile
    }
    return Status::Ok();
  }

  // Reads what a source has now. At EOF without follow, sends the rest and marks it done.
  // False when stopped.
  StatusOr<bool> ReadAvailable(Source& src, const std::atomic<bool>& stop) {
    if (!src.sniffed && src.pos == 0) {
      // A followed file that was too short to tell: look at its first bytes again.
      struct stat st;
      if (::fstat(src.fd, &st) == 0 && st.st_size >= 6) SV_RETURN_IF_ERROR(Open(src, 0));
    }
    if (!src.format.empty()) return ReadCompressed(src, stop);
    std::string buf(kReadChunkBytes, '\0');
    bool got_any = false;
    while (!stop.load()) {
      if (src.path.empty()) {
        // stdin: wait in short slices so that `stop` is noticed.
        pollfd p{src.fd, POLLIN, 0};
        const int r = ::poll(&p, 1, 100);
        if (r == 0) {
          rd_kafka_poll(producer, 0);
          MaybeSaveOffsets(false);
          continue;
        }
      }
      const ssize_t n = ::read(src.fd, buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::IoError("cannot read " + src.id + ": " + strerror(errno));
      }
      if (n == 0) break;
      got_any = true;
      std::string_view data(buf.data(), static_cast<size_t>(n));
      if (src.path.empty() && src.pos < StartPosition(src.id)) {
        // Resuming stdin: skip what was sent before.
        const size_t skip = static_cast<size_t>(
            std::min<int64_t>(StartPosition(src.id) - src.pos, static_cast<int64_t>(n)));
        src.pos += static_cast<int64_t>(skip);
        src.pending_start = src.pos;
        src.covered = src.pos;
        input_bytes += static_cast<int64_t>(skip);
        data.remove_prefix(skip);
      }
      if (!Consume(src, data, stop)) return false;
    }
    if (stop.load()) return false;
    const bool at_end_for_good = !options.follow || src.path.empty();
    if (at_end_for_good) {
      if (options.doc_per_file) ++lines;
      else if (!src.pending.empty()) ++lines;  // the last, unterminated line
      if (!EmitPending(src, /*final=*/true, src.pos, stop)) return false;
      src.done = true;
      return true;
    }
    if (options.doc_per_file) {
      // Following whole files: send once the file stopped growing for one poll.
      if (!got_any && src.grew && !src.pending.empty()) {
        ++lines;
        if (!EmitPending(src, true, src.pos, stop)) return false;
      }
      src.grew = got_any;
    }
    return CheckReplaced(src);
  }

  // A compressed source: decodes it to its end (or its first error), sending its lines; the end
  // of the data ends its last line. Corrupt or truncated data is logged and recorded in
  // <prefix>.rejected, naming the file and the decoded offset; what was decoded before it is
  // sent (following: its complete lines) and the other sources go on. Without follow the source
  // is then done; following, the file is decoded again once its size or mtime changes (a file
  // still being written, more members appended), skipping what was sent, or from 0 if it shrank
  // or was replaced. False when stopped.
  StatusOr<bool> ReadCompressed(Source& src, const std::atomic<bool>& stop) {
    if (src.decoder == nullptr) return CheckCompressedChanged(src);
    std::string buf(kReadChunkBytes, '\0');
    Status broken;
    while (!stop.load()) {
      StatusOr<size_t> n = src.decoder->Read(buf.data(), buf.size());
      if (!n.ok()) {
        broken = n.status();
        break;
      }
      if (*n == 0) break;
      std::string_view data(buf.data(), *n);
      if (src.pos < src.skip_to) {
        // Resuming: skip the decoded bytes that were sent before.
        const size_t skip = static_cast<size_t>(
            std::min<int64_t>(src.skip_to - src.pos, static_cast<int64_t>(data.size())));
        src.pos += static_cast<int64_t>(skip);
        src.pending_start = src.pos;
        src.covered = std::max(src.covered, src.pos);
        data.remove_prefix(skip);
      }
      if (!data.empty() && !Consume(src, data, stop)) return false;
      rd_kafka_poll(producer, 0);
    }
    if (stop.load()) return false;
    if (broken.ok() && src.pos < src.skip_to) {
      spdlog::warn("ingest: {} decodes to {} bytes, fewer than its resume position {}; reading "
                   "it from the start", src.id, src.pos, src.skip_to);
      SV_RETURN_IF_ERROR(Open(src, 0));
      return true;
    }
    if (!broken.ok()) {
      if (options.follow) {
        spdlog::error("ingest: {}; the lines complete before it are sent, and the file is read "
                      "on from there when it changes", broken.message());
      } else {
        spdlog::error("ingest: {}; the {} bytes decoded before it are sent", broken.message(),
                      src.pos);
      }
      ++rejected;
      ProduceRaw(rejected_topic, src.id,
                 RejectionToJson(broken.message(), src.id + ":" + std::to_string(src.pos), ""),
                 kRejectionTag);
    }
    // The end of the data ends the last line. After an error, a followed file's unfinished line
    // waits (the file may be still being written), as lines of plain followed files do.
    if (broken.ok() || !options.follow) {
      if (!src.pending.empty()) ++lines;
      if (!EmitPending(src, /*final=*/true, src.pos, stop)) return false;
    }
    src.decoder.reset();
    if (!options.follow) {
      src.done = true;
      return true;
    }
    struct stat st;
    if (::stat(src.path.c_str(), &st) == 0) {
      src.ended_size = st.st_size;
      src.ended_mtime = st.st_mtim;
    }
    return true;
  }

  // Follow mode, a compressed source whose decoding ended: notices removal, replacement,
  // shrinking (decoded again from 0) and growth or rewriting (decoded again, skipping what was
  // read).
  StatusOr<bool> CheckCompressedChanged(Source& src) {
    struct stat st;
    if (::stat(src.path.c_str(), &st) != 0) {
      spdlog::info("ingest: {} disappeared; stopped following it", src.id);
      src.done = true;
      return true;
    }
    if (st.st_size == src.ended_size && st.st_mtim.tv_sec == src.ended_mtime.tv_sec &&
        st.st_mtim.tv_nsec == src.ended_mtime.tv_nsec && st.st_ino == src.inode) {
      return true;
    }
    const bool from_start = st.st_ino != src.inode || st.st_size < src.ended_size;
    const int64_t resume = from_start ? 0 : src.pending_start;  // the first byte not sent
    spdlog::info("ingest: {} changed; decoding it again{}", src.id,
                 from_start ? " from the start"
                            : ", skipping the " + std::to_string(resume) + " bytes read");
    SV_RETURN_IF_ERROR(Open(src, resume));
    return true;
  }

  // Follow mode: notices truncation, replacement (new inode) and removal of a followed file.
  StatusOr<bool> CheckReplaced(Source& src) {
    struct stat st;
    if (::stat(src.path.c_str(), &st) != 0) {
      spdlog::info("ingest: {} disappeared; stopped following it", src.id);
      src.done = true;
      return true;
    }
    if (st.st_ino != src.inode || st.st_size < src.pos) {
      spdlog::info("ingest: {} was {}; reading it from the start", src.id,
                   st.st_ino != src.inode ? "replaced" : "truncated");
      ::close(src.fd);
      src.fd = -1;
      SV_RETURN_IF_ERROR(Open(src, 0));
    }
    return true;
  }

  // Waits until everything produced is delivered (failed deliveries produced again). Once `stop`
  // is set, gives up after stop_flush_timeout_ms. False when messages are left.
  // librdkafka learns a topic's partitions and leaders only at its next metadata refresh of
  // unknown topics, about a second after the first message to it is queued; asking for the
  // topic's metadata first lets the first document go out at once (the rejections' topic is
  // left alone: asking could create it on a cluster that creates topics on demand). Best
  // effort: an unreachable broker is handled by the flow control's retries.
  void WarmUpTopics() {
    rd_kafka_topic_t* topic = rd_kafka_topic_new(producer, docs_topic.c_str(), nullptr);
    if (topic == nullptr) return;
    const rd_kafka_metadata_t* md = nullptr;
    if (rd_kafka_metadata(producer, 0, topic, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_metadata_destroy(md);
    }
    rd_kafka_topic_destroy(topic);  // librdkafka keeps the topic's state for producev
  }

  bool Flush(const std::atomic<bool>& stop) {
    auto deadline = Clock::time_point::max();
    while (true) {
      ProduceFailedAgain();
      if (rd_kafka_outq_len(producer) == 0) {
        std::lock_guard<std::mutex> lock(delivery.mu);
        if (delivery.failed.empty()) return true;
        continue;
      }
      if (stop.load() && deadline == Clock::time_point::max()) {
        deadline = Clock::now() + std::chrono::milliseconds(options.stop_flush_timeout_ms);
      }
      if (Clock::now() > deadline) return false;
      rd_kafka_poll(producer, 50);
    }
  }
};

Ingestor::Ingestor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Ingestor::~Ingestor() = default;

namespace {

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* state = static_cast<DeliveryState*>(opaque);
  const auto id = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(m->_private));
  std::lock_guard<std::mutex> lock(state->mu);
  if (id != 0) {
    // Flow bytes are acknowledged either way (re-counted when produced again).
    const auto it = state->in_flight.find(id);
    if (it != state->in_flight.end()) state->acked_bytes += it->second.flow;
  }
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (id != 0) {
      ++state->delivered_docs;
      state->Done(id);
    }
    return;
  }
  // Failed for good inside librdkafka (e.g. message.timeout.ms): produce it again.
  const auto now = Clock::now();
  if (now - state->last_error_log > std::chrono::seconds(5)) {
    spdlog::warn("ingest: delivery to {} failed ({}); producing it again",
                 rd_kafka_topic_name(m->rkt), rd_kafka_err2str(m->err));
    state->last_error_log = now;
  }
  state->failed.emplace_back(rd_kafka_topic_name(m->rkt),
                             std::string(static_cast<const char*>(m->key), m->key_len),
                             std::string(static_cast<const char*>(m->payload), m->len), id);
}

void OnError(rd_kafka_t*, int err, const char* reason, void* opaque) {
  auto* state = static_cast<DeliveryState*>(opaque);
  std::lock_guard<std::mutex> lock(state->mu);
  const auto now = Clock::now();
  if (now - state->last_error_log > std::chrono::seconds(5)) {
    spdlog::warn("ingest: Kafka: {} ({}); retrying",
                 reason, rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err)));
    state->last_error_log = now;
  }
}

void OnLog(const rd_kafka_t*, int level, const char* facility, const char* message) {
  if (level <= 3) spdlog::debug("librdkafka {}: {}", facility, message);
}

}  // namespace

ConsumptionRate::ConsumptionRate(double window_seconds, double min_span_seconds)
    : window_(window_seconds), min_span_(min_span_seconds) {}

void ConsumptionRate::Add(double t, int64_t committed_messages) {
  samples_.emplace_back(t, committed_messages);
  // Keep the newest sample at or before the window's start, so the span covers the window.
  while (samples_.size() > 2 && samples_[1].first <= t - window_) samples_.pop_front();
}

double ConsumptionRate::MessagesPerSecond() const {
  if (samples_.size() < 2) return -1;
  const auto& [t0, c0] = samples_.front();
  const auto& [t1, c1] = samples_.back();
  if (t1 - t0 < min_span_ || c1 <= c0) return -1;
  return static_cast<double>(c1 - c0) / (t1 - t0);
}

int64_t TimeBoundedLagBudget(int64_t cap, int64_t floor, double bytes_per_second,
                             double seconds) {
  if (bytes_per_second < 0 || seconds <= 0) return cap;
  const double bound = bytes_per_second * seconds;
  if (bound >= static_cast<double>(cap)) return cap;
  return std::min(cap, std::max(floor, static_cast<int64_t>(bound)));
}

StatusOr<std::unique_ptr<Ingestor>> Ingestor::Create(const IngestOptions& options) {
  if (options.from.empty()) return Status::InvalidArgument("--from is empty");
  if (options.max_lag_bytes < 0 || options.max_partition_lag_bytes < 0) {
    return Status::InvalidArgument("--max-lag-bytes must not be negative");
  }
  if (!(options.max_lag_seconds >= 0)) {
    return Status::InvalidArgument("--max-lag-seconds must not be negative");
  }
  if (options.poll_interval_ms < 1) {
    return Status::InvalidArgument("poll interval must be at least 1 ms");
  }
  if (options.from != "-") {
    std::error_code ec;
    if (!fs::exists(options.from, ec)) return Status::NotFound("--from: no such file or directory: " + options.from);
    if (!fs::is_directory(options.from, ec) && !fs::is_regular_file(options.from, ec)) {
      return Status::InvalidArgument("--from: not a file or directory: " + options.from);
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (!options.offsets_file.empty()) {
    if (options.offsets_flush_ms < 1) {
      return Status::InvalidArgument("offsets flush interval must be at least 1 ms");
    }
    StatusOr<std::map<std::string, int64_t>> saved = ReadOffsetsFile(options.offsets_file);
    if (!saved.ok()) return saved.status();
    for (const auto& [source, pos] : *saved) impl->options.start_positions.emplace(source, pos);
    if (!saved->empty()) {
      spdlog::info("ingest: resuming {} source(s) from {}", saved->size(), options.offsets_file);
    }
  }
  impl->delivery.delivered = SourcePositions(impl->options.start_positions);
  impl->docs_topic = DocsTopic(options.kafka.topic_prefix);
  impl->rejected_topic = RejectedTopic(options.kafka.topic_prefix);
  impl->group = options.group.empty() ? TrainersGroup(options.kafka.topic_prefix) : options.group;

  std::vector<std::pair<std::string, std::string>> defaults = {
      {"enable.idempotence", "true"},
      {"linger.ms", "5"},
      {"message.max.bytes", std::to_string(kMaxDocumentMessageBytes + 4096)}};
  for (auto& p : IdempotentProducerDefaults(options.kafka)) {
    defaults.push_back(std::move(p));
  }
  StatusOr<rd_kafka_conf_t*> conf = MakeRdKafkaConf(options.kafka, defaults);
  if (!conf.ok()) return conf.status();
  rd_kafka_conf_set_opaque(*conf, &impl->delivery);
  rd_kafka_conf_set_dr_msg_cb(*conf, OnDelivery);
  rd_kafka_conf_set_error_cb(*conf, OnError);
  rd_kafka_conf_set_log_cb(*conf, OnLog);
  char err[512];
  impl->producer = rd_kafka_new(RD_KAFKA_PRODUCER, *conf, err, sizeof err);
  if (impl->producer == nullptr) {
    rd_kafka_conf_destroy(*conf);
    return Status::InvalidArgument(std::string("cannot create the Kafka producer: ") + err);
  }
  StatusOr<std::unique_ptr<ConsumerGroupLagProbe>> probe =
      ConsumerGroupLagProbe::Create(options.kafka, impl->group);
  if (!probe.ok()) return probe.status();
  impl->probe = std::move(probe).value();
  return std::unique_ptr<Ingestor>(new Ingestor(std::move(impl)));
}

void Ingestor::Pause(bool paused) { impl_->paused.store(paused); }

bool Ingestor::paused() const { return impl_->paused.load(); }

Status Ingestor::Run(const std::atomic<bool>& stop) {
  Impl& m = *impl_;
  m.WarmUpTopics();
  Status failure;
  while (!stop.load()) {
    Status s = m.Scan();
    if (!s.ok()) {
      failure = s;
      break;
    }
    bool all_done = true;
    for (auto& [key, src] : m.sources) {
      if (src->done) continue;
      StatusOr<bool> r = m.ReadAvailable(*src, stop);
      if (!r.ok()) {
        failure = r.status();
        break;
      }
      if (!src->done) all_done = false;
      if (!*r) break;  // stopped
    }
    if (!failure.ok() || stop.load()) break;
    char reason[512];
    if (const rd_kafka_resp_err_t e = rd_kafka_fatal_error(m.producer, reason, sizeof reason);
        e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Status::Internal(std::string("fatal Kafka producer error: ") + reason);
    }
    if (all_done && !m.options.follow) break;
    if (all_done && m.options.from == "-") break;
    // Following: wait for more, serving delivery reports meanwhile.
    const auto until = Clock::now() + std::chrono::milliseconds(m.options.poll_interval_ms);
    while (!stop.load() && Clock::now() < until) {
      rd_kafka_poll(m.producer, 20);
      m.ProduceFailedAgain();
      m.MaybeSaveOffsets(false);
    }
  }
  (void)m.Flush(stop);
  m.MaybeSaveOffsets(true);
  char reason[512];
  if (rd_kafka_fatal_error(m.producer, reason, sizeof reason) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::Internal(std::string("fatal Kafka producer error: ") + reason);
  }
  if (!failure.ok()) return failure;
  const int left = rd_kafka_outq_len(m.producer);
  if (left > 0) {
    return Status::IoError("stopped with " + std::to_string(left) +
                           " messages not acknowledged by the broker");
  }
  return Status::Ok();
}

IngestStats Ingestor::stats() const {
  const Impl& m = *impl_;
  IngestStats s;
  s.documents_produced = m.produced_docs.load();
  s.documents_delivered = m.delivery.delivered_docs.load();
  s.rejected = m.rejected.load();
  s.lines = m.lines.load();
  s.input_bytes = m.input_bytes.load();
  s.message_bytes = m.message_bytes.load();
  s.delivery_retries = m.delivery.retries.load();
  s.throttled_seconds = m.throttled_seconds.load();
  return s;
}

}  // namespace streamvec

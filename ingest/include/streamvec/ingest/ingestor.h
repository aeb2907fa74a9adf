// File, directory and stdin connectors: text in, documents out to Kafka topic <prefix>.docs.
//
// One document per line (or per file with doc_per_file). Source id = the file's absolute path
// (or "stdin"); it is the message key, so one source's documents stay in one partition, in order.
// Document.id = "<source>:<start byte>", Document.offset = the byte position just past the
// document in its source (resume there to continue after it). A line longer than
// kMaxDocumentTextBytes is cut at whitespace (SplitText) into several documents; each piece
// carries its own end offset, the last piece of a line the line's end (past its '\n').
// Whitespace-only lines are skipped; positions still advance. A piece with invalid UTF-8 (for a
// line under the size limit: the whole line) goes to <prefix>.rejected with the reason and the
// origin "source:offset", and the stream goes on.
//
// Flow control. The embedded broker keeps only about 5 MiB per partition and drops older data
// silently, and the trainers commit offsets only once the documents are in a durable snapshot.
// Documents go round robin over the partitions that have room: before producing, the ingestor
// picks the first partition p, from the round-robin cursor on, for which
//     lag_bytes(all partitions) + unacked + next <= max_lag_bytes            and
//     lag_bytes(p)              + unacked + next <= max_partition_lag_bytes
// where lag_bytes = (high watermark - the group's committed offset, or - the low watermark when
// the group has none) x the average size of the messages this ingestor produced (plus a per-record
// overhead) and what it sent there since it asked, `unacked` = bytes produced but not yet
// acknowledged, and `next` the message about to be produced. While no partition has room it
// waits (counted in throttled_seconds) and asks again. A message alone larger than the budget is
// let through once nothing is pending.
//
// Delivery: idempotent producer (enable.idempotence=true, acks=all; one request in flight on the
// embedded broker, which does not enforce the producer's sequence: IdempotentProducerDefaults);
// a message whose delivery fails (e.g. message.timeout.ms ran out while the broker was down) is
// produced again, so delivery is at least once. An unreachable broker is logged and retried with
// backoff, never fatal.
#ifndef STREAMVEC_INGEST_INGESTOR_H_
#define STREAMVEC_INGEST_INGESTOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "streamvec/base/status.h"
#include "streamvec/kafka/client_config.h"

namespace streamvec {

// Ring size of one partition on the embedded broker (librdkafka's mock cluster), in bytes.
inline constexpr int64_t kMockPartitionRingBytes = int64_t{5} << 20;

struct IngestOptions {
  KafkaOptions kafka;            // brokers, topic prefix, extra librdkafka properties
  std::string from;              // a file, a directory (its regular files, recursively, sorted;
                                 // names starting with '.' skipped) or "-" for stdin
  bool doc_per_file = false;     // one document per file (cut at whitespace if too long)
  // Each document's `lang` from its text (DetectLanguage: CLD2 on its first 8 KiB; "" when not
  // reliable).
  bool detect_language = true;
  // Keep watching like `tail -F`: new files in the directory and data appended to files are sent
  // (polled every poll_interval_ms); only complete lines ('\n'-terminated) are sent while
  // following. Without follow, Run returns at EOF of all sources and sends the last unterminated
  // line. With doc_per_file and follow, a file's new data is sent once it stopped growing for
  // one poll interval. A file that shrinks or is replaced (new inode) is read again from 0.
  bool follow = false;
  int poll_interval_ms = 200;    // follow mode: how often files and directories are checked
  std::string group;             // consumer group whose lag is watched; "" = <prefix>.trainers
  // Flow-control budget over all partitions of <prefix>.docs, in bytes; 0 = 80% of
  // (partitions x kMockPartitionRingBytes), read from the topic's metadata.
  int64_t max_lag_bytes = 0;
  // Budget for the single worst partition, in bytes (one source fills one partition); 0 = 80% of
  // kMockPartitionRingBytes (the trainer commits at half of it: KafkaTrainerOptions::
  // snapshot_partition_bytes). Raise both on a real Kafka cluster with real retention.
  int64_t max_partition_lag_bytes = 0;
  // Time bound on the budget: the total budget is also at most the group's measured consumption
  // rate (ConsumptionRate over its committed offsets, bytes/s) times this many seconds, and at
  // least twice the partition budget; the byte budgets above stay the ceiling (on the embedded
  // broker, the ring). So a slow trainer is not handed minutes of backlog. 0: bytes only.
  double max_lag_seconds = 10.0;
  // Source id -> byte offset to resume from (a Document.offset the trainer recorded). Sources
  // not listed start at 0. For stdin, that many bytes are read and skipped.
  std::map<std::string, int64_t> start_positions;
  // Where each source's delivered position is kept across restarts (like Kafka Connect
  // standalone's offset.storage.file.filename): a JSON file {"positions": {source id: byte
  // offset}} holding, per source, the end of the contiguous prefix whose documents the broker
  // acknowledged (SourcePositions over the deliveries). Read at Create (a source listed in
  // start_positions keeps that position), rewritten atomically (temporary file and rename) at
  // most every offsets_flush_ms (and at most about 1 MB/s of rewrites for a file of many
  // sources) while documents are delivered, and when Run returns. A restart after a crash sends
  // again only what was delivered since the last rewrite (at least once). "" = none.
  std::string offsets_file;
  int offsets_flush_ms = 20;
  // After stop, how long Run keeps trying to deliver what was already produced, in ms.
  int stop_flush_timeout_ms = 5000;
};

// The rate at which a consumer group works through a topic, from its committed offsets over a
// sliding window of lag queries: what IngestOptions::max_lag_seconds scales. Trainers commit at
// snapshots (every few seconds or MiB), so the window spans several commits. Not thread-safe.
class ConsumptionRate {
 public:
  // window_seconds > 0: how far back samples count; min_span_seconds: the shortest span a rate
  // is reported over.
  explicit ConsumptionRate(double window_seconds = 10.0, double min_span_seconds = 2.0);
  // One lag query's result: at time t (seconds, monotonic, non-decreasing), the sum of the
  // group's committed offsets over the topic's partitions (messages; 0 for none committed).
  void Add(double t, int64_t committed_messages);
  // Messages a second over the samples of the last window, or -1 while they span less than
  // min_span_seconds or no offset moved in them (a stalled or idle group: no rate to size from).
  double MessagesPerSecond() const;

 private:
  double window_;
  double min_span_;
  std::deque<std::pair<double, int64_t>> samples_;  // (t, committed), oldest first
};

// The total lag budget under a time bound, in bytes: min(cap, max(floor, bytes_per_second x
// seconds)); `cap` when the rate is unknown (< 0) or seconds <= 0.
int64_t TimeBoundedLagBudget(int64_t cap, int64_t floor, double bytes_per_second, double seconds);

// Counters since Create. All are totals; safe to read from any thread while Run works.
struct IngestStats {
  int64_t documents_produced = 0;   // documents handed to the producer (retries not counted)
  int64_t documents_delivered = 0;  // documents acknowledged by the broker
  int64_t rejected = 0;             // pieces sent to <prefix>.rejected
  int64_t lines = 0;                // input lines read (with doc_per_file: files)
  int64_t input_bytes = 0;          // source bytes consumed
  int64_t message_bytes = 0;        // bytes of document messages produced (key + value)
  int64_t delivery_retries = 0;     // messages produced again after a failed delivery
  double throttled_seconds = 0;     // time spent waiting for the consumer group (flow control)
};

// Thread safety: Run is called from one thread at a time; stats() from any thread.
class Ingestor {
 public:
  // Validates the options and creates the Kafka clients. Asks the brokers for their cluster id
  // (at most 2 s; unreachable is not an error) to suit the producer to the embedded broker
  // (IdempotentProducerDefaults).
  // Errors: InvalidArgument (no brokers, empty `from`, a librdkafka property refused, negative
  // budget), NotFound (`from` does not exist).
  static StatusOr<std::unique_ptr<Ingestor>> Create(const IngestOptions& options);
  ~Ingestor();
  Ingestor(const Ingestor&) = delete;
  Ingestor& operator=(const Ingestor&) = delete;

  // Reads the sources and produces their documents until EOF of all of them (without follow) and
  // until everything produced is acknowledged, or until `stop` becomes true (then it still tries
  // to deliver what was produced for stop_flush_timeout_ms). Returns OK when everything produced
  // was delivered; IoError when stopped with messages undelivered or a file cannot be read;
  // Internal on a fatal producer error. Waiting for an unreachable broker or a missing topic is
  // logged and retried, not an error.
  Status Run(const std::atomic<bool>& stop);

  IngestStats stats() const;

  // Pauses (true) or resumes (false) producing: while paused, Run sends no new document (what was
  // already produced is still delivered) and keeps its source positions. Thread-safe.
  void Pause(bool paused);
  bool paused() const;

 private:
  struct Impl;
  explicit Ingestor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_INGEST_INGESTOR_H_

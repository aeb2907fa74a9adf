#include "streamvec/node/param_node.h"

#include <librdkafka/rdkafkacpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "streamvec/base/hash_word.h"
#include "streamvec/base/word_slot_index.h"
#include "streamvec/kafka/broker.h"
#include "streamvec/kafka/document.h"
#include "streamvec/kafka/rdkafka_conf.h"
#include "streamvec/param/count_summary.h"
#include "streamvec/store/embedding_entries.h"
#include "streamvec/store/state_store.h"

namespace streamvec {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// Seconds a batch waits, at most, for the messages the partition held when it began.
constexpr double kBatchWaitSeconds = 1.0;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// librdkafka's errors -> spdlog, each error kind at most once every 10 s (a broker that is down
// is reported every few hundred ms while librdkafka retries). Called from librdkafka's threads.
class NodeEventLogger : public RdKafka::EventCb {
 public:
  explicit NodeEventLogger(std::string what) : what_(std::move(what)) {}
  void event_cb(RdKafka::Event& event) override {
    if (event.type() != RdKafka::Event::EVENT_ERROR) return;
    if (event.fatal()) fatal_.store(true);
    std::lock_guard<std::mutex> lock(mu_);
    const int kind = static_cast<int>(event.err());
    auto it = last_.find(kind);
    if (it != last_.end() && SecondsSince(it->second) < 10) return;
    last_[kind] = Clock::now();
    spdlog::error("{}: Kafka error: {}: {} (librdkafka retries)", what_,
                  RdKafka::err2str(event.err()), event.str());
  }
  bool fatal() const { return fatal_.load(); }

 private:
  const std::string what_;
  std::atomic<bool> fatal_{false};
  std::mutex mu_;
  std::map<int, Clock::time_point> last_;  // GUARDED_BY(mu_)
};

// The read group's commits are asynchronous (CommitReadOffset): one that fails (the group's
// coordinator not found yet, a broker restart) is reported here, served on the node's thread by
// read_committer->consume, and CommitRead sends the position again.
class ReadCommitResult : public RdKafka::OffsetCommitCb {
 public:
  void offset_commit_cb(RdKafka::ErrorCode err,
                        std::vector<RdKafka::TopicPartition*>& offsets) override {
    bool ok = err == RdKafka::ERR_NO_ERROR;
    for (const RdKafka::TopicPartition* p : offsets) ok = ok && p->err() == RdKafka::ERR_NO_ERROR;
    if (!ok) failed = true;
  }
  bool failed = false;
};

Status SetProperty(RdKafka::Conf* conf, const std::string& name, const std::string& value) {
  std::string err;
  if (conf->set(name, value, err) != RdKafka::Conf::CONF_OK) {
    return Status::InvalidArgument("--kafka-config " + name + "=" + value + ": " + err);
  }
  return Status::Ok();
}

std::string ChunkKey(size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s/%08zu", kNodeRowsEntry, i);
  return buf;
}

// No inf or NaN among v[0, dim): an all-ones exponent marks both. Without an early exit, so
// that the loop vectorises (every published row is checked).
bool AllFinite(const float* v, int dim) {
  uint32_t bad = 0;
  for (int j = 0; j < dim; ++j) {
    uint32_t bits;
    std::memcpy(&bits, v + j, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return bad == 0;
}

// The node's rows: one slot per held word with its input row, output row (dim floats each) and
// two row-wise Adagrad accumulators (input, output). Slots of evicted words are reused.
struct NodeRows {
  int dim = 0;
  std::vector<std::string> words;  // slot -> word; "" for a free slot
  std::vector<float> input, output;
  std::vector<float> accumulators;  // 2 per slot: MergeBatch key (slot * 2 + table)
  WordSlotIndex index;              // word -> slot, by HashWord (a lookup per pushed row)
  std::vector<uint32_t> free_slots;

  NodeRows() { index.Init(0); }
  size_t slots() const { return words.size(); }
  size_t held() const { return index.size(); }
  float* Row(uint32_t slot, int table) {
    return (table == 0 ? input.data() : output.data()) + static_cast<size_t>(slot) * dim;
  }
  const float* Row(uint32_t slot, int table) const {
    return (table == 0 ? input.data() : output.data()) + static_cast<size_t>(slot) * dim;
  }
  // Returns the slot of `word`, or -1.
  int64_t Find(std::string_view word) const {
    const uint32_t slot = index.Find(word, HashWord(word), words);
    return slot == WordSlotIndex::kNone ? int64_t{-1} : static_cast<int64_t>(slot);
  }
  // A zeroed slot for `word` (not held).
  uint32_t Add(const std::string& word) {
    uint32_t slot;
    if (!free_slots.empty()) {
      slot = free_slots.back();
      free_slots.pop_back();
    } else {
      slot = static_cast<uint32_t>(words.size());
      words.emplace_back();
      input.resize(input.size() + dim);
      output.resize(output.size() + dim);
      accumulators.resize(accumulators.size() + 2);
    }
    words[slot] = word;
    std::fill_n(Row(slot, 0), dim, 0.0f);
    std::fill_n(Row(slot, 1), dim, 0.0f);
    accumulators[2 * slot] = accumulators[2 * slot + 1] = 0.0f;
    index.Insert(HashWord(word), slot);
    return slot;
  }
  // Holds `word` (not held) at `slot`, whose row a restore filled.
  void Hold(const std::string& word, uint32_t slot) { index.Insert(HashWord(word), slot); }
  void Remove(const std::string& word) {
    const int64_t found = Find(word);
    if (found < 0) return;
    const uint32_t slot = static_cast<uint32_t>(found);
    index.Erase(HashWord(word), slot);
    words[slot].clear();
    free_slots.push_back(slot);
  }
  // Calls f(slot) for every held slot, in slot order.
  template <typename F>
  void ForEachHeld(F&& f) const {
    for (uint32_t slot = 0; slot < words.size(); ++slot) {
      if (!words[slot].empty()) f(slot);
    }
  }
};

// One message of a consumed batch that decoded as a push.
struct DecodedPush {
  ParamMessage message;
};

}  // namespace


struct ParamNode::Impl {
  ParamNodeOptions options;
  std::string updates_topic, params_topic, rejected_topic, group;
  std::unique_ptr<StateStore> store;
  std::unique_ptr<CountSummary> counts;
  NodeRows rows;
  NodeEventLogger consumer_events{"param-node consumer"};
  NodeEventLogger producer_events{"param-node producer"};
  NodeEventLogger read_events{"param-node read-offset committer"};
  std::unique_ptr<RdKafka::KafkaConsumer> consumer;
  // Commits the read position (next_offset, merged but perhaps not yet in a snapshot) to
  // ParamNodesReadGroup; never consumes.
  std::unique_ptr<RdKafka::KafkaConsumer> read_committer;
  ReadCommitResult read_commit_result;
  int64_t read_committed = -1;
  std::unique_ptr<RdKafka::Producer> producer;

  // Resume point (from the snapshot).
  std::string snapshot_cluster_id;
  int64_t snapshot_offset = -1;
  std::string cluster_id;
  int64_t next_offset = -1;  // next `.updates` offset; covered by the rows once merged
  // The offset the next consumed message should have (the start offset, then the one after the
  // last consumed): a message past it means the broker dropped the ones between (a gap), which
  // are published as kGap messages so that their senders push them again. -1: not assigned.
  int64_t expected_offset = -1;
  std::vector<std::pair<int64_t, int64_t>> pending_gaps;  // [first lost, end), not published
  // When each trainer last pushed (MergeRule::kScaledSum's T: those seen in the last
  // kActiveTrainerSeconds).
  std::map<uint32_t, std::chrono::steady_clock::time_point> trainer_seen;
  static constexpr int kActiveTrainerSeconds = 30;

  // Cumulative over the state's life (kNodeMetaEntry).
  uint64_t clock = 0, total_messages = 0, total_rejected = 0, total_rows_dropped = 0;
  uint64_t sequence = 0;  // of the next publication message

  // Publication: the slots whose rows changed since they were last published (in pending_row,
  // the tables that changed: kPendingInput and/or kPendingOutput; a slot's flags go with the
  // word that holds it), their number, and vocabulary changes not yet published (the latest per
  // word).
  static constexpr uint8_t kPendingInput = 1, kPendingOutput = 2;
  static constexpr uint8_t kPendingBoth = kPendingInput | kPendingOutput;
  std::vector<uint8_t> pending_row;
  size_t pending_rows = 0;
  void MarkPending(uint32_t slot, uint8_t tables = kPendingBoth) {
    if (slot >= pending_row.size()) pending_row.resize(rows.slots(), 0);
    if (pending_row[slot] == 0) ++pending_rows;
    pending_row[slot] |= tables;
  }
  void ClearPending(uint32_t slot) {
    if (slot < pending_row.size() && pending_row[slot] != 0) {
      pending_row[slot] = 0;
      --pending_rows;
    }
  }
  // ProcessBatch's merge batches (new rows, and the rest), kept so that their memory is reused.
  std::unique_ptr<MergeBatch> fresh_batch, merged_batch;
  // The slot after the last one published: a turn that cannot publish every pending row
  // (publish_max_bytes) goes on from it, round robin over the slots, so that no row waits more
  // than one pass over the pending ones (from the first slot every turn, the rows late in the
  // order waited for the end of a run while the cap held).
  size_t publish_cursor = 0;
  std::map<std::string, ParamRecord> pending_vocab;
  // Republication (ParamNodeOptions::republish_every_s): the words held when the current sweep
  // began, and the next one to publish; empty between sweeps.
  std::vector<std::string> sweep_words;
  size_t sweep_next = 0;
  Clock::time_point last_sweep = Clock::now();

  bool changed = false;  // since the last snapshot
  // Push bytes merged since the last snapshot, by sender, and the most of one sender: what a
  // trainer keeps copies of until a snapshot covers them (ParamNodeOptions::snapshot_bytes).
  std::unordered_map<uint32_t, uint64_t> sender_bytes;
  uint64_t max_sender_bytes = 0;
  bool at_end = false;
  Clock::time_point last_activity = Clock::now();

  mutable std::mutex mu;
  ParamNodeStats stats;  // GUARDED_BY(mu)

  Status Restore();
  void ProcessBatch(std::vector<std::unique_ptr<RdKafka::Message>>& batch);
  std::vector<ParamMessage> push_pool;  // ProcessBatch's decoded pushes, memory kept
  static constexpr size_t kKeptDecodedPushes = 32;
  void Reject(const RdKafka::Message& m, const std::string& reason);
  void Produce(const std::string& topic, int32_t partition, const std::string& value,
               const std::string& key);
  // The words the counts dropped since the last call: their rows go (before the next merge)
  // and a removed record waits for the next publication.
  void TakeRemovedWords();
  // TakeRemovedWords, then the counts' changes since the last call into pending_vocab (once a
  // publication turn: a word's count changes many times a turn and goes out once).
  void TakeVocabularyChanges();
  Status Publish(bool everything);
  // The publication record of `slot`: its word, count and error, and the rows of `tables`
  // (kPendingInput, kPendingOutput); false when the slot holds no word or its rows are not
  // finite (logged, not published).
  bool RowRecord(uint32_t slot, ParamRecord* r, uint8_t tables = kPendingBoth) const;
  // Begins a republication sweep over the words held now, once republish_every_s has passed
  // since the last one began and none is in progress.
  void StartSweepIfDue();
  // Appends the sweep's next rows to the turn's records while `*budget` (bytes, updated) stays
  // within publish_max_bytes (at least one record when there is none); skips words whose rows
  // are pending (their change goes out as such). Ends the sweep at its last word. Returns the
  // rows appended.
  size_t AppendSweptRows(ParamPrecision precision, size_t* budget);
  // A publication turn's records: the first publish_used of publish_records, which keep their
  // memory (word, rows) from turn to turn: a 2 MiB turn holds thousands of rows, which would
  // otherwise allocate and free two row vectors each.
  std::vector<ParamRecord> publish_records;
  size_t publish_used = 0;
  // The next record of the turn, reset (not yet counted in publish_used).
  ParamRecord& NextPublishRecord() {
    if (publish_used == publish_records.size()) publish_records.emplace_back();
    ParamRecord& r = publish_records[publish_used];
    r.Reset();
    return r;
  }

  // Snapshots are written by a thread of their own, so that merging goes on while RocksDB
  // writes and syncs (most of a snapshot's time is spent waiting on the disk): StartSnapshot
  // copies the state (serialised entries, ~1 KB a row) on the node's thread, the writer
  // thread writes them, and FinishSnapshot (on the node's thread, once it is done) commits the
  // `.updates` offset the snapshot covers. At most one is in flight; the store is touched only
  // by the writer while one is.
  struct SnapshotJob {
    std::string why;
    int64_t covered = -1;
    uint64_t clock = 0;
    Clock::time_point start;
    std::string metadata;
    std::vector<std::pair<std::string, std::string>> entries;  // besides the embedding's
    std::vector<std::string> serving_words;                    // most frequent first
    std::vector<float> serving_rows;                           // their input rows, dense
    std::vector<double> serving_counts;                        // their counts (upper estimates)
    Status result;
    std::atomic<bool> done{false};
    std::thread writer;
  };
  std::unique_ptr<SnapshotJob> snapshot_job;
  void StartSnapshot(const char* why);
  // Waits for the snapshot in flight (if any) when `wait`, else returns at once unless it is
  // done; handles a finished one. Its status (OK when none finished).
  Status FinishSnapshot(bool wait);
  // StartSnapshot + FinishSnapshot(wait): a synchronous snapshot (the final one).
  Status Snapshot(const char* why);
  std::string OffsetsJson() const;
  // Commits next_offset to ParamNodesReadGroup (asynchronously, when it moved): after each
  // merged batch, and on the 0.5 s tick. The trainers' flow control waits on it.
  void CommitRead();
  // Commits `offset` to ParamNodesReadGroup now: asynchronously, or with `sync` waiting for the
  // broker's answer (the start position, so that no later commit can land before it).
  void CommitReadOffset(int64_t offset, bool sync = false);
  bool Assign(const std::atomic<bool>& stop);
  void UpdateLag();
};

Status ParamNode::Impl::Restore() {
  StatusOr<std::string> meta_bytes = store->Get(kNodeMetaEntry);
  if (!meta_bytes.ok()) {
    return Status::FailedPrecondition("state " + options.state_dir +
                                      " is not a parameter node's (it has no " + kNodeMetaEntry +
                                      " entry: a trainer's state?)");
  }
  const std::string where = "state " + options.state_dir + ": ";
  try {
    const json meta = json::parse(*meta_bytes);
    const uint32_t shard = meta.at("shard").get<uint32_t>();
    const uint32_t shards = meta.at("shards").get<uint32_t>();
    if (shard != options.shard || shards != options.shards) {
      return Status::FailedPrecondition(
          where + "it holds shard " + std::to_string(shard) + " of " + std::to_string(shards) +
          ", not --shard " + std::to_string(options.shard) + " of --shards " +
          std::to_string(options.shards));
    }
    const uint32_t dim = meta.at("dim").get<uint32_t>();
    if (options.dim != 0 && dim != 0 && dim != options.dim) {
      return Status::FailedPrecondition(where + "its rows have dim " + std::to_string(dim) +
                                        ", not --dim " + std::to_string(options.dim));
    }
    if (dim != 0) options.dim = dim;
    rows.dim = static_cast<int>(options.dim);
    clock = meta.value("clock", uint64_t{0});
    total_messages = meta.value("messages", uint64_t{0});
    total_rejected = meta.value("rejected", uint64_t{0});
    total_rows_dropped = meta.value("rows_dropped", uint64_t{0});
    sequence = meta.value("sequence", uint64_t{0});
    const size_t slots = meta.at("slots").get<size_t>();
    const size_t per_chunk = meta.at("rows_per_chunk").get<size_t>();
    if (slots > 0 && (dim == 0 || per_chunk == 0)) {
      return Status::Corruption(where + "node/meta: slots without dim or rows_per_chunk");
    }

    StatusOr<std::string> counts_bytes = store->Get(kNodeCountsEntry);
    StatusOr<std::string> offsets_bytes = store->Get(kNodeOffsetsEntry);
    if (!counts_bytes.ok() || !offsets_bytes.ok()) {
      return Status::Corruption(where + kNodeCountsEntry + " or " + kNodeOffsetsEntry +
                                " is missing");
    }
    const json c = json::parse(*counts_bytes);
    std::vector<CountEntry> entries;
    for (const json& e : c.at("entries")) {
      entries.push_back({e.at(0).get<std::string>(), e.at(1).get<double>(), e.at(2).get<double>()});
    }
    const size_t capacity = c.at("capacity").get<size_t>();
    if (capacity != options.vocab_capacity) {
      spdlog::info("param-node: the state's vocabulary capacity {} is kept (--vocab-capacity {} "
                   "applies to a new state)", capacity, options.vocab_capacity);
    }
    StatusOr<CountSummary> summary = CountSummary::FromEntries(
        capacity, entries, c.at("total").get<double>(), c.at("floor").get<double>());
    if (!summary.ok()) return Status::Corruption(where + "node/counts: " +
                                                 summary.status().message());
    counts = std::make_unique<CountSummary>(std::move(summary).value());

    const size_t slot_bytes = 2 * static_cast<size_t>(dim) * sizeof(float) + 2 * sizeof(float);
    for (size_t chunk = 0; chunk * per_chunk < slots; ++chunk) {
      StatusOr<std::string> bytes = store->Get(ChunkKey(chunk));
      if (!bytes.ok()) return Status::Corruption(where + ChunkKey(chunk) + " is missing");
      const std::string& b = *bytes;
      size_t pos = 0;
      const size_t end_slot = std::min(slots, (chunk + 1) * per_chunk);
      for (size_t s = chunk * per_chunk; s < end_slot; ++s) {
        uint32_t len = 0;
        if (pos + 4 > b.size()) return Status::Corruption(where + ChunkKey(chunk) + " truncated");
        std::memcpy(&len, b.data() + pos, 4);
        pos += 4;
        if (pos + len + slot_bytes > b.size()) {
          return Status::Corruption(where + ChunkKey(chunk) + " truncated");
        }
        const std::string word(b.data() + pos, len);
        pos += len;
        // Slots are restored at their positions, free ones included.
        const uint32_t slot = static_cast<uint32_t>(rows.words.size());
        rows.words.push_back(word);
        rows.input.resize(rows.input.size() + dim);
        rows.output.resize(rows.output.size() + dim);
        rows.accumulators.resize(rows.accumulators.size() + 2);
        std::memcpy(rows.Row(slot, 0), b.data() + pos, dim * sizeof(float));
        pos += dim * sizeof(float);
        std::memcpy(rows.Row(slot, 1), b.data() + pos, dim * sizeof(float));
        pos += dim * sizeof(float);
        std::memcpy(&rows.accumulators[2 * slot], b.data() + pos, 2 * sizeof(float));
        pos += 2 * sizeof(float);
        if (word.empty()) {
          rows.free_slots.push_back(slot);
        } else {
          if (!counts->Contains(word) || rows.Find(word) >= 0) {
            return Status::Corruption(where + ChunkKey(chunk) + ": row of '" + word +
                                      "' is not in the counts or repeated");
          }
          rows.Hold(word, slot);
        }
      }
      if (pos != b.size()) return Status::Corruption(where + ChunkKey(chunk) + ": trailing bytes");
    }
    std::reverse(rows.free_slots.begin(), rows.free_slots.end());

    const json off = json::parse(*offsets_bytes);
    snapshot_cluster_id = off.value("cluster_id", "");
    if (off.value("topic", "") == updates_topic &&
        off.value("partition", int64_t{-1}) == static_cast<int64_t>(options.shard)) {
      snapshot_offset = off.value("offset", int64_t{-1});
    }
  } catch (const std::exception& e) {
    return Status::Corruption(where + "malformed parameter node entry: " + e.what());
  }
  // A restored node republishes what it holds: trainers that start now pull it from `.params`.
  rows.ForEachHeld([this](uint32_t slot) { MarkPending(slot); });
  TakeVocabularyChanges();
  spdlog::info("param-node: resuming {} (snapshot {}): {} words, dim {}, clock {}, `.updates` "
               "offset {}", options.state_dir, store->version(), rows.held(), options.dim, clock,
               snapshot_offset);
  return Status::Ok();
}

void ParamNode::Impl::Produce(const std::string& topic, int32_t partition,
                              const std::string& value, const std::string& key) {
  for (int attempt = 0; attempt < 600; ++attempt) {
    const RdKafka::ErrorCode e = producer->produce(
        topic, partition, RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(value.data()),
        value.size(), key.empty() ? nullptr : key.data(), key.size(), 0, nullptr);
    if (e != RdKafka::ERR__QUEUE_FULL) {
      if (e != RdKafka::ERR_NO_ERROR) {
        spdlog::error("param-node: cannot queue a message for {}: {}", topic,
                      RdKafka::err2str(e));
      }
      break;
    }
    producer->poll(100);
  }
  producer->poll(0);
}

void ParamNode::Impl::Reject(const RdKafka::Message& m, const std::string& reason) {
  const std::string origin =
      m.topic_name() + "/" + std::to_string(m.partition()) + "@" + std::to_string(m.offset());
  spdlog::warn("param-node: rejected {}: {}", origin, reason);
  Produce(rejected_topic, RdKafka::Topic::PARTITION_UA,
          RejectionToJson(reason, origin,
                          std::string_view(static_cast<const char*>(m.payload()),
                                           m.payload() ? m.len() : 0)),
          origin);
  ++total_rejected;
  std::lock_guard<std::mutex> lock(mu);
  ++stats.rejected;
}

void ParamNode::Impl::TakeRemovedWords() {
  std::vector<std::string> removed = counts->TakeRemoved();
  if (removed.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    stats.evictions += removed.size();
  }
  for (std::string& word : removed) {
    if (const int64_t slot = rows.Find(word); slot >= 0) ClearPending(static_cast<uint32_t>(slot));
    rows.Remove(word);
    ParamRecord r;
    r.word = word;
    r.removed = true;
    pending_vocab[std::move(word)] = std::move(r);
  }
}

void ParamNode::Impl::TakeVocabularyChanges() {
  TakeRemovedWords();
  for (ParamRecord& r : counts->TakeChanges(kCountReportGrowth)) {
    std::string word = r.word;
    pending_vocab[std::move(word)] = std::move(r);
  }
}

void ParamNode::Impl::ProcessBatch(std::vector<std::unique_ptr<RdKafka::Message>>& batch) {
  const auto t0 = Clock::now();
  uint64_t bytes = 0;
  // This batch's pushes: the first `used` of push_pool, decoded into the memory earlier batches'
  // left (DecodeParamMessageInto), so that merging allocates nothing per record.
  std::vector<ParamMessage>& pushes = push_pool;
  size_t used = 0;
  // Counts first, the whole batch's, in offset order: they decide which words hold rows.
  for (const auto& m : batch) {
    bytes += m->len();
    next_offset = std::max(next_offset, m->offset() + 1);
    if (expected_offset >= 0 && m->offset() > expected_offset) {
      spdlog::warn(
          "param-node: {}/{} offsets {}..{} were dropped by the broker before this shard "
          "read them: their senders push them again",
          updates_topic, options.shard, expected_offset, m->offset() - 1);
      pending_gaps.emplace_back(expected_offset, m->offset());
      std::lock_guard<std::mutex> lock(mu);
      stats.gaps += 1;
      stats.lost_messages += static_cast<uint64_t>(m->offset() - expected_offset);
    }
    expected_offset = std::max(expected_offset, m->offset() + 1);
    const std::string_view payload(static_cast<const char*>(m->payload()),
                                   m->payload() ? m->len() : 0);
    if (used == pushes.size()) pushes.emplace_back();
    ParamMessage* decoded = &pushes[used];
    if (Status s = DecodeParamMessageInto(
            payload, ParamExpectations{ParamModelKind::kSgns, options.dim}, *decoded);
        !s.ok()) {
      Reject(*m, s.message());
      continue;
    }
    if (decoded->header.kind != ParamMessageKind::kPush) {
      Reject(*m, "message kind " + ParamMessageKindName(decoded->header.kind) +
                     " on " + updates_topic + ", which carries pushes only");
      continue;
    }
    if (Status s = counts->AddPushed(decoded->records); !s.ok()) {
      Reject(*m, s.message());
      continue;
    }
    ++used;
    uint64_t& sent = sender_bytes[decoded->header.sender];
    sent += m->len();
    max_sender_bytes = std::max(max_sender_bytes, sent);
    if (options.dim == 0) {
      options.dim = decoded->header.dim;
      rows.dim = static_cast<int>(options.dim);
      spdlog::info("param-node: dim {} (from the first push, {})", options.dim,
                   m->topic_name() + "/" + std::to_string(m->partition()) + "@" +
                       std::to_string(m->offset()));
    }
  }
  const std::span<const ParamMessage> merged_pushes(pushes.data(), used);
  TakeRemovedWords();

  uint64_t dropped = 0, rounds = 0, contributions = 0;
  double merged_scale = 0;  // kScaledSum's factor, when it merged
  if (!merged_pushes.empty()) {
    const int dim = rows.dim;
    if (!fresh_batch || fresh_batch->dim() != dim) {
      fresh_batch = std::make_unique<MergeBatch>(dim);
      merged_batch = std::make_unique<MergeBatch>(dim);
    }
    MergeBatch& fresh = *fresh_batch;
    MergeBatch& merged = *merged_batch;
    std::unordered_set<uint32_t> fresh_slots;
    const auto now = std::chrono::steady_clock::now();
    for (const ParamMessage& push : merged_pushes) trainer_seen[push.header.sender] = now;
    for (auto it = trainer_seen.begin(); it != trainer_seen.end();) {
      it = now - it->second > std::chrono::seconds(kActiveTrainerSeconds) ? trainer_seen.erase(it)
                                                                          : std::next(it);
    }
    for (const ParamMessage& push : merged_pushes) {
      for (const ParamRecord& r : push.records) {
        if (r.input.empty() && r.output.empty()) continue;
        // A word with a row is held by the counts (TakeRemovedWords removed the rows of
        // the words they dropped): only a word without one is looked up there.
        int64_t found = rows.Find(r.word);
        if (found < 0 && !counts->Contains(r.word)) {
          ++dropped;
          continue;
        }
        uint32_t slot;
        if (found < 0) {
          slot = rows.Add(r.word);
          fresh_slots.insert(slot);
        } else {
          slot = static_cast<uint32_t>(found);
          // A sender's initial rows of a word this shard holds already (a trainer that admitted
          // it before any publication of it reached it, as trainers admitting by the group's
          // counts do at about the same time) are merged as a step like any delta: they are
          // what the sender learned of the word since it admitted it, plus its initialisation,
          // small (input components within +-0.5/dim, output zero) beside a trained row.
        }
        const bool fresh_slot = fresh_slots.count(slot) != 0;
        MergeBatch& into = fresh_slot ? fresh : merged;
        if (!r.input.empty()) into.Add(uint64_t{slot} * 2, push.header.sender, r.input);
        if (!r.output.empty()) into.Add(uint64_t{slot} * 2 + 1, push.header.sender, r.output);
        // Only the tables that changed go out again; a new word's first publication has both.
        MarkPending(slot, fresh_slot
                              ? kPendingBoth
                              : static_cast<uint8_t>((r.input.empty() ? 0 : kPendingInput) |
                                                     (r.output.empty() ? 0 : kPendingOutput)));
      }
    }
    rounds = fresh.rows() + merged.rows();
    contributions = fresh.contributions() + merged.contributions();
    auto row_of = [this](uint64_t key) {
      const uint32_t slot = static_cast<uint32_t>(key / 2);
      return NodeRowRef{rows.Row(slot, static_cast<int>(key % 2)), &rows.accumulators[key]};
    };
    MergeOptions first = options.merge;
    first.rule = MergeRule::kAverage;  // a new row: the mean of the senders' initial rows
    fresh.Apply(first, row_of);
    MergeOptions rule = options.merge;
    rule.scale =
        options.merge_scale > 0
            ? options.merge_scale
            : 1.0 / std::sqrt(static_cast<double>(std::max<size_t>(1, trainer_seen.size())));
    if (rule.rule == MergeRule::kScaledSum) merged_scale = rule.scale;
    merged.Apply(rule, row_of);
  }
  // The memory of a few messages is kept (a batch of max_batch_messages would keep hundreds of
  // MB of decoded rows).
  if (push_pool.size() > kKeptDecodedPushes) push_pool.resize(kKeptDecodedPushes);
  clock += used;
  total_messages += batch.size();
  total_rows_dropped += dropped;
  changed = true;
  std::lock_guard<std::mutex> lock(mu);
  stats.messages += batch.size();
  stats.bytes_in += bytes;
  stats.merges += used;
  stats.rounds += rounds;
  stats.contributions += contributions;
  stats.rows_dropped += dropped;
  stats.clock = clock;
  stats.rows = rows.held();
  stats.dim = options.dim;
  stats.active_trainers = static_cast<uint32_t>(trainer_seen.size());
  if (merged_scale > 0) stats.merge_scale = merged_scale;
  stats.next_offset = next_offset;
  stats.merge_seconds += SecondsSince(t0);
}

Status ParamNode::Impl::Publish(bool everything) {
  if (options.dim == 0) return Status::Ok();
  // Gaps first: a trainer must learn of its lost pushes before a publication whose watermark
  // passes them (it would take them as merged).
  for (const auto& [first, end] : pending_gaps) {
    ParamMessageHeader gap;
    gap.kind = ParamMessageKind::kGap;
    gap.model = ParamModelKind::kSgns;
    gap.dim = options.dim;
    gap.sender = options.shard;
    gap.sequence = sequence;
    gap.sender_clock = static_cast<uint64_t>(first);
    gap.base_clock = static_cast<uint64_t>(end);
    StatusOr<std::vector<std::string>> m = EncodeParamMessages(gap, {});
    if (!m.ok()) return m.status();
    sequence += 1;
    Produce(params_topic, static_cast<int32_t>(options.shard), m->front(),
            std::to_string(options.shard));
    changed = true;
    std::lock_guard<std::mutex> lock(mu);
    stats.published_messages += 1;
    stats.bytes_out += m->front().size();
  }
  pending_gaps.clear();
  if (!everything) StartSweepIfDue();
  TakeVocabularyChanges();
  const bool sweeping = !everything && sweep_next < sweep_words.size();
  if (pending_rows == 0 && pending_vocab.empty() && !sweeping) return Status::Ok();
  ParamMessageHeader header;
  header.model = ParamModelKind::kSgns;
  header.precision = options.publish_precision;
  header.dim = options.dim;
  header.sender = options.shard;
  header.sender_clock = clock;
  // The merged watermark: every push below it is in the rows read below.
  header.base_clock = next_offset > 0 ? static_cast<uint64_t>(next_offset) : 0;
  publish_used = 0;
  size_t budget = 0;
  // A sweep in progress keeps a quarter of the turn for itself, so changed rows that fill every
  // turn do not hold it back.
  const size_t changed_cap = sweeping ? options.publish_max_bytes - options.publish_max_bytes / 4
                                      : options.publish_max_bytes;
  // One pass over the slots from the cursor, round robin.
  const size_t slots = pending_row.size();
  for (size_t k = 0; k < slots && pending_rows > 0; ++k) {
    const uint32_t slot = static_cast<uint32_t>((publish_cursor + k) % slots);
    if (pending_row[slot] == 0) continue;
    ParamRecord& r = NextPublishRecord();
    if (!RowRecord(slot, &r, pending_row[slot])) {
      ClearPending(slot);
      continue;
    }
    const size_t b = ParamRecordBytes(r, options.dim, header.precision);
    if (!everything && publish_used > 0 && budget + b > changed_cap) break;
    budget += b;
    publish_cursor = slot + 1;
    ++publish_used;
    ClearPending(slot);
  }
  // Then the sweep, in the rest of the turn.
  const size_t swept = sweeping ? AppendSweptRows(header.precision, &budget) : 0;
  const std::span<const ParamRecord> records(publish_records.data(), publish_used);
  std::vector<std::string> messages;
  if (!records.empty()) {
    header.kind = ParamMessageKind::kRows;
    header.sequence = sequence;
    StatusOr<std::vector<std::string>> m =
        EncodeParamMessages(header, records, options.max_message_bytes);
    if (!m.ok()) return m.status();
    sequence += m->size();
    messages = std::move(m).value();
  }
  if (!pending_vocab.empty()) {
    std::vector<ParamRecord> vocab;
    vocab.reserve(pending_vocab.size());
    for (auto& [word, r] : pending_vocab) vocab.push_back(std::move(r));
    pending_vocab.clear();
    header.kind = ParamMessageKind::kVocabulary;
    header.sequence = sequence;
    StatusOr<std::vector<std::string>> m =
        EncodeParamMessages(header, vocab, options.max_message_bytes);
    if (!m.ok()) return m.status();
    sequence += m->size();
    for (std::string& s : *m) messages.push_back(std::move(s));
  }
  uint64_t out_bytes = 0;
  const std::string key = std::to_string(options.shard);
  for (const std::string& value : messages) {
    Produce(params_topic, static_cast<int32_t>(options.shard), value, key);
    out_bytes += value.size();
  }
  changed = true;  // the sequence moved
  std::lock_guard<std::mutex> lock(mu);
  stats.published_messages += messages.size();
  stats.bytes_out += out_bytes;
  stats.published_rows += records.size();
  stats.republished_rows += swept;
  return Status::Ok();
}

bool ParamNode::Impl::RowRecord(uint32_t slot, ParamRecord* r, uint8_t tables) const {
  if (slot >= rows.slots() || rows.words[slot].empty()) return false;  // a free slot
  const std::string& word = rows.words[slot];
  const int dim = rows.dim;
  const float* in = rows.Row(slot, 0);
  const float* out = rows.Row(slot, 1);
  if (!AllFinite(in, dim) || !AllFinite(out, dim)) {
    spdlog::warn(
        "param-node: the row of '{}' is not finite (a diverging merge rule?): not "
        "published",
        word);
    return false;
  }
  r->word = word;
  r->has_count = true;
  counts->CountOf(word, &r->count, &r->count_error);
  if (tables & kPendingInput) r->input.assign(in, in + dim);
  if (tables & kPendingOutput) r->output.assign(out, out + dim);
  return true;
}

void ParamNode::Impl::StartSweepIfDue() {
  if (!sweep_words.empty() || options.republish_every_s <= 0 ||
      SecondsSince(last_sweep) < options.republish_every_s) {
    return;
  }
  sweep_words.reserve(rows.held());
  rows.ForEachHeld([this](uint32_t slot) { sweep_words.push_back(rows.words[slot]); });
  sweep_next = 0;
  last_sweep = Clock::now();
}

size_t ParamNode::Impl::AppendSweptRows(ParamPrecision precision, size_t* budget) {
  size_t swept = 0;
  while (sweep_next < sweep_words.size()) {
    const int64_t slot = rows.Find(sweep_words[sweep_next]);
    if (slot < 0 || (static_cast<size_t>(slot) < pending_row.size() && pending_row[slot] != 0)) {
      ++sweep_next;
      continue;
    }
    ParamRecord& r = NextPublishRecord();
    if (!RowRecord(static_cast<uint32_t>(slot), &r)) {
      ++sweep_next;
      continue;
    }
    const size_t b = ParamRecordBytes(r, options.dim, precision);
    if (publish_used > 0 && *budget + b > options.publish_max_bytes) break;
    *budget += b;
    ++publish_used;
    ++sweep_next;
    ++swept;
  }
  if (sweep_next >= sweep_words.size()) {
    sweep_words.clear();  // done: the next one starts republish_every_s after this one began
    sweep_words.shrink_to_fit();
    sweep_next = 0;
  }
  return swept;
}

std::string ParamNode::Impl::OffsetsJson() const {
  json j = {{"cluster_id", cluster_id.empty() ? snapshot_cluster_id : cluster_id},
            {"group", group},
            {"topic", updates_topic},
            {"partition", options.shard},
            {"offset", next_offset >= 0 ? next_offset : snapshot_offset}};
  return j.dump();
}

void ParamNode::Impl::StartSnapshot(const char* why) {
  auto job = std::make_unique<SnapshotJob>();
  job->why = why;
  job->start = Clock::now();
  // Rejections and publications are acknowledged before the offsets that pass them are recorded.
  if (producer->flush(10000) != RdKafka::ERR_NO_ERROR) {
    spdlog::warn("param-node: messages not yet acknowledged by the broker at snapshot time");
  }
  const int dim = rows.dim;
  const std::string offsets = OffsetsJson();
  job->covered = next_offset;
  job->clock = clock;
  json meta_entry = {{"shard", options.shard},
                     {"shards", options.shards},
                     {"dim", options.dim},
                     {"model", "sgns"},
                     {"slots", rows.slots()},
                     {"rows_per_chunk", kNodeRowsPerChunk},
                     {"clock", clock},
                     {"messages", total_messages},
                     {"rejected", total_rejected},
                     {"rows_dropped", total_rows_dropped},
                     {"sequence", sequence}};
  json metadata = {{"model", "sgns"},
                   {"kind", "param-node"},
                   {"shard", options.shard},
                   {"shards", options.shards},
                   {"dim", options.dim},
                   {"merge", std::string(MergeRuleName(options.merge.rule))},
                   {"vocab_size", rows.held()},
                   {"vocab_capacity", counts->capacity()},
                   {"words_seen", counts->total()},
                   {"clock", clock},
                   {"messages", total_messages},
                   {"rejected", total_rejected},
                   {"offsets", json::parse(offsets)}};
  job->metadata = metadata.dump();
  const std::vector<CountEntry> entries = counts->Entries();
  if (dim > 0) {
    // The serving embedding: held words with rows, most frequent first.
    job->serving_words.reserve(rows.held());
    job->serving_rows.reserve(rows.held() * static_cast<size_t>(dim));
    for (const CountEntry& e : entries) {
      const int64_t slot = rows.Find(e.word);
      if (slot < 0) continue;
      job->serving_words.push_back(e.word);
      job->serving_counts.push_back(e.count);
      const float* row = rows.Row(static_cast<uint32_t>(slot), 0);
      job->serving_rows.insert(job->serving_rows.end(), row, row + dim);
    }
  }
  job->entries.emplace_back(kNodeMetaEntry, meta_entry.dump());
  for (size_t chunk = 0; chunk * kNodeRowsPerChunk < rows.slots(); ++chunk) {
    std::string b;
    const size_t end = std::min(rows.slots(), (chunk + 1) * kNodeRowsPerChunk);
    size_t bytes = 0;  // reserved at once: appending row by row would copy the chunk as it grows
    for (size_t slot = chunk * kNodeRowsPerChunk; slot < end; ++slot) {
      bytes += 4 + rows.words[slot].size() + 2 * dim * sizeof(float) + 2 * sizeof(float);
    }
    b.reserve(bytes);
    for (size_t slot = chunk * kNodeRowsPerChunk; slot < end; ++slot) {
      const std::string& w = rows.words[slot];
      const uint32_t len = static_cast<uint32_t>(w.size());
      b.append(reinterpret_cast<const char*>(&len), 4);
      b.append(w);
      const uint32_t s32 = static_cast<uint32_t>(slot);
      b.append(reinterpret_cast<const char*>(rows.Row(s32, 0)), dim * sizeof(float));
      b.append(reinterpret_cast<const char*>(rows.Row(s32, 1)), dim * sizeof(float));
      b.append(reinterpret_cast<const char*>(&rows.accumulators[2 * slot]), 2 * sizeof(float));
    }
    job->entries.emplace_back(ChunkKey(chunk), std::move(b));
  }
  json list = json::array();
  list.get_ref<json::array_t&>().reserve(entries.size());
  for (const CountEntry& e : entries) list.push_back({e.word, e.count, e.error});
  job->entries.emplace_back(kNodeCountsEntry, json{{"capacity", counts->capacity()},
                                                   {"total", counts->total()},
                                                   {"floor", counts->floor()},
                                                   {"entries", list}}
                                                  .dump());
  job->entries.emplace_back(kNodeOffsetsEntry, offsets);
  changed = false;
  sender_bytes.clear();
  max_sender_bytes = 0;
  SnapshotJob* raw = job.get();
  StateStore* st = store.get();
  job->writer = std::thread([raw, st, dim] {
    raw->result = st->WriteSnapshot(
        [&](const SnapshotSink& sink) -> Status {
          if (dim > 0) {
            std::vector<const float*> vectors(raw->serving_words.size());
            for (size_t i = 0; i < vectors.size(); ++i) {
              vectors[i] = raw->serving_rows.data() + i * static_cast<size_t>(dim);
            }
            SV_RETURN_IF_ERROR(WriteEmbeddingEntries(raw->serving_words, vectors, dim, sink));
            // For the union's count order (serve / export of several shards) and GET /v1/words.
            SV_RETURN_IF_ERROR(WriteEmbeddingCounts(raw->serving_counts, sink));
          }
          for (const auto& [key, value] : raw->entries) SV_RETURN_IF_ERROR(sink(key, value));
          return Status::Ok();
        },
        raw->metadata);
    raw->done.store(true);
  });
  snapshot_job = std::move(job);
}

Status ParamNode::Impl::FinishSnapshot(bool wait) {
  if (!snapshot_job || (!wait && !snapshot_job->done.load())) return Status::Ok();
  snapshot_job->writer.join();
  std::unique_ptr<SnapshotJob> job = std::move(snapshot_job);
  if (!job->result.ok()) {
    changed = true;  // what it held is still to be written
    return job->result;
  }
  // Durable: the group's offset may now pass what the snapshot covers.
  if (job->covered >= 0 && consumer) {
    std::vector<RdKafka::TopicPartition*> list{
        RdKafka::TopicPartition::create(updates_topic, static_cast<int32_t>(options.shard))};
    list[0]->set_offset(job->covered);
    const RdKafka::ErrorCode e = consumer->commitSync(list);
    RdKafka::TopicPartition::destroy(list);
    if (e != RdKafka::ERR_NO_ERROR) {
      spdlog::warn("param-node: committing the offset failed (the snapshot holds it): {}",
                   RdKafka::err2str(e));
    }
  }
  spdlog::info("param-node: snapshot {} ({}): {} words, clock {}, offset {}, {:.3f} s",
               store->version(), job->why, job->serving_words.size(), job->clock, job->covered,
               SecondsSince(job->start));
  std::lock_guard<std::mutex> lock(mu);
  ++stats.snapshots;
  stats.snapshot_version = store->version();
  return Status::Ok();
}

Status ParamNode::Impl::Snapshot(const char* why) {
  SV_RETURN_IF_ERROR(FinishSnapshot(/*wait=*/true));
  StartSnapshot(why);
  return FinishSnapshot(/*wait=*/true);
}

bool ParamNode::Impl::Assign(const std::atomic<bool>& stop) {
  int32_t partitions = -1;
  auto last_log = Clock::now() - std::chrono::seconds(60);
  while (!stop.load()) {
    RdKafka::Metadata* md = nullptr;
    std::string err;
    std::unique_ptr<RdKafka::Topic> t(
        RdKafka::Topic::create(consumer.get(), updates_topic, nullptr, err));
    if (t && consumer->metadata(false, t.get(), &md, 2000) == RdKafka::ERR_NO_ERROR && md) {
      for (const RdKafka::TopicMetadata* tm : *md->topics()) {
        if (tm->topic() == updates_topic && tm->err() == RdKafka::ERR_NO_ERROR) {
          partitions = static_cast<int32_t>(tm->partitions()->size());
        }
      }
    }
    delete md;
    if (partitions > static_cast<int32_t>(options.shard)) break;
    if (SecondsSince(last_log) >= 10) {
      spdlog::info("param-node: waiting for topic {} to have partition {}", updates_topic,
                   options.shard);
      last_log = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (stop.load()) return false;
  if (partitions != static_cast<int32_t>(options.shards)) {
    spdlog::warn("param-node: {} has {} partitions for {} shards (trainers push a word to "
                 "partition ShardOf(word, shards))", updates_topic, partitions, options.shards);
  }
  cluster_id = consumer->clusterid(5000);
  int64_t offset = RdKafka::Topic::OFFSET_BEGINNING;
  int64_t low = -1, high = -1;
  const RdKafka::ErrorCode watermarks = consumer->query_watermark_offsets(
      updates_topic, static_cast<int32_t>(options.shard), &low, &high, 5000);
  if (snapshot_offset >= 0) {
    if (!snapshot_cluster_id.empty() && !cluster_id.empty() && snapshot_cluster_id != cluster_id) {
      spdlog::info("param-node: the snapshot's offset is from Kafka cluster '{}', this is '{}': "
                   "the partition starts from the beginning (the rows are kept)",
                   snapshot_cluster_id, cluster_id);
    } else if (watermarks == RdKafka::ERR_NO_ERROR && snapshot_offset > high) {
      spdlog::info("param-node: the snapshot's offset {} is beyond the high watermark {}: the "
                   "partition starts from the beginning (the rows are kept)",
                   snapshot_offset, high);
    } else {
      offset = snapshot_offset;
      next_offset = snapshot_offset;
    }
    // An ignored offset must not be recorded again under this cluster's id.
    if (next_offset < 0) snapshot_offset = -1;
  }
  expected_offset = offset >= 0 ? offset : 0;
  std::vector<RdKafka::TopicPartition*> list{
      RdKafka::TopicPartition::create(updates_topic, static_cast<int32_t>(options.shard))};
  list[0]->set_offset(offset);
  const RdKafka::ErrorCode e = consumer->assign(list);
  RdKafka::TopicPartition::destroy(list);
  if (e != RdKafka::ERR_NO_ERROR) {
    spdlog::error("param-node: cannot take {}/{}: {}", updates_topic, options.shard,
                  RdKafka::err2str(e));
    return false;
  }
  // The read group restarts from here too: a read position from before a crash would let the
  // trainers push past what the broker keeps for the re-read.
  // Synchronously: an asynchronous commit sent while the coordinator is still being found can
  // reach the broker after the first merge's commit and move the read group back (CI once saw
  // it stay at 0 after two merged messages).
  if (offset >= 0) {
    CommitReadOffset(offset, /*sync=*/true);
  } else if (watermarks == RdKafka::ERR_NO_ERROR && low >= 0) {
    CommitReadOffset(low, /*sync=*/true);
  }
  spdlog::info("param-node: shard {} of {}: consuming {}/{} from {}", options.shard,
               options.shards, updates_topic, options.shard,
               offset >= 0 ? "offset " + std::to_string(offset) : std::string("the beginning"));
  last_activity = Clock::now();
  return true;
}

void ParamNode::Impl::CommitRead() {
  if (next_offset < 0 || (next_offset == read_committed && !read_commit_result.failed)) return;
  if (read_commit_result.failed) {
    // (The broker's errors themselves reach read_events, at most one a kind every 10 s.)
    spdlog::debug("param-node: committing the read offset failed; sending it again");
  }
  read_commit_result.failed = false;
  CommitReadOffset(next_offset);
}

void ParamNode::Impl::CommitReadOffset(int64_t offset, bool sync) {
  std::vector<RdKafka::TopicPartition*> list{
      RdKafka::TopicPartition::create(updates_topic, static_cast<int32_t>(options.shard))};
  list[0]->set_offset(offset);
  const RdKafka::ErrorCode e =
      sync ? read_committer->commitSync(list) : read_committer->commitAsync(list);
  RdKafka::TopicPartition::destroy(list);
  if (e != RdKafka::ERR_NO_ERROR) {
    spdlog::warn("param-node: committing the read offset failed: {}", RdKafka::err2str(e));
    return;
  }
  read_committed = offset;
}

void ParamNode::Impl::UpdateLag() {
  int64_t low = -1, high = -1;
  if (consumer->get_watermark_offsets(updates_topic, static_cast<int32_t>(options.shard), &low,
                                      &high) != RdKafka::ERR_NO_ERROR ||
      high < 0) {
    return;
  }
  const int64_t from = next_offset >= 0 ? next_offset : low;
  std::lock_guard<std::mutex> lock(mu);
  stats.lag = std::max<int64_t>(0, high - from);
}

ParamNode::ParamNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ParamNode::~ParamNode() {
  if (impl_->snapshot_job) impl_->snapshot_job->writer.join();
  if (impl_->consumer) impl_->consumer->close();
  if (impl_->read_committer) impl_->read_committer->close();
  if (impl_->producer) impl_->producer->flush(2000);
}

StatusOr<std::unique_ptr<ParamNode>> ParamNode::Create(const ParamNodeOptions& o) {
  if (o.kafka.brokers.empty()) return Status::InvalidArgument("--brokers is empty");
  if (o.kafka.topic_prefix.empty()) return Status::InvalidArgument("--prefix is empty");
  if (o.state_dir.empty()) return Status::InvalidArgument("--state is required");
  if (o.shards < 1) return Status::InvalidArgument("--shards must be at least 1");
  if (o.shard >= o.shards) {
    return Status::InvalidArgument("--shard " + std::to_string(o.shard) +
                                   " must be below --shards " + std::to_string(o.shards));
  }
  if (o.vocab_capacity < 2) return Status::InvalidArgument("--vocab-capacity must be at least 2");
  if (o.dim > kMaxParamDim) {
    return Status::InvalidArgument("--dim must be at most " + std::to_string(kMaxParamDim));
  }
  if (!(o.snapshot_every_s > 0)) {
    return Status::InvalidArgument("--snapshot-every must be positive");
  }
  if (!(o.publish_every_s >= 0)) {
    return Status::InvalidArgument("--publish-every must not be negative");
  }
  if (!(o.merge.eta > 0) || !(o.merge.epsilon > 0)) {
    return Status::InvalidArgument("the Downpour eta and epsilon must be positive");
  }
  if (o.max_message_bytes < 4096 || o.publish_max_bytes == 0 || o.max_batch_messages == 0) {
    return Status::InvalidArgument("message and batch bounds too small");
  }
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.options = o;
  m.updates_topic = UpdatesTopic(o.kafka.topic_prefix);
  m.params_topic = ParamsTopic(o.kafka.topic_prefix);
  m.rejected_topic = RejectedTopic(o.kafka.topic_prefix);
  m.group = ParamNodesGroup(o.kafka.topic_prefix);
  m.rows.dim = static_cast<int>(o.dim);

  // Kafka configuration first: a bad property is a usage error and must not touch the state.
  std::unique_ptr<RdKafka::Conf> cconf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::unique_ptr<RdKafka::Conf> pconf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::unique_ptr<RdKafka::Conf> rconf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  const std::string client = "streamvec-param-node-" + std::to_string(o.shard);
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"bootstrap.servers", o.kafka.brokers},
           {"group.id", ParamNodesReadGroup(o.kafka.topic_prefix)},
           {"client.id", client + "-read"},
           {"enable.auto.commit", "false"},
           {"enable.auto.offset.store", "false"}}) {
    SV_RETURN_IF_ERROR(SetProperty(rconf.get(), name, value));
  }
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"bootstrap.servers", o.kafka.brokers},
           {"group.id", m.group},
           {"client.id", client},
           {"enable.auto.commit", "false"},
           {"enable.auto.offset.store", "false"},
           {"auto.offset.reset", "earliest"},
           {"enable.partition.eof", "true"},
           {"max.partition.fetch.bytes", std::to_string(kParamFetchBytes)},
           // After a fetch error (a reset: the ring dropped pushes) fetch again in 20 ms, not 500.
           {"fetch.error.backoff.ms", "20"},
           // The embedded broker answers a fetch that finds nothing only after this wait, even
           // when pushes come meanwhile (500 ms by default).
           {"fetch.wait.max.ms", "10"}}) {
    SV_RETURN_IF_ERROR(SetProperty(cconf.get(), name, value));
  }
  SV_RETURN_IF_ERROR(SetProperty(pconf.get(), "bootstrap.servers", o.kafka.brokers));
  SV_RETURN_IF_ERROR(SetProperty(pconf.get(), "client.id", client));
  SV_RETURN_IF_ERROR(SetProperty(pconf.get(), "linger.ms", "5"));
  SV_RETURN_IF_ERROR(SetProperty(pconf.get(), "enable.idempotence", "true"));
  for (const auto& [name, value] : IdempotentProducerDefaults(o.kafka)) {
    SV_RETURN_IF_ERROR(SetProperty(pconf.get(), name, value));
  }
  std::string err;
  if (cconf->set("event_cb", &m.consumer_events, err) != RdKafka::Conf::CONF_OK ||
      pconf->set("event_cb", &m.producer_events, err) != RdKafka::Conf::CONF_OK ||
      rconf->set("event_cb", &m.read_events, err) != RdKafka::Conf::CONF_OK ||
      rconf->set("offset_commit_cb", &m.read_commit_result, err) != RdKafka::Conf::CONF_OK) {
    return Status::Internal("librdkafka configuration: " + err);
  }
  for (const auto& [name, value] : o.kafka.properties) {
    SV_RETURN_IF_ERROR(SetProperty(cconf.get(), name, value));
    SV_RETURN_IF_ERROR(SetProperty(pconf.get(), name, value));
    SV_RETURN_IF_ERROR(SetProperty(rconf.get(), name, value));
  }

  // A damaged live database is rebuilt from the newest intact checkpoint (its rows, counts and
  // .updates offset).
  StateStoreOptions store_options;
  store_options.restore_damaged = true;
  StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(o.state_dir, StateStore::Mode::kCreateOrOpen, store_options);
  if (!store.ok()) return store.status();
  m.store = std::move(store).value();
  if (m.store->restore().restored) {
    spdlog::warn("param-node: state {}: {}", o.state_dir, m.store->restore().Describe());
  }
  if (m.store->version() > 0) {
    SV_RETURN_IF_ERROR(m.Restore());
  } else {
    m.counts = std::make_unique<CountSummary>(o.vocab_capacity);
  }
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stats.clock = m.clock;
    m.stats.rows = m.rows.held();
    m.stats.dim = m.options.dim;
    m.stats.snapshot_version = m.store->version();
    m.stats.next_offset = m.snapshot_offset;
  }

  if (o.create_topics_on != nullptr) {
    const int shards = static_cast<int>(o.shards);
    SV_RETURN_IF_ERROR(o.create_topics_on->CreateTopic(m.updates_topic, shards));
    SV_RETURN_IF_ERROR(o.create_topics_on->CreateTopic(m.params_topic, shards));
    SV_RETURN_IF_ERROR(o.create_topics_on->CreateTopic(m.rejected_topic, 1));
  }
  m.producer.reset(RdKafka::Producer::create(pconf.get(), err));
  if (!m.producer) return Status::InvalidArgument("Kafka producer: " + err);
  m.consumer.reset(RdKafka::KafkaConsumer::create(cconf.get(), err));
  if (!m.consumer) return Status::InvalidArgument("Kafka consumer: " + err);
  m.read_committer.reset(RdKafka::KafkaConsumer::create(rconf.get(), err));
  if (!m.read_committer) return Status::InvalidArgument("Kafka consumer: " + err);
  return std::unique_ptr<ParamNode>(new ParamNode(std::move(impl)));
}

Status ParamNode::Run(const std::atomic<bool>& stop) {
  Impl& m = *impl_;
  const auto t0 = Clock::now();
  const bool assigned = m.Assign(stop);
  auto last_snapshot = Clock::now();
  auto last_publish = Clock::now() - std::chrono::hours(1);
  auto last_lag = Clock::now() - std::chrono::hours(1);
  Status fatal;
  while (assigned && !stop.load()) {
    std::vector<std::unique_ptr<RdKafka::Message>> batch;
    std::unique_ptr<RdKafka::Message> msg(m.consumer->consume(100));
    m.producer->poll(0);
    // One batch: the first message and the messages the partition held when it was fetched (up
    // to the high watermark the consumer knew then: messages produced together are merged
    // together, however the client hands them over), at most max_batch_messages, waiting at
    // most kBatchWaitSeconds for them.
    int64_t batch_end = -1;
    const auto batch_start = Clock::now();
    while (msg->err() == RdKafka::ERR_NO_ERROR) {
      m.at_end = false;
      m.last_activity = Clock::now();
      if (batch.empty()) {
        int64_t low = -1, high = -1;
        if (m.consumer->get_watermark_offsets(msg->topic_name(), msg->partition(), &low,
                                              &high) == RdKafka::ERR_NO_ERROR) {
          batch_end = high;
        }
      }
      const int64_t next = msg->offset() + 1;
      batch.push_back(std::move(msg));
      if (batch.size() >= m.options.max_batch_messages) break;
      while (true) {
        const bool expected = next < batch_end && !stop.load() &&
                              SecondsSince(batch_start) < kBatchWaitSeconds;
        msg.reset(m.consumer->consume(expected ? 100 : 0));
        if (!(expected && msg->err() == RdKafka::ERR__TIMED_OUT)) break;
      }
    }
    if (msg && msg->err() == RdKafka::ERR__PARTITION_EOF) {
      m.at_end = true;
    } else if (msg && msg->err() != RdKafka::ERR_NO_ERROR &&
               msg->err() != RdKafka::ERR__TIMED_OUT) {
      spdlog::warn("param-node: consume: {}", msg->errstr());
    }
    if (!batch.empty()) {
      m.ProcessBatch(batch);
      m.CommitRead();  // the trainers wait on it
    }
    if (m.consumer_events.fatal() || m.producer_events.fatal()) {
      fatal = Status::Internal("fatal librdkafka error (see the log)");
      break;
    }
    if (SecondsSince(last_publish) >= m.options.publish_every_s) {
      if (Status s = m.Publish(/*everything=*/false); !s.ok()) {
        spdlog::error("param-node: publication failed: {}", s.message());
      }
      last_publish = Clock::now();
    }
    const bool bytes_due =
        m.options.snapshot_bytes > 0 && m.max_sender_bytes >= m.options.snapshot_bytes;
    if (Status s = m.FinishSnapshot(/*wait=*/false); !s.ok()) {
      spdlog::warn("param-node: snapshot failed, the previous one is kept: {}", s.message());
    }
    if (m.changed && !m.snapshot_job &&
        (bytes_due || SecondsSince(last_snapshot) >= m.options.snapshot_every_s)) {
      m.StartSnapshot(bytes_due ? "bytes" : "periodic");
      last_snapshot = Clock::now();
    }
    if (SecondsSince(last_lag) >= 0.5) {
      m.CommitRead();
      delete m.read_committer->consume(0);  // serves its events (it is assigned nothing)
      m.UpdateLag();
      last_lag = Clock::now();
    }
    if (m.options.max_idle_s > 0 && m.at_end &&
        SecondsSince(m.last_activity) >= m.options.max_idle_s) {
      spdlog::info("param-node: idle for {} s: stopping", m.options.max_idle_s);
      break;
    }
  }
  Status final_status = fatal;
  if (Status s = m.Publish(/*everything=*/true); !s.ok()) {
    spdlog::error("param-node: final publication failed: {}", s.message());
  }
  if (Status s = m.FinishSnapshot(/*wait=*/true); !s.ok()) {
    spdlog::warn("param-node: snapshot failed, the previous one is kept: {}", s.message());
  }
  if (m.changed || m.store->version() == 0) {
    if (Status s = m.Snapshot("final"); !s.ok() && final_status.ok()) final_status = s;
  }
  m.UpdateLag();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stats.seconds = SecondsSince(t0);
  }
  return final_status;
}

ParamNodeStats ParamNode::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace streamvec

#include "streamvec/trainer/kafka_trainer.h"

#include <librdkafka/rdkafkacpp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "streamvec/kafka/broker.h"
#include "streamvec/kafka/document.h"
#include "streamvec/kafka/rdkafka_conf.h"
#include "streamvec/kernels/cuda.h"
#include "streamvec/store/embedding_entries.h"
#include "streamvec/store/snapshot_reader.h"
#include "streamvec/store/word2vec_format.h"
#include "streamvec/tokenizer/normalize.h"
#include "streamvec/tokenizer/whitespace_tokenizer.h"

namespace streamvec {
namespace {

// Seconds without a message after which pending training is snapshotted and committed.
constexpr double kIdleSnapshotSeconds = 0.5;
// The snapshot write budget holds at most this many seconds of its rate.
constexpr double kWriteBurstSeconds = 60;

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Bytes of the regular files under `dir`, each inode once (a published checkpoint hard-links
// the database's table files); 0 when it cannot be read.
uint64_t DiskBytes(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::set<std::pair<dev_t, ino_t>> seen;
  uint64_t bytes = 0;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (seen.insert({st.st_dev, st.st_ino}).second) bytes += static_cast<uint64_t>(st.st_size);
  }
  return bytes;
}

// Owns the TopicPartition pointers librdkafka's C++ API hands around in vectors.
struct PartitionList {
  std::vector<RdKafka::TopicPartition*> v;
  PartitionList() = default;
  PartitionList(const PartitionList&) = delete;
  PartitionList& operator=(const PartitionList&) = delete;
  ~PartitionList() { RdKafka::TopicPartition::destroy(v); }
};

// librdkafka's errors and logs -> spdlog. Broker connection errors repeat every few hundred ms
// while a broker is down (librdkafka keeps retrying with backoff), so each error kind is logged
// at most once every kErrorLogInterval. Called from librdkafka's threads and from poll().
class EventLogger : public RdKafka::EventCb {
 public:
  // quiet_confwarn: the producer gets the consumer's extra properties too, so its warnings about
  // consumer-only properties are expected and logged at debug level.
  EventLogger(std::string what, bool quiet_confwarn)
      : what_(std::move(what)), quiet_confwarn_(quiet_confwarn) {}

  void event_cb(RdKafka::Event& event) override {
    switch (event.type()) {
      case RdKafka::Event::EVENT_ERROR:
        if (event.fatal()) fatal_.store(true);
        if (ShouldLog(static_cast<int>(event.err()))) {
          if (event.err() == RdKafka::ERR__ALL_BROKERS_DOWN ||
              event.err() == RdKafka::ERR__TRANSPORT || event.err() == RdKafka::ERR__RESOLVE) {
            spdlog::error("{}: cannot reach the Kafka brokers: {} (retrying with backoff)", what_,
                          event.str());
          } else {
            spdlog::error("{}: Kafka error: {}: {}", what_, RdKafka::err2str(event.err()),
                          event.str());
          }
        }
        break;
      case RdKafka::Event::EVENT_LOG:
        if (event.severity() <= RdKafka::Event::EVENT_SEVERITY_WARNING &&
            !(quiet_confwarn_ && event.fac() == "CONFWARN")) {
          if (ShouldLog(1000 + static_cast<int>(event.severity()))) {
            spdlog::warn("{}: librdkafka {}: {}", what_, event.fac(), event.str());
          }
        } else {
          spdlog::debug("{}: librdkafka {}: {}", what_, event.fac(), event.str());
        }
        break;
      default:
        break;
    }
  }

  bool fatal() const { return fatal_.load(); }

 private:
  static constexpr double kErrorLogInterval = 10.0;  // seconds

  bool ShouldLog(int kind) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = last_.find(kind);
    const auto now = Clock::now();
    if (it != last_.end() &&
        std::chrono::duration<double>(now - it->second).count() < kErrorLogInterval) {
      return false;
    }
    last_[kind] = now;
    return true;
  }

  const std::string what_;
  const bool quiet_confwarn_;
  std::atomic<bool> fatal_{false};
  std::mutex mu_;
  std::map<int, Clock::time_point> last_;  // GUARDED_BY(mu_)
};

// Forwards librdkafka's rebalance callback (called from inside consume() and close(), on the
// thread that calls them).
class RebalanceHandler : public RdKafka::RebalanceCb {
 public:
  using Fn = std::function<void(RdKafka::KafkaConsumer*, RdKafka::ErrorCode,
                                std::vector<RdKafka::TopicPartition*>&)>;
  explicit RebalanceHandler(Fn fn) : fn_(std::move(fn)) {}
  void rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override {
    fn_(consumer, err, partitions);
  }

 private:
  Fn fn_;
};

Status SetProperty(RdKafka::Conf* conf, const std::string& name, const std::string& value) {
  std::string err;
  if (conf->set(name, value, err) != RdKafka::Conf::CONF_OK) {
    return Status::InvalidArgument("--kafka-config " + name + "=" + value + ": " + err);
  }
  return Status::Ok();
}

std::string Origin(const RdKafka::Message& m) {
  return m.topic_name() + "/" + std::to_string(m.partition()) + "@" + std::to_string(m.offset());
}

}  // namespace

// A document waiting in the current micro-batch.
struct PendingDocument {
  Document doc;
  int32_t partition;
  int64_t offset;
};

struct KafkaTrainer::Impl {
  KafkaTrainerOptions options;
  std::atomic<bool> snapshot_requested{false};  // RequestSnapshot()
  std::string group;
  std::string topic;
  std::string rejected_topic;
  std::unique_ptr<StateStore> store;
  std::unique_ptr<StreamingLearner> learner;
  std::unique_ptr<ParamClient> param;  // options.param_shards > 0
  std::unique_ptr<CharDistiller> distiller;  // --char-distill (or resumed with one)
  std::unique_ptr<CharSgns> char_sgns;       // --model char-lstm (or resumed with one)
  EventLogger consumer_events{"trainer consumer", false};
  EventLogger producer_events{"trainer producer", true};
  std::unique_ptr<RebalanceHandler> rebalance;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer;
  std::unique_ptr<RdKafka::Producer> producer;

  // Resume: the snapshot's offsets, applied to a partition at its first assignment.
  std::string snapshot_cluster_id;
  std::string snapshot_topic;
  std::map<int32_t, int64_t> resume_offsets;
  // Partitions revoked by a rebalance, with the offset this trainer's durable state covers in
  // each: if one comes back, it starts there unless the group has committed further (another
  // member trained on). The group's offset alone would be behind when this trainer's commit never
  // reached it (a resumed partition revoked before anything new was trained: nothing to snapshot,
  // so nothing committed), and the documents between would be trained twice.
  std::map<int32_t, int64_t> revoked_covered;
  bool cluster_checked = false;
  std::string cluster_id;  // of the broker we consume from ("" until known)

  // Run-thread state.
  std::set<int32_t> assigned;
  int32_t topic_partitions = 0;  // of `topic`, at the last assignment (UpdateForGroupSize)
  // Assigned partitions read to their end (ERR__PARTITION_EOF) with no message since: the topic
  // is idle for --max-idle only once this holds every assigned partition.
  std::set<int32_t> at_end;
  std::map<int32_t, int64_t> next_offsets;  // next offset per partition, covered by training
  std::vector<PendingDocument> batch;
  size_t batch_bytes = 0;
  Clock::time_point batch_started;
  bool dirty = false;             // trained or rejected something since the last snapshot
  bool since_checkpoint = false;  // ... since the last checkpoint (or its failure)
  Clock::time_point last_checkpoint_time = Clock::now();
  uint64_t stats_checkpoint_version = 0;  // StateStore version of the last checkpoint
  // Unix seconds since which what the learner trained is not in a checkpoint: the last
  // checkpoint's capture, or the start of the first process on this state before any.
  double checkpoint_wall_time = 0;
  // Every assigned partition read to its end once since this start (a restart's replay done).
  bool caught_up = false;
  Clock::time_point started = Clock::now();
  // Snapshot write budget (KafkaTrainerOptions::snapshot_write_rate): bytes that may be written
  // now; refilled at the rate, capped at kWriteBurstSeconds of it, charged after each write.
  double write_tokens = 0;
  Clock::time_point tokens_at = Clock::now();
  void RefillWriteTokens() {
    const double rate = options.snapshot_write_rate;
    if (rate <= 0) return;
    write_tokens = std::min(rate * kWriteBurstSeconds,
                            write_tokens + rate * SecondsSince(tokens_at));
    tokens_at = Clock::now();
  }
  bool snapshots_allowed = true;  // false once Run stopped without a final snapshot
  uint64_t bytes_since_snapshot = 0;
  // Message bytes consumed per partition since the last snapshot, and the largest of them.
  std::map<int32_t, uint64_t> partition_bytes_since_snapshot;
  uint64_t max_partition_bytes_since_snapshot = 0;
  Clock::time_point last_snapshot_time = Clock::now();
  bool ever_assigned = false;
  uint64_t idle_pushed_words = 0;  // words trained at the last push of a quiet stream
  bool got_message = false;
  Clock::time_point first_message;
  Clock::time_point last_activity = Clock::now();  // assignment or message
  // Cumulative over runs (kTrainerCountersEntry).
  uint64_t total_documents = 0, total_bytes = 0, total_rejected = 0;
  uint64_t start_words = 0, start_words_trained = 0;

  Clock::time_point run_start = Clock::now();  // set when Run starts
  // Run-thread phase times (copied into stats with the wall time).
  double consume_s = 0, parse_s = 0, feed_s = 0, snapshot_s = 0, commit_s = 0;

  mutable std::mutex mu;
  KafkaTrainerStats stats;                   // GUARDED_BY(mu)
  // Per source, the end of its contiguous trained prefix. GUARDED_BY(mu)
  SourcePositions positions;
  // With options.shared_positions: what the last checkpoint recorded of them (the final
  // snapshot is taken when they moved since, though this trainer trained nothing more).
  std::map<std::string, int64_t> recorded_positions;

  Status TrainPending();
  void AdvancePosition(const Document& doc);
  // A snapshot is taken in two steps: StartSnapshot trains what is pending, copies the learner
  // and the offsets it covers into memory (the workers idle meanwhile) and hands them to a
  // thread that writes them to the store; FinishSnapshot waits for that thread and, once the
  // snapshot is durable, commits its offsets. Snapshot does both (rebalances, the final one).
  // One snapshot is in flight at a time; the store is used by its thread alone meanwhile.
  struct InFlightSnapshot {
    std::thread thread;
    std::atomic<bool> done{false};
    Status status;  // set by the thread before done
    std::vector<std::pair<std::string, std::string>> entries;
    std::string metadata;
    std::map<int32_t, int64_t> offsets;  // next offset per partition, committed once durable
    std::string why;
    bool checkpoint = true;  // false: a serving publication (keep_unwritten, no commit)
    uint64_t bytes = 0;  // of the entries
    uint64_t written = 0;  // of those, written anew by the store
    double capture_s = 0;
    Clock::time_point started;
  };
  std::unique_ptr<InFlightSnapshot> in_flight;
  Status StartSnapshot(const char* why);
  Status FinishSnapshot(bool commit);
  Status Snapshot(const char* why);
  void Commit(const std::map<int32_t, int64_t>& offsets);
  // Without waiting for the broker (KafkaTrainerOptions::commit_before_durable).
  void CommitAsync(const std::map<int32_t, int64_t>& offsets);
  void Reject(const RdKafka::Message& m, const std::string& reason);
  void OnAssign(RdKafka::KafkaConsumer* consumer, std::vector<RdKafka::TopicPartition*>& parts);
  // The consumer's handle of `topic` (StartOffsets), kept while the consumer lives.
  std::unique_ptr<RdKafka::Topic> topic_handle;
  // Where the partitions of `parts` that the snapshot does not cover start: the group's
  // committed offset, else auto.offset.reset's end (earliest unless --kafka-config says
  // latest), looked up here with one OffsetFetch. Left to librdkafka (OFFSET_INVALID), its
  // reset path waits a fixed 100 ms before the ListOffsets of a partition without a committed
  // offset, which a fresh trainer spent before its first message. Partitions missing from the
  // result (lookup failed, auto.offset.reset=error) are left to librdkafka.
  std::map<int32_t, int64_t> StartOffsets(RdKafka::KafkaConsumer* consumer,
                                          const std::vector<RdKafka::TopicPartition*>& parts);
  void OnRevoke(RdKafka::KafkaConsumer* consumer, std::vector<RdKafka::TopicPartition*>& parts);
  void UpdateLag();
  // The kafka/offsets entry: what a restart resumes from (no partitions: from the beginning).
  std::string OffsetsJson(bool with_partitions = true) const;
  // Assignment mode: takes the configured partitions (waiting, until `stop`, for the topic to
  // exist). False when stopped first.
  bool AssignManually(const std::atomic<bool>& stop);
  // The partitions of `topic` by the consumer's metadata (one request, 2 s at most); 0 when
  // unknown.
  int32_t TopicPartitions();
  // The ParamClient settings that follow the group's size, for the options left to it: from
  // the trainers sharing the topic (its partitions over this trainer's), the push interval
  // (push_every_words 0: kGroupPushWords over them), the group's counts (group_counts kAuto)
  // and the push schedule's hot rows (push_hot_rows unset). At each assignment.
  void UpdateForGroupSize();
  // On the embedded broker (the cluster id is the mock's), the consumer's fetch.wait.max.ms
  // becomes 10 unless --kafka-config set it: the mock answers a fetch that finds nothing only at
  // the end of that wait, even when documents arrive meanwhile, so librdkafka's 500 ms held each
  // document that reached a caught-up trainer up to half a second (a Kafka broker answers as
  // soon as data comes, and keeps the default). The queue of prefetched messages keeps
  // librdkafka's 64 MiB (a smaller one pauses fetching while full). With the group also held by
  // a keeper (EmbeddedBroker::HoldGroup: topic GroupKeeperTopic(group) exists): a group-joining
  // trainer gets session.timeout.ms and heartbeat.interval.ms kHeldGroupSessionMs and
  // kHeldGroupHeartbeatMs unless --kafka-config set them
  // (the mock applies the last joiner's session to the whole group and waits that less 1 s for
  // a join, so a member with a longer session would hold every later join that long); an
  // assigning one (--assign) is refused with InvalidArgument, as the mock refuses commits
  // without a generation to a group with members. Elsewhere (a real cluster, whose
  // group.min.session.timeout.ms is 6 s, or a group nobody holds, whose first join outlasts
  // 1.06 s) nothing changes.
  Status SuitConsumerToEmbeddedBroker(RdKafka::Conf* consumer_conf);

  // Copies the run thread's wall and phase times into stats.
  void PublishTimes(Clock::time_point run_start) {
    std::lock_guard<std::mutex> lock(mu);
    stats.seconds = SecondsSince(run_start);
    stats.consume_seconds = consume_s;
    stats.parse_seconds = parse_s;
    stats.feed_seconds = feed_s;
    stats.snapshot_seconds = snapshot_s;
    stats.commit_seconds = commit_s;
  }
};

std::map<int32_t, int64_t> KafkaTrainer::Impl::StartOffsets(
    RdKafka::KafkaConsumer* c, const std::vector<RdKafka::TopicPartition*>& parts) {
  std::map<int32_t, int64_t> start;
  std::string reset = "earliest";
  for (const auto& [name, value] : options.kafka.properties) {
    if (name == "auto.offset.reset") reset = value;
  }
  int64_t fallback;
  if (reset == "earliest" || reset == "smallest" || reset == "beginning") {
    fallback = RdKafka::Topic::OFFSET_BEGINNING;
  } else if (reset == "latest" || reset == "largest" || reset == "end") {
    fallback = RdKafka::Topic::OFFSET_END;
  } else {
    return start;  // "error": librdkafka reports it
  }
  std::vector<RdKafka::TopicPartition*> query;
  for (const RdKafka::TopicPartition* tp : parts) {
    if (resume_offsets.count(tp->partition()) == 0) {
      query.push_back(RdKafka::TopicPartition::create(tp->topic(), tp->partition()));
    }
  }
  if (query.empty()) return start;
  // The partitions' leaders known before the assignment starts them: librdkafka waits a fixed
  // 500 ms before the offset query of a partition whose leader it does not know yet.
  if (!topic_handle) {
    std::string err;
    topic_handle.reset(RdKafka::Topic::create(c, topic, nullptr, err));
  }
  if (topic_handle) {
    RdKafka::Metadata* md = nullptr;
    if (c->metadata(false, topic_handle.get(), &md, 5000) == RdKafka::ERR_NO_ERROR) delete md;
  }
  if (c->committed(query, 5000) == RdKafka::ERR_NO_ERROR) {
    for (const RdKafka::TopicPartition* tp : query) {
      if (tp->err() != RdKafka::ERR_NO_ERROR) continue;
      start[tp->partition()] = tp->offset() >= 0 ? tp->offset() : fallback;
    }
  }
  RdKafka::TopicPartition::destroy(query);
  return start;
}

void KafkaTrainer::Impl::OnAssign(RdKafka::KafkaConsumer* c,
                                  std::vector<RdKafka::TopicPartition*>& parts) {
  if (!cluster_checked) {
    cluster_checked = true;
    cluster_id = c->clusterid(5000);
    if (!resume_offsets.empty()) {
      if (!snapshot_cluster_id.empty() && !cluster_id.empty() &&
          snapshot_cluster_id != cluster_id) {
        spdlog::info(
            "trainer: the snapshot's offsets are from Kafka cluster '{}', this is '{}' "
            "(a new broker?): its partitions start from the beginning",
            snapshot_cluster_id, cluster_id);
        for (auto& [p, offset] : resume_offsets) offset = RdKafka::Topic::OFFSET_BEGINNING;
      } else if (snapshot_topic != topic) {
        spdlog::info("trainer: the snapshot's offsets are for topic '{}', not '{}': ignored",
                     snapshot_topic, topic);
        resume_offsets.clear();
      }
    }
  }
  const std::map<int32_t, int64_t> start = StartOffsets(c, parts);
  std::string where;
  for (RdKafka::TopicPartition* tp : parts) {
    const int32_t p = tp->partition();
    assigned.insert(p);
    auto it = resume_offsets.find(p);
    if (it == resume_offsets.end()) {
      auto s = start.find(p);
      int64_t offset = s != start.end() ? s->second : RdKafka::Topic::OFFSET_INVALID;
      auto covered = revoked_covered.find(p);
      if (covered != revoked_covered.end()) {
        // The logical offsets (beginning, end, invalid) are negative: the covered one wins.
        if (covered->second > offset) {
          offset = covered->second;
          next_offsets[p] = offset;
          where += " " + std::to_string(p) + "@" + std::to_string(offset);
        }
        revoked_covered.erase(covered);
      }
      tp->set_offset(offset);
      continue;
    }
    int64_t offset = it->second;
    resume_offsets.erase(it);
    if (offset >= 0) {
      int64_t low = -1, high = -1;
      const RdKafka::ErrorCode e = c->query_watermark_offsets(topic, p, &low, &high, 5000);
      if (e == RdKafka::ERR_NO_ERROR && offset > high) {
        spdlog::info(
            "trainer: the snapshot's offset {} of {}/{} is beyond its high watermark "
            "{}: the partition starts from the beginning",
            offset, topic, p, high);
        offset = RdKafka::Topic::OFFSET_BEGINNING;
      }
    }
    tp->set_offset(offset);
    if (offset >= 0) next_offsets[p] = offset;
    where += " " + std::to_string(p) + "@" + (offset >= 0 ? std::to_string(offset) : "start");
  }
  if (!where.empty()) {
    spdlog::info("trainer: resuming {} from the snapshot (or, for partitions given back, what "
                 "the state covers):{}",
                 topic, where);
  }
  const RdKafka::ErrorCode e = c->assign(parts);
  if (e != RdKafka::ERR_NO_ERROR) {
    spdlog::error("trainer: cannot take the assigned partitions: {}", RdKafka::err2str(e));
  }
  spdlog::info("trainer: {} partition(s) of {} assigned ({} {})", assigned.size(), topic,
               options.assign ? "manually, offsets committed to group" : "group", group);
  UpdateForGroupSize();
  ever_assigned = true;
  last_activity = Clock::now();
}

void KafkaTrainer::Impl::OnRevoke(RdKafka::KafkaConsumer* c,
                                  std::vector<RdKafka::TopicPartition*>& parts) {
  // Before giving partitions away, make what was consumed from them durable and commit it, so
  // the next owner starts where this one stopped.
  if (snapshots_allowed) {
    if (Status s = FinishSnapshot(/*commit=*/true); !s.ok()) {
      spdlog::warn("trainer: snapshot failed, the previous one is kept: {}", s.message());
    }
  }
  if (snapshots_allowed && (dirty || since_checkpoint || !batch.empty())) {
    if (Status s = Snapshot("rebalance"); !s.ok()) {
      spdlog::warn("trainer: snapshot before a rebalance failed (the previous one is kept): {}",
                   s.message());
    }
  }
  // What the state holds is durable now unless a snapshot above failed.
  const bool durable = snapshots_allowed && !dirty && !since_checkpoint && batch.empty();
  for (RdKafka::TopicPartition* tp : parts) {
    const int32_t p = tp->partition();
    auto next = next_offsets.find(p);
    if (durable && next != next_offsets.end() && next->second >= 0) {
      revoked_covered[p] = next->second;
    } else {
      revoked_covered.erase(p);
    }
    assigned.erase(p);
    at_end.erase(p);
    if (next != next_offsets.end()) next_offsets.erase(next);
  }
  batch.clear();
  batch_bytes = 0;
  c->unassign();
}

void KafkaTrainer::Impl::Reject(const RdKafka::Message& m, const std::string& reason) {
  const std::string origin = Origin(m);
  spdlog::warn("trainer: rejected {}: {}", origin, reason);
  const std::string value = RejectionToJson(
      reason, origin,
      std::string_view(static_cast<const char*>(m.payload()), m.payload() ? m.len() : 0));
  for (int attempt = 0; attempt < 100; ++attempt) {
    const RdKafka::ErrorCode e = producer->produce(
        rejected_topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
        const_cast<char*>(value.data()), value.size(), origin.data(), origin.size(), 0, nullptr);
    if (e != RdKafka::ERR__QUEUE_FULL) {
      if (e != RdKafka::ERR_NO_ERROR) {
        spdlog::error("trainer: cannot queue the rejection of {}: {}", origin, RdKafka::err2str(e));
      }
      break;
    }
    producer->poll(100);
  }
  producer->poll(0);
  ++total_rejected;
  dirty = true;
  since_checkpoint = true;
  std::lock_guard<std::mutex> lock(mu);
  ++stats.rejected;
}

// A source's position is the end of its contiguous trained prefix (SourcePositions: a
// document's [start, offset) range). Called with mu held.
void KafkaTrainer::Impl::AdvancePosition(const Document& doc) {
  positions.Cover(doc.source, doc.start, doc.offset);
  if (options.shared_positions) options.shared_positions->Cover(doc.source, doc.start, doc.offset);
}

std::vector<std::string_view> SplitDocumentForSync(std::string_view text, size_t max_words) {
  SV_CHECK(max_words >= 1);
  auto space = [](char c) { return IsTokenSeparator(static_cast<unsigned char>(c)); };
  // n bytes hold at most (n + 1) / 2 words: a short text needs no scan.
  if (text.size() < 2 * max_words) {
    if (std::all_of(text.begin(), text.end(), space)) return {};
    return {text};
  }
  std::vector<std::string_view> pieces;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    while (i < n && space(text[i])) ++i;  // the whitespace between pieces
    if (i == n) break;
    const size_t start = i;
    size_t words = 0;
    size_t end = i;
    while (i < n && words < max_words) {
      while (i < n && !space(text[i])) ++i;  // a word
      end = i;
      ++words;
      while (i < n && space(text[i])) ++i;
    }
    // A text of at most max_words words stays whole (with its surrounding whitespace).
    if (pieces.empty() && i == n) return {text};
    pieces.push_back(text.substr(start, end - start));
  }
  return pieces;
}

Status KafkaTrainer::Impl::TrainPending() {
  if (batch.empty()) return Status::Ok();
  const auto feed_t0 = Clock::now();
  std::vector<std::string_view> texts;
  texts.reserve(batch.size());
  std::vector<std::string> normalized;
  if (options.normalize_text) {
    normalized.reserve(batch.size());
    for (const PendingDocument& d : batch) normalized.push_back(NormalizeText(d.doc.text));
    for (const std::string& t : normalized) texts.emplace_back(t);
  } else {
    for (const PendingDocument& d : batch) texts.emplace_back(d.doc.text);
  }
  Status s;
  if (char_sgns) {
    s = char_sgns->TrainMicroBatch(learner.get(), texts);
  } else if (!param) {
    s = learner->TrainMicroBatch(texts);
  } else {
    // A distributed trainer trains document by document, and a long document piece by piece,
    // so that it can push every --push-every words and apply the shards' rows in between,
    // however large the micro-batch or its documents.
    const size_t piece_words =
        static_cast<size_t>(std::max<uint64_t>(kMinSyncPieceWords, param->push_every_words() / 2));
    for (size_t i = 0; i < texts.size() && s.ok(); ++i) {
      for (std::string_view piece : SplitDocumentForSync(texts[i], piece_words)) {
        s = learner->TrainMicroBatch(std::vector<std::string_view>{piece});
        if (!s.ok()) break;
        if (Status ps = param->Sync(/*force=*/false); !ps.ok()) {
          spdlog::warn("trainer: parameter node: {}", ps.message());
        }
      }
    }
  }
  if (distiller && s.ok()) {
    if (Status ds = distiller->MaybeStep(*learner); !ds.ok()) {
      spdlog::warn("trainer: character model distillation: {}", ds.message());
    }
  }
  feed_s += SecondsSince(feed_t0);
  const StreamingStats ls = learner->stats();
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const PendingDocument& d : batch) {
      if (d.doc.offset >= 0) AdvancePosition(d.doc);
      ++stats.documents_by_language[d.doc.lang];
    }
    stats.documents += batch.size();
    stats.micro_batches += 1;
    stats.words = ls.words_seen - start_words;
    stats.words_trained = ls.words_trained - start_words_trained;
    stats.state_documents = total_documents + batch.size();
    stats.state_words = ls.words_seen;
    stats.active_seconds = SecondsSince(first_message);
    stats.trained_until_seconds = SecondsSince(run_start);
    stats.vocab_size = ls.vocab_size;
    stats.evictions = ls.evictions;
    if (param) stats.param = param->stats();
    if (distiller) {
      stats.char_distill = true;
      stats.char_distill_stats = distiller->stats();
    }
    if (char_sgns) {
      stats.char_lstm = true;
      stats.char_lstm_stats = char_sgns->stats();
    }
    // The running mean since the last snapshot (TakeLoss there); no wait for the workers.
    if (ls.loss > 0) stats.loss = ls.loss;
  }
  for (const PendingDocument& d : batch) {
    int64_t& next = next_offsets[d.partition];
    next = std::max(next, d.offset + 1);
  }
  total_documents += batch.size();
  batch.clear();
  batch_bytes = 0;
  dirty = true;
  since_checkpoint = true;
  if (options.commit_before_durable) {
    const auto commit_t0 = Clock::now();
    CommitAsync(next_offsets);
    commit_s += SecondsSince(commit_t0);
  }
  return s;
}

std::string KafkaTrainer::Impl::OffsetsJson(bool with_partitions) const {
  json parts = json::object();
  if (with_partitions) {
    // Offsets of the snapshot not applied yet (partitions not assigned since the start) stay.
    for (const auto& [p, offset] : resume_offsets) {
      if (offset >= 0) parts[std::to_string(p)] = offset;
    }
    for (const auto& [p, offset] : next_offsets) parts[std::to_string(p)] = offset;
  }
  json j = {{"cluster_id", cluster_id.empty() ? snapshot_cluster_id : cluster_id},
            {"group", group},
            {"topic", topic},
            {"partitions", parts}};
  return j.dump();
}

Status KafkaTrainer::Impl::StartSnapshot(const char* why) {
  SV_RETURN_IF_ERROR(FinishSnapshot(/*commit=*/true));  // one snapshot in flight at a time
  SV_RETURN_IF_ERROR(TrainPending());
  const auto t0 = Clock::now();
  // Rejections are acknowledged before the offsets that pass them are recorded.
  if (producer->flush(5000) != RdKafka::ERR_NO_ERROR) {
    spdlog::warn("trainer: rejections not yet acknowledged by the broker at snapshot time");
  }
  auto snap = std::make_unique<InFlightSnapshot>();
  snap->why = why;
  // A serving publication where allowed: the periodic, pause and byte triggers between
  // checkpoints. A requested, rebalance or final snapshot, the first one, and one taken after a
  // failed checkpoint (since_checkpoint with an old last_checkpoint_time) are checkpoints.
  const std::string_view reason(why);
  snap->checkpoint =
      options.checkpoint_every_s <= 0 ||
      !(reason == "periodic" || reason == "pause" || reason == "partition lag") ||
      SecondsSince(last_checkpoint_time) >= options.checkpoint_every_s;
  snap->offsets = next_offsets;
  std::string offsets = OffsetsJson();
  if (!snap->checkpoint) {
    // What a restart resumes from: the last checkpoint's offsets (carried into this version),
    // none before the first checkpoint.
    auto covered = store->Get(kKafkaOffsetsEntry);
    offsets = covered.ok() ? *covered : OffsetsJson(/*with_partitions=*/false);
  }
  std::map<std::string, int64_t> positions_copy;
  {
    std::lock_guard<std::mutex> lock(mu);
    positions_copy =
        options.shared_positions ? options.shared_positions->positions() : positions.positions();
  }
  json meta = json::parse(LearnerMetadataJson(*learner, char_sgns.get()));
  meta["documents"] = total_documents;
  meta["rejected"] = total_rejected;
  meta["bytes"] = total_bytes;
  meta["offsets"] = json::parse(offsets);
  meta["kind"] = snap->checkpoint ? "checkpoint" : "publication";
  if (distiller) meta["char_model"] = json::parse(distiller->MetadataJson());
  if (!snap->checkpoint) {
    meta["checkpoint_version"] = stats_checkpoint_version;
    meta["checkpoint_created_at"] = checkpoint_wall_time;
  }
  snap->metadata = meta.dump();
  // The learner's entries are copied while its workers are idle (SaveState drains them), so
  // the copy is the state that covers `offsets`; training goes on while they are written.
  auto capture = [&snap](const std::string& key, std::string_view value) -> Status {
    snap->entries.emplace_back(key, std::string(value));
    snap->bytes += key.size() + value.size();
    return Status::Ok();
  };
  if (snap->checkpoint) {
    if (char_sgns) {
      SV_RETURN_IF_ERROR(learner->SaveState(capture));
      SV_RETURN_IF_ERROR(char_sgns->WriteServingEntries(*learner, capture));
      SV_RETURN_IF_ERROR(char_sgns->Save(capture, /*checkpoint=*/true));
    } else {
      SV_RETURN_IF_ERROR(WriteLearnerSnapshot(*learner, capture));
    }
    if (distiller) SV_RETURN_IF_ERROR(distiller->Save(capture, /*checkpoint=*/true));
    SV_RETURN_IF_ERROR(capture(kKafkaOffsetsEntry, offsets));
    SV_RETURN_IF_ERROR(capture(kSourcePositionsEntry, json(positions_copy).dump()));
    recorded_positions = positions_copy;
    SV_RETURN_IF_ERROR(capture(kTrainerCountersEntry, json{{"documents", total_documents},
                                                           {"bytes", total_bytes},
                                                           {"rejected", total_rejected}}
                                                          .dump()));
    since_checkpoint = false;
    last_checkpoint_time = Clock::now();
    checkpoint_wall_time = WallSeconds();
  } else if (char_sgns) {
    SV_RETURN_IF_ERROR(char_sgns->WriteServingEntries(*learner, capture));
    SV_RETURN_IF_ERROR(char_sgns->Save(capture, /*checkpoint=*/false));
  } else {
    SV_RETURN_IF_ERROR(WriteServingEntries(*learner, capture));
    if (distiller) SV_RETURN_IF_ERROR(distiller->Save(capture, /*checkpoint=*/false));
  }
  learner->TakeLoss();  // the loss figure restarts with each snapshot
  dirty = false;
  bytes_since_snapshot = 0;
  partition_bytes_since_snapshot.clear();
  max_partition_bytes_since_snapshot = 0;
  last_snapshot_time = Clock::now();
  snap->capture_s = SecondsSince(t0);
  snapshot_s += snap->capture_s;
  snap->started = Clock::now();
  InFlightSnapshot* raw = snap.get();
  StateStore* st = store.get();
  snap->thread = std::thread([raw, st] {
    SnapshotWriteOptions write;
    write.keep_unwritten = !raw->checkpoint;
    raw->status = st->WriteSnapshot(
        [raw](const SnapshotSink& sink) -> Status {
          for (const auto& [key, value] : raw->entries) SV_RETURN_IF_ERROR(sink(key, value));
          return Status::Ok();
        },
        raw->metadata, write);
    if (raw->status.ok()) raw->written = st->last_write_stats().written_bytes;
    raw->entries.clear();
    raw->entries.shrink_to_fit();
    raw->done.store(true);
  });
  in_flight = std::move(snap);
  return Status::Ok();
}

Status KafkaTrainer::Impl::FinishSnapshot(bool commit) {
  if (!in_flight) return Status::Ok();
  const auto t0 = Clock::now();
  in_flight->thread.join();
  snapshot_s += SecondsSince(t0);  // time the run thread waited for the write
  std::unique_ptr<InFlightSnapshot> snap = std::move(in_flight);
  if (!snap->status.ok()) {
    dirty = true;  // what it held is still to be made durable
    if (snap->checkpoint) {
      since_checkpoint = true;
      last_checkpoint_time = Clock::time_point{};  // the next snapshot is a checkpoint
    }
    return snap->status;
  }
  if (snap->checkpoint) stats_checkpoint_version = store->version();
  RefillWriteTokens();
  write_tokens -= static_cast<double>(snap->written);
  const uint64_t disk = DiskBytes(options.state_dir);
  {
    std::lock_guard<std::mutex> lock(mu);
    ++stats.snapshots;
    stats.snapshot_version = store->version();
    stats.snapshot_bytes = snap->bytes;
    stats.snapshot_bytes_total += snap->bytes;
    stats.snapshot_written_bytes = snap->written;
    stats.snapshot_written_bytes_total += snap->written;
    stats.state_disk_bytes = disk;
    if (snap->checkpoint) {
      ++stats.checkpoints;
      stats.checkpoint_version = store->version();
    }
  }
  spdlog::info("trainer: {} {} ({}): {:.1f} MB of entries, {:.1f} MB written, state copied in "
               "{:.3f} s, written in {:.3f} s; state directory {:.1f} MB",
               snap->checkpoint ? "checkpoint" : "publication", store->version(), snap->why,
               snap->bytes / 1e6, snap->written / 1e6, snap->capture_s,
               SecondsSince(snap->started), disk / 1e6);
  // A publication covers no offsets a restart would resume from: nothing to commit.
  if (commit && snap->checkpoint) {
    const auto commit_t0 = Clock::now();
    Commit(snap->offsets);
    commit_s += SecondsSince(commit_t0);
  }
  return Status::Ok();
}

Status KafkaTrainer::Impl::Snapshot(const char* why) {
  SV_RETURN_IF_ERROR(StartSnapshot(why));
  return FinishSnapshot(/*commit=*/true);
}

// Commits `offsets` (a durable snapshot's) of the partitions still assigned. A failed commit is
// not an error: the snapshot holds the offsets, and a resumed trainer uses them; the group's
// offsets catch up at the next commit.
void KafkaTrainer::Impl::CommitAsync(const std::map<int32_t, int64_t>& offsets) {
  PartitionList list;
  for (const auto& [p, offset] : offsets) {
    if (!assigned.count(p)) continue;
    RdKafka::TopicPartition* tp = RdKafka::TopicPartition::create(topic, p);
    tp->set_offset(offset);
    list.v.push_back(tp);
  }
  if (list.v.empty()) return;
  const RdKafka::ErrorCode e = consumer->commitAsync(list.v);
  if (e != RdKafka::ERR_NO_ERROR) {
    spdlog::warn("trainer: committing offsets to Kafka failed: {}", RdKafka::err2str(e));
  }
}

void KafkaTrainer::Impl::Commit(const std::map<int32_t, int64_t>& offsets) {
  PartitionList list;
  for (const auto& [p, offset] : offsets) {
    if (!assigned.count(p)) continue;
    RdKafka::TopicPartition* tp = RdKafka::TopicPartition::create(topic, p);
    tp->set_offset(offset);
    list.v.push_back(tp);
  }
  if (list.v.empty()) return;
  const RdKafka::ErrorCode e = consumer->commitSync(list.v);
  if (e != RdKafka::ERR_NO_ERROR) {
    spdlog::warn("trainer: committing offsets to Kafka failed (the snapshot holds them): {}",
                 RdKafka::err2str(e));
  }
}

void KafkaTrainer::Impl::UpdateLag() {
  if (assigned.empty()) return;
  PartitionList list;
  for (int32_t p : assigned) list.v.push_back(RdKafka::TopicPartition::create(topic, p));
  if (consumer->position(list.v) != RdKafka::ERR_NO_ERROR) return;
  int64_t lag = 0;
  bool known = false;
  for (RdKafka::TopicPartition* tp : list.v) {
    int64_t low = -1, high = -1;
    if (consumer->get_watermark_offsets(topic, tp->partition(), &low, &high) !=
            RdKafka::ERR_NO_ERROR ||
        high < 0 || tp->offset() < 0) {
      continue;
    }
    known = true;
    lag += std::max<int64_t>(0, high - tp->offset());
  }
  std::lock_guard<std::mutex> lock(mu);
  stats.lag = known ? lag : -1;
}

Status KafkaTrainer::Impl::SuitConsumerToEmbeddedBroker(RdKafka::Conf* consumer_conf) {
  RdKafka::Metadata* md = nullptr;
  if (producer->metadata(/*all_topics=*/true, nullptr, &md, 2000) != RdKafka::ERR_NO_ERROR) {
    return Status::Ok();  // the broker is not up yet: nothing to learn, librdkafka's defaults
  }
  std::unique_ptr<RdKafka::Metadata> owned(md);
  if (!IsEmbeddedBrokerClusterId(producer->clusterid(2000))) return Status::Ok();
  bool fetch_wait_set = false;
  for (const auto& [name, value] : options.kafka.properties) {
    fetch_wait_set = fetch_wait_set || name == "fetch.wait.max.ms";
  }
  if (!fetch_wait_set) SV_RETURN_IF_ERROR(SetProperty(consumer_conf, "fetch.wait.max.ms", "10"));
  const std::string keeper = GroupKeeperTopic(group);
  bool held = false;
  for (const RdKafka::TopicMetadata* t : *md->topics()) held = held || t->topic() == keeper;
  if (!held) return Status::Ok();
  if (options.assign) {
    return Status::InvalidArgument(
        "--assign: group " + group +
        " is held by the embedded broker (streamvec broker "
        "--hold-group), and the broker refuses offset commits from a consumer outside a group "
        "that has members; drop --assign (a trainer joins a held group in about 0.1 s) or start "
        "the broker without --hold-trainers / --hold-group");
  }
  for (const auto& [name, value] : options.kafka.properties) {
    if (name == "session.timeout.ms" || name == "heartbeat.interval.ms") return Status::Ok();
  }
  SV_RETURN_IF_ERROR(SetProperty(consumer_conf, "session.timeout.ms",
                                 std::to_string(kHeldGroupSessionMs)));
  SV_RETURN_IF_ERROR(SetProperty(consumer_conf, "heartbeat.interval.ms",
                                 std::to_string(kHeldGroupHeartbeatMs)));
  spdlog::info("trainer: group {} is held on the embedded broker: session.timeout.ms {}, "
               "heartbeat.interval.ms {}", group, kHeldGroupSessionMs, kHeldGroupHeartbeatMs);
  return Status::Ok();
}

int32_t KafkaTrainer::Impl::TopicPartitions() {
  int32_t partitions = 0;
  RdKafka::Metadata* md = nullptr;
  std::string err;
  std::unique_ptr<RdKafka::Topic> t(RdKafka::Topic::create(consumer.get(), topic, nullptr, err));
  if (t && consumer->metadata(false, t.get(), &md, 2000) == RdKafka::ERR_NO_ERROR && md) {
    for (const RdKafka::TopicMetadata* tm : *md->topics()) {
      if (tm->topic() == topic && tm->err() == RdKafka::ERR_NO_ERROR) {
        partitions = static_cast<int32_t>(tm->partitions()->size());
      }
    }
  }
  delete md;
  return partitions;
}

void KafkaTrainer::Impl::UpdateForGroupSize() {
  const bool auto_counts = options.group_counts == KafkaTrainerOptions::GroupCounts::kAuto;
  const bool auto_hot_rows = !options.push_hot_rows.has_value();
  if (!param || assigned.empty()) return;
  if (options.push_every_words != 0 && !auto_counts && !auto_hot_rows) return;
  // Asked at every assignment: partitions may have been added since the last one.
  if (const int32_t now = TopicPartitions(); now > 0) topic_partitions = now;
  if (topic_partitions <= 0) return;  // unknown: the interval stays
  const uint64_t trainers = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::lround(static_cast<double>(topic_partitions) /
                                           static_cast<double>(assigned.size()))));
  if (auto_counts && (trainers >= kGroupCountsMinTrainers) != param->group_counts()) {
    param->set_group_counts(trainers >= kGroupCountsMinTrainers);
    spdlog::info("trainer: about {} trainer(s) share {}: admitting words by {} counts", trainers,
                 topic, param->group_counts() ? "the group's" : "this trainer's own");
  }
  const uint32_t hot_rows =
      trainers >= kPushHotRowsManyFromTrainers ? kPushHotRowsMany : kPushHotRows;
  if (auto_hot_rows && hot_rows != param->push_hot_rows()) {
    param->set_push_hot_rows(hot_rows);
    spdlog::info(
        "trainer: about {} trainer(s) share {}: the rows of the {} most frequent words "
        "go out every push",
        trainers, topic, hot_rows);
  }
  if (options.push_every_words != 0) return;
  const uint64_t every = std::max(kMinGroupPushWords, kGroupPushWords / trainers);
  if (every == param->push_every_words()) return;
  param->set_push_every_words(every);
  spdlog::info(
      "trainer: {} of the {} partitions of {}: about {} trainer(s) share them; pushing "
      "every {} trained words",
      assigned.size(), topic_partitions, topic, trainers, every);
}

bool KafkaTrainer::Impl::AssignManually(const std::atomic<bool>& stop) {
  int32_t partitions = -1;
  auto last_log = Clock::now() - std::chrono::seconds(60);
  while (!stop.load()) {
    partitions = TopicPartitions();
    if (partitions > 0) break;
    if (SecondsSince(last_log) >= 10) {
      spdlog::info("trainer: waiting for topic {} to exist", topic);
      last_log = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (partitions <= 0) return false;
  std::vector<int32_t> wanted = options.assign_partitions;
  if (wanted.empty()) {
    for (int32_t p = 0; p < partitions; ++p) wanted.push_back(p);
  }
  PartitionList list;
  for (int32_t p : wanted) {
    if (p < 0 || p >= partitions) {
      spdlog::warn("trainer: partition {} of {} does not exist ({} partitions): skipped", p,
                   topic, partitions);
      continue;
    }
    list.v.push_back(RdKafka::TopicPartition::create(topic, p));
  }
  OnAssign(consumer.get(), list.v);
  return true;
}

KafkaTrainer::KafkaTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KafkaTrainer::~KafkaTrainer() {
  if (impl_->in_flight) impl_->in_flight->thread.join();
  if (impl_->consumer) {
    impl_->snapshots_allowed = false;
    impl_->consumer->close();
  }
  if (impl_->producer) impl_->producer->flush(2000);
}

StatusOr<std::unique_ptr<KafkaTrainer>> KafkaTrainer::Create(const KafkaTrainerOptions& o) {
  if (o.kafka.brokers.empty()) return Status::InvalidArgument("--brokers is empty");
  if (o.state_dir.empty()) return Status::InvalidArgument("--state is required");
  if (o.kafka.topic_prefix.empty()) return Status::InvalidArgument("--prefix is empty");
  if (o.micro_batch_max_docs == 0 || o.micro_batch_max_bytes == 0 ||
      !(o.micro_batch_max_wait_s >= 0)) {
    return Status::InvalidArgument("micro-batch bounds must be positive");
  }
  if (!(o.snapshot_every_s >= 0)) {
    return Status::InvalidArgument("--snapshot-every must not be negative");
  }
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.options = o;
  m.group = o.group.empty() ? TrainersGroup(o.kafka.topic_prefix) : o.group;
  m.topic = DocsTopic(o.kafka.topic_prefix);
  m.rejected_topic = RejectedTopic(o.kafka.topic_prefix);

  // Kafka configuration first: a bad property is a usage error and must not touch the state.
  std::unique_ptr<RdKafka::Conf> cconf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::unique_ptr<RdKafka::Conf> pconf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  m.rebalance =
      std::make_unique<RebalanceHandler>([&m](RdKafka::KafkaConsumer* c, RdKafka::ErrorCode e,
                                              std::vector<RdKafka::TopicPartition*>& parts) {
        if (e == RdKafka::ERR__ASSIGN_PARTITIONS) {
          m.OnAssign(c, parts);
        } else {
          m.OnRevoke(c, parts);
        }
      });
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"bootstrap.servers", o.kafka.brokers},
                                                        {"group.id", m.group},
                                                        {"client.id", "streamvec-trainer"},
                                                        {"enable.auto.commit", "false"},
                                                        {"enable.auto.offset.store", "false"},
                                                        {"auto.offset.reset", "earliest"},
                                                        {"enable.partition.eof", "true"}}) {
    SV_RETURN_IF_ERROR(SetProperty(cconf.get(), name, value));
  }
  SV_RETURN_IF_ERROR(SetProperty(pconf.get(), "bootstrap.servers", o.kafka.brokers));
  SV_RETURN_IF_ERROR(SetProperty(pconf.get(), "client.id", "streamvec-trainer-rejections"));
  SV_RETURN_IF_ERROR(SetProperty(pconf.get(), "linger.ms", "5"));
  if (cconf->set("event_cb", &m.consumer_events, err) != RdKafka::Conf::CONF_OK ||
      cconf->set("rebalance_cb", m.rebalance.get(), err) != RdKafka::Conf::CONF_OK ||
      pconf->set("event_cb", &m.producer_events, err) != RdKafka::Conf::CONF_OK) {
    return Status::Internal("librdkafka configuration: " + err);
  }
  // The extra properties go to both clients; a consumer-only one is ignored by the producer
  // (librdkafka logs it at debug level here), and vice versa.
  for (const auto& [name, value] : o.kafka.properties) {
    SV_RETURN_IF_ERROR(SetProperty(cconf.get(), name, value));
    SV_RETURN_IF_ERROR(SetProperty(pconf.get(), name, value));
  }

  // The state: an existing one is resumed with its own options.
  // A damaged live database is rebuilt from the newest intact checkpoint, whose offsets and
  // source positions the resume below reads.
  StateStoreOptions store_options;
  store_options.restore_damaged = true;
  StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(o.state_dir, StateStore::Mode::kCreateOrOpen, store_options);
  if (!store.ok()) return store.status();
  m.store = std::move(store).value();
  if (m.store->restore().restored) {
    spdlog::warn("trainer: state {}: {}", o.state_dir, m.store->restore().Describe());
  }
  // A state of serving publications only (a crash before the first checkpoint) holds no learner:
  // start afresh, from the beginning of the stream.
  const bool has_checkpoint =
      m.store->version() > 0 && m.store->Get(kTrainerCountersEntry).ok();
  if (m.store->version() > 0 && !has_checkpoint) {
    spdlog::info("trainer: {} holds no checkpoint yet (snapshot {} is a serving publication): "
                 "starting from the beginning", o.state_dir, m.store->version());
  }
  // The checkpoint interval runs from when the state's training stopped being covered, not from
  // this start: a process restarted again and again before an interval has passed still bounds
  // the replay. That is the checkpoint's time (a publication names its checkpoint), or, before
  // any checkpoint, the first process's start (its publications say when).
  m.checkpoint_wall_time = WallSeconds();
  if (m.store->version() > 0) {
    if (has_checkpoint) m.stats_checkpoint_version = m.store->version();
    if (auto meta = m.store->CurrentMetadata(); meta.ok()) {
      const json j = json::parse(*meta, nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) {
        const bool publication = j.value("kind", "") == "publication";
        if (publication && has_checkpoint) {
          m.stats_checkpoint_version = j.value("checkpoint_version", uint64_t{0});
        }
        const double since =
            publication ? j.value("checkpoint_created_at", 0.0) : j.value("created_at", 0.0);
        if (since > 0) m.checkpoint_wall_time = std::min(since, m.checkpoint_wall_time);
      }
    }
    const double age = std::clamp(WallSeconds() - m.checkpoint_wall_time, 0.0, 1e6);
    m.last_checkpoint_time = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(age));
  }
  if (has_checkpoint) {
    StateStore& st = *m.store;
    m.stats.checkpoint_version = m.stats_checkpoint_version;
    // A character model state keeps its learner on the CPU (--device moves the character
    // model's passes only, below).
    const int learner_device = st.Get(kCharSgnsEntry).ok() ? -1 : o.learner.cuda_device;
    auto loaded = StreamingLearner::LoadState([&st](const std::string& key) { return st.Get(key); },
                                              o.learner.isa, o.learner.threads, learner_device);
    if (!loaded.ok()) {
      return Status(loaded.status().code(),
                    "state " + o.state_dir + ": " + loaded.status().message());
    }
    m.learner = std::move(loaded).value();
    auto char_sgns =
        CharSgns::Load([&st](const std::string& key) { return st.Get(key); }, o.learner.threads);
    if (char_sgns.ok()) {
      m.char_sgns = std::move(char_sgns).value();
    } else if (char_sgns.status().code() != StatusCode::kNotFound) {
      return Status(char_sgns.status().code(),
                    "state " + o.state_dir + ": " + char_sgns.status().message());
    }
    auto distiller = CharDistiller::Load([&st](const std::string& key) { return st.Get(key); });
    if (m.char_sgns) {
      // The character model is the input side: no distiller.
    } else if (distiller.ok()) {
      m.distiller = std::move(distiller).value();
    } else if (distiller.status().code() != StatusCode::kNotFound) {
      return Status(distiller.status().code(),
                    "state " + o.state_dir + ": " + distiller.status().message());
    }
    try {
      if (auto off = st.Get(kKafkaOffsetsEntry); off.ok()) {
        const json j = json::parse(*off);
        m.snapshot_cluster_id = j.value("cluster_id", "");
        m.snapshot_topic = j.value("topic", "");
        for (const auto& [p, offset] : j.at("partitions").items()) {
          // A broker that died with the process (commit_before_durable: `streamvec run`) is new
          // at every start: its topic is read from the beginning, whatever the snapshot's
          // offsets say. The cluster-id check cannot tell: the mock's id is made from two
          // pointers, which a new process can repeat (it did under ASan), and the old offsets
          // then skipped the first documents of the new broker's partitions.
          m.resume_offsets[std::stoi(p)] =
              o.commit_before_durable ? RdKafka::Topic::OFFSET_BEGINNING : offset.get<int64_t>();
        }
      }
      if (auto pos = st.Get(kSourcePositionsEntry); pos.ok()) {
        m.positions = SourcePositions(json::parse(*pos).get<std::map<std::string, int64_t>>());
      }
      if (auto c = st.Get(kTrainerCountersEntry); c.ok()) {
        const json j = json::parse(*c);
        m.total_documents = j.value("documents", uint64_t{0});
        m.total_bytes = j.value("bytes", uint64_t{0});
        m.total_rejected = j.value("rejected", uint64_t{0});
      }
    } catch (const std::exception& e) {
      return Status::Corruption("state " + o.state_dir + ": malformed trainer entry: " + e.what());
    }
    spdlog::info(
        "trainer: resuming {} (snapshot {}, {} words seen, {} documents, {} partition "
        "offset(s))",
        o.state_dir, m.store->version(), m.learner->stats().words_seen, m.total_documents,
        m.resume_offsets.size());
  } else {
    SV_RETURN_IF_ERROR(ValidateStreamingOptions(o.learner));
    StreamingOptions learner_options = o.learner;
    if (o.char_lstm) learner_options.cuda_device = -1;  // as on resume, above
    m.learner = std::make_unique<StreamingLearner>(learner_options);
    SV_RETURN_IF_ERROR(m.learner->device_status());
    if (o.char_distill) {
      CharDistillOptions co = o.char_distill_options;
      co.model.dim = o.learner.dim;
      SV_RETURN_IF_ERROR(ValidateCharDistillOptions(co));
      m.distiller = std::make_unique<CharDistiller>(co);
    }
    if (o.char_lstm) {
      CharSgnsOptions co = o.char_lstm_options;
      co.model = o.char_distill_options.model;
      co.model.dim = o.learner.dim;
      SV_RETURN_IF_ERROR(ValidateCharModelOptions(co.model));
      m.char_sgns = std::make_unique<CharSgns>(co, o.learner.threads);
    }
  }
  if (m.char_sgns && o.param_shards > 0) {
    return Status::InvalidArgument(
        "--model char-lstm trains without a parameter node (no --param-shards)");
  }
  if (m.char_sgns && o.learner.cuda_device >= 0) {
    // The character model's passes on the device; the learner's rows stay on the host.
    SV_RETURN_IF_ERROR(CudaCheckDevice(o.learner.cuda_device, nullptr));
    SV_RETURN_IF_ERROR(m.char_sgns->UseCudaDevice(o.learner.cuda_device));
  }
  if (o.param_shards > 0) {
    ParamClientOptions po;
    po.kafka = o.kafka;
    po.shards = o.param_shards;
    // 0: set at each assignment (UpdateForGroupSize); until the first, as for two trainers.
    po.push_every_words = o.push_every_words != 0 ? o.push_every_words : kGroupPushWords / 2;
    po.push_hot_rows = o.push_hot_rows.value_or(kPushHotRows);  // unset: as push_every_words
    po.push_max_period = o.push_max_period;
    po.pull_every_words = o.pull_every_words;
    po.max_staleness = o.max_staleness;
    po.precision = o.delta_precision;
    po.group_counts = o.group_counts == KafkaTrainerOptions::GroupCounts::kOn;
    po.sender = o.trainer_id != 0 ? o.trainer_id : static_cast<uint32_t>(std::random_device{}());
    StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, m.learner.get());
    if (!client.ok()) return client.status();
    m.param = std::move(client).value();
    spdlog::info("trainer: pushing to {} ({} shard(s)) as trainer {}, every {}",
                 UpdatesTopic(o.kafka.topic_prefix), o.param_shards, po.sender,
                 o.push_every_words != 0
                     ? std::to_string(o.push_every_words) + " trained words"
                     : std::to_string(kGroupPushWords) +
                           " trained words over the trainers sharing the partitions");
  }
  const StreamingStats ls = m.learner->stats();
  m.start_words = ls.words_seen;
  m.start_words_trained = ls.words_trained;
  m.stats.state_documents = m.total_documents;
  m.stats.state_words = ls.words_seen;
  m.stats.snapshot_version = m.store->version();

  m.producer.reset(RdKafka::Producer::create(pconf.get(), err));
  if (!m.producer) return Status::InvalidArgument("Kafka producer: " + err);
  SV_RETURN_IF_ERROR(m.SuitConsumerToEmbeddedBroker(cconf.get()));
  m.consumer.reset(RdKafka::KafkaConsumer::create(cconf.get(), err));
  if (!m.consumer) return Status::InvalidArgument("Kafka consumer: " + err);
  return std::unique_ptr<KafkaTrainer>(new KafkaTrainer(std::move(impl)));
}

void KafkaTrainer::RequestSnapshot() { impl_->snapshot_requested.store(true); }

Status KafkaTrainer::Run(const std::atomic<bool>& stop) {
  Impl& m = *impl_;
  if (m.param) m.param->set_stop(&stop);
  const auto t0 = Clock::now();
  m.run_start = t0;
  if (m.options.assign) {
    spdlog::info("trainer: consuming {} by manual assignment (offsets committed to group {}) "
                 "from {}",
                 m.topic, m.group, m.options.kafka.brokers);
    (void)m.AssignManually(stop);  // false: stopped before the topic existed (the loop below
                                   // ends at once)
  } else {
    const RdKafka::ErrorCode se = m.consumer->subscribe({m.topic});
    if (se != RdKafka::ERR_NO_ERROR) {
      return Status::Internal("cannot subscribe to " + m.topic + ": " + RdKafka::err2str(se));
    }
    spdlog::info("trainer: consuming {} as group {} from {}", m.topic, m.group,
                 m.options.kafka.brokers);
  }
  m.last_snapshot_time = Clock::now();
  auto last_lag = Clock::now();
  Status fatal;
  while (!stop.load()) {
    // Wait at most 100 ms (the stop flag), less when a partial micro-batch is about to be due.
    int timeout_ms = 100;
    if (!m.batch.empty()) {
      const double left = m.options.micro_batch_max_wait_s - SecondsSince(m.batch_started);
      timeout_ms = std::clamp(static_cast<int>(left * 1000), 0, 100);
    } else if (m.options.max_idle_s > 0 && m.ever_assigned &&
               m.at_end.size() == m.assigned.size()) {
      // ... and, once the idle exit waits only for the clock, not past the --max-idle deadline
      // (+ 1 ms, so that it has passed on waking; at least 1 ms, never a busy loop).
      const double left = m.options.max_idle_s - SecondsSince(m.last_activity);
      timeout_ms = std::clamp(static_cast<int>(left * 1000) + 1, 1, timeout_ms);
    }
    const auto consume_t0 = Clock::now();
    std::unique_ptr<RdKafka::Message> msg(m.consumer->consume(timeout_ms));
    m.producer->poll(0);
    m.consume_s += SecondsSince(consume_t0);
    switch (msg->err()) {
      case RdKafka::ERR_NO_ERROR: {
        m.last_activity = Clock::now();
        m.at_end.erase(msg->partition());
        if (!m.got_message) {
          m.got_message = true;
          m.first_message = m.last_activity;
          spdlog::info("trainer: first message {:.3f} s after the start", SecondsSince(t0));
        }
        const size_t len = msg->len();
        m.total_bytes += len;
        m.bytes_since_snapshot += len;
        m.max_partition_bytes_since_snapshot =
            std::max(m.max_partition_bytes_since_snapshot,
                     m.partition_bytes_since_snapshot[msg->partition()] += len);
        {
          std::lock_guard<std::mutex> lock(m.mu);
          m.stats.bytes += len;
        }
        const auto parse_t0 = Clock::now();
        StatusOr<Document> doc = ParseDocument(
            std::string_view(static_cast<const char*>(msg->payload()), msg->payload() ? len : 0));
        m.parse_s += SecondsSince(parse_t0);
        if (!doc.ok()) {
          m.Reject(*msg, doc.status().message());
          // The rejected message is covered by the offsets too (a snapshot trains the pending
          // batch first, so the offset never passes an untrained document).
          int64_t& next = m.next_offsets[msg->partition()];
          next = std::max(next, msg->offset() + 1);
          break;
        }
        if (!m.options.languages.empty() &&
            std::find(m.options.languages.begin(), m.options.languages.end(), doc->lang) ==
                m.options.languages.end()) {
          {
            std::lock_guard<std::mutex> lock(m.mu);
            ++m.stats.skipped_language;
            if (doc->offset >= 0) m.AdvancePosition(*doc);  // its source's text is done with
          }
          // Covered by the offsets as a rejected message is (a snapshot trains the pending batch
          // first).
          int64_t& next = m.next_offsets[msg->partition()];
          next = std::max(next, msg->offset() + 1);
          break;
        }
        if (m.batch.empty()) m.batch_started = Clock::now();
        m.batch.push_back({std::move(doc).value(), msg->partition(), msg->offset()});
        m.batch_bytes += len;
        break;
      }
      case RdKafka::ERR__PARTITION_EOF:
        if (m.assigned.count(msg->partition())) m.at_end.insert(msg->partition());
        break;
      case RdKafka::ERR__TIMED_OUT:
        break;
      default:
        if (m.consumer_events.fatal() || msg->err() == RdKafka::ERR__FATAL) {
          std::string reason;
          const RdKafka::ErrorCode e = m.consumer->fatal_error(reason);
          fatal = Status::Internal("fatal Kafka error: " + RdKafka::err2str(e) + ": " + reason);
        } else {
          spdlog::debug("trainer: consume: {}", msg->errstr());
        }
        break;
    }
    if (!fatal.ok()) break;
    msg.reset();

    // A partial micro-batch trains at once when every assigned partition has been read to its
    // end: nothing more is there to wait for (a caught-up trainer, or the last batch of a
    // backlog, which would otherwise idle for the rest of micro_batch_max_wait_s).
    const bool all_at_end = !m.assigned.empty() && m.at_end.size() == m.assigned.size();
    if (!m.batch.empty() && (m.batch.size() >= m.options.micro_batch_max_docs ||
                             m.batch_bytes >= m.options.micro_batch_max_bytes || all_at_end ||
                             SecondsSince(m.batch_started) >= m.options.micro_batch_max_wait_s)) {
      if (Status s = m.TrainPending(); !s.ok()) {
        spdlog::warn("trainer: micro-batch: {}", s.message());
      }
      // Training time is not idle time (for the pause snapshot and --max-idle): messages that
      // arrived meanwhile wait in librdkafka's queue.
      m.last_activity = Clock::now();
    }
    const bool requested = m.snapshot_requested.exchange(false);
    if (requested && !m.batch.empty()) {
      if (Status s = m.TrainPending(); !s.ok()) {
        spdlog::warn("trainer: micro-batch: {}", s.message());
      }
    }
    // A pause in the stream makes what was trained durable at once (and commits it): a producer
    // throttled on the group's committed lag can go on without waiting for the next interval.
    const bool pause = m.options.snapshot_every_s > 0 && m.batch.empty() &&
                       SecondsSince(m.last_activity) >= kIdleSnapshotSeconds &&
                       SecondsSince(m.last_snapshot_time) >= kIdleSnapshotSeconds;
    // A quiet stream (every assigned partition read to its end, no message for
    // kIdleSnapshotSeconds) sends the shards everything trained since the last such push, the
    // rows the push schedule deferred included, and applies what they published: the node's
    // embedding then holds every trained word while the stream waits, instead of when the
    // trainer stops, and a trainer that stops later has little left to push.
    if (m.param && all_at_end && m.batch.empty() &&
        SecondsSince(m.last_activity) >= kIdleSnapshotSeconds) {
      const uint64_t trained = m.learner->stats().words_trained;
      if (trained != m.idle_pushed_words) {
        m.idle_pushed_words = trained;
        if (Status ps = m.param->Sync(/*force=*/true); !ps.ok()) {
          spdlog::warn("trainer: parameter node: {}", ps.message());
        }
      }
    }
    // A snapshot written in the background: commit its offsets once it is durable.
    if (m.in_flight && m.in_flight->done.load()) {
      if (Status s = m.FinishSnapshot(/*commit=*/true); !s.ok()) {
        spdlog::warn("trainer: snapshot failed, the previous one is kept: {}", s.message());
      }
    }
    // A snapshot due while the previous one is still being written waits for it (StartSnapshot):
    // triggers keep their spacing, and at most one copy of the state is in memory.
    // A checkpoint due while the stream is quiet (publications keep serving fresh; the learner
    // still has to become durable within checkpoint_every_s).
    if (!m.assigned.empty() && m.at_end.size() == m.assigned.size()) m.caught_up = true;
    // Due once the interval since the last checkpoint has passed; after a restart not before the
    // replay of what the crash lost is trained (every partition read to its end once), or one
    // interval has passed since the start: the next checkpoint then covers the replay.
    const bool checkpoint_due =
        m.options.checkpoint_every_s > 0 && m.since_checkpoint &&
        SecondsSince(m.last_checkpoint_time) >= m.options.checkpoint_every_s &&
        (m.caught_up || SecondsSince(m.started) >= m.options.checkpoint_every_s);
    // The write budget spaces the triggered publications: a snapshot that changed many rows, as
    // in a backlog, is followed by a longer pause.
    m.RefillWriteTokens();
    // (The one in flight is charged when it completes: wait for it.)
    const bool within_budget =
        m.options.snapshot_write_rate <= 0 || (!m.in_flight && m.write_tokens >= 0);
    // A due checkpoint is not held back (the replay after a crash stays within
    // checkpoint_every_s); what it writes is charged to the budget, so the publications after it
    // wait longer.
    if ((m.dirty || checkpoint_due) && (requested || within_budget || checkpoint_due) &&
        (requested || pause || checkpoint_due || (m.options.snapshot_every_s > 0 &&
                     SecondsSince(m.last_snapshot_time) >= m.options.snapshot_every_s) ||
                    (m.options.snapshot_every_bytes > 0 &&
                     m.bytes_since_snapshot >= m.options.snapshot_every_bytes) ||
                    (m.options.snapshot_partition_bytes > 0 &&
                     m.max_partition_bytes_since_snapshot >=
                         m.options.snapshot_partition_bytes))) {
      const char* why = requested ? "requested"
                        : pause   ? "pause"
                        : m.max_partition_bytes_since_snapshot >= m.options.snapshot_partition_bytes &&
                                m.options.snapshot_partition_bytes > 0
                            ? "partition lag"
                            : "periodic";
      if (Status s = m.StartSnapshot(why); !s.ok()) {
        spdlog::warn("trainer: snapshot failed, the previous one is kept: {}", s.message());
        m.last_snapshot_time = Clock::now();  // retry after another interval
        m.bytes_since_snapshot = 0;
        m.partition_bytes_since_snapshot.clear();
        m.max_partition_bytes_since_snapshot = 0;
      }
    }
    if (SecondsSince(last_lag) >= 1.0) {
      m.UpdateLag();
      last_lag = Clock::now();
    }
    // Idle: every assigned partition read to its end (a slow first fetch is not idleness), and
    // no message for max_idle_s.
    if (m.options.max_idle_s > 0 && m.ever_assigned && m.batch.empty() &&
        m.at_end.size() == m.assigned.size() &&
        SecondsSince(m.last_activity) >= m.options.max_idle_s) {
      spdlog::info("trainer: no message for {} s, stopping", m.options.max_idle_s);
      break;
    }
    m.PublishTimes(t0);
  }
  Status result = fatal;
  // A snapshot still being written completes (as it would before a crash too); its offsets are
  // committed only on a clean stop.
  if (Status s = m.FinishSnapshot(/*commit=*/m.options.final_snapshot && fatal.ok()); !s.ok()) {
    spdlog::warn("trainer: snapshot failed, the previous one is kept: {}", s.message());
  }
  if (m.param && m.options.final_snapshot && fatal.ok()) {
    // What was trained since the last push reaches the node before the trainer goes.
    if (Status ps = m.param->Sync(/*force=*/true); !ps.ok()) {
      spdlog::warn("trainer: parameter node: {}", ps.message());
    } else if (Status fs = m.param->Flush(10000); !fs.ok()) {
      spdlog::warn("trainer: parameter node: {}", fs.message());
    }
    std::lock_guard<std::mutex> lock(m.mu);
    m.stats.param = m.param->stats();
  }
  if (m.distiller) {
    // The distillation steps still queued beside the learner finish and are counted.
    if (Status ds = m.distiller->Wait(); !ds.ok()) {
      spdlog::warn("trainer: character model distillation: {}", ds.message());
    }
    std::lock_guard<std::mutex> lock(m.mu);
    m.stats.char_distill_stats = m.distiller->stats();
  }
  if (m.options.final_snapshot && fatal.ok()) {
    const bool shared_moved = m.options.shared_positions &&
                              m.options.shared_positions->positions() != m.recorded_positions;
    if (m.dirty || m.since_checkpoint || !m.batch.empty() || m.store->version() == 0 ||
        shared_moved) {
      if (Status s = m.Snapshot("final"); !s.ok()) {
        result =
            Status(s.code(), "final snapshot failed (the previous one is kept): " + s.message());
      }
    }
  } else {
    m.snapshots_allowed = false;  // as a crash: nothing more becomes durable
  }
  m.snapshots_allowed = false;
  m.UpdateLag();
  m.consumer->close();
  m.topic_handle.reset();  // before the consumer handle it belongs to
  m.consumer.reset();
  m.producer->flush(5000);
  m.PublishTimes(t0);
  return result;
}

KafkaTrainerStats KafkaTrainer::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

std::map<std::string, int64_t> KafkaTrainer::source_positions() const {
  if (impl_->options.shared_positions) return impl_->options.shared_positions->positions();
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->positions.positions();
}

const std::string& KafkaTrainer::group() const { return impl_->group; }

StatusOr<std::map<std::string, int64_t>> KafkaTrainer::ReadSourcePositions(
    const std::string& state_dir) {
  StatusOr<std::string> value = Status::NotFound("no snapshot");
  // The newest published checkpoint (never blocks a live writer); else the live database,
  // opened read-only (no lock taken).
  if (auto reader = SnapshotReader::OpenNewest(state_dir); reader.ok()) {
    value = (*reader)->Get(kSourcePositionsEntry);
  } else {
    auto store = StateStore::Open(state_dir, StateStore::Mode::kReadOnly);
    if (!store.ok()) {
      if (store.status().code() == StatusCode::kNotFound) return std::map<std::string, int64_t>{};
      return store.status();
    }
    if ((*store)->version() > 0) value = (*store)->Get(kSourcePositionsEntry);
  }
  if (!value.ok()) {
    if (value.status().code() == StatusCode::kNotFound) return std::map<std::string, int64_t>{};
    return value.status();
  }
  try {
    return json::parse(*value).get<std::map<std::string, int64_t>>();
  } catch (const std::exception& e) {
    return Status::Corruption("state " + state_dir + ": malformed " + kSourcePositionsEntry + ": " +
                              e.what());
  }
}

Status WriteLearnerSnapshot(const StreamingLearner& learner, const SnapshotSink& sink) {
  SV_RETURN_IF_ERROR(learner.SaveState(sink));
  return WriteServingEntries(learner, sink);
}

Status WriteServingEntries(const StreamingLearner& learner, const SnapshotSink& sink) {
  std::vector<std::string> words;
  std::vector<uint32_t> slots;
  std::vector<const float*> rows;  // the learner's rows: no dense copy during a snapshot
  int stride = 0;
  size_t rows_per_chunk = 0;
  learner.ExportRowsBySlot(&words, &slots, &rows, &stride, &rows_per_chunk);
  return WriteServingEntries(learner, words, slots, rows, stride, rows_per_chunk, sink);
}

Status WriteServingEntries(const StreamingLearner& learner, const std::vector<std::string>& words,
                           const std::vector<uint32_t>& slots,
                           const std::vector<const float*>& slot_rows, int stride,
                           size_t rows_per_chunk, const SnapshotSink& sink) {
  SV_RETURN_IF_ERROR(WriteEmbeddingTable(words, slots, slot_rows, learner.options().dim, stride,
                                         rows_per_chunk, sink));
  // The words' running counts, for browsing the vocabulary (GET /v1/words): 8 bytes a word.
  std::vector<double> counts;
  counts.reserve(words.size());
  for (const std::string& w : words) counts.push_back(learner.Count(w));
  return WriteEmbeddingCounts(counts, sink);
}

std::string LearnerMetadataJson(const StreamingLearner& learner, const CharSgns* char_sgns) {
  const StreamingStats st = learner.stats();
  const StreamingOptions& o = learner.options();
  json j = {{"model", "sgns"},
            {"words_seen", st.words_seen},
            {"words_trained", st.words_trained},
            {"vocab_size", st.vocab_size},
            {"admitted", st.admitted},
            {"evictions", st.evictions},
            {"dim", o.dim},
            {"window", o.window},
            {"negative", o.negative},
            {"sample", o.sample},
            {"min_count", o.min_count},
            {"vocab_capacity", o.vocab_capacity},
            {"count_half_life", o.count_half_life},
            {"ns_exponent", o.ns_exponent},
            {"optimizer", o.optimizer == StreamOptimizer::kAdagrad ? "adagrad" : "constant"},
            {"eta", o.eta},
            {"alpha", o.alpha},
            {"seed", o.seed}};
  if (char_sgns != nullptr) {
    j["model"] = "char-lstm";
    j["char_model"] = json::parse(char_sgns->MetadataJson());
  }
  return j.dump();
}

}  // namespace streamvec

// The Kafka trainer: a consumer-group member on `<prefix>.docs` that feeds documents to a
// StreamingLearner in micro-batches and snapshots the learner, the serving embedding and the
// Kafka offsets it covers into a StateStore (docs/pipeline.md, "Trainer").
//
// Delivery is at least once (nothing accepted is lost): offsets are committed to
// Kafka only after the snapshot that covers them is durable, and a restarted trainer resumes
// from its snapshot's offsets. After a clean stop nothing is trained twice; after a crash the
// documents consumed after the last snapshot are trained again, none are lost.
//
// Resume rule, applied when partitions are assigned: a partition recorded in the snapshot starts
// at the snapshot's next offset; any other at the group's committed offset, else the earliest.
// The snapshot's offsets are ignored (with an info log; the partition starts at its beginning)
// when the snapshot was taken on another cluster (cluster id differs: a fresh embedded broker
// after `streamvec run` restarted), for another topic, or when an offset lies beyond the
// partition's high watermark.
//
// Bad input is rejected, not fatal: a message that ParseDocument refuses (not JSON, a missing
// field, over kMaxDocumentMessageBytes) goes to `<prefix>.rejected` as RejectionToJson(reason,
// "<topic>/<partition>@<offset>", payload), is counted, and the stream goes on. An unreachable
// broker is logged (at most one line per error kind every 10 s) while librdkafka retries with
// backoff; it is never fatal.
//
// Thread safety: Run is called from one thread at a time; stats() and source_positions() may be
// called from any thread while Run runs.
#ifndef STREAMVEC_TRAINER_KAFKA_TRAINER_H_
#define STREAMVEC_TRAINER_KAFKA_TRAINER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/kafka/document.h"
#include "streamvec/store/state_store.h"
#include "streamvec/trainer/char_distiller.h"
#include "streamvec/trainer/char_sgns.h"
#include "streamvec/trainer/param_client.h"
#include "streamvec/trainer/streaming_learner.h"

namespace streamvec {

// Entries a trainer writes into every snapshot, next to the learner's own (SaveState) and the
// serving embedding (WriteEmbeddingEntries):
//   kKafkaOffsetsEntry    {"cluster_id": "...", "group": "...", "topic": "streamvec.docs",
//                          "partitions": {"0": 1234, ...}}  (next offset to consume)
//   kSourcePositionsEntry {"<source>": <largest document "offset" trained>, ...}
//   kTrainerCountersEntry {"documents": n, "bytes": n, "rejected": n}  (cumulative over runs)
inline constexpr char kKafkaOffsetsEntry[] = "kafka/offsets";
inline constexpr char kSourcePositionsEntry[] = "ingest/positions";
inline constexpr char kTrainerCountersEntry[] = "trainer/counters";

// The source positions of several trainers in one process (`streamvec run --trainers N`), which
// share one stream: each covers the [start, offset) ranges of the documents it trained, so a
// source's prefix spans the documents of all of them (one trainer alone sees only some of each
// source's documents, and its own prefix stops at the first document another trained).
// Thread-safe.
class SharedSourcePositions {
 public:
  // Starts from known prefixes, source id -> byte offset (where the connector resumes).
  explicit SharedSourcePositions(std::map<std::string, int64_t> start = {})
      : positions_(std::move(start)) {}
  // As SourcePositions::Cover.
  void Cover(const std::string& source, int64_t start, int64_t end) {
    std::lock_guard<std::mutex> lock(mu_);
    positions_.Cover(source, start, end);
  }
  // Source id -> end of its contiguous prefix trained by any of the trainers.
  std::map<std::string, int64_t> positions() const {
    std::lock_guard<std::mutex> lock(mu_);
    return positions_.positions();
  }

 private:
  mutable std::mutex mu_;
  SourcePositions positions_;  // GUARDED_BY(mu_)
};

// The default push interval (KafkaTrainerOptions::push_every_words 0): kGroupPushWords trained
// words a push of the whole group, so a trainer of T pushes every kGroupPushWords / T words (two
// trainers: 262,144; four: 131,072), never more often than every kMinGroupPushWords.
// docs/distributed.md, "Where the quality goes".
inline constexpr uint64_t kGroupPushWords = uint64_t{1} << 19;
inline constexpr uint64_t kMinGroupPushWords = uint64_t{1} << 15;
// A distributed trainer trains a document in pieces of at most max(kMinSyncPieceWords, push
// interval / 2) words (SplitDocumentForSync) and checks the push and pull intervals after each.
inline constexpr uint64_t kMinSyncPieceWords = 4096;
// Trainers sharing the topic from which KafkaTrainerOptions::group_counts kAuto is on.
inline constexpr uint64_t kGroupCountsMinTrainers = 3;
// The default push schedule (KafkaTrainerOptions::push_hot_rows unset): the rows of the
// kPushHotRows most frequent words go out every round while at most two trainers share the
// topic, of the kPushHotRowsMany most frequent from kPushHotRowsManyFromTrainers trainers on.
// A trainer of four learns three quarters of a row from the others' pushes, and the rarer rows
// the schedule defers are then a larger part of what it misses (docs/distributed.md, "The push
// schedule with more trainers").
inline constexpr uint32_t kPushHotRows = 4096;
inline constexpr uint32_t kPushHotRowsMany = 16384;
inline constexpr uint64_t kPushHotRowsManyFromTrainers = 3;

struct KafkaTrainerOptions {
  KafkaOptions kafka;                 // brokers, topic prefix, extra librdkafka properties
  std::string group;                  // consumer group; "" = "<prefix>.trainers"
  // Manual partition assignment (Kafka's assign() instead of subscribe()): the trainer takes
  // these partitions of <prefix>.docs without joining the group, so it starts consuming at once
  // instead of after the group's join (about 3 s on the embedded broker, whose first join of a
  // group waits a fixed 3 s for more members). Offsets are still committed to `group` (the
  // ingestor's flow control reads them), which needs a group that no subscribing member uses,
  // and nothing rebalances: for one trainer alone (as in `streamvec run`), or trainers given
  // disjoint partition lists. Partitions added to the topic later are not picked up.
  bool assign = false;
  std::vector<int32_t> assign_partitions;  // with assign: these partitions; empty: all of them
  std::string state_dir;              // StateStore directory; an existing state is resumed
  StreamingOptions learner;           // options of a new learner (a resumed one keeps its own,
                                      // except isa and threads)
  size_t micro_batch_max_docs = 512;  // documents per TrainMicroBatch call, at most
  size_t micro_batch_max_bytes = size_t{4} << 20;  // message bytes per micro-batch, at most
  double micro_batch_max_wait_s = 0.2;             // seconds a partial micro-batch waits for more
  double snapshot_every_s = 5;                     // seconds between snapshots (0: no time trigger)
                                                   // (also taken 0.5 s into a pause of the stream,
                                                   // so a throttled producer need not wait for it)
  uint64_t snapshot_every_bytes = uint64_t{256} << 20;  // message bytes between snapshots
                                                        // (0: no byte trigger)
  // A snapshot (and the commit after it) is also taken once one partition holds this many
  // message bytes consumed since the last one (0: no such trigger). The ingestor throttles on
  // the group's committed lag, at most 80% of the embedded broker's 5 MiB ring per partition by
  // default (IngestOptions::max_partition_lag_bytes, 4 MiB); committing at 3.5 MiB leaves the
  // producer 0.5 MiB a partition (8 MiB with 16 partitions, about 0.3 s of training here) while
  // the snapshot is written in the background (0.1-0.25 s), so it seldom waits while the trainer
  // could take more, and snapshots are as rare as the ring allows (docs/pipeline.md, "Flow
  // control"). Raise it with the ingestor's budget on a Kafka cluster with real retention.
  uint64_t snapshot_partition_bytes = uint64_t{7} << 19;  // 3.5 MiB
  // Two cadences (issue 29). 0: every snapshot is a recovery checkpoint (the whole learner with
  // the offsets it covers; its offsets are committed once it is durable). > 0: the triggers
  // above take serving publications (the admitted words' input vectors and the metadata, which
  // `serve` reads; the learner's entries are carried from the last checkpoint, no offsets are
  // committed), and a checkpoint is taken at most this many seconds after the last one while
  // something was trained since, and at a requested, rebalance or final snapshot. After a crash
  // the trainer resumes from the last checkpoint: the replay is at most this interval of stream.
  double checkpoint_every_s = 0;
  // Bytes per second that snapshots may write on average (0: no limit). A triggered publication
  // waits while the bytes written by the earlier snapshots exceed this rate since (a budget
  // refilled at the rate, holding at most 60 s of it): where every row changes (a backlog: a bulk
  // load) publications are spaced by their cost; where few change (a slow stream) they stay at
  // the snapshot interval. Checkpoints (due, requested, final) are not held back, but charged.
  // With checkpoint_every_s 0 every snapshot is a checkpoint and this budget spaces them.
  double snapshot_write_rate = 0;
  // Commit offsets as soon as their documents are trained, before a snapshot covers them. Only
  // for a broker that dies with the trainer's process (`streamvec run`'s embedded one): after a
  // crash nothing is read back from it (the connectors resend from the snapshot's source
  // positions), so its committed offsets only pace the ingestor, which then never waits for a
  // snapshot. Anywhere else a crash would lose what was committed but not snapshotted.
  bool commit_before_durable = false;
  double max_idle_s = 0;       // > 0: Run returns (after its final snapshot) once every assigned
                               // partition has been read to its end and no message has arrived
                               // for this many seconds since the first partition assignment
  // Natural text: lowercase and drop punctuation before tokenising (NormalizeText,
  // tokenizer/normalize.h), so "The" and "the," are one word. Off for pre-normalised corpora.
  bool normalize_text = false;
  // Languages to train (documents' `lang`, which ingest and the crawler fill in: DetectLanguage);
  // a document of another language or none is skipped (counted, its offset covered). Empty: all.
  std::vector<std::string> languages;
  bool final_snapshot = true;  // false: Run returns at stop without the final snapshot and
                               // commit, as a crash would (for tests of the resume rule)
  // Parameter node (issue 20; ParamClient): with param_shards > 0 the trainer pushes its row
  // deltas and counts to <prefix>.updates and applies the rows the node's shards publish on
  // <prefix>.params, between micro-batches. 0: alone, as before.
  uint32_t param_shards = 0;
  // Trained words between pushes; 0: kGroupPushWords over the trainers sharing the topic (its
  // partitions over this trainer's, at each assignment), at least kMinGroupPushWords: the group
  // as a whole trains about the same number of words between two pushes of one trainer, so a
  // trainer's view of the others' rows is as stale with two trainers as with eight.
  uint64_t push_every_words = 0;
  // The push schedule (ParamClientOptions::push_hot_rows); unset: kPushHotRows or
  // kPushHotRowsMany by the trainers sharing the topic, at each assignment.
  std::optional<uint32_t> push_hot_rows;
  uint32_t push_max_period = 8;   // rounds (ParamClientOptions::push_max_period)
  uint64_t pull_every_words = 0;  // trained words between applications of the shards' rows
                                  // (ParamClientOptions::pull_every_words; 0: every Sync)
  int64_t max_staleness = -1;     // push rounds a shard may not have merged (bounded delay,
                                  // ParamClientOptions::max_staleness; -1: no bound)
  ParamPrecision delta_precision = ParamPrecision::kFp32;
  // Admit words and weigh the noise distribution by the group's counts
  // (ParamClientOptions::group_counts): kAuto turns it on while about kGroupCountsMinTrainers
  // or more trainers share the topic (its partitions over this trainer's, at each assignment).
  // With two trainers each sees half of a word's occurrences and the counts gain little for
  // the rows they add to the pushes and publications; with four a word needs four times its
  // min_count before any trainer alone admits it.
  enum class GroupCounts { kAuto, kOn, kOff };
  GroupCounts group_counts = GroupCounts::kAuto;
  uint32_t trainer_id = 0;  // sender id of the pushes; 0: drawn at random at start
  // MIMICK beside the learner (CharDistiller, docs/char-model.md): a character model learns the
  // learner's vectors and goes into every snapshot (kCharModelEntry), so `serve` answers words
  // outside the vocabulary. Taken for a new state; a resumed state keeps a distiller it has (and
  // its options) and gets none it lacks. char_distill_options.model.dim is set to the learner's.
  bool char_distill = false;
  CharDistillOptions char_distill_options;
  // --model char-lstm (CharSgns, docs/char-model.md): the character model, shaped by
  // char_distill_options.model, is the input side of SGNS with char_lstm_options' mode and
  // batch_words. Taken for a new state (a resumed state keeps what it was created with); not
  // with param_shards or a device.
  bool char_lstm = false;
  CharSgnsOptions char_lstm_options;
  // Trainers of one process sharing a stream: this trainer covers its documents in
  // `shared_positions` too, and its checkpoints record the shared prefixes (kSourcePositionsEntry)
  // instead of its own. Everything below the shared prefix a checkpoint records at time t was
  // trained by some trainer before t, so it is in that trainer's next checkpoint: the minimum
  // over the trainers' newest checkpoints is a position that loses nothing. nullptr: its own.
  std::shared_ptr<SharedSourcePositions> shared_positions;
};

struct KafkaTrainerStats {
  uint64_t documents = 0;         // valid documents trained by this process
  uint64_t bytes = 0;             // message bytes consumed (valid and rejected)
  uint64_t words = 0;             // words counted by the learner in this process
  uint64_t state_documents = 0;   // documents in the state since it began (resumed ones too)
  uint64_t state_words = 0;       // words counted since the state began (words_seen)
  uint64_t words_trained = 0;     // words trained on (admitted, kept by subsampling)
  uint64_t rejected = 0;          // messages sent to <prefix>.rejected
  uint64_t skipped_language = 0;  // documents of a language not in KafkaTrainerOptions::languages
  // Documents trained by this process per `lang` ("" for documents that name none).
  std::map<std::string, uint64_t> documents_by_language;
  uint64_t micro_batches = 0;     // TrainMicroBatch calls
  uint64_t snapshots = 0;         // snapshots written by this process
  uint64_t snapshot_version = 0;  // StateStore version of the last snapshot (0: none yet)
  int64_t lag = -1;               // messages behind the high watermarks of the assigned
                                  // partitions; -1 while unknown
  double seconds = 0;             // wall seconds in Run
  double active_seconds = 0;      // wall seconds from the first message to the end of the last
                                  // micro-batch (rates without the group join and idle time)
  double trained_until_seconds = 0;  // wall seconds from Run's start to the end of the last
                                     // micro-batch (rates with the join, without idle time)
  uint64_t vocab_size = 0;        // words held by the learner (<= its capacity)
  uint64_t evictions = 0;         // words that lost their slot (space-saving), state's lifetime
  double loss = 0;                // mean loss per positive pair since the last snapshot, nats
  // Where Run's thread spends its time, wall seconds (docs/pipeline.md, "Where the time goes"):
  uint64_t snapshot_bytes = 0;          // entry bytes the last snapshot passed to the store
  uint64_t snapshot_bytes_total = 0;    // entry bytes of this process's snapshots
  uint64_t snapshot_written_bytes = 0;  // of those, written anew by the last (changed entries)
  uint64_t snapshot_written_bytes_total = 0;  // written anew by this process's snapshots
  uint64_t checkpoints = 0;             // of the snapshots, recovery checkpoints
  uint64_t checkpoint_version = 0;      // StateStore version of the last checkpoint
  uint64_t state_disk_bytes = 0;        // the state directory's files after the last snapshot
                                        // (hard-linked checkpoint files counted once)
  double consume_seconds = 0;     // inside consume(): waiting for messages, rebalance callbacks
  double parse_seconds = 0;       // parsing documents (ParseDocument) and rejecting bad ones
  double feed_seconds = 0;        // TrainMicroBatch: normalising, counting, queueing for the
                                  // workers (with threads > 1 the workers train meanwhile)
  double snapshot_seconds = 0;    // snapshots: draining the workers, writing the state
  double commit_seconds = 0;      // committing offsets after durable snapshots
  ParamClientStats param;         // pushes and pulls (KafkaTrainerOptions::param_shards > 0)
  // The character model's distillation (KafkaTrainerOptions::char_distill), zeros without one.
  bool char_distill = false;
  CharDistillStats char_distill_stats;
  // The character model as SGNS's input side (KafkaTrainerOptions::char_lstm).
  bool char_lstm = false;
  CharSgnsStats char_lstm_stats;
};

class KafkaTrainer {
 public:
  // Opens (or creates) the state and resumes its learner (StreamingLearner::LoadState) and its
  // offsets; creates the consumer and the producer for rejections (no network round trip yet).
  // Errors: InvalidArgument for bad options or librdkafka properties (naming them);
  // FailedPrecondition when the state directory is in use by another process or is not a
  // streamvec state; Corruption / IoError from the store.
  static StatusOr<std::unique_ptr<KafkaTrainer>> Create(const KafkaTrainerOptions& options);
  // Leaves the group without a snapshot (what is not in the last snapshot is trained again by
  // the next trainer).
  ~KafkaTrainer();
  KafkaTrainer(const KafkaTrainer&) = delete;
  KafkaTrainer& operator=(const KafkaTrainer&) = delete;

  // Consumes and trains until `stop` is true (checked at least every 100 ms) or, with
  // max_idle_s, until the topic is idle; then trains what is pending, writes a final snapshot,
  // commits its offsets and leaves the group. Call once. Errors: the final snapshot's (a failed
  // periodic snapshot is a warning and training goes on), Internal for a fatal librdkafka error.
  Status Run(const std::atomic<bool>& stop);

  KafkaTrainerStats stats() const;

  // Asks Run to train what is pending and write a snapshot at its next loop turn (within about
  // 100 ms), if anything was consumed since the last one. Thread-safe; returns at once.
  void RequestSnapshot();

  // Per document source, the end of its contiguous trained prefix (resumed from the snapshot;
  // with shared_positions, the shared one).
  std::map<std::string, int64_t> source_positions() const;

  // The positions recorded in the newest snapshot of `state_dir`, without taking the writer's
  // lock (what `streamvec run` hands its connectors on restart). Empty when the directory holds
  // no state or no snapshot. Errors: FailedPrecondition (not a streamvec state), Corruption.
  static StatusOr<std::map<std::string, int64_t>> ReadSourcePositions(const std::string& state_dir);

  // The consumer group in use ("<prefix>.trainers" unless set).
  const std::string& group() const;

 private:
  struct Impl;
  explicit KafkaTrainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Writes a learner's snapshot entries: its state (SaveState) and the serving embedding
// (WriteServingEntries). Shared by the Kafka trainer and `train --stream`.
Status WriteLearnerSnapshot(const StreamingLearner& learner, const SnapshotSink& sink);

// The serving embedding of a learner's admitted words, in its slot order (ExportRowsBySlot ->
// WriteEmbeddingTable with the learner's row layout: a chunk whose rows did not change keeps its
// bytes, and at a checkpoint equals the learner's "input/" entry, so the state store writes it
// once), and the words' running counts (WriteEmbeddingCounts). What a serving publication
// writes.
Status WriteServingEntries(const StreamingLearner& learner, const SnapshotSink& sink);
// The same with other rows than the learner's (CharSgns: the served vectors): the words, slots,
// rows_per_chunk and stride of StreamingLearner::ExportRowsBySlot, slot_rows[slots[i]] pointing
// at word i's row (stride floats, the vector first).
Status WriteServingEntries(const StreamingLearner& learner, const std::vector<std::string>& words,
                           const std::vector<uint32_t>& slots,
                           const std::vector<const float*>& slot_rows, int stride,
                           size_t rows_per_chunk, const SnapshotSink& sink);

// A distributed trainer's document cut into pieces of at most `max_words` words (>= 1; SV_CHECK),
// in order, each piece ending at the end of a word and the whitespace between pieces dropped, so
// that the pieces hold the same words as `text`; words are separated as the tokenizer separates
// tokens (IsTokenSeparator). The trainer trains piece by piece and checks the push and pull
// intervals after each (docs/distributed.md, "Trainers"): without the cut a document of 44,000
// words (the 100M corpus's) pushes at most once per document whatever --push-every asks for. A
// text of at most max_words words is one piece (itself); a text with no word gives no piece.
// Windows do not cross a cut (the learner treats each piece as a document): one in max_words words.
std::vector<std::string_view> SplitDocumentForSync(std::string_view text, size_t max_words);

// The snapshot metadata of a learner, a JSON object: {"model": "sgns", "words_seen",
// "words_trained", "vocab_size", "admitted", "evictions", "dim", "window", "negative", "sample",
// "min_count", "vocab_capacity", "count_half_life", "optimizer", "eta", "alpha", "seed"}; with
// a `char_sgns`, "model" is "char-lstm" and "char_model" its CharSgns::MetadataJson.
std::string LearnerMetadataJson(const StreamingLearner& learner,
                                const CharSgns* char_sgns = nullptr);

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_KAFKA_TRAINER_H_

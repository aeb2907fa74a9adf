// A parameter-node shard (issue 20; docs/distributed.md): owns shard I of N of the global
// embedding. It consumes partition I of `<prefix>.updates` (the trainers' pushes, param/protocol.h)
// by manual assignment, merges each consumed batch's row deltas into its rows (MergeBatch under a
// MergeRule: Downpour SGD with node-side Adagrad, Dean et al. 2012, section 4.1; averaging; sum;
// AdaSum, Maleki et al. 2021), counts the pushed words in a bounded, mergeable summary
// (CountSummary: space-saving, Agarwal et al. 2012), publishes the rows it changed and its
// vocabulary changes on partition I of `<prefix>.params`, and snapshots everything with the
// `.updates` offset it covers into a StateStore in the layout `streamvec serve` reads.
//
// Words. The shard holds at most `vocab_capacity` words: those the count summary holds. A push's
// count records are added first (the whole batch's, in offset order); a word evicted by them
// loses its row (its slot is reused), a word admitted gets a zero row and zero Adagrad state.
// Row deltas of a word the summary does not hold after the batch's counts (never counted, or
// evicted) are dropped and counted (`rows_dropped`): the trainer learns from the vocabulary
// publication that the word left. A row the node created in this batch is merged as the mean of
// the senders' deltas whatever the rule: the first push of a word carries its whole row (a
// trainer's RowDeltaTracker::MarkFresh, against a node base of zero), a random initialisation
// that is neither a gradient step (Downpour would rescale it) nor to be summed; later rounds of
// that row follow the rule.
//
// Merge rounds and the clock. One consumed batch is a first message and the messages the
// partition held when it was fetched (up to the high watermark the consumer then knew: messages
// a trainer produced together are merged together), plus any the consumer holds already, at most
// max_batch_messages, waiting at most a second for them. The node clock, written in
// every publication's header (sender_clock), counts the push messages merged over the state's
// life: a trainer's staleness is that clock minus the clock it last applied (Li et al. 2014,
// bounded delay; not enforced by the node yet).
//
// Bad input is rejected, never fatal: a message DecodeParamMessage refuses (truncated, bad
// magic, newer protocol version, another dim or model, non-finite values, ...) or one that is not
// a push goes to `<prefix>.rejected` as RejectionToJson(reason, "<topic>/<partition>@<offset>",
// payload), is counted, and the stream goes on. The expected dim is `dim` when set, else the
// snapshot's, else the first valid push's (then fixed for the state's life).
//
// Gaps. The shard checks the offsets it consumes: a message past the expected one (the start
// offset, then the one after the last consumed) means the broker dropped the ones between
// before they were read (the embedded broker's ~5 MiB ring overrun by several trainers at once,
// a cluster's retention). The run is logged, counted (`lost_messages`) and published as a kGap
// message (param/protocol.h) before any publication whose watermark passes it, so that the
// senders push those messages again (ParamClient).
//
// Delivery: at least once, as the trainer. Snapshots (every snapshot_every_s while something
// changed, and at stop) hold the rows, Adagrad accumulators, counts and the next `.updates`
// offset; the offset is committed to group `<prefix>.param-nodes` only once the snapshot is
// durable. The offset read and merged so far is committed to `<prefix>.param-nodes.read` as the
// node goes (after each merged batch; reset to the start offset when the node starts): the
// trainers' flow control. Its consumer asks the broker to answer an empty fetch within 10 ms
// (`fetch.wait.max.ms`): the embedded broker holds such a fetch for the whole wait even when
// pushes arrive meanwhile, and with librdkafka's 500 ms default every trainer would wait that long.
// A restarted node resumes from its snapshot: what was merged after it is consumed and merged
// again, nothing before it twice. The snapshot's offset is ignored (the partition starts at its
// beginning, the rows kept) when it names another cluster (a fresh embedded broker) or lies
// beyond the partition's high watermark.
//
// Publications on `<prefix>.params` (partition I): kRows records (word, the node's count and
// error, and of its input and output rows those a merge changed since the word's last
// publication; both for a word new to the shard, a restart's and a sweep's republication) for
// the words changed since the last publication, then kVocabulary
// records (CountSummary::TakeChanges: a word's count again once it grew by kCountReportGrowth,
// a new word and a removal always), coalesced and sent at most every publish_every_s, at most
// publish_max_bytes per turn (the rest waits for the next turn): the embedded broker keeps only
// about 5 MiB per partition. After a restart every held row is published again, and every
// republish_every_s a sweep publishes every held row again over as many turns as it needs.
//
// Thread safety: Run is called from one thread, once; stats() from any thread.
#ifndef STREAMVEC_NODE_PARAM_NODE_H_
#define STREAMVEC_NODE_PARAM_NODE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "streamvec/base/status.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/param/merge.h"
#include "streamvec/param/protocol.h"

namespace streamvec {

class EmbeddedBroker;

// Entries a node writes into every snapshot, next to the serving embedding
// (WriteEmbeddingEntries: the held words, most frequent first, and their input rows):
//   kNodeMetaEntry     {"shard", "shards", "dim", "model", "slots", "rows_per_chunk", "clock",
//                       "messages", "rejected", "rows_dropped"}
//   kNodeRowsEntry/<i> chunk i (8 decimal digits) of kNodeRowsPerChunk slots, each: u32 word
//                      length (0: free slot), the word, dim floats input row, dim floats output
//                      row, 2 floats Adagrad accumulators (input, output); host byte order
//   kNodeCountsEntry   {"capacity", "total", "floor", "entries": [[word, count, error], ...]}
//   kNodeOffsetsEntry  {"cluster_id", "group", "topic", "partition", "offset"} (next offset)
inline constexpr char kNodeMetaEntry[] = "node/meta";
inline constexpr char kNodeRowsEntry[] = "node/rows";
inline constexpr char kNodeCountsEntry[] = "node/counts";
inline constexpr char kNodeOffsetsEntry[] = "node/offsets";
inline constexpr size_t kNodeRowsPerChunk = 128;

// A held word's count is published again (a kVocabulary record) once it grew by this fraction
// since its last publication: the trainers weigh their noise distributions and admit words by
// these counts (ParamClientOptions::group_counts), which a relative precision serves, and a
// frequent word's count changes at every publication turn.
constexpr double kCountReportGrowth = 1.0 / 16;

struct ParamNodeOptions {
  KafkaOptions kafka;        // brokers, topic prefix, extra librdkafka properties
  uint32_t shard = 0;        // this node's shard, 0..shards-1: the `.updates` partition it owns
  uint32_t shards = 1;       // shards in all (the trainers' --param-shards), >= 1
  std::string state_dir;     // StateStore directory; an existing node state is resumed
  MergeOptions merge;        // --merge and the Downpour Adagrad rate
  // kScaledSum's factor (--merge-scale): > 0 a fixed factor; 0 (auto, the default) 1/sqrt(T),
  // T the trainers that pushed to the shard in the last 30 s (MergeRule::kScaledSum).
  double merge_scale = 0;
  size_t vocab_capacity = 100000;  // words this shard holds at most (>= 2)
  uint32_t dim = 0;          // expected dim; 0: the snapshot's, else the first valid push's
  double snapshot_every_s = 5;     // seconds between snapshots while something changed (> 0)
  // A snapshot (and the commit of the `.updates` offset it covers) is also taken once one sender's
  // pushes merged since the last one reach this many bytes (0: no such trigger). Trainers wait
  // on the shard's read position (committed to ParamNodesReadGroup as it merges), not on
  // snapshots, and each keeps a copy of its own pushes until a snapshot covers them (ParamClient:
  // up to 64 MiB a shard), to push them again when a restarted shard finds them gone from the
  // broker: this bounds that copy. (Counted per sender: a shard that N trainers push to would
  // otherwise snapshot N times as often for the same bound.)
  uint64_t snapshot_bytes = uint64_t{24} << 20;
  double publish_every_s = 0.2;    // seconds between publications (coalescing), >= 0
  // Encoded row bytes per publication turn, at most (the rest waits for the next turn, which
  // goes on after the last word published: round robin, so rows that change at every turn do not
  // hold back the others): with publish_every_s, at most 10 MiB/s on the partition by default, so
  // a trainer that reads `.params` within about 0.4 s loses nothing from the embedded broker's
  // ~5 MiB ring (a trainer reads it after every document).
  size_t publish_max_bytes = size_t{2} << 20;
  // Seconds between the starts of two sweeps that publish every held row again, changed or not
  // (--republish-every; 0: never). `.params` is a log of changes with short retention (about
  // 0.5 s of publications on the embedded broker): a trainer that joins late, or falls behind,
  // gets a row it missed when the row changes again or, for a row that no longer changes, from
  // the next sweep. A sweep goes on over as many turns as it needs, with at least a quarter of
  // each turn's publish_max_bytes; words whose change is waiting are left to that change.
  double republish_every_s = 60;
  // Of the published rows (--publish-precision). fp16 halves what every trainer reads; the
  // node's rows stay fp32, and a trainer's row is the published one plus its own unpushed delta,
  // so the rounding (relative 2^-11) does not accumulate.
  ParamPrecision publish_precision = ParamPrecision::kFp16;
  size_t max_message_bytes = size_t{512} << 10;  // bytes per `.params` message (under Kafka's
                                                 // 1 MB message.max.bytes), at most
  size_t max_batch_messages = 256;  // `.updates` messages merged as one batch, at most
  double max_idle_s = 0;     // > 0: Run returns (after its final snapshot) once the partition
                             // was read to its end and no message came for this many seconds
  // For tests and the embedded broker: create `.updates` and `.params` (shards partitions) and
  // `.rejected` (1 partition) on it at Create. A real cluster's topics exist already.
  EmbeddedBroker* create_topics_on = nullptr;
};

struct ParamNodeStats {
  uint64_t messages = 0;      // `.updates` messages consumed by this process (valid or not)
  uint64_t bytes_in = 0;      // their bytes
  uint64_t merges = 0;        // push messages merged by this process
  uint64_t rounds = 0;        // row rounds applied (one per row and batch; MergeBatch)
  uint64_t contributions = 0; // (row, sender) contributions merged
  uint64_t rows_dropped = 0;  // row records of words the shard does not hold (dropped)
  uint64_t rejected = 0;      // messages sent to `<prefix>.rejected` by this process
  uint64_t gaps = 0;          // runs of `.updates` offsets the broker dropped before this shard
                              // read them (each published as a kGap message)
  uint64_t lost_messages = 0;       // the offsets in those runs (pushes their senders push again)
  uint64_t published_messages = 0;  // `.params` messages produced
  uint64_t bytes_out = 0;     // their bytes
  uint64_t published_rows = 0;      // row records published
  uint64_t republished_rows = 0;    // of which unchanged rows of a sweep (republish_every_s)
  uint64_t snapshots = 0;     // snapshots written by this process
  uint64_t snapshot_version = 0;    // StateStore version of the last one (0: none)
  uint64_t clock = 0;         // node clock: push messages merged over the state's life
  uint64_t rows = 0;          // words held (each with input and output rows)
  uint64_t evictions = 0;     // words that left the vocabulary (this process)
  uint32_t dim = 0;           // 0 until known
  uint32_t active_trainers = 0;  // senders that pushed to the shard in the last 30 s
  double merge_scale = 0;  // kScaledSum's factor at its last merge (0: none yet, or another rule)
  int64_t next_offset = -1;   // next `.updates` offset to merge (-1: none yet)
  int64_t lag = -1;           // messages behind the partition's high watermark; -1: unknown
  double seconds = 0;         // wall seconds in Run
  double merge_seconds = 0;   // of those, decoding and merging
};

class ParamNode {
 public:
  // Opens (or creates) the state and resumes a node state found there; creates the Kafka clients
  // (no round trip yet). Errors: InvalidArgument naming the option or librdkafka property;
  // FailedPrecondition when the state is in use, is not a streamvec state, is not a node's
  // (a trainer's), or belongs to another shard or shard count; Corruption for a malformed node
  // entry; IoError from the store.
  static StatusOr<std::unique_ptr<ParamNode>> Create(const ParamNodeOptions& options);
  ~ParamNode();
  ParamNode(const ParamNode&) = delete;
  ParamNode& operator=(const ParamNode&) = delete;

  // Consumes, merges, publishes and snapshots until `stop` is true (checked at least every
  // 100 ms) or, with max_idle_s, the partition is idle; then publishes what is pending, writes a
  // final snapshot (if anything changed) and commits. Call once. Errors: the final snapshot's (a
  // failed periodic one is a warning), Internal for a fatal librdkafka error.
  Status Run(const std::atomic<bool>& stop);

  ParamNodeStats stats() const;

 private:
  struct Impl;
  explicit ParamNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_NODE_PARAM_NODE_H_

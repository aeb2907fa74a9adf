// A trainer's side of the parameter node (issue 20): pushes of row deltas and counts to
// <prefix>.updates and pulls of the node's rows from <prefix>.params, around a StreamingLearner.
//
// Downpour SGD (Dean et al. 2012, section 4.1): the trainer trains its micro-batches locally
// (the learner, Hogwild and Adagrad as alone) and every `push_every_words` trained words it
// quiesces the learner and pushes, for every admitted word, what its rows moved since the last
// push (RowDeltaTracker::Export: row - base) with the occurrences counted since then, to the
// word's shard (ShardOf: the .updates partition). A word seen for the first time, or a slot
// the learner gave to another word, is pushed whole (MarkFresh: the node starts it from zero).
// Then it applies the rows the shards published since (RowDeltaTracker::ApplyRows: the node's
// row plus the local delta not yet pushed), for the words it holds; others are skipped. A word
// the node reports removed (evicted from its shard) is pushed whole again next time.
//
// Rarer rows go out less often than frequent ones (PushSchedule,
// ParamClientOptions::push_hot_rows). Publications are consumed at every Sync but applied every
// pull_every_words trained words (the newest row of each word waits until then), and
// max_staleness bounds how many of its push rounds the shards have not merged (bounded delay).
// The trainer keeps a copy of each push message until it is safe (below the shard's committed
// offset, in a node snapshot; below its merged watermark without flow control), at most 64 MiB
// a shard, and pushes again the messages a shard's gap (param/protocol.h, kGap) names: the broker
// dropped them before the shard read them.
// Rows a trainer missed (it joined late, or fell behind .params' retention) come again with the
// shard's republication sweeps (ParamNodeOptions::republish_every_s).
// The vocabulary and the noise distribution follow the group's counts as the shards publish
// them (ParamClientOptions::group_counts). Not yet: a late trainer's start from a snapshot of
// the shards.
//
// Thread safety: one thread (the Kafka trainer's) drives it, between micro-batches.
#ifndef STREAMVEC_TRAINER_PARAM_CLIENT_H_
#define STREAMVEC_TRAINER_PARAM_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "streamvec/base/status.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/param/protocol.h"
#include "streamvec/trainer/streaming_learner.h"

namespace streamvec {

struct ParamClientOptions {
  KafkaOptions kafka;        // brokers, topic prefix, extra librdkafka properties
  uint32_t shards = 1;       // node shards: partitions of .updates and .params (--param-shards)
  uint32_t sender = 0;       // this trainer's id in the messages' header
  ParamPrecision precision = ParamPrecision::kFp32;  // of the pushed deltas (--delta-precision)
  uint64_t push_every_words = uint64_t{1} << 18;     // trained words between pushes (--push-every)
  // Which moved rows a push round carries (PushSchedule, after pWord2Vec): the rows of the
  // push_hot_rows most frequent words every round, rarer rows every 2, 4, ... rounds, each row
  // at least every push_max_period rounds (rounded down to a power of two). A row not due
  // keeps accumulating its delta; a word's first (whole-row) push and the final push at stop
  // carry every moved row. push_hot_rows 0: every moved row every round (--push-hot-rows,
  // --push-max-period).
  uint32_t push_hot_rows = 4096;
  uint32_t push_max_period = 8;
  // Trained words between two applications of the shards' publications to the learner
  // (--pull-every). Publications are consumed at every Sync all the same (acknowledgements and
  // the node rows new words start from stay current, and .params is read before the broker
  // drops it); the newest row of each held word waits in a buffer until the next application,
  // and a forced Sync applies it. 0: at every Sync.
  uint64_t pull_every_words = 0;
  // Bounded delay (Li et al. 2014, "Scaling Distributed Machine Learning with the Parameter
  // Server", section 4; Ho et al. 2013, stale synchronous parallel): before push round r the
  // trainer waits, consuming publications, until every shard has acknowledged (merged, as its
  // publications' watermark shows) each of this trainer's rounds up to r - max_staleness - 1
  // that carried rows to it, so at most max_staleness pushed rounds are unmerged when a round
  // goes out. 0: every push is merged before the next; -1: no bound (--max-staleness). A
  // shard's read position on .updates (ParamNodesReadGroup, or its committed offset) passing the
  // round also ends a wait, so a round that led to no publication (its rows dropped by the
  // shard) is not waited for long.
  // The stop flag ends the wait; the round then goes out.
  int64_t max_staleness = -1;
  // Flow control: before each push message to a shard (a push sent again included), wait
  // while that `.updates` partition holds more than this many bytes the shard has not read
  // (ParamNodesReadGroup: a node commits its read position as it merges), so the embedded
  // broker's ~5 MiB ring does not drop a push before the shard reads it. What a restarted shard
  // finds dropped since its snapshot is pushed again from this trainer's copies. 0: no waiting
  // (a Kafka cluster with real retention).
  int64_t max_lag_bytes = int64_t{4} << 20;
  // The group's vocabulary (--group-counts): the learner admits a word and weighs it in its
  // noise distribution by the whole group's count, not by its own share's
  // (StreamingLearner::SetGroupCounts: its own count plus the shards' published guaranteed
  // count less what this trainer pushed of it), so a word another trainer admitted is trained
  // here from its first occurrence, as one trainer reading the whole stream would. False: every
  // trainer admits and draws negatives by its own counts alone.
  bool group_counts = true;
  // Raised while waiting (the trainer's stop): the push then goes out without waiting more.
  const std::atomic<bool>* stop = nullptr;
};

struct ParamClientStats {
  uint64_t pushes = 0;           // push rounds
  uint64_t push_messages = 0;    // messages produced to .updates
  uint64_t push_bytes = 0;       // their bytes
  uint64_t rows_pushed = 0;      // records pushed (a word's deltas and count)
  uint64_t rows_deferred = 0;    // moved rows a round left for a later one (the push schedule)
  uint64_t group_counts_raised = 0;  // held words whose group count a shard's count raised
  uint64_t pull_messages = 0;    // publications consumed from .params
  uint64_t pull_bytes = 0;       // their bytes
  uint64_t pulls_lost = 0;       // publications the broker dropped before this trainer read them
                                 // (it reads on from the oldest one left)
  uint64_t rows_applied = 0;     // published rows applied to words this trainer holds
  uint64_t rows_from_node = 0;   // words admitted with the node's published row
  uint64_t rows_corrected = 0;   // applied rows older than our last push of them: our deltas
                                 // the shard had not merged yet were added back
  uint64_t rows_stale = 0;       // published rows skipped: older than this trainer's last push
                                 // of the row (the shard's watermark had not passed it)
  uint64_t rejected = 0;         // publications that did not decode (logged, skipped)
  uint64_t repushed_messages = 0;  // push messages sent again: a shard's gap (param/protocol.h,
                                   // kGap) said the broker dropped them before it read them
  uint64_t node_clock = 0;       // newest node clock applied (the pushes' base clock)
  double throttled_seconds = 0;  // waiting for the shards (flow control)
  double staleness_wait_seconds = 0;  // waiting for acknowledgements (max_staleness)
  uint64_t unacked_rounds = 0;  // this trainer's push rounds with rows that some shard has not
                                // acknowledged yet, the round just pushed included (gauge)
  uint64_t rows_pending = 0;    // published rows consumed, waiting for pull_every (gauge)
  uint64_t push_every_words = 0;  // the push interval now (gauge; set_push_every_words)
  uint64_t push_hot_rows = 0;     // the push schedule's rows due every round now (gauge;
                                  // set_push_hot_rows; 0: every moved row every round)
  uint64_t group_counts = 0;      // 1 while admitting by the group's counts (gauge)
};

class ParamClient {
 public:
  // The learner must outlive the client and have its rows on the host (no CUDA device):
  // InvalidArgument otherwise, or for shards 0, push_every_words 0, max_staleness below -1,
  // or a property librdkafka refuses. Does not contact the broker.
  static StatusOr<std::unique_ptr<ParamClient>> Create(const ParamClientOptions& options,
                                                      StreamingLearner* learner);
  ~ParamClient();
  ParamClient(const ParamClient&) = delete;
  ParamClient& operator=(const ParamClient&) = delete;

  // Call after a micro-batch was queued: pushes once push_every_words more words were trained
  // since the last push (always with force: before a snapshot, at stop), first waiting for
  // acknowledgements when max_staleness requires it, then consumes what the shards published
  // and applies it once pull_every_words more words were trained (always with force). IoError
  // when a push cannot be queued (the producer's queue full for 10 s); a publication that does
  // not decode is skipped and counted.
  Status Sync(bool force);
  // Waits up to timeout_ms for the pushes to be delivered (at stop). IoError if some were not.
  Status Flush(int timeout_ms);

  ParamClientStats stats() const;
  // ParamClientOptions::push_every_words from now on (>= 1): the next push once that many words
  // were trained since the last one. The trainer sets it when its share of the partitions
  // changes (KafkaTrainerOptions::push_every_words 0).
  void set_push_every_words(uint64_t words);
  uint64_t push_every_words() const;
  // ParamClientOptions::push_hot_rows from the next push round on (0: every moved row every
  // round; > 0 needs push_max_period >= 1, SV_CHECK). The trainer sets it when its share of the
  // partitions changes (KafkaTrainerOptions::push_hot_rows unset).
  void set_push_hot_rows(uint32_t rows);
  uint32_t push_hot_rows() const;
  // ParamClientOptions::stop, set after Create (the trainer's Run receives its flag).
  void set_stop(const std::atomic<bool>* stop);
  // ParamClientOptions::group_counts from now on. On: the held words' group counts come with
  // the shards' next publications. Off: the learner's are dropped (StreamingLearner::
  // SetGroupCounts). The trainer sets it when its share of the partitions changes
  // (KafkaTrainerOptions::group_counts kAuto).
  void set_group_counts(bool on);
  bool group_counts() const;

 private:
  struct Impl;
  explicit ParamClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_PARAM_CLIENT_H_

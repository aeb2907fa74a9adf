// `streamvec run --trainers N --param-shards S` (docs/distributed.md, "In one process"): where
// the trainers' and shards' states live under --state, where the connector resumes when several
// trainers shared the stream, the trainers' counters together, and the drain of the shards
// before they stop.
#ifndef STREAMVEC_APP_RUN_SHARDS_H_
#define STREAMVEC_APP_RUN_SHARDS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/node/param_node.h"
#include "streamvec/trainer/kafka_trainer.h"

namespace streamvec::app {

// The state directories of a run with --param-shards: <state>/shard-<i>, <state>/trainer-<j>.
std::string ShardState(const std::string& state, int shard);
std::string TrainerState(const std::string& state, int trainer);

// Where the connector resumes when `trainers` trainers shared the stream: per source, the
// minimum over the trainers' snapshots of the shared prefix each recorded (SharedSourcePositions:
// below it every document is in some trainer's checkpoint); a source missing from any of them
// starts at 0. Documents past it are sent again (at least once). Errors of
// KafkaTrainer::ReadSourcePositions, naming the trainer's state.
StatusOr<std::map<std::string, int64_t>> ReadSharedSourcePositions(const std::string& state,
                                                                   int trainers);

// The trainers' counters together, as one trainer's (sums; maxima of the times and the
// vocabulary size; lag -1 if any is unknown): what /metrics and the report lines show. The one
// trainer's own with a single trainer. `trainers` is not empty.
KafkaTrainerStats TotalStats(const std::vector<std::unique_ptr<KafkaTrainer>>& trainers);

// After the trainers stopped (each pushed what was left and flushed it): waits, at most
// `limit_s` seconds, until every shard consumed and merged every message of its `.updates`
// partition, so the trainers' last pushes are in the shards' final snapshots. The broker is the
// process's own and new, so a shard consumes its partition from the beginning (a resumed
// snapshot's offset names another cluster): its message count in this process reaches the
// partition's size. False (logged) when it gave up.
bool DrainShards(const KafkaOptions& kafka, const std::vector<std::unique_ptr<ParamNode>>& nodes,
                 double limit_s);

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_RUN_SHARDS_H_

// The distributed trainer's flags (docs/distributed.md), shared by `train --brokers
// --param-shards N` and `run --trainers N --param-shards S`: how a trainer pushes its row deltas
// to the parameter-node shards and applies the rows they publish (ParamClientOptions).
#ifndef STREAMVEC_APP_PARAM_FLAGS_H_
#define STREAMVEC_APP_PARAM_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "streamvec/base/status.h"
#include "streamvec/trainer/kafka_trainer.h"

namespace streamvec::app {

struct ParamClientFlags {
  uint64_t push_every = 0;  // --push-every: trained words between pushes (0: by the trainers)
  std::string push_hot_rows = "auto";       // --push-hot-rows: auto or a number of rows
  uint32_t push_max_period = 8;             // --push-max-period, rounds
  int64_t pull_every = 0;      // --pull-every: trained words between applications (0: each doc)
  int64_t max_staleness = -1;  // --max-staleness: push rounds (-1: no bound)
  std::string delta_precision = "fp32";  // --delta-precision fp32|fp16
  std::string group_counts = "auto";     // --group-counts auto|on|off
};

// --push-every, --push-hot-rows, --push-max-period, --pull-every, --max-staleness,
// --delta-precision; `lead` starts each description (e.g. "Kafka, with --param-shards: ").
void AddParamClientFlags(CLI::App* cmd, ParamClientFlags* flags, const std::string& lead);

// The flags into a trainer's options (push_every_words ... delta_precision). InvalidArgument
// naming --push-hot-rows for a value other than auto or a number of rows, --delta-precision for
// a precision other than fp32 or fp16.
Status ApplyParamClientFlags(const ParamClientFlags& flags, KafkaTrainerOptions* options);

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_PARAM_FLAGS_H_

// `streamvec train --stream`: the streaming learner driven from standard input (or a file read
// sequentially), with state snapshots in a RocksDB directory (docs/streaming.md); and
// `streamvec train --brokers ...`: the same learner fed by the Kafka trainer (docs/pipeline.md).
#ifndef STREAMVEC_APP_STREAM_TRAIN_H_
#define STREAMVEC_APP_STREAM_TRAIN_H_

#include <string>
#include <vector>

#include "param_flags.h"
#include "streamvec/base/status.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/trainer/char_distiller.h"
#include "streamvec/trainer/char_sgns.h"
#include "streamvec/trainer/streaming_learner.h"

namespace streamvec::app {

// x for a progress line, three significant digits or so: "1.23M", "45.6k", "789".
std::string HumanNumber(double x);

// Prints "streamvec train: error: <status's message>" on stderr; returns `code` (the exit status).
int TrainFail(const Status& status, int code);

struct StreamTrainFlags {
  std::string input;            // "-" for stdin, or a path read sequentially
  std::string state;            // state directory (required)
  std::string output;           // optional: vectors written at the end
  std::string format = "text";  // of output
  std::string snapshot_every = "300s";  // "<N>" words or "<S>s" seconds
  // Passes over `input` (> 1 only for a file: batch `train --model char-lstm --epochs N`); the
  // learner goes on across passes as over one stream.
  int epochs = 1;
  bool progress_bar = false;
  // Natural text: NormalizeText (lowercase, punctuation and symbols to spaces, NFKC) line by
  // line before the learner (--normalize).
  bool normalize = false;
  StreamingOptions options;
  // --char-distill: a character model learns the vectors beside training (docs/char-model.md).
  bool char_distill = false;
  CharDistillOptions char_distill_options;
  // --model char-lstm: the character model is the input side of SGNS (CharSgns), with
  // char_distill_options.model's shape and --char-mode.
  bool char_lstm = false;
  CharSgnsOptions char_lstm_options;  // mode, batch_words (model: char_distill_options.model)
  // Training flags given on the command line: ignored (with a warning) when a state is resumed.
  std::vector<std::string> explicit_flags;
};

// Runs until EOF, SIGINT or SIGTERM; returns the exit status (0 ok, 1 runtime failure, 2 bad
// input or usage), messages on stderr.
int RunStreamTrain(const StreamTrainFlags& flags);

struct KafkaTrainFlags {
  KafkaOptions kafka;           // brokers (from --brokers or --bootstrap-file), prefix, properties
  std::string group;            // "" = <prefix>.trainers
  std::string state;            // state directory (required)
  std::string snapshot_every = "5s";  // "<S>s" seconds or "<N>" message bytes
  double max_idle_s = 0;        // > 0: stop after this many seconds without a message
  bool normalize = false;       // lowercase and drop punctuation (natural text)
  std::vector<std::string> languages;  // --lang: documents' languages to train (empty: all)
  std::string assign;           // "" (join the group), "all" or "P,P,..." (manual assignment)
  int64_t snapshot_partition_bytes = -1;  // -1: KafkaTrainerOptions' default
  double checkpoint_every_s = 0;           // KafkaTrainerOptions::checkpoint_every_s
  double snapshot_write_rate_mb = 0;       // KafkaTrainerOptions::snapshot_write_rate, MB/s
  std::string metrics;          // --metrics HOST:PORT: GET /metrics (Prometheus); "" = none
  uint32_t param_shards = 0;    // --param-shards: push to / pull from the parameter node
  ParamClientFlags param;       // --push-every ... --delta-precision (with --param-shards)
  uint32_t trainer_id = 0;                  // --trainer-id (0: random)
  StreamingOptions options;
  bool char_distill = false;                // as in StreamTrainFlags
  CharDistillOptions char_distill_options;
  bool char_lstm = false;  // as in StreamTrainFlags
  CharSgnsOptions char_lstm_options;
  std::vector<std::string> explicit_flags;  // as in StreamTrainFlags
};

// Consumes <prefix>.docs until SIGINT / SIGTERM (or --max-idle), then writes a final snapshot
// and commits. Returns the exit status: 0 ok, 1 runtime failure (final snapshot, fatal Kafka
// error), 2 usage or a state that cannot be used (in use by another process, not a state).
int RunKafkaTrain(const KafkaTrainFlags& flags);

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_STREAM_TRAIN_H_

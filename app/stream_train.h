// `streamvec train --stream`: the streaming learner driven from standard input (or a file read
// sequentially), with state snapshots in a RocksDB directory. See docs/streaming.md.
#ifndef STREAMVEC_APP_STREAM_TRAIN_H_
#define STREAMVEC_APP_STREAM_TRAIN_H_

#include <string>
#include <vector>

#include "streamvec/trainer/streaming_learner.h"

namespace streamvec::app {

struct StreamTrainFlags {
  std::string input;            // "-" for stdin, or a path read sequentially
  std::string state;            // state directory (required)
  std::string output;           // optional: vectors written at the end
  std::string format = "text";  // of output
  std::string snapshot_every = "300s";  // "<N>" words or "<S>s" seconds
  bool progress_bar = false;
  StreamingOptions options;
  // Training flags given on the command line: ignored (with a warning) when a state is resumed.
  std::vector<std::string> explicit_flags;
};

// Runs until EOF, SIGINT or SIGTERM; returns the exit status (0 ok, 1 runtime failure, 2 bad
// input or usage), messages on stderr.
int RunStreamTrain(const StreamTrainFlags& flags);

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_STREAM_TRAIN_H_

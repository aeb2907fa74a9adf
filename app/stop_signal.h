// SIGINT / SIGTERM as a stop flag, for the commands that run until told to stop and hand a
// `const std::atomic<bool>&` to a library loop (Ingestor, Crawler, KafkaTrainer).
#ifndef STREAMVEC_APP_STOP_SIGNAL_H_
#define STREAMVEC_APP_STOP_SIGNAL_H_

#include <atomic>

namespace streamvec::app {

// Installs handlers for SIGINT and SIGTERM (without SA_RESTART: a blocked read returns EINTR, so
// a reading loop sees the flag) and returns the flag they set. The flag is process-wide and
// stays set. Setting a lock-free atomic is async-signal-safe.
const std::atomic<bool>& StopOnSignals();

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_STOP_SIGNAL_H_

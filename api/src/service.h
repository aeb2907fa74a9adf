// The server without HTTP: follows a SnapshotSource (polling thread), prepares each new snapshot
// (index, quality, alignments; served.h), applies the quality gate, swaps it in atomically, and
// answers HttpCalls while recording request metrics. server.cpp only adds the cpprest listener.
#ifndef STREAMVEC_API_SRC_SERVICE_H_
#define STREAMVEC_API_SRC_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "metrics.h"
#include "retained.h"
#include "routes.h"
#include "served.h"
#include "streamvec/api/server.h"

namespace streamvec::api {

// Thread safety: Handle, snapshot_version and Metrics from any thread; PollOnce from one thread
// at a time (Start's caller, then the polling thread).
class Service {
 public:
  Service(const ServeOptions& options, std::shared_ptr<SnapshotSource> source);
  ~Service();  // StopPolling()s.

  // One check for a newer snapshot; prepares and swaps it in (or refuses it at the gate). Errors
  // are logged once each and never stop serving.
  void PollOnce();
  void StartPolling();
  void StopPolling();  // idempotent

  // Answers one call and records its latency, status and error kind.
  HttpReply Handle(const HttpCall& call);
  uint64_t snapshot_version() const;
  std::string Metrics() const;  // the whole /metrics text

 private:
  // The calling (polling or index) thread yields to request threads: LowerThreadPriority
  // (nice index_nice and a short time slice, base/thread_priority.h).
  void LowerPriority(const char* thread) const;
  void PollLoop();
  // The index thread: builds an HNSW index over the served snapshot when it has none of its own
  // (at most every max(index_rebuild_interval_s, last build time) while snapshots keep coming;
  // in between each new snapshot carries the last index over, see Served), attaches it to
  // whatever snapshot is served by then, and measures recall@10.
  void IndexLoop();
  void IndexOnce();
  nlohmann::json EvaluationOf(uint64_t version) const;

  const ServeOptions options_;
  const std::shared_ptr<SnapshotSource> source_;
  std::atomic<std::shared_ptr<const Served>> current_;
  RequestMetrics request_metrics_;
  RetainedSnapshots retained_;
  Routes routes_;

  mutable std::mutex evaluations_mu_;
  std::map<uint64_t, nlohmann::json> evaluations_;  // GUARDED_BY(evaluations_mu_)

  std::atomic<uint64_t> snapshots_loaded_{0};
  std::atomic<uint64_t> load_errors_{0};
  std::atomic<uint64_t> gate_rejections_{0};
  uint64_t rejected_version_ = 0;  // newest version refused at the gate; polling thread only
  std::string last_error_;         // polling thread only
  std::shared_ptr<const Served> retired_;  // polling thread only: the last one replaced

  std::mutex swap_mu_;  // serialises stores to current_ by the polling and index threads
  std::atomic<double> index_recall_{1.0};
  std::atomic<uint64_t> index_builds_{0};
  std::atomic<uint64_t> index_loads_{0};            // from ServeOptions::index_dir
  std::atomic<uint64_t> index_builds_deferred_{0};  // index thread rounds that waited
  std::optional<std::chrono::steady_clock::time_point> deferring_since_;  // index thread only
  std::chrono::steady_clock::time_point next_build_{};        // index thread only
  std::chrono::steady_clock::time_point next_early_build_{};  // index thread only

  std::thread poller_;
  std::thread indexer_;
  std::mutex mu_;
  std::condition_variable poll_wake_;  // the polling thread's
  std::condition_variable wake_;       // the index thread's
  bool stopping_ = false;       // GUARDED_BY(mu_)
  std::atomic<bool> cancel_index_{false};  // set at stop: an HNSW build under way gives up
  bool index_pending_ = false;  // GUARDED_BY(mu_): a snapshot was swapped in
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_SERVICE_H_

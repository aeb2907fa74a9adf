// The REST server of `streamvec serve` (and of `streamvec run`, in-process): answers vector,
// neighbour and similarity queries from the newest published snapshot of a state directory, and
// swaps in newer snapshots while it serves. Routes and JSON bodies: api/README.md.
//
// Serving never waits for training: a background thread polls the state directory, copies a newer
// snapshot's embedding into memory, prepares it (unit rows for cosine), and only then swaps it in
// atomically. Each request holds the snapshot it started with until it finishes, so a swap never
// fails or mixes snapshots within a request.
//
// HTTP is cpprestsdk's listener (its shared thread pool). It has no limit on header size and no
// timeout on half-sent requests: a public deployment belongs behind a reverse proxy.
//
// Thread safety: all methods may be called from any thread. No process-wide state is owned, so
// several servers may run in one process (on different ports).
#ifndef STREAMVEC_API_SERVER_H_
#define STREAMVEC_API_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "streamvec/api/serving_snapshot.h"
#include "streamvec/base/status.h"
#include "streamvec/base/thread_priority.h"

namespace streamvec::api {

// The dashboard's default root for `streamvec serve`: PREFIX/share/streamvec/web when the
// running binary is PREFIX/bin/streamvec of an installed tree (`cmake --install`), else the web/
// folder of the source tree this library was built from (its node_modules come from `npm ci` in
// scripts/install-deps).
std::string DefaultWebRoot();

// A hook of an admin route. Called on a request thread; returns when the action is done (or
// queued); an error becomes a 500 naming it. Must be thread-safe.
using AdminHook = std::function<Status()>;

struct ServeOptions {
  std::string state_dir;           // state directory a trainer writes (may not exist yet)
  std::string host = "127.0.0.1";  // address to listen on: IP literal or host name
  int port = 8000;                 // TCP port; 0 = pick a free port (see Server::port())
  double poll_interval_s = 0.5;    // seconds between checks for a newer snapshot; > 0

  // --- access ---
  // Bearer token the admin routes (POST /v1/admin/...) require in `Authorization: Bearer <t>`.
  // Empty: admin routes answer 403 (disabled). A wrong or missing token: 401. Read routes are open.
  std::string admin_token;
  // Value of Access-Control-Allow-Origin on every reply (and OPTIONS preflights answered 204).
  // Empty (default): no CORS headers, OPTIONS is 405.
  std::string cors_origin;
  AdminHook on_snapshot;       // POST /v1/admin/snapshot: write a snapshot now; unset: 501
  AdminHook on_pause_ingest;   // POST /v1/admin/ingest/pause; unset: 501
  AdminHook on_resume_ingest;  // POST /v1/admin/ingest/resume; unset: 501
  // Extra Prometheus text (complete "# HELP", "# TYPE" and sample lines, names streamvec_...,
  // newline-terminated) appended to GET /metrics: how an embedding process (`streamvec run`)
  // publishes its own gauges and counters. Called on a request thread for each scrape, possibly
  // from several at once: must be thread-safe and fast (no I/O). Unset: nothing appended.
  std::function<std::string()> extra_metrics;

  // --- neighbour index (built in the background; carried over to newer snapshots meanwhile) ---
  size_t exact_max_words = 20000;  // vocabulary <= this: exact scan; above: an HNSW index
  int hnsw_m = 16;                 // HNSW links per node
  // ef_construction 120 and ef_search 120 (bench/knn_bench.py, 220k words of the 100M corpus):
  // recall@10 0.953-0.956 where 100/120 gave 0.947-0.948, for a build about 1.1x as long.
  int hnsw_ef_construction = 120;  // HNSW candidate list while building
  int hnsw_ef_search = 120;        // HNSW candidate list while searching (>= k is used)
  int index_threads = 1;           // threads building the index (the trainer shares the cores)
  size_t recall_queries = 200;     // sampled rows for streamvec_index_recall_at_10
  // A new snapshot served with the index of an older one (carried over) has that index's recall
  // measured first (carried_recall_queries sampled rows, against the exact scan); under
  // min_carried_recall the snapshot is served by the exact scan instead, and a fresh index is
  // built as soon as the index thread may (as when many words are new). 0: always carry.
  // Cost: carried_recall_queries exact scans per new snapshot, on the polling thread (about 1 ms
  // each per 50k words of dim 100).
  double min_carried_recall = 0.95;
  size_t carried_recall_queries = 50;
  // Seconds at least between two index builds while snapshots keep coming (also at least the
  // last build's duration; only the latter once more than 2% of the served words are newer than
  // the index); meanwhile the newest index is carried over to each new snapshot.
  double index_rebuild_interval_s = 30;
  // A directory where each built index is saved (streamvec-index.hnsw and its .json, replaced
  // by every build) and where an index is looked for before one is built: a server restarted
  // on the same snapshot loads it (a second, where a build of 220k words takes about 13) once
  // its recall@10 on the snapshot reaches min_carried_recall. Several servers of one state may
  // share it. Empty: indexes are only built, never saved.
  std::string index_dir;
  // Asked before each index build, on the index thread (must be thread-safe and fast): true
  // while the process's trainer is saturated (`streamvec run`: it seldom waits for messages),
  // so that the build waits and training keeps the cores. Recall does not suffer meanwhile:
  // words that no index holds are scanned exactly (all of them before the first build). A build
  // waits at most index_max_defer_s seconds. Unset: builds never wait.
  std::function<bool()> defer_index_builds;
  double index_max_defer_s = 60;
  // Priority of the index and polling threads: index builds and snapshot preparation yield the
  // cores to requests (LowerThreadPriority, base/thread_priority.h: nice value 0..19, a 0.2 ms
  // time slice and, under BackgroundPolicy::kIdle, SCHED_IDLE).
  int index_nice = 10;
  BackgroundPolicy index_policy = BackgroundPolicy::kNice;

  // --- quality per snapshot (eval/, before the snapshot is swapped in) ---
  std::vector<std::string> similarity_files;  // word-pair files (WS-353, MEN...); checked at Start
  std::string analogy_file;                   // questions-words.txt format; empty: none
  size_t analogy_restrict_vocab = 30000;      // as `streamvec eval --restrict`
  int eval_threads = 1;                       // threads scoring analogies
  size_t pip_top_words = 10000;  // PIP loss vs the previous snapshot over its first N shared words
  // Refuse to serve a snapshot whose first similarity file's Spearman falls by more than this
  // from the served snapshot's (logged, counted in streamvec_quality_gate_rejections_total). < 0:
  // off. Needs similarity_files.
  double quality_gate_drop = -1;

  // --- word history (GET /v1/words/{w}/history) ---
  size_t history_snapshots = 4;         // older snapshots kept in memory and aligned (0: none)
  size_t procrustes_top_words = 10000;  // shared words (most frequent first) fitting a rotation

  // --- pinned queries (?snapshot=N on every query route) ---
  // Published snapshots outside the served one and its history that are loaded on demand for a
  // pinned request and kept (least recently used evicted), each about 2 x rows x dim floats.
  // 0: none are loaded; pins reach the served snapshot and the history_snapshots ones only.
  size_t pinned_snapshots = 2;

  // Folder holding the dashboard (index.html, dashboard.js and node_modules/uplot); empty: GET /
  // and /static/... answer 404.
  std::string web_root = DefaultWebRoot();
};

// Sizes cpprestsdk's process-wide thread pool (its default is 40 threads), which serves every
// listener of the process. Call once, before the first Server::Start: on 2 cores, fewer threads
// answer more requests per second (8 threads beat 40 under wrk). Errors: InvalidArgument for
// 0 or more than 1024; FailedPrecondition once the pool has started.
Status InitializeHttpThreads(size_t threads);

class Server {
 public:
  // Loads the newest published snapshot of options.state_dir if there is one (a missing one is
  // not an error: the server answers 503 until a snapshot appears), starts listening on
  // http://host:port/ and starts polling for newer snapshots. Returns once it accepts requests.
  // Errors: InvalidArgument naming the option (empty state_dir or host, port outside [0, 65535],
  // poll_interval_s not > 0, a similarity/analogy file that does not exist, a quality gate
  // without similarity files); IoError naming host:port when it cannot listen (port in use,
  // address not local).
  static StatusOr<std::unique_ptr<Server>> Start(const ServeOptions& options);

  // The same, serving snapshots from `source` instead of options.state_dir (which is ignored):
  // for callers that publish snapshots in memory, and for tests.
  static StatusOr<std::unique_ptr<Server>> Start(const ServeOptions& options,
                                                 std::shared_ptr<SnapshotSource> source);

  ~Server();  // Stop()s.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The port listened on (the picked one when ServeOptions::port was 0).
  int port() const;
  // Version of the snapshot being served; 0 until the first one is loaded.
  uint64_t snapshot_version() const;
  // Stops polling for snapshots, waits (at most 2 s) until the requests already taken are answered
  // and their replies written, and closes the listener. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SERVER_H_

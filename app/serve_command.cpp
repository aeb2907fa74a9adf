// streamvec serve --state DIR --http HOST:PORT [options]: the REST API over a state directory's
// published snapshots (api/README.md, docs/serving.md), until SIGINT or SIGTERM.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "host_port.h"
#include "server_flags.h"
#include "streamvec/api/server.h"

namespace streamvec::app {
namespace {

struct ServeFlags {
  // cpprestsdk's thread pool: one thread a core measured best on 2 cores (lookups 5.8k -> 16k
  // req/s, most_similar p99 14 -> 4.5 ms with wrk -c16 against 40 threads); 0: its default, 40.
  size_t http_threads = std::max(2u, std::thread::hardware_concurrency());
  std::vector<std::string> state;  // one, or one per parameter-node shard (their union)
  std::string http = "127.0.0.1:8000";
  double poll_interval_s = 0.5;
  std::string admin_token_file;
  std::string cors_origin;
  std::vector<std::string> similarity;
  std::string analogy;
  size_t analogy_restrict = 30000;
  double gate_drop = -1;
  size_t exact_max_words = 20000;
  int hnsw_ef = 120;
  // Every core: a serve process has no trainer beside it (run keeps 1), and two threads build
  // the index of 220k words in about half the time of one (bench/knn_bench.py).
  int index_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double index_rebuild_s = 30;
  double min_carried_recall = 0.95;
  std::string index_dir;  // --index-dir
  size_t history = 4;
  size_t pinned_snapshots = 2;
  std::string web_root = api::DefaultWebRoot();
};

int RunServe(const ServeFlags& flags) {
  api::ServeOptions options;
  options.state_dir = flags.state.front();
  options.poll_interval_s = flags.poll_interval_s;
  options.cors_origin = flags.cors_origin;
  options.similarity_files = flags.similarity;
  options.analogy_file = flags.analogy;
  options.analogy_restrict_vocab = flags.analogy_restrict;
  options.quality_gate_drop = flags.gate_drop;
  options.exact_max_words = flags.exact_max_words;
  options.hnsw_ef_search = flags.hnsw_ef;
  options.index_threads = flags.index_threads;
  options.index_rebuild_interval_s = flags.index_rebuild_s;
  options.min_carried_recall = flags.min_carried_recall;
  options.index_dir = flags.index_dir;
  options.history_snapshots = flags.history;
  options.pinned_snapshots = flags.pinned_snapshots;
  options.web_root = flags.web_root;
  // A file or the environment, not a flag value: a token on the command line is visible in `ps`.
  if (std::string error;
      !ResolveAdminToken(flags.admin_token_file, "", &options.admin_token, &error)) {
    std::fprintf(stderr, "streamvec serve: %s\n", error.c_str());
    return 2;
  }
  if (!ParseHostPort(flags.http, &options.host, &options.port)) {
    std::fprintf(stderr,
                 "streamvec serve: --http: expected HOST:PORT (e.g. 127.0.0.1:8000), got '%s'\n",
                 flags.http.c_str());
    return 2;
  }
  if (!(flags.poll_interval_s > 0)) {
    std::fprintf(stderr, "streamvec serve: --poll-interval: must be > 0 seconds\n");
    return 2;
  }
  // Block the stop signals before any thread starts, so every thread inherits the mask and this
  // one receives them with sigtimedwait.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  if (flags.http_threads > 0) {
    if (Status s = api::InitializeHttpThreads(flags.http_threads); !s.ok()) {
      std::fprintf(stderr, "streamvec: %s\n", s.message().c_str());
      return 2;
    }
  }
  StatusOr<std::unique_ptr<api::Server>> server =
      flags.state.size() == 1
          ? api::Server::Start(options)
          : api::Server::Start(options, api::NewShardedStateDirSnapshotSource(flags.state));
  if (!server.ok()) {
    std::fprintf(stderr, "streamvec serve: %s\n", server.status().ToString().c_str());
    return server.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const std::string host =
      options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
  const std::string url = "http://" + host + ":" + std::to_string((*server)->port());
  bool announced = false;
  if ((*server)->snapshot_version() == 0) {
    std::printf("listening on %s: waiting for a first snapshot in %s\n", url.c_str(),
                options.state_dir.c_str());
    std::fflush(stdout);
  }
  while (true) {
    if (!announced && (*server)->snapshot_version() > 0) {
      std::printf("serving %s (snapshot %llu)\n", url.c_str(),
                  static_cast<unsigned long long>((*server)->snapshot_version()));
      if (!flags.web_root.empty()) {
        std::printf("dashboard %s/ from %s\n", url.c_str(), flags.web_root.c_str());
      }
      std::fflush(stdout);
      announced = true;
    }
    const timespec wait = {0, 100 * 1000 * 1000};
    const int sig = sigtimedwait(&stop, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) break;
  }
  (*server)->Stop();
  std::fprintf(stderr, "streamvec serve: stopped\n");
  return 0;
}

}  // namespace

void RegisterServeCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = root.add_subcommand(
      "serve",
      "Serve vectors, neighbours and similarities over HTTP from a state directory's "
      "newest snapshot (hot-swapped as a trainer publishes)");
  cmd->add_option("--state", flags->state,
                  "State directory a trainer or a parameter node writes (may not exist yet); "
                  "repeat it once per parameter-node shard to serve their union")
      ->required();
  AddHttpThreadsFlag(cmd, &flags->http_threads);
  cmd->add_option("--http", flags->http, "HOST:PORT to listen on (PORT 0 picks a free one)")
      ->capture_default_str();
  cmd->add_option("--poll-interval", flags->poll_interval_s,
                  "Seconds between checks for a newer snapshot")
      ->capture_default_str();
  AddAdminTokenFileFlag(cmd, &flags->admin_token_file);
  cmd->add_option(
      "--cors-origin", flags->cors_origin,
      "Allow browser pages from this origin (Access-Control-Allow-Origin; default off)");
  cmd->add_option("--similarity", flags->similarity,
                  "Word-pair file scored on every snapshot (repeatable; as streamvec eval)");
  cmd->add_option("--analogy", flags->analogy, "Analogy file scored on every snapshot");
  cmd->add_option("--analogy-restrict", flags->analogy_restrict,
                  "Analogies: only the N most frequent words")
      ->capture_default_str();
  cmd->add_option("--quality-gate-ws353-drop", flags->gate_drop,
                  "Refuse a snapshot whose Spearman on the first --similarity file falls by more "
                  "than this from the served one (default off)");
  cmd->add_option("--exact-max-words", flags->exact_max_words,
                  "Exact neighbour scan up to this vocabulary size; an HNSW index above")
      ->capture_default_str();
  AddIndexFlags(cmd, &flags->hnsw_ef, &flags->index_rebuild_s, &flags->index_dir,
                &flags->min_carried_recall);
  cmd->add_option("--index-threads", flags->index_threads,
                  "Threads building an HNSW index (default: one a core)")
      ->check(CLI::Range(1, 1024));  // no default shown: it depends on the machine
  cmd->add_option("--history", flags->history, "Older snapshots kept for /v1/words/{w}/history")
      ->capture_default_str();
  AddPinnedSnapshotsFlag(cmd, &flags->pinned_snapshots);
  // No default shown: it depends on where the binary is (installed or in a build folder).
  cmd->add_option("--web-root", flags->web_root,
                  "Folder of the dashboard (default: share/streamvec/web above the binary's "
                  "folder, installed or in the build folder, else the source tree's web/)");
  cmd->callback([flags, exit_code]() { *exit_code = RunServe(*flags); });
}

}  // namespace streamvec::app

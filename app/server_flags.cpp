#include "server_flags.h"

namespace streamvec::app {

void AddHttpThreadsFlag(CLI::App* cmd, size_t* http_threads) {
  cmd->add_option(
         "--http-threads", *http_threads,
         "Threads answering HTTP requests (default: one a core; 0: cpprestsdk's default, 40)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
}

void AddIndexFlags(CLI::App* cmd, int* hnsw_ef, double* index_rebuild_s) {
  cmd->add_option("--hnsw-ef", *hnsw_ef, "HNSW search candidate list (recall vs speed)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--index-rebuild-interval", *index_rebuild_s,
                  "Seconds at least between HNSW rebuilds while snapshots keep coming (each new "
                  "snapshot carries the last index over meanwhile)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace streamvec::app

#include "server_flags.h"

#include <cstdlib>
#include <fstream>

namespace streamvec::app {

void AddHttpThreadsFlag(CLI::App* cmd, size_t* http_threads) {
  cmd->add_option(
         "--http-threads", *http_threads,
         "Threads answering HTTP requests (default: one a core; 0: cpprestsdk's default, 40)")
      ->check(CLI::Range(0, 1024));  // no default shown: it depends on the machine
}

void AddIndexFlags(CLI::App* cmd, int* hnsw_ef, double* index_rebuild_s, std::string* index_dir,
                   double* min_carried_recall) {
  cmd->add_option("--hnsw-ef", *hnsw_ef, "HNSW search candidate list (recall vs speed)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--index-rebuild-interval", *index_rebuild_s,
                  "Seconds at least between HNSW rebuilds while snapshots keep coming (each new "
                  "snapshot carries the last index over meanwhile)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--index-dir", *index_dir,
                  "Save each built HNSW index here (one file, replaced) and load it instead of "
                  "building when the served snapshot is the one it was built for, as after a "
                  "restart (default: never saved)");
  cmd->add_option("--min-carried-recall", *min_carried_recall,
                  "A new snapshot whose carried-over index has a lower recall@10 on it (against "
                  "the exact scan, 50 sampled words) is served by the exact scan until a fresh "
                  "index is built (0: always carry)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

void AddPinnedSnapshotsFlag(CLI::App* cmd, size_t* pinned_snapshots) {
  cmd->add_option("--pinned-snapshots", *pinned_snapshots,
                  "Older published snapshots loaded on demand for ?snapshot=N queries and kept "
                  "in memory, least recently used evicted (each as large as a served snapshot; "
                  "0: pins reach only the served snapshot and its --history)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
}

void AddAdminTokenFileFlag(CLI::App* cmd, std::string* file) {
  cmd->add_option("--admin-token-file", *file,
                  std::string("File whose first line is the bearer token of POST /v1/admin/* "
                              "(else $") +
                      kAdminTokenEnv + "; neither: admin routes disabled, 403)");
}

bool ResolveAdminToken(const std::string& file, const std::string& flag_token, std::string* token,
                       std::string* error) {
  token->clear();
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in || !std::getline(in, *token) || token->empty()) {
      *error = "--admin-token-file: cannot read a token from '" + file + "'";
      return false;
    }
    return true;
  }
  if (!flag_token.empty()) {
    *token = flag_token;
    return true;
  }
  if (const char* env = std::getenv(kAdminTokenEnv); env != nullptr) *token = env;
  return true;
}

}  // namespace streamvec::app

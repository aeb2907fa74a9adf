// Flags of the REST server that `serve` and `run` share (same names, ranges and help).
#ifndef STREAMVEC_APP_SERVER_FLAGS_H_
#define STREAMVEC_APP_SERVER_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

namespace streamvec::app {

// --http-threads: threads answering requests, in [0, 1024] (0: cpprestsdk's default, 40).
void AddHttpThreadsFlag(CLI::App* cmd, size_t* http_threads);

// --hnsw-ef (search candidate list, in [1, 100000]) and --index-rebuild-interval (seconds, >= 0)
// of the served HNSW index (api::ServeOptions::hnsw_ef_search, index_rebuild_interval_s),
// --index-dir (index_dir) and --min-carried-recall (min_carried_recall).
void AddIndexFlags(CLI::App* cmd, int* hnsw_ef, double* index_rebuild_s, std::string* index_dir,
                   double* min_carried_recall);

// --pinned-snapshots N: older published snapshots loaded on demand for ?snapshot=N requests
// and kept (api::ServeOptions::pinned_snapshots), in [0, 1000].
void AddPinnedSnapshotsFlag(CLI::App* cmd, size_t* pinned_snapshots);

// Environment variable holding the admin routes' bearer token (used when no flag gives one).
inline constexpr char kAdminTokenEnv[] = "STREAMVEC_ADMIN_TOKEN";

// --admin-token-file FILE: the bearer token of POST /v1/admin/* is the file's first line, so it
// is not on the command line, where every user sees it in `ps`.
void AddAdminTokenFileFlag(CLI::App* cmd, std::string* file);

// The admin token: the first line of `file` if given, else `flag_token` (run's --admin-token,
// visible in `ps`), else $STREAMVEC_ADMIN_TOKEN, else empty (admin routes off). False, with
// *error naming the file, when the file cannot be read or its first line is empty.
bool ResolveAdminToken(const std::string& file, const std::string& flag_token, std::string* token,
                       std::string* error);

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_SERVER_FLAGS_H_

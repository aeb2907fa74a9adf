// Flags of the REST server that `serve` and `run` share (same names, ranges and help).
#ifndef STREAMVEC_APP_SERVER_FLAGS_H_
#define STREAMVEC_APP_SERVER_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstddef>

namespace streamvec::app {

// --http-threads: threads answering requests, in [0, 1024] (0: cpprestsdk's default, 40).
void AddHttpThreadsFlag(CLI::App* cmd, size_t* http_threads);

// --hnsw-ef (search candidate list, in [1, 100000]) and --index-rebuild-interval (seconds, >= 0)
// of the served HNSW index (api::ServeOptions::hnsw_ef_search, index_rebuild_interval_s).
void AddIndexFlags(CLI::App* cmd, int* hnsw_ef, double* index_rebuild_s);

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_SERVER_FLAGS_H_

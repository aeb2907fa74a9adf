// The REST routes of `streamvec serve`, independent of the HTTP library: server.cpp turns a
// cpprestsdk request into an HttpCall and writes back the HttpReply. Keeping cpprest out of here
// keeps the slow-compiling headers in one translation unit.
#ifndef STREAMVEC_API_SRC_ROUTES_H_
#define STREAMVEC_API_SRC_ROUTES_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "streamvec/api/serving_snapshot.h"

namespace streamvec::api {

// Largest request body accepted (bytes); larger bodies get 400 without being parsed.
inline constexpr size_t kMaxBodyBytes = size_t{1} << 20;
// Most words in one POST /v1/vectors, and the largest k of /v1/neighbors.
inline constexpr size_t kMaxBatchWords = 1000;
inline constexpr long kMaxNeighbors = 1000;

struct HttpCall {
  std::string method;  // "GET", "POST", ...
  std::string path;    // as sent: percent-encoded, without the query
  std::string query;   // as sent, without '?'
  std::string body;    // at most kMaxBodyBytes (see body_too_large)
  bool body_too_large = false;
};

struct HttpReply {
  int status = 200;
  std::string body;   // JSON
  std::string allow;  // for 405: the methods the route accepts
};

// Answers calls from the snapshot `current()` returns (null: none loaded yet) and, for
// /v1/snapshots, from `source`. Thread safety: Handle is safe from many threads at once as long
// as `current` and `source` are.
class Routes {
 public:
  Routes(std::function<std::shared_ptr<const ServingSnapshot>()> current,
         std::shared_ptr<SnapshotSource> source);

  // Never throws for bad input: every error is a JSON {"error": ...} reply.
  HttpReply Handle(const HttpCall& call) const;

 private:
  std::function<std::shared_ptr<const ServingSnapshot>()> current_;
  std::shared_ptr<SnapshotSource> source_;
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_ROUTES_H_

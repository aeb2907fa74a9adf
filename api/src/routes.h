// The REST routes of `streamvec serve`, independent of the HTTP library: server.cpp turns a
// cpprestsdk request into an HttpCall and writes back the HttpReply. Keeping cpprest out of here
// keeps the slow-compiling headers in one translation unit.
#ifndef STREAMVEC_API_SRC_ROUTES_H_
#define STREAMVEC_API_SRC_ROUTES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "retained.h"
#include "served.h"
#include "streamvec/api/server.h"
#include "streamvec/api/serving_snapshot.h"

namespace streamvec::api {

// Largest request body accepted (bytes); larger bodies get 400 without being parsed.
inline constexpr size_t kMaxBodyBytes = size_t{1} << 20;
// Most words in one POST /v1/vectors, and the largest k / topn of the neighbour routes.
inline constexpr size_t kMaxBatchWords = 1000;
inline constexpr long kMaxNeighbors = 1000;
// GET /v1/words: words per page (limit), its default, and the largest offset.
inline constexpr long kMaxWordsPage = 1000;
inline constexpr long kDefaultWordsPage = 100;
inline constexpr long kMaxWordsOffset = 1L << 31;

struct HttpCall {
  std::string method;         // "GET", "POST", ...
  std::string path;           // as sent: percent-encoded, without the query
  std::string query;          // as sent, without '?'
  std::string body;           // at most kMaxBodyBytes (see body_too_large)
  std::string authorization;  // the Authorization header, if any
  std::string if_none_match;  // the If-None-Match header, if any (entity tags, or *)
  bool body_too_large = false;
};

struct HttpReply {
  int status = 200;
  std::string body;                               // JSON unless content_type says otherwise
  std::string content_type = "application/json";  // MIME type of body
  std::string allow;                              // for 405: the methods the route accepts
  std::string route = "unknown";  // route template, the label of the request metrics
  std::string error_kind;         // empty on success; "bad_request", "not_found", ...
  uint64_t snapshot = 0;          // version the answer came from (0: not a snapshot's answer)
  // Entity tag of a 200 (quoted, as the ETag header carries it): the snapshot and a hash of the
  // body; a 304 carries the one it matched.
  std::string etag;
};

// What the routes read. All functions must be thread-safe.
struct RouteContext {
  std::function<std::shared_ptr<const Served>()> current;  // null: no snapshot loaded yet
  std::shared_ptr<SnapshotSource> source;                  // for /v1/snapshots
  const ServeOptions* options = nullptr;                   // hooks, token, web_root
  std::function<std::string()> metrics;                    // the whole /metrics text
  // Quality figures and promotion status of a snapshot this server prepared (null if none).
  std::function<nlohmann::json(uint64_t version)> evaluation_of;
  // Resolves ?snapshot=N to a retained older snapshot; null: only the served one is pinnable.
  RetainedSnapshots* retained = nullptr;
};

// Thread safety: Handle is safe from many threads at once.
class Routes {
 public:
  explicit Routes(RouteContext context);

  // Never throws for bad input: every error is a JSON {"error": ...} reply.
  HttpReply Handle(const HttpCall& call) const;

  // The OpenAPI 3.0 document of every route Handle dispatches.
  static nlohmann::json OpenApi();

 private:
  RouteContext ctx_;
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_ROUTES_H_

// libFuzzer target: the REST routes through their HTTP-free handler (api/src/routes.h: what
// server.cpp calls for every cpprestsdk request), serving two small snapshots (3 and 4 words of
// dim 3; the newer served, the older retained for ?snapshot=1) with an admin token set.
//
// Input: byte 0 picks the method (bits 0-2), the Authorization header (bits 3-4: none, the
// right token, a wrong one, garbage) and body_too_large (bit 5); the rest is
// "<path>\n<query>\n<If-None-Match>\n<body>" (missing parts empty).
//
// Handle must never throw or crash, and every reply must hold together: a status in 200..599;
// a JSON body parses (an error is an object with an "error" string); 405 names the allowed
// methods; 304 has no body; the Authorization header is never echoed; an admin hook runs only
// for a request that carried the right token.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "retained.h"
#include "routes.h"
#include "served.h"
#include "streamvec/api/serving_snapshot.h"

namespace {

using streamvec::Embeddings;
using streamvec::SnapshotInfo;
using streamvec::Status;
using streamvec::StatusOr;
using streamvec::api::ServingSnapshot;

constexpr std::string_view kToken = "s3cret-fuzz-token";

std::shared_ptr<const ServingSnapshot> Snapshot(uint64_t version, std::vector<std::string> words,
                                                std::vector<float> vectors) {
  Embeddings e;
  e.dim = 3;
  e.words = std::move(words);
  e.vectors.assign(vectors.begin(), vectors.end());
  std::vector<double> counts;
  for (size_t i = 0; i < e.words.size(); ++i) counts.push_back(100.0 / (i + 1));
  return std::make_shared<const ServingSnapshot>(
      std::move(e), SnapshotInfo{version, 1700000000.0 + version, "{\"fuzz\": true}"},
      std::move(counts));
}

// Both snapshots, published in memory.
class Source : public streamvec::api::SnapshotSource {
 public:
  Source()
      : old_(Snapshot(1, {"king", "queen", "man"}, {1, 0, 0, 0.9f, 0.1f, 0, 0, 1, 0})),
        new_(Snapshot(2, {"king", "queen", "naïve", "zero"},
                      {1, 0.1f, 0, 0.8f, 0.2f, 0, 0, 0, 1, 0, 0, 0})) {}
  StatusOr<std::vector<SnapshotInfo>> List() override {
    return std::vector<SnapshotInfo>{old_->info(), new_->info()};
  }
  StatusOr<std::shared_ptr<const ServingSnapshot>> LoadNewerThan(uint64_t version) override {
    if (version < 2) return new_;
    return std::shared_ptr<const ServingSnapshot>();
  }
  StatusOr<std::shared_ptr<const ServingSnapshot>> Load(uint64_t version) override {
    if (version == 1) return old_;
    if (version == 2) return new_;
    return Status::NotFound("snapshot " + std::to_string(version) + " is not published");
  }
  std::shared_ptr<const ServingSnapshot> old_, new_;
};

bool g_authorized = false;  // the current request carries the right token
int g_hook_calls = 0;

Status Hook() {
  if (!g_authorized) std::abort();  // an admin action without the token
  ++g_hook_calls;
  return g_hook_calls % 2 ? Status::Ok() : Status::FailedPrecondition("fuzz: hook refuses");
}

struct Fixture {
  Fixture() {
    options.admin_token = std::string(kToken);
    options.on_snapshot = Hook;
    options.on_pause_ingest = Hook;
    // on_resume_ingest unset: 501
    options.web_root = STREAMVEC_SOURCE_DIR "/web";
    source = std::make_shared<Source>();
    const std::shared_ptr<const streamvec::api::Served> first =
        streamvec::api::PrepareServed(source->old_, nullptr, options);
    served = streamvec::api::PrepareServed(source->new_, first.get(), options);
    retained = std::make_unique<streamvec::api::RetainedSnapshots>(source, 2);
    routes = std::make_unique<streamvec::api::Routes>(streamvec::api::RouteContext{
        [this] { return served; }, source, &options,
        [] {
          return std::string(
              "# HELP streamvec_up 1\n# TYPE streamvec_up gauge\n"
              "streamvec_up 1\n");
        },
        [](uint64_t version) {
          return version == 2 ? nlohmann::json{{"promoted", true}} : nlohmann::json(nullptr);
        },
        retained.get()});
  }
  streamvec::api::ServeOptions options;
  std::shared_ptr<Source> source;
  std::shared_ptr<const streamvec::api::Served> served;
  std::unique_ptr<streamvec::api::RetainedSnapshots> retained;
  std::unique_ptr<streamvec::api::Routes> routes;
};

std::string_view NextLine(std::string_view* rest) {
  const size_t eol = rest->find('\n');
  const std::string_view line = rest->substr(0, eol);
  *rest = eol == std::string_view::npos ? std::string_view() : rest->substr(eol + 1);
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* fixture = new Fixture();  // built once; never freed (the process ends)
  if (size == 0) return 0;
  static const char* const kMethods[] = {"GET",     "POST",  "PUT",   "DELETE",
                                         "OPTIONS", "TRACE", "PATCH", "HEAD"};
  streamvec::api::HttpCall call;
  call.method = kMethods[data[0] & 7];
  const int auth = (data[0] >> 3) & 3;
  call.authorization = auth == 1   ? "Bearer " + std::string(kToken)
                       : auth == 2 ? std::string("Bearer wrong")
                       : auth == 3 ? std::string("Basic czNjcmV0")
                                   : std::string();
  call.body_too_large = (data[0] & 0x20) != 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  call.path = NextLine(&rest);
  call.query = NextLine(&rest);
  call.if_none_match = NextLine(&rest);
  call.body = rest;
  g_authorized = auth == 1;

  streamvec::api::HttpReply r = fixture->routes->Handle(call);

  if (r.status < 200 || r.status > 599 || r.route.empty()) std::abort();
  if (r.status == 405 && r.allow.empty()) std::abort();
  if (r.status == 304 && !r.body.empty()) std::abort();
  // The Authorization header is never echoed (the request's own path or body may hold it).
  const std::string_view sent(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (sent.find(kToken) == std::string_view::npos && r.body.find(kToken) != std::string::npos) {
    std::abort();
  }
  // A body checked recently is not parsed again (the same errors and documents recur; parsing
  // them took a quarter of each run). A direct-mapped table: no allocation, which libFuzzer's
  // leak check would take for a leak to confirm by running the input again.
  static size_t checked[1 << 16];
  const size_t body_hash =
      (std::hash<std::string>()(r.body) ^ std::hash<std::string>()(r.content_type) * 31 ^
       static_cast<size_t>(r.status) * 1000003) |
      1;  // 0: an empty slot
  size_t& slot = checked[body_hash & ((1 << 16) - 1)];
  if (slot == body_hash) return 0;
  slot = body_hash;
  if (r.content_type == "application/json" && r.status != 304) {
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) std::abort();
    if (r.status >= 400 && (!j.is_object() || !j.contains("error") || !j["error"].is_string())) {
      std::abort();
    }
  }
  return 0;
}

// Helpers of the api/ tests: snapshots published in memory and a JSON client over real HTTP.
#ifndef STREAMVEC_TESTS_API_TEST_UTIL_H_
#define STREAMVEC_TESTS_API_TEST_UTIL_H_

#include <cpprest/http_client.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "streamvec/api/server.h"

namespace streamvec::api::testing_util {

using nlohmann::json;
namespace http = web::http;

// The "word" of each object of a JSON array (neighbour lists, results), in order.
inline std::vector<std::string> Words(const json& list) {
  std::vector<std::string> out;
  for (const json& n : list) out.push_back(n["word"].get<std::string>());
  return out;
}

// Snapshots published in memory (the seam the server offers instead of a state directory).
class MemorySource : public SnapshotSource {
 public:
  void Publish(Embeddings e, uint64_t version, std::string metadata = "{}",
               std::vector<double> counts = {}) {
    SnapshotInfo info{version, 1700000000.0 + version, std::move(metadata)};
    auto s = std::make_shared<const ServingSnapshot>(std::move(e), info, std::move(counts));
    std::lock_guard<std::mutex> lock(mu_);
    infos_.push_back(info);
    published_[version] = s;
    newest_ = std::move(s);
  }
  // What a state store's retention does to an old snapshot: no longer listed nor loadable.
  void Retire(uint64_t version) {
    std::lock_guard<std::mutex> lock(mu_);
    published_.erase(version);
    std::erase_if(infos_, [version](const SnapshotInfo& i) { return i.version == version; });
  }
  StatusOr<std::vector<SnapshotInfo>> List() override {
    std::lock_guard<std::mutex> lock(mu_);
    return infos_;
  }
  StatusOr<std::shared_ptr<const ServingSnapshot>> LoadNewerThan(uint64_t version) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (newest_ && newest_->version() > version) return newest_;
    return std::shared_ptr<const ServingSnapshot>();
  }
  StatusOr<std::shared_ptr<const ServingSnapshot>> Load(uint64_t version) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++loads_;
    const auto it = published_.find(version);
    if (it == published_.end()) {
      return Status::NotFound("snapshot " + std::to_string(version) + " is not published");
    }
    return it->second;
  }
  int loads() {
    std::lock_guard<std::mutex> lock(mu_);
    return loads_;
  }

 private:
  std::mutex mu_;
  std::vector<SnapshotInfo> infos_;
  std::map<uint64_t, std::shared_ptr<const ServingSnapshot>> published_;
  std::shared_ptr<const ServingSnapshot> newest_;
  int loads_ = 0;  // calls of Load
};

// Hand-made 3-d vectors whose neighbours are known.
inline Embeddings Toy(float scale = 1.0f) {
  Embeddings e;
  e.dim = 3;
  e.words = {"king", "queen", "man", "woman", "naïve", "c++", "zero", "a/b"};
  e.vectors = {1, 0, 0, 0.9f, 0.1f, 0,    0, 1, 0, 0.1f, 0.9f, 0,
               0, 0, 1, 0,    0.1f, 0.9f, 0, 0, 0, 0.5f, 0.5f, 0};
  for (float& v : e.vectors) v *= scale;
  return e;
}

struct Reply {
  int status = 0;
  json body;
  std::string allow;
};

class Client {
 public:
  explicit Client(int port) : client_("http://127.0.0.1:" + std::to_string(port)) {}
  Reply Call(const http::method& method, const std::string& path_and_query,
             const std::string& body = "", bool with_body = false, bool expect_json = true) {
    http::http_request request(method);
    request.set_request_uri(path_and_query);
    if (with_body) request.set_body(body, "application/json");
    http::http_response response = client_.request(request).get();
    Reply r;
    r.status = response.status_code();
    const std::string text = response.extract_utf8string(true).get();
    r.body = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (expect_json) {
      EXPECT_FALSE(r.body.is_discarded()) << "not JSON: " << text;
    }
    if (response.headers().has("Allow")) r.allow = response.headers()["Allow"];
    return r;
  }
  Reply Get(const std::string& path) { return Call(http::methods::GET, path); }
  Reply Post(const std::string& path, const std::string& body) {
    return Call(http::methods::POST, path, body, true);
  }
  // Raw reply: status, body text and headers.
  http::http_response Raw(const http::method& method, const std::string& path_and_query,
                          const std::string& authorization = "",
                          const std::string& if_none_match = "") {
    http::http_request request(method);
    request.set_request_uri(path_and_query);
    if (!authorization.empty()) request.headers().add("Authorization", authorization);
    if (!if_none_match.empty()) request.headers().add("If-None-Match", if_none_match);
    return client_.request(request).get();
  }

 private:
  http::client::http_client client_;
};

inline std::string Encode(const std::string& s) { return web::uri::encode_data_string(s); }

// Random rows (normal entries), words "w0", "w1", ...
inline Embeddings RandomEmbeddings(size_t rows, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Embeddings e;
  e.dim = dim;
  for (size_t i = 0; i < rows; ++i) e.words.push_back("w" + std::to_string(i));
  e.vectors.resize(rows * static_cast<size_t>(dim));
  for (float& v : e.vectors) v = normal(rng);
  return e;
}

// Polls `done` every 10 ms for up to 60 s (a bound, not a timing assertion); its last answer.
template <typename F>
bool WaitFor(F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// A server over a MemorySource on a free port of 127.0.0.1, with a client; the base of the tests.
class ServerFixture : public ::testing::Test {
 protected:
  void StartServer(ServeOptions options = {}) {
    options.port = 0;
    options.poll_interval_s = 0.02;
    StatusOr<std::unique_ptr<Server>> s = Server::Start(options, source_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    client_ = std::make_unique<Client>(server_->port());
  }
  std::shared_ptr<MemorySource> source_ = std::make_shared<MemorySource>();
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

}  // namespace streamvec::api::testing_util

#endif  // STREAMVEC_TESTS_API_TEST_UTIL_H_

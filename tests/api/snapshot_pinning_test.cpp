// Queries pinned to an older snapshot (?snapshot=N), the 404 of one no longer retained, and
// entity tags with conditional GET, over real HTTP on 127.0.0.1.

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.h"

namespace streamvec::api {
namespace {

using namespace testing_util;

constexpr int kDim = 8;
constexpr size_t kRows = 60;

// Snapshot v: its own random vectors (seed v), so every answer depends on the snapshot.
Embeddings Version(uint64_t v) { return RandomEmbeddings(kRows, kDim, static_cast<uint32_t>(v)); }

class SnapshotPinningTest : public ServerFixture {
 protected:
  // Publishes snapshots 1..n (the server, once started, follows them to n).
  void PublishUpTo(uint64_t n) {
    for (uint64_t v = 1; v <= n; ++v) source_->Publish(Version(v), v);
  }
  void PublishAndWait(uint64_t v) {
    source_->Publish(Version(v), v);
    ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == v; }));
  }
  // The server's /metrics sample `name` (no labels), or -1.
  double Metric(const std::string& name) {
    const std::string text = client_->Raw(http::methods::GET, "/metrics").extract_string().get();
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }
  std::string ETag(const std::string& path, int* status = nullptr,
                   const std::string& if_none_match = "", std::string* body = nullptr) {
    http::http_response r = client_->Raw(http::methods::GET, path, "", if_none_match);
    if (status != nullptr) *status = r.status_code();
    if (body != nullptr) *body = r.extract_utf8string(true).get();
    return r.headers().has("ETag") ? r.headers()["ETag"] : "";
  }
};

// Snapshots 1 and 2 stay in memory (the served snapshot's history): pinned answers are theirs,
// equal to an exact scan of their own vectors and different from the newest snapshot's.
TEST_F(SnapshotPinningTest, PinnedAnswersAreThatSnapshotsAndDifferFromTheNewest) {
  source_->Publish(Version(1), 1);
  StartServer();
  PublishAndWait(2);
  PublishAndWait(3);
  std::map<uint64_t, std::vector<std::string>> neighbours;
  for (uint64_t v = 1; v <= 3; ++v) {
    const Embeddings e = Version(v);
    const std::string pin = "&snapshot=" + std::to_string(v);
    Reply r = client_->Get("/v1/vectors/w5?snapshot=" + std::to_string(v));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body["snapshot"], v);
    for (int j = 0; j < kDim; ++j) EXPECT_FLOAT_EQ(r.body["vector"][j].get<float>(), e.row(5)[j]);
    r = client_->Get("/v1/neighbors?word=w5&k=5" + pin);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body["snapshot"], v);
    const ServingSnapshot reference(Version(v), SnapshotInfo{v, 0, "{}"});
    std::vector<std::string> want;
    for (const auto& n : reference.Neighbors(5, 5)) want.push_back(reference.word(n.row));
    EXPECT_EQ(Words(r.body["neighbors"]), want) << "snapshot " << v;
    neighbours[v] = want;
    r = client_->Get("/v1/similarity?w1=w5&w2=w6" + pin);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NEAR(r.body["similarity"].get<double>(), reference.Similarity(5, 6), 1e-6);
  }
  EXPECT_NE(neighbours[1], neighbours[3]);
  const Reply newest = client_->Get("/v1/neighbors?word=w5&k=5");
  EXPECT_EQ(newest.body["snapshot"], 3);
  EXPECT_EQ(Words(newest.body["neighbors"]), neighbours[3]);
  EXPECT_EQ(Metric("streamvec_pinned_snapshot_loads_total"), 0);  // all from memory

  // History pinned to snapshot 2: the older snapshot 1 only, with its own neighbours.
  const Reply h = client_->Get("/v1/words/w5/history?k=5&snapshot=2");
  ASSERT_EQ(h.status, 200) << h.body;
  EXPECT_EQ(h.body["snapshot"], 2);
  ASSERT_EQ(h.body["history"].size(), 1u);
  EXPECT_EQ(h.body["history"][0]["snapshot"], 1);
  EXPECT_EQ(Words(h.body["history"][0]["neighbors"]), neighbours[1]);
  EXPECT_EQ(Words(h.body["neighbors"]), neighbours[2]);
  EXPECT_EQ(client_->Get("/v1/words/w5/history").body["history"].size(), 2u);
}

// Every route that answers from a snapshot takes ?snapshot=N, says which snapshot answered and
// tags the answer with it; the OpenAPI document says so too.
TEST_F(SnapshotPinningTest, EveryQueryRouteTakesASnapshotAndNamesIt) {
  source_->Publish(Version(1), 1);
  StartServer();
  PublishAndWait(2);
  const std::vector<std::string> gets = {
      "/v1/vectors/w1",
      "/v1/neighbors?word=w1",
      "/v1/most_similar?positive=w1",
      "/v1/analogy?a=w1&b=w2&c=w3",
      "/v1/similarity?w1=w1&w2=w2",
      "/v1/doesnt_match?words=w1,w2,w3",
      "/v1/n_similarity?ws1=w1&ws2=w2",
      "/v1/most_similar_cosmul?positive=w1",
      "/v1/rank?w1=w1&w2=w2",
      "/v1/words",
      "/v1/words/w1",
      "/v1/words/w1/history",
  };
  for (const std::string& path : gets) {
    const std::string sep = path.find('?') == std::string::npos ? "?" : "&";
    for (uint64_t v : {1, 2}) {
      int status = 0;
      std::string body;
      const std::string tag =
          ETag(path + sep + "snapshot=" + std::to_string(v), &status, "", &body);
      ASSERT_EQ(status, 200) << path << " " << body;
      EXPECT_EQ(json::parse(body)["snapshot"], v) << path;
      EXPECT_EQ(tag.rfind("\"" + std::to_string(v) + "-", 0), 0u) << path << " " << tag;
    }
    EXPECT_EQ(client_->Get(path).body["snapshot"], 2) << path;
  }
  json vector = json::array();
  for (int j = 0; j < kDim; ++j) vector.push_back(j + 1);
  const std::vector<std::pair<std::string, std::string>> posts = {
      {"/v1/vectors", R"({"words": ["w1"]})"},
      {"/v1/neighbors", json{{"vector", vector}}.dump()},
  };
  for (const auto& [path, body] : posts) {
    const Reply r = client_->Post(path + "?snapshot=1", body);
    ASSERT_EQ(r.status, 200) << path << " " << r.body;
    EXPECT_EQ(r.body["snapshot"], 1) << path;
  }

  const Reply doc = client_->Get("/openapi.json");
  ASSERT_EQ(doc.status, 200);
  for (const char* path : {"/v1/vectors/{word}", "/v1/words", "/v1/words/{word}",
                           "/v1/most_similar", "/v1/words/{word}/history"}) {
    const json& op = doc.body["paths"][path]["get"];
    bool pinnable = false;
    for (const json& p : op["parameters"]) pinnable |= p["name"] == "snapshot";
    EXPECT_TRUE(pinnable) << path;
    EXPECT_TRUE(op["responses"].contains("304")) << path;
    EXPECT_TRUE(op["responses"]["200"]["headers"].contains("ETag")) << path;
  }
  EXPECT_EQ(doc.body["paths"]["/v1/words"]["get"]["parameters"][1]["schema"]["maximum"], 1000);
}

// Beyond the history, published snapshots load on demand into an LRU cache of
// pinned_snapshots; one retired by the writer (or newer than the served one) is a 404 that
// names it and lists the retained ones.
TEST_F(SnapshotPinningTest, OlderSnapshotsLoadOnDemandAndAnUnretainedOneIs404) {
  PublishUpTo(4);
  source_->Retire(1);
  ServeOptions options;
  options.history_snapshots = 0;
  options.pinned_snapshots = 1;
  StartServer(options);
  ASSERT_EQ(server_->snapshot_version(), 4u);

  Reply r = client_->Get("/v1/vectors/w3?snapshot=1");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body["error"].get<std::string>().find("snapshot 1 "), std::string::npos) << r.body;
  EXPECT_EQ(r.body["snapshot"], 1);
  EXPECT_EQ(r.body["retained"], json::parse("[2, 3, 4]"));
  r = client_->Get("/v1/most_similar?positive=w3&snapshot=9");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body["error"].get<std::string>().find("snapshot 9 "), std::string::npos) << r.body;

  auto vector_of = [&](uint64_t v) {
    const Reply got = client_->Get("/v1/vectors/w3?snapshot=" + std::to_string(v));
    EXPECT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(got.body["snapshot"], v);
    return got.body["vector"][0].get<float>();
  };
  EXPECT_FLOAT_EQ(vector_of(2), Version(2).row(3)[0]);
  EXPECT_FLOAT_EQ(vector_of(2), Version(2).row(3)[0]);  // cached: no second load
  EXPECT_EQ(Metric("streamvec_pinned_snapshot_loads_total"), 1);
  EXPECT_FLOAT_EQ(vector_of(3), Version(3).row(3)[0]);  // evicts 2 (one kept)
  EXPECT_FLOAT_EQ(vector_of(2), Version(2).row(3)[0]);  // loaded again
  EXPECT_EQ(Metric("streamvec_pinned_snapshot_loads_total"), 3);
  EXPECT_EQ(Metric("streamvec_pinned_snapshots_loaded"), 1);
  EXPECT_FLOAT_EQ(vector_of(4), Version(4).row(3)[0]);  // the served one

  // Requests for one snapshot at once share its load; none fails.
  source_->Publish(Version(5), 5);
  ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == 5; }));
  std::vector<std::thread> clients;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      Client c(server_->port());
      const Reply got = c.Get("/v1/vectors/w3?snapshot=3");
      if (got.status != 200 || got.body["snapshot"] != 3) failures.fetch_add(1);
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(SnapshotPinningTest, WithoutPinnedSnapshotsOnlyMemoryIsReachable) {
  PublishUpTo(3);
  ServeOptions options;
  options.history_snapshots = 0;
  options.pinned_snapshots = 0;
  StartServer(options);
  const Reply r = client_->Get("/v1/words?snapshot=2");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.body["retained"], json::parse("[3]"));
  EXPECT_EQ(source_->loads(), 0);
}

TEST_F(SnapshotPinningTest, EntityTagsAndConditionalGet) {
  source_->Publish(Version(1), 1);
  StartServer();
  int status = 0;
  std::string body;
  const std::string path = "/v1/neighbors?word=w7&k=4";
  const std::string first = ETag(path, &status);
  ASSERT_EQ(status, 200);
  ASSERT_EQ(first.rfind("\"1-", 0), 0u) << first;
  EXPECT_EQ(ETag(path, &status), first);  // the same answer, the same tag

  for (const std::string& matching : {first, "W/" + first, "\"x\", " + first, std::string("*")}) {
    const std::string tag = ETag(path, &status, matching, &body);
    EXPECT_EQ(status, 304) << matching;
    EXPECT_TRUE(body.empty()) << body;
    EXPECT_EQ(tag, first);
  }
  ETag(path, &status, "\"1-0000000000000000\"", &body);
  EXPECT_EQ(status, 200);
  EXPECT_FALSE(json::parse(body)["neighbors"].empty());
  // Another URL, another answer: another tag.
  EXPECT_NE(ETag("/v1/neighbors?word=w7&k=5", &status), first);

  // A new snapshot: the client's tag no longer matches, the answer comes with the new one.
  PublishAndWait(2);
  const std::string second = ETag(path, &status, first, &body);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(second.rfind("\"2-", 0), 0u) << second;
  EXPECT_EQ(json::parse(body)["snapshot"], 2);
  // Pinned to snapshot 1 the answer (and its tag) is still the first one.
  EXPECT_EQ(ETag(path + "&snapshot=1", &status, first), first);
  EXPECT_EQ(status, 304);
  // Errors carry no tag and are never 304.
  EXPECT_EQ(ETag("/v1/neighbors?word=nope", &status, "*"), "");
  EXPECT_EQ(status, 404);
  // POST answers carry a tag but If-None-Match never turns them into 304.
  http::http_request post(http::methods::POST);
  post.set_request_uri("/v1/vectors");
  post.set_body(std::string(R"({"words": ["w1"]})"), "application/json");
  post.headers().add("If-None-Match", "*");
  http::client::http_client raw("http://127.0.0.1:" + std::to_string(server_->port()));
  const http::http_response p = raw.request(post).get();
  EXPECT_EQ(p.status_code(), 200);
  EXPECT_TRUE(p.headers().has("ETag"));
}

}  // namespace
}  // namespace streamvec::api

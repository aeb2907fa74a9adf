// Operating the server over real HTTP: /metrics (Prometheus text), admin routes and their token,
// CORS, /openapi.json against the dispatcher, the HNSW index per snapshot, quality per snapshot
// and its gate, and a word's history across Procrustes-aligned snapshots.

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "streamvec/eval/neighbors.h"
#include "streamvec/eval/pip.h"
#include "streamvec/eval/similarity.h"
#include "test_util.h"

namespace streamvec::api {
namespace {

using namespace testing_util;

class OperationsTest : public ServerFixture {
 protected:
  std::string Text(const std::string& path, int* status = nullptr,
                   http::http_headers* headers = nullptr) {
    http::http_response r = client_->Raw(http::methods::GET, path);
    if (status != nullptr) *status = r.status_code();
    if (headers != nullptr) *headers = r.headers();
    return r.extract_utf8string(true).get();
  }
};

// Parses Prometheus text: sample name (with labels) -> value; checks that every sample belongs to
// a family with one HELP and one TYPE line given before it.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.starts_with("# HELP ")) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(helps.insert(name).second) << "two HELP lines for " << name;
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      std::istringstream f(line.substr(7));
      std::string name, type;
      f >> name >> type;
      EXPECT_TRUE(types.emplace(name, type).second) << "two TYPE lines for " << name;
      EXPECT_TRUE(type == "gauge" || type == "counter" || type == "histogram") << line;
      continue;
    }
    const size_t space = line.rfind(' ');
    const std::string key = line.substr(0, space);
    std::string family = key.substr(0, key.find('{'));
    EXPECT_TRUE(family.starts_with("streamvec_")) << line;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (family.ends_with(suffix) && !types.count(family)) {
        family = family.substr(0, family.size() - std::string(suffix).size());
      }
    }
    EXPECT_TRUE(types.count(family)) << "no TYPE before " << line;
    EXPECT_TRUE(helps.count(family)) << "no HELP before " << line;
    samples[key] = std::stod(line.substr(space + 1));
  }
  return samples;
}

TEST_F(OperationsTest, MetricsArePrometheusTextWithRequestsSnapshotAndExtraLines) {
  source_->Publish(Toy(), 3, R"({"words_trained": 1234, "evictions": 5})");
  ServeOptions options;
  options.extra_metrics = [] {
    return std::string(
        "# HELP streamvec_train_loss Mean SGNS loss.\n# TYPE streamvec_train_loss gauge\n"
        "streamvec_train_loss 2.5\n");
  };
  StartServer(options);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(client_->Get("/v1/vectors/king").status, 200);
  EXPECT_EQ(client_->Get("/v1/vectors/emperor").status, 404);
  EXPECT_EQ(client_->Get("/v1/neighbors?word=king&k=0").status, 400);
  EXPECT_EQ(client_->Get("/nowhere").status, 404);
  int status = 0;
  http::http_headers headers;
  const std::string text = Text("/metrics", &status, &headers);
  ASSERT_EQ(status, 200);
  EXPECT_NE(headers.content_type().find("text/plain"), std::string::npos);
  const std::map<std::string, double> m = ParseMetrics(text);
  EXPECT_EQ(m.at("streamvec_snapshot_version"), 3);
  EXPECT_EQ(m.at("streamvec_vocabulary_size"), 8);
  EXPECT_EQ(m.at("streamvec_snapshot_words_trained"), 1234);
  EXPECT_EQ(m.at("streamvec_snapshot_evictions"), 5);
  EXPECT_GE(m.at("streamvec_snapshot_age_seconds"), 0);
  EXPECT_EQ(m.at("streamvec_index_recall_at_10"), 1);  // exact search below the threshold
  EXPECT_EQ(m.at("streamvec_train_loss"), 2.5);
  EXPECT_EQ(m.at(R"(streamvec_http_requests_total{route="/v1/vectors/{word}",status="200"})"), 3);
  EXPECT_EQ(m.at(R"(streamvec_http_requests_total{route="/v1/vectors/{word}",status="404"})"), 1);
  EXPECT_EQ(m.at(R"(streamvec_http_requests_total{route="unknown",status="404"})"), 1);
  EXPECT_EQ(m.at(R"(streamvec_http_errors_total{kind="unknown_word"})"), 1);
  EXPECT_EQ(m.at(R"(streamvec_http_errors_total{kind="bad_request"})"), 1);
  EXPECT_EQ(m.at(R"(streamvec_http_errors_total{kind="unknown_route"})"), 1);
  EXPECT_EQ(m.at(R"(streamvec_http_request_duration_seconds_count{route="/v1/vectors/{word}"})"),
            4);
  EXPECT_EQ(
      m.at(
          R"(streamvec_http_request_duration_seconds_bucket{route="/v1/vectors/{word}",le="+Inf"})"),
      4);
}

TEST_F(OperationsTest, AdminRoutesNeedTheBearerTokenAndCallTheHooks) {
  source_->Publish(Toy(), 1);
  {
    StartServer();  // no token configured: disabled
    EXPECT_EQ(client_->Raw(http::methods::POST, "/v1/admin/snapshot", "Bearer x").status_code(),
              403);
    server_.reset();
  }
  std::atomic<int> snapshots{0}, pauses{0};
  ServeOptions options;
  options.admin_token = "s3cret";
  options.on_snapshot = [&] {
    ++snapshots;
    return Status::Ok();
  };
  options.on_pause_ingest = [&] {
    ++pauses;
    return Status::IoError("broker down");
  };
  StartServer(options);
  EXPECT_EQ(client_->Raw(http::methods::POST, "/v1/admin/snapshot").status_code(), 401);
  EXPECT_EQ(client_->Raw(http::methods::POST, "/v1/admin/snapshot", "Bearer wrong").status_code(),
            401);
  EXPECT_EQ(client_->Raw(http::methods::POST, "/v1/admin/snapshot", "Bearer s3cre").status_code(),
            401);
  EXPECT_EQ(snapshots, 0);
  EXPECT_EQ(client_->Raw(http::methods::POST, "/v1/admin/snapshot", "Bearer s3cret").status_code(),
            200);
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(
      client_->Raw(http::methods::POST, "/v1/admin/ingest/pause", "Bearer s3cret").status_code(),
      500);  // the hook's error
  EXPECT_EQ(pauses, 1);
  EXPECT_EQ(
      client_->Raw(http::methods::POST, "/v1/admin/ingest/resume", "Bearer s3cret").status_code(),
      501);  // no hook
  EXPECT_EQ(client_->Raw(http::methods::GET, "/v1/admin/snapshot", "Bearer s3cret").status_code(),
            405);
  // Read routes stay open.
  EXPECT_EQ(client_->Get("/v1/vectors/king").status, 200);
}

TEST_F(OperationsTest, CorsIsOffByDefaultAndOnWithAnOrigin) {
  source_->Publish(Toy(), 1);
  StartServer();
  http::http_response r = client_->Raw(http::methods::GET, "/healthz");
  EXPECT_FALSE(r.headers().has("Access-Control-Allow-Origin"));
  EXPECT_EQ(client_->Raw(http::methods::OPTIONS, "/v1/vectors/king").status_code(), 405);
  // TRACE is not answered by the listener with an echo of the request's credentials.
  {
    http::http_response t =
        client_->Raw(http::methods::TRCE, "/v1/vectors/king", "Bearer s3cret");
    EXPECT_EQ(t.status_code(), 405);
    const std::string body = t.extract_string().get();
    EXPECT_EQ(body.find("s3cret"), std::string::npos) << body;
    EXPECT_NE(body.find("\"error\""), std::string::npos) << body;
  }
  server_.reset();
  ServeOptions options;
  options.cors_origin = "https://example.org";
  StartServer(options);
  r = client_->Raw(http::methods::GET, "/healthz");
  EXPECT_EQ(r.headers()["Access-Control-Allow-Origin"], "https://example.org");
  r = client_->Raw(http::methods::OPTIONS, "/v1/vectors/king");
  EXPECT_EQ(r.status_code(), 204);
  EXPECT_EQ(r.headers()["Access-Control-Allow-Origin"], "https://example.org");
}

TEST_F(OperationsTest, OpenApiDescribesEveryDispatchedRoute) {
  source_->Publish(Toy(), 1);
  StartServer();
  const Reply doc = client_->Get("/openapi.json");
  ASSERT_EQ(doc.status, 200);
  EXPECT_EQ(doc.body["openapi"], "3.0.3");
  const json& paths = doc.body["paths"];
  // The dispatcher's own list (in every 404) is exactly the document's routes.
  const Reply unknown = client_->Get("/no/such/route");
  ASSERT_EQ(unknown.status, 404);
  std::set<std::string> dispatched, documented;
  for (const json& r : unknown.body["routes"]) dispatched.insert(r.get<std::string>());
  for (auto p = paths.begin(); p != paths.end(); ++p) {
    for (auto m = p.value().begin(); m != p.value().end(); ++m) {
      std::string method = m.key();
      for (char& c : method) c = static_cast<char>(std::toupper(c));
      documented.insert(method + " " + p.key());
      EXPECT_TRUE(m.value().contains("summary")) << p.key();
    }
  }
  EXPECT_EQ(dispatched, documented);
  EXPECT_GE(documented.size(), 17u);
  // The admin routes name their security scheme and its failures; the query routes their 503
  // before a snapshot; limits are schema constraints (issue 24, item 11).
  const json& scheme = doc.body["components"]["securitySchemes"]["adminBearer"];
  EXPECT_EQ(scheme["type"], "http");
  EXPECT_EQ(scheme["scheme"], "bearer");
  const json& admin = paths["/v1/admin/snapshot"]["post"];
  EXPECT_EQ(admin["security"][0].count("adminBearer"), 1u);
  EXPECT_TRUE(admin["responses"].contains("401"));
  EXPECT_TRUE(admin["responses"].contains("403"));
  EXPECT_FALSE(paths["/v1/neighbors"]["get"].contains("security"));
  EXPECT_TRUE(paths["/v1/neighbors"]["get"]["responses"].contains("503"));
  EXPECT_TRUE(paths["/healthz"]["get"]["responses"].contains("503"));
  EXPECT_FALSE(paths["/metrics"]["get"]["responses"].contains("503"));
  for (const json& p : paths["/v1/neighbors"]["get"]["parameters"]) {
    if (p["name"] == "k") {
      EXPECT_EQ(p["schema"]["minimum"], 1);
      EXPECT_EQ(p["schema"]["maximum"], 1000);
    }
  }
  const json& words =
      paths["/v1/vectors"]["post"]["requestBody"]["content"]["application/json"]["schema"]
           ["properties"]["words"];
  EXPECT_EQ(words["maxItems"], 1000);
  // And every documented route reaches a handler (never "no route").
  for (const std::string& route : documented) {
    const std::string method = route.substr(0, route.find(' '));
    std::string path =
        std::regex_replace(route.substr(route.find(' ') + 1), std::regex("\\{[a-z]+\\}"), "king");
    http::http_response r = client_->Raw(method, path);
    const std::string body = r.extract_utf8string(true).get();
    EXPECT_EQ(body.find("no route"), std::string::npos) << route << ": " << body;
    EXPECT_NE(r.status_code(), 405) << route;
  }
}

// Rows grouped around 60 random centres, so neighbour lists are meaningful for the recall check.
Embeddings Clustered(size_t rows, int dim, uint32_t seed, float noise) {
  Embeddings centres = RandomEmbeddings(60, dim, seed);
  Embeddings e = RandomEmbeddings(rows, dim, seed + 1);
  for (size_t r = 0; r < rows; ++r) {
    for (int j = 0; j < dim; ++j) {
      e.vectors[r * dim + j] = centres.row(r % 60)[j] + noise * e.vectors[r * dim + j];
    }
  }
  return e;
}

TEST_F(OperationsTest, HnswAboveTheThresholdAgreesWithExactSearchAndSwapsWithoutFailures) {
  const Embeddings e = Clustered(3000, 16, 21, 0.5f);
  source_->Publish(e, 1);
  ServeOptions options;
  options.exact_max_words = 1000;
  StartServer(options);
  // The index is built on the index thread; the exact scan serves until it is attached.
  ASSERT_TRUE(WaitFor([&] { return ParseMetrics(Text("/metrics")).at("streamvec_index_hnsw"); }));
  const std::map<std::string, double> m = ParseMetrics(Text("/metrics"));
  EXPECT_EQ(m.at("streamvec_index_hnsw"), 1);
  EXPECT_EQ(m.at("streamvec_index_snapshot_version"), 1);
  EXPECT_EQ(m.at("streamvec_index_builds_total"), 1);
  EXPECT_GE(m.at("streamvec_index_recall_at_10"), 0.9);
  EXPECT_LE(m.at("streamvec_index_recall_at_10"), 1.0);
  // Over HTTP, against the plain scan.
  const std::vector<float> unit = eval::NormalizeRows(e.vectors.data(), e.rows(), e.dim);
  double hits = 0, wanted = 0;
  for (size_t row = 7; row < e.rows(); row += 150) {
    const Reply r = client_->Get("/v1/neighbors?word=w" + std::to_string(row) + "&k=10");
    ASSERT_EQ(r.status, 200) << r.body;
    std::set<std::string> got;
    for (const json& n : r.body["neighbors"]) got.insert(n["word"]);
    EXPECT_FALSE(got.count("w" + std::to_string(row)));  // the query word is excluded
    const size_t self[] = {row};
    for (const eval::Neighbor& n :
         eval::TopKByDot(unit.data(), e.rows(), e.dim, unit.data() + row * e.dim, 10, self)) {
      hits += got.count(e.words[n.row]);
      wanted += 1;
    }
  }
  EXPECT_GE(hits / wanted, 0.9);
  const Reply ms = client_->Get("/v1/most_similar?positive=w1,w2");
  ASSERT_EQ(ms.status, 200);
  EXPECT_EQ(ms.body["search"], "hnsw");
  EXPECT_EQ(client_->Get("/v1/most_similar?positive=w1&restrict_vocab=500").body["search"],
            "exact");

  // Swaps with an index built per snapshot: no request fails meanwhile.
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, done{0};
  std::vector<std::thread> loops;
  for (int t = 0; t < 2; ++t) {
    loops.emplace_back([&, t] {
      Client c(server_->port());
      while (!stop) {
        const Reply r = t == 0 ? c.Get("/v1/neighbors?word=w5&k=10")
                               : c.Get("/v1/most_similar?positive=w9&negative=w3&topn=5");
        const char* list = t == 0 ? "neighbors" : "results";
        if (r.status != 200 || !r.body.contains(list) || r.body[list].empty()) {
          ++failures;
        }
        ++done;
      }
    });
  }
  for (uint64_t v = 2; v <= 4; ++v) {
    source_->Publish(Clustered(3000, 16, static_cast<uint32_t>(21 + v), 0.5f), v);
    ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == v; }));
  }
  stop = true;
  for (std::thread& t : loops) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_GT(done, 0);
}

// Snapshot v2 of `v1`: every vector moved a little, words w10..w19 gone, and new words n0..n19,
// each a near copy of w(100 + i), so that n_i is w(100 + i)'s nearest neighbour.
Embeddings Drifted(const Embeddings& v1, uint32_t seed) {
  const Embeddings noise = RandomEmbeddings(v1.rows() + 20, v1.dim, seed);
  Embeddings e;
  e.dim = v1.dim;
  const size_t dim = static_cast<size_t>(v1.dim);
  for (size_t r = 0; r < v1.rows(); ++r) {
    if (r >= 10 && r < 20) continue;
    e.words.push_back(v1.words[r]);
    for (size_t j = 0; j < dim; ++j) {
      e.vectors.push_back(v1.row(r)[j] + 0.05f * noise.row(r)[j]);
    }
  }
  for (size_t i = 0; i < 20; ++i) {
    e.words.push_back("n" + std::to_string(i));
    const size_t row = 100 + i - 10;  // w(100 + i) in e (10 rows were dropped before it)
    for (size_t j = 0; j < dim; ++j) {
      e.vectors.push_back(e.vectors[row * dim + j] + 0.001f * noise.row(v1.rows() + i)[j]);
    }
  }
  return e;
}

// --index-dir: the built index is saved; a server restarted on the same snapshot loads it
// instead of building one and answers the same; restarted on a newer snapshot it builds (the
// saved index is for another snapshot) and saves that one.
TEST_F(OperationsTest, IndexDirSavesTheBuiltIndexAndARestartOnTheSameSnapshotLoadsIt) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("streamvec-index-dir-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  source_->Publish(Clustered(3000, 16, 31, 0.5f), 1);
  ServeOptions options;
  options.exact_max_words = 1000;
  options.index_dir = dir.string();
  auto start = [&](double builds, double loads) {
    client_.reset();
    server_.reset();
    StartServer(options);
    ASSERT_TRUE(WaitFor([&] { return ParseMetrics(Text("/metrics")).at("streamvec_index_hnsw"); }));
    const std::map<std::string, double> m = ParseMetrics(Text("/metrics"));
    EXPECT_EQ(m.at("streamvec_index_builds_total"), builds);
    EXPECT_EQ(m.at("streamvec_index_loads_total"), loads);
    EXPECT_GE(m.at("streamvec_index_recall_at_10"), 0.9);
  };
  auto saved_for = [&] {
    std::ifstream in(dir / "streamvec-index.hnsw.json");
    return in ? json::parse(in).value("snapshot", 0) : 0;
  };

  start(/*builds=*/1, /*loads=*/0);  // the directory does not exist yet: created
  EXPECT_EQ(saved_for(), 1);
  const Reply built = client_->Get("/v1/neighbors?word=w5&k=10");
  ASSERT_EQ(built.status, 200) << built.body;

  start(/*builds=*/0, /*loads=*/1);
  const Reply loaded = client_->Get("/v1/neighbors?word=w5&k=10");
  ASSERT_EQ(loaded.status, 200) << loaded.body;
  EXPECT_EQ(loaded.body["neighbors"], built.body["neighbors"]);

  source_->Publish(Clustered(3000, 16, 32, 0.5f), 2);
  start(/*builds=*/1, /*loads=*/0);
  EXPECT_EQ(saved_for(), 2);
  std::filesystem::remove_all(dir);
}

TEST_F(OperationsTest, CarriedOverIndexAnswersWithTheNewSnapshotsWordsAndCosines) {
  const Embeddings v1 = Clustered(3000, 16, 31, 0.5f);
  source_->Publish(v1, 1);
  ServeOptions options;
  options.exact_max_words = 1000;
  options.index_rebuild_interval_s = 1e6;  // one build: v2 is served by v1's index
  StartServer(options);
  ASSERT_TRUE(WaitFor([&] { return ParseMetrics(Text("/metrics")).at("streamvec_index_hnsw"); }));
  const Embeddings v2 = Drifted(v1, 32);
  source_->Publish(v2, 2);
  ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == 2; }));
  std::map<std::string, double> m = ParseMetrics(Text("/metrics"));
  EXPECT_EQ(m.at("streamvec_index_hnsw"), 1);
  EXPECT_EQ(m.at("streamvec_index_snapshot_version"), 1);  // carried over, not rebuilt
  EXPECT_EQ(m.at("streamvec_index_unindexed_words"), 20);
  EXPECT_EQ(m.at("streamvec_index_builds_total"), 1);

  // Results are v2's: its words only, its exact cosines, and the words v1's index lacks.
  const std::vector<float> unit = eval::NormalizeRows(v2.vectors.data(), v2.rows(), v2.dim);
  double hits = 0, wanted = 0;
  for (size_t row = 3; row < v2.rows(); row += 97) {
    const std::string word = v2.words[row];
    const Reply r = client_->Get("/v1/neighbors?word=" + word + "&k=10");
    ASSERT_EQ(r.status, 200) << r.body;
    std::map<std::string, double> got;
    for (const json& n : r.body["neighbors"]) got[n["word"]] = n["similarity"];
    EXPECT_EQ(got.size(), 10u);
    const size_t self[] = {row};
    std::map<std::string, double> exact_cosine;
    for (const eval::Neighbor& n :
         eval::TopKByDot(unit.data(), v2.rows(), v2.dim, unit.data() + row * v2.dim, 3000, self)) {
      exact_cosine[v2.words[n.row]] = n.similarity;
    }
    for (const auto& [w, similarity] : got) {
      ASSERT_TRUE(exact_cosine.count(w)) << w << " is not a word of snapshot 2";
      EXPECT_NEAR(similarity, exact_cosine[w], 1e-5) << w;
    }
    for (const eval::Neighbor& n :
         eval::TopKByDot(unit.data(), v2.rows(), v2.dim, unit.data() + row * v2.dim, 10, self)) {
      hits += got.count(v2.words[n.row]);
      wanted += 1;
    }
  }
  EXPECT_GE(hits / wanted, 0.9);
  for (int i : {0, 7, 19}) {
    const Reply r = client_->Get("/v1/neighbors?word=w" + std::to_string(100 + i) + "&k=3");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body["neighbors"][0]["word"], "n" + std::to_string(i)) << r.body;
  }
  EXPECT_EQ(client_->Get("/v1/neighbors?word=w15&k=3").status, 404);
  const Reply ms = client_->Get("/v1/most_similar?positive=w100&topn=5");
  ASSERT_EQ(ms.status, 200);
  EXPECT_EQ(ms.body["search"], "hnsw");
  EXPECT_EQ(ms.body["results"][0]["word"], "n0");
  const Reply snaps = client_->Get("/v1/snapshots");
  ASSERT_EQ(snaps.status, 200);
  EXPECT_NE(snaps.body.dump().find("\"carried\":true"), std::string::npos) << snaps.body;
}

// A snapshot whose vectors all moved (the same words, new clusters): v1's carried index would
// find few of v2's neighbours, so v2 is served by the exact scan until a fresh index is built
// (held back here, as `run` defers builds while its trainer is saturated).
TEST_F(OperationsTest, CarriedIndexUnderTheRecallBarGivesWayToTheExactScan) {
  const Embeddings v1 = Clustered(3000, 16, 31, 0.5f);
  source_->Publish(v1, 1);
  std::atomic<bool> hold_builds{false};
  ServeOptions options;
  options.exact_max_words = 1000;
  options.index_rebuild_interval_s = 1e6;
  options.defer_index_builds = [&hold_builds] { return hold_builds.load(); };
  options.index_max_defer_s = 1e6;
  StartServer(options);
  ASSERT_TRUE(WaitFor([&] { return ParseMetrics(Text("/metrics")).at("streamvec_index_hnsw"); }));
  hold_builds = true;
  const Embeddings v2 = Clustered(3000, 16, 77, 0.5f);
  source_->Publish(v2, 2);
  ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == 2; }));
  const std::map<std::string, double> m = ParseMetrics(Text("/metrics"));
  EXPECT_EQ(m.at("streamvec_index_hnsw"), 0);
  EXPECT_EQ(m.at("streamvec_index_recall_at_10"), 1);
  const std::vector<float> unit = eval::NormalizeRows(v2.vectors.data(), v2.rows(), v2.dim);
  for (size_t row = 5; row < v2.rows(); row += 211) {
    const Reply r = client_->Get("/v1/neighbors?word=" + v2.words[row] + "&k=10");
    ASSERT_EQ(r.status, 200) << r.body;
    std::set<std::string> got;
    for (const json& n : r.body["neighbors"]) got.insert(n["word"]);
    const size_t self[] = {row};
    for (const eval::Neighbor& n :
         eval::TopKByDot(unit.data(), v2.rows(), v2.dim, unit.data() + row * v2.dim, 10, self)) {
      EXPECT_TRUE(got.count(v2.words[n.row])) << v2.words[n.row] << " missing for row " << row;
    }
  }
  EXPECT_EQ(client_->Get("/v1/most_similar?positive=w1").body["search"], "exact");
  const Reply snaps = client_->Get("/v1/snapshots");
  EXPECT_NE(snaps.body.dump().find("\"carried_index_below_recall\":true"), std::string::npos)
      << snaps.body;
  hold_builds = false;  // the fresh index comes back as soon as builds may run
  ASSERT_TRUE(WaitFor([&] { return ParseMetrics(Text("/metrics")).at("streamvec_index_hnsw"); }));
  EXPECT_EQ(ParseMetrics(Text("/metrics")).at("streamvec_index_snapshot_version"), 2);
}

std::string WritePairs(const std::string& name, const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + std::to_string(::getpid()) + ".txt"))
          .string();
  std::ofstream(path) << text;
  return path;
}

// Word pairs whose human scores follow the cosines of `e` (Spearman 1 on e itself).
std::string PairsFollowing(const Embeddings& e) {
  std::ostringstream out;
  for (size_t i = 0; i + 1 < 60; i += 2) {
    out << e.words[i] << "\t" << e.words[i + 1] << "\t"
        << eval::CosineSimilarity(e.row(i), e.row(i + 1), e.dim) * 10 << "\n";
  }
  return out.str();
}

TEST_F(OperationsTest, QualityPerSnapshotMatchesEvalAndTheGateRefusesADrop) {
  const Embeddings good = RandomEmbeddings(200, 8, 31);
  const std::string pairs = WritePairs("pairs", PairsFollowing(good));
  ServeOptions options;
  options.similarity_files = {pairs};
  options.quality_gate_drop = 0.2;
  source_->Publish(good, 1);
  StartServer(options);
  Reply r = client_->Get("/v1/snapshots");
  ASSERT_EQ(r.status, 200);
  const json& q1 = r.body["snapshots"][0]["quality"];
  const StatusOr<eval::SimilarityResult> want = eval::EvaluateWordPairs(good, pairs);
  ASSERT_TRUE(want.ok());
  EXPECT_DOUBLE_EQ(q1["similarity"][0]["spearman"].get<double>(), want->spearman);
  EXPECT_DOUBLE_EQ(q1["similarity"][0]["pearson"].get<double>(), want->pearson);
  EXPECT_EQ(q1["similarity"][0]["pairs"], want->pairs);

  // A small change passes the gate and gets a PIP loss against snapshot 1.
  Embeddings close = good;
  for (size_t i = 100 * 8; i < close.vectors.size(); ++i) close.vectors[i] *= 1.01f;
  source_->Publish(close, 2);
  ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == 2; }));
  r = client_->Get("/v1/snapshots");
  const json& pip = r.body["snapshots"][1]["quality"]["pip"];
  const eval::PipResult want_pip = eval::PipLoss(good, close, options.pip_top_words);
  EXPECT_EQ(pip["previous"], 1);
  EXPECT_EQ(pip["words"], want_pip.words);
  EXPECT_DOUBLE_EQ(pip["normalized"].get<double>(), want_pip.normalized);
  EXPECT_TRUE(r.body["snapshots"][1]["promoted"].get<bool>());

  // Scrambled vectors fall far below: not promoted, counted, the old one stays served.
  source_->Publish(RandomEmbeddings(200, 8, 99), 3);
  ASSERT_TRUE(WaitFor([&] {
    const Reply s = client_->Get("/v1/snapshots");
    return s.body["snapshots"].size() == 3 && s.body["snapshots"][2].contains("promoted");
  }));
  r = client_->Get("/v1/snapshots");
  EXPECT_FALSE(r.body["snapshots"][2]["promoted"].get<bool>());
  EXPECT_NE(r.body["snapshots"][2]["rejected"].get<std::string>().find("quality gate"),
            std::string::npos);
  EXPECT_EQ(r.body["served"], 2);
  EXPECT_EQ(server_->snapshot_version(), 2u);
  const std::map<std::string, double> m = ParseMetrics(Text("/metrics"));
  EXPECT_EQ(m.at("streamvec_quality_gate_rejections_total"), 1);
  EXPECT_DOUBLE_EQ(m.at(R"(streamvec_quality_similarity_spearman{file=")" +
                        std::filesystem::path(pairs).filename().string() + "\"}"),
                   r.body["snapshots"][1]["quality"]["similarity"][0]["spearman"].get<double>());
  EXPECT_TRUE(m.count("streamvec_quality_pip_loss_normalized"));
  std::filesystem::remove(pairs);
}

TEST(OperationsStartTest, QualityOptionsAreChecked) {
  ServeOptions options;
  options.port = 0;
  options.similarity_files = {"/nonexistent/ws353.txt"};
  StatusOr<std::unique_ptr<Server>> s = Server::Start(options, std::make_shared<MemorySource>());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent/ws353.txt"), std::string::npos);
  options.similarity_files.clear();
  options.quality_gate_drop = 0.1;
  s = Server::Start(options, std::make_shared<MemorySource>());
  EXPECT_FALSE(s.ok());
}

// Rotates coordinate pairs (j, j+1) by `angle` and (0, dim-1) by 2 * angle: an orthogonal map.
Embeddings Rotated(const Embeddings& e, double angle) {
  Embeddings out = e;
  auto turn = [&](size_t r, int a, int b, double t) {
    float* v = out.vectors.data() + r * out.dim;
    const double x = v[a], y = v[b];
    v[a] = static_cast<float>(std::cos(t) * x - std::sin(t) * y);
    v[b] = static_cast<float>(std::sin(t) * x + std::cos(t) * y);
  };
  for (size_t r = 0; r < out.rows(); ++r) {
    for (int j = 0; j + 1 < out.dim; j += 2) turn(r, j, j + 1, angle);
    turn(r, 0, out.dim - 1, 2 * angle);
  }
  return out;
}

TEST_F(OperationsTest, WordHistoryAlignsSnapshotsWithProcrustes) {
  const Embeddings v1 = RandomEmbeddings(400, 10, 41);
  Embeddings v2 = Rotated(v1, 0.7);  // same meanings, a different basis
  // w5 changes meaning in v2: it takes w300's (rotated) vector.
  std::copy(v2.row(300), v2.row(300) + 10, v2.vectors.begin() + 5 * 10);
  source_->Publish(v1, 1);
  StartServer();
  source_->Publish(v2, 2);
  ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == 2; }));
  Reply r = client_->Get("/v1/words/w7/history?k=3");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.body["history"].size(), 1u);
  const json& then = r.body["history"][0];
  EXPECT_EQ(then["snapshot"], 1);
  EXPECT_EQ(then["aligned_on_words"], 400);
  EXPECT_NEAR(then["cosine_to_now"].get<double>(), 1.0, 1e-3);  // unchanged word, rotated space
  EXPECT_EQ(then["neighbors"].size(), 3u);
  EXPECT_EQ(r.body["neighbors"].size(), 3u);
  r = client_->Get("/v1/words/w5/history");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_LT(r.body["history"][0]["cosine_to_now"].get<double>(), 0.9);  // drifted
  EXPECT_EQ(r.body["neighbors"][0]["word"], "w300");  // now it means what w300 means
  EXPECT_EQ(client_->Get("/v1/words/emperor/history").status, 404);
}

}  // namespace
}  // namespace streamvec::api

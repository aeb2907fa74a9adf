// The REST API over real HTTP on 127.0.0.1 (a free port): every route's answers and errors,
// snapshot hot swaps under load, and the state-directory path end to end (RocksDB in a temp dir).

#include <arpa/inet.h>
#include <cpprest/http_client.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "streamvec/store/embedding_entries.h"
#include "streamvec/store/snapshot_reader.h"
#include "streamvec/store/state_store.h"
#include "test_util.h"

namespace streamvec::api {
namespace {

using nlohmann::json;
namespace http = web::http;
using namespace testing_util;

class ServerTest : public ServerFixture {};

TEST_F(ServerTest, VectorOfAWord) {
  source_->Publish(Toy(), 3);
  StartServer();
  EXPECT_EQ(server_->snapshot_version(), 3u);
  const Reply r = client_->Get("/v1/vectors/queen");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["word"], "queen");
  EXPECT_EQ(r.body["snapshot"], 3);
  ASSERT_EQ(r.body["vector"].size(), 3u);
  EXPECT_FLOAT_EQ(r.body["vector"][0].get<float>(), 0.9f);
  EXPECT_FLOAT_EQ(r.body["vector"][1].get<float>(), 0.1f);
}

TEST_F(ServerTest, PercentEncodedUtf8AndReservedCharactersInWords) {
  source_->Publish(Toy(), 1);
  StartServer();
  Reply r = client_->Get("/v1/vectors/" + Encode("naïve"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["word"], "naïve");
  r = client_->Get("/v1/vectors/" + Encode("a/b"));  // %2F inside one path segment
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["word"], "a/b");
  r = client_->Get("/v1/vectors/" + Encode("c++"));
  ASSERT_EQ(r.status, 200) << r.body;
  r = client_->Get("/v1/neighbors?word=" + Encode("naïve") + "&k=1");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["word"], "naïve");
  EXPECT_EQ(r.body["neighbors"][0]["word"], "c++");
  // most_similar writes its reply by hand: non-ASCII and reserved characters come back intact.
  r = client_->Get("/v1/most_similar?positive=" + Encode("naïve") + "&negative=" + Encode("a/b") +
                   "&topn=1");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["positive"], json::array({"naïve"}));
  EXPECT_EQ(r.body["negative"], json::array({"a/b"}));
  EXPECT_EQ(r.body["sources"]["naïve"], "table");
  ASSERT_EQ(r.body["results"].size(), 1u);
  r = client_->Get("/v1/vectors/" + Encode("naïf"));
  ASSERT_EQ(r.status, 404);
  EXPECT_NE(r.body["error"].get<std::string>().find("'naïf'"), std::string::npos) << r.body;
  // cpprest itself rejects a malformed escape in the path (400, before our handler).
  r = client_->Call(http::methods::GET, "/v1/vectors/bad%zzescape", "", false, false);
  EXPECT_EQ(r.status, 400);
  r = client_->Get("/v1/neighbors?word=bad%zz");
  EXPECT_EQ(r.status, 400);
}

TEST_F(ServerTest, VectorErrors) {
  source_->Publish(Toy(), 1);
  StartServer();
  Reply r = client_->Get("/v1/vectors/emperor");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body["error"].get<std::string>().find("'emperor'"), std::string::npos) << r.body;
  r = client_->Get("/v1/vectors/");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body["error"].get<std::string>().find("word"), std::string::npos) << r.body;
  r = client_->Get("/v1/vectors/king/extra");
  EXPECT_EQ(r.status, 404) << r.body;
  r = client_->Call(http::methods::DEL, "/v1/vectors/king");
  EXPECT_EQ(r.status, 405) << r.body;
  EXPECT_EQ(r.allow, "GET");
}

TEST_F(ServerTest, BatchOfVectorsListsMissingWords) {
  source_->Publish(Toy(), 2);
  StartServer();
  const Reply r =
      client_->Post("/v1/vectors", R"({"words": ["man", "emperor", "naïve", "man", ""]})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.body["vectors"].size(), 3u);
  EXPECT_EQ(r.body["vectors"][0]["word"], "man");
  EXPECT_EQ(r.body["vectors"][0]["vector"], json::parse("[0, 1, 0]"));
  EXPECT_EQ(r.body["vectors"][1]["word"], "naïve");
  EXPECT_EQ(r.body["vectors"][2]["word"], "man");
  EXPECT_EQ(r.body["missing"], json::parse(R"(["emperor", ""])"));
  EXPECT_EQ(r.body["snapshot"], 2);
  const Reply empty = client_->Post("/v1/vectors", R"({"words": []})");
  ASSERT_EQ(empty.status, 200);
  EXPECT_TRUE(empty.body["vectors"].empty());
}

TEST_F(ServerTest, BatchErrors) {
  source_->Publish(Toy(), 1);
  StartServer();
  Reply r = client_->Post("/v1/vectors", R"({"words": ["man")");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"].get<std::string>().find("malformed JSON"), std::string::npos);
  r = client_->Post("/v1/vectors", R"(["man"])");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"].get<std::string>().find("words"), std::string::npos);
  r = client_->Post("/v1/vectors", R"({"words": ["man", 3]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"].get<std::string>().find("words[1]"), std::string::npos);
  json many = {{"words", json::array()}};
  for (int i = 0; i < 1001; ++i) many["words"].push_back("man");
  r = client_->Post("/v1/vectors", many.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"].get<std::string>().find("1001 words"), std::string::npos) << r.body;
  json big = {{"words", json::array({std::string(1100000, 'x')})}};
  r = client_->Post("/v1/vectors", big.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"].get<std::string>().find("over 1048576 bytes"), std::string::npos)
      << r.body;
  r = client_->Get("/v1/vectors");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.allow, "POST");
}

TEST_F(ServerTest, NeighborsAreExactCosineWithoutTheQueryWord) {
  source_->Publish(Toy(), 1);
  StartServer();
  Reply r = client_->Get("/v1/neighbors?word=king&k=2");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["word"], "king");
  EXPECT_EQ(r.body["snapshot"], 1);
  ASSERT_EQ(r.body["neighbors"].size(), 2u);
  EXPECT_EQ(r.body["neighbors"][0]["word"], "queen");
  EXPECT_NEAR(r.body["neighbors"][0]["similarity"].get<double>(), 0.9 / std::sqrt(0.82), 1e-6);
  EXPECT_EQ(r.body["neighbors"][1]["word"], "a/b");
  EXPECT_NEAR(r.body["neighbors"][1]["similarity"].get<double>(), std::sqrt(0.5), 1e-6);
  r = client_->Get("/v1/neighbors?word=king");  // default k = 10, capped by the vocabulary
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["neighbors"].size(), 7u);
  for (const json& n : r.body["neighbors"]) EXPECT_NE(n["word"], "king");
}

TEST_F(ServerTest, NeighborsErrors) {
  source_->Publish(Toy(), 1);
  StartServer();
  for (const char* bad : {"0", "1001", "ten", "5x", "", "-1", "99999999999999999999"}) {
    const Reply r = client_->Get(std::string("/v1/neighbors?word=king&k=") + bad);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.body["error"].get<std::string>().find("'k'"), std::string::npos) << r.body;
  }
  Reply r = client_->Get("/v1/neighbors?k=3");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"].get<std::string>().find("'word'"), std::string::npos) << r.body;
  r = client_->Get("/v1/neighbors?word=emperor");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body["error"].get<std::string>().find("'emperor'"), std::string::npos);
  r = client_->Get("/v1/neighbors?word=king&k=1000");
  EXPECT_EQ(r.status, 200);
  r = client_->Call(http::methods::PUT, "/v1/neighbors?word=king");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.allow, "GET, POST");
}

TEST_F(ServerTest, Similarity) {
  source_->Publish(Toy(), 1);
  StartServer();
  Reply r = client_->Get("/v1/similarity?w1=king&w2=man");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["w1"], "king");
  EXPECT_EQ(r.body["w2"], "man");
  EXPECT_NEAR(r.body["similarity"].get<double>(), 0.0, 1e-7);
  EXPECT_EQ(r.body["snapshot"], 1);
  r = client_->Get("/v1/similarity?w1=king&w2=queen");
  EXPECT_NEAR(r.body["similarity"].get<double>(), 0.9 / std::sqrt(0.82), 1e-6);
  r = client_->Get("/v1/similarity?w1=king&w2=zero");
  EXPECT_EQ(r.body["similarity"], 0);
  r = client_->Get("/v1/similarity?w1=king");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"].get<std::string>().find("'w2'"), std::string::npos);
  r = client_->Get("/v1/similarity?w1=king&w2=emperor");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body["error"].get<std::string>().find("'emperor'"), std::string::npos);
}

TEST_F(ServerTest, SnapshotsListMetadataAndTheServedOne) {
  source_->Publish(Toy(), 1, R"({"words_trained": 100, "vocabulary": 8})");
  source_->Publish(Toy(2), 2, R"({"words_trained": 250, "vocabulary": 8,
                                 "offsets": {"docs": [[0, 17]]}})");
  StartServer();
  const Reply r = client_->Get("/v1/snapshots");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["served"], 2);
  ASSERT_EQ(r.body["snapshots"].size(), 2u);
  EXPECT_EQ(r.body["snapshots"][0]["version"], 1);
  EXPECT_EQ(r.body["snapshots"][0]["served"], false);
  EXPECT_EQ(r.body["snapshots"][1]["served"], true);
  EXPECT_EQ(r.body["snapshots"][1]["words_trained"], 250);
  EXPECT_EQ(r.body["snapshots"][1]["offsets"]["docs"][0][1], 17);
  EXPECT_EQ(r.body["snapshots"][1]["created_at"], 1700000002.0);
}

TEST_F(ServerTest, NoSnapshotYetIs503UntilOneIsPublished) {
  StartServer();
  EXPECT_EQ(server_->snapshot_version(), 0u);
  Reply r = client_->Get("/healthz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body["status"], "no snapshot yet");
  for (const char* path :
       {"/v1/vectors/king", "/v1/neighbors?word=king", "/v1/similarity?w1=king&w2=man"}) {
    r = client_->Get(path);
    EXPECT_EQ(r.status, 503) << path;
    EXPECT_TRUE(r.body["error"].is_string());
  }
  r = client_->Get("/v1/snapshots");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body["served"].is_null());

  source_->Publish(Toy(), 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (server_->snapshot_version() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r = client_->Get("/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, json::parse(R"({"status": "ok", "snapshot": 1})"));
}

TEST_F(ServerTest, UnknownRouteIs404NamingIt) {
  source_->Publish(Toy(), 1);
  StartServer();
  const Reply r = client_->Get("/v2/whatever");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body["error"].get<std::string>().find("/v2/whatever"), std::string::npos);
}

TEST(ServerStartTest, RejectsBadOptionsAndBusyPort) {
  ServeOptions options;
  options.state_dir = "";
  EXPECT_EQ(Server::Start(options).status().code(), StatusCode::kInvalidArgument);
  options.state_dir = "/nonexistent/state";
  options.port = 70000;
  EXPECT_EQ(Server::Start(options).status().code(), StatusCode::kInvalidArgument);
  options.port = 0;
  options.poll_interval_s = 0;
  EXPECT_EQ(Server::Start(options).status().code(), StatusCode::kInvalidArgument);
  options.poll_interval_s = 0.5;
  options.index_nice = 20;
  StatusOr<std::unique_ptr<Server>> bad_nice = Server::Start(options);
  EXPECT_EQ(bad_nice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_nice.status().message().find("index_nice"), std::string::npos);
  options.index_nice = 10;
  options.index_rebuild_interval_s = -1;
  EXPECT_EQ(Server::Start(options).status().code(), StatusCode::kInvalidArgument);
  options.index_rebuild_interval_s = 30;
  {
    StatusOr<std::unique_ptr<Server>> waiting = Server::Start(options);  // no state yet: fine
    ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
    EXPECT_GT((*waiting)->port(), 0);
    EXPECT_EQ(Client((*waiting)->port()).Get("/healthz").status, 503);
  }
  // A port another socket listens on. (Not a second Server in this process: cpprest shares one
  // acceptor per host:port in a process, so that would not be a real conflict.)
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  options.port = ntohs(addr.sin_port);
  StatusOr<std::unique_ptr<Server>> busy = Server::Start(options);
  close(fd);
  EXPECT_EQ(busy.status().code(), StatusCode::kIoError);
  EXPECT_NE(busy.status().message().find(std::to_string(options.port)), std::string::npos)
      << busy.status().ToString();
}

// One HTTP/1.1 GET over a raw IPv6 socket to [::1]:port; returns what came back.
std::string GetOverIpv6Loopback(int port, const std::string& path) {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  addr.sin6_port = htons(static_cast<uint16_t>(port));
  std::string got;
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n";
    if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, n);
    }
  }
  if (fd >= 0) close(fd);
  return got;
}

// Whether this machine has an IPv6 loopback to bind (CI containers may not).
bool HasIpv6Loopback() {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// --http '[::1]:PORT' listens on the IPv6 loopback (cpprestsdk's listener takes no IPv6 literal
// itself); any other IPv6 literal is refused up front, naming what works.
TEST(ServerStartTest, ListensOnTheIpv6LoopbackAndRefusesOtherIpv6Literals) {
  ServeOptions options;
  options.state_dir = "/nonexistent/state";
  options.host = "fd00::1";
  options.port = 0;
  StatusOr<std::unique_ptr<Server>> other = Server::Start(options);
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("[::1]"), std::string::npos) << other.status().ToString();
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback here";
  options.host = "::1";
  StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string reply = GetOverIpv6Loopback((*server)->port(), "/healthz");
  EXPECT_EQ(reply.rfind("HTTP/1.1 503", 0), 0u) << reply;  // no snapshot yet
  EXPECT_NE(reply.find("no snapshot yet"), std::string::npos) << reply;
}

// Clients hammer the server while snapshots are swapped in: every request succeeds, and the
// snapshot a client sees never goes backwards.
TEST_F(ServerTest, HotSwapsNeverFailARequest) {
  source_->Publish(Toy(1), 1);
  StartServer();
  std::atomic<bool> done{false};
  std::atomic<int> failures{0}, requests{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 2; ++t) {
    clients.emplace_back([&, t] {
      Client client(server_->port());
      uint64_t last = 0;
      while (!done.load()) {
        const Reply r =
            t == 0 ? client.Get("/v1/vectors/king") : client.Get("/v1/neighbors?word=king&k=3");
        requests.fetch_add(1);
        if (r.status != 200 || r.body["snapshot"].get<uint64_t>() < last) {
          failures.fetch_add(1);
          continue;
        }
        last = r.body["snapshot"].get<uint64_t>();
        if (t == 0 && r.body["vector"][0].get<float>() != static_cast<float>(last)) {
          failures.fetch_add(1);  // a vector from another snapshot than the one reported
        }
      }
    });
  }
  for (uint64_t v = 2; v <= 20; ++v) {
    source_->Publish(Toy(static_cast<float>(v)), v);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (server_->snapshot_version() != v && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(server_->snapshot_version(), v);
  }
  done = true;
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0) << "of " << requests.load();
  EXPECT_GT(requests.load(), 0);
}

// The real path: a StateStore publishes snapshots in a temp dir, the server follows them.
class StateDirServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("streamvec_api_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    StatusOr<std::unique_ptr<StateStore>> store =
        StateStore::Open(dir_.string(), StateStore::Mode::kCreateOrOpen);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  void TearDown() override {
    server_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // A snapshot of `e` (with the words' counts when given, as a trainer writes them).
  void Write(const Embeddings& e, int words_trained, const std::vector<double>& counts = {}) {
    const Status st = store_->WriteSnapshot(
        [&](const SnapshotSink& sink) {
          SV_RETURN_IF_ERROR(WriteEmbeddingEntries(e, sink));
          return counts.empty() ? Status::Ok() : WriteEmbeddingCounts(counts, sink);
        },
        json{{"words_trained", words_trained}, {"vocabulary", e.rows()}}.dump());
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  // A server on dir_, polling every 20 ms.
  void StartServer(ServeOptions options = {}) {
    options.state_dir = dir_.string();
    options.port = 0;
    options.poll_interval_s = 0.02;
    StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
  }
  void WaitForVersion(uint64_t v) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (server_->snapshot_version() < v && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(server_->snapshot_version(), v);
  }
  std::filesystem::path dir_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Server> server_;
};

// A checkpoint whose metadata.json is damaged is skipped (logged, counted in a metric): the
// newest intact snapshot is served and listed, and /v1/snapshots does not fail.
TEST_F(StateDirServerTest, DamagedSnapshotMetadataIsSkippedAndTheNewestIntactOneServed) {
  Write(Toy(1), 100);
  Write(Toy(2), 200);
  Write(Toy(3), 300);
  const std::filesystem::path meta =
      dir_ / "checkpoints" / "00000000000000000003" / "metadata.json";
  ASSERT_TRUE(std::filesystem::exists(meta));
  std::ofstream(meta, std::ios::trunc) << "{bad";
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(server_->snapshot_version(), 2u);
  Client client(server_->port());
  Reply r = client.Get("/v1/vectors/king");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["vector"][0], 2.0);
  r = client.Get("/v1/snapshots");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.body["snapshots"].size(), 2u);
  EXPECT_EQ(r.body["snapshots"][1]["version"], 2);
  http::http_response m = client.Raw(http::methods::GET, "/metrics");
  EXPECT_NE(m.extract_string().get().find("streamvec_snapshots_damaged 1"), std::string::npos);
  // A newer intact snapshot is served as usual.
  Write(Toy(4), 400);
  WaitForVersion(4);
}

// A checkpoint whose database is damaged (a table file truncated, as by a bad disk) is skipped
// the same way: logged, counted, left out of /v1/snapshots; the newest intact one is served
// instead of nothing.
TEST_F(StateDirServerTest, TruncatedTableFileOfTheNewestSnapshotServesTheNewestIntactOne) {
  Write(Toy(1), 100);
  Write(Toy(2), 200);
  Write(Toy(3), 300);
  store_.reset();  // the writer is gone: its live database shares the damaged file
  namespace fs = std::filesystem;
  const auto tables = [&](const char* name) {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_ / "checkpoints" / name / "db")) {
      if (e.path().extension() == ".sst") out.insert(e.path().filename().string());
    }
    return out;
  };
  const std::set<std::string> older = tables("00000000000000000002");
  bool truncated = false;
  for (const std::string& t : tables("00000000000000000003")) {
    if (older.count(t)) continue;
    const fs::path p = dir_ / "checkpoints" / "00000000000000000003" / "db" / t;
    fs::resize_file(p, fs::file_size(p) / 2);
    truncated = true;
    break;
  }
  ASSERT_TRUE(truncated);
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  WaitForVersion(2);
  Client client(server_->port());
  Reply r = client.Get("/v1/vectors/king");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["vector"][0], 2.0);
  r = client.Get("/v1/snapshots");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.body["snapshots"].size(), 2u) << r.body;
  EXPECT_EQ(r.body["snapshots"][1]["version"], 2);
  http::http_response m = client.Raw(http::methods::GET, "/metrics");
  EXPECT_NE(m.extract_string().get().find("streamvec_snapshots_damaged 1"), std::string::npos);
}

TEST_F(StateDirServerTest, FollowsPublishedSnapshotsWhileServing) {
  Write(Toy(1), 100);
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(server_->snapshot_version(), 1u);
  Client client(server_->port());
  Reply r = client.Get("/v1/vectors/king");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["vector"][0], 1.0);

  std::atomic<bool> done{false};
  std::atomic<int> failures{0}, requests{0};
  std::thread hammer([&] {
    Client c(server_->port());
    while (!done.load()) {
      const Reply h = c.Get("/v1/neighbors?word=" + Encode("naïve") + "&k=2");
      requests.fetch_add(1);
      if (h.status != 200 || h.body["neighbors"][0]["word"] != "c++") failures.fetch_add(1);
    }
  });
  for (int v = 2; v <= 6; ++v) {
    Write(Toy(static_cast<float>(v)), 100 * v);
    WaitForVersion(v);
  }
  done = true;
  hammer.join();
  EXPECT_EQ(failures.load(), 0) << "of " << requests.load();

  r = client.Get("/v1/vectors/king");
  EXPECT_EQ(r.body["vector"][0], 6.0);
  EXPECT_EQ(r.body["snapshot"], 6);
  r = client.Get("/v1/snapshots");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["served"], 6);
  ASSERT_FALSE(r.body["snapshots"].empty());
  const json& newest = r.body["snapshots"].back();
  EXPECT_EQ(newest["version"], 6);
  EXPECT_EQ(newest["served"], true);
  EXPECT_EQ(newest["words_trained"], 600);
  EXPECT_GT(newest["created_at"].get<double>(), 1.6e9);
}

// The real path of ?snapshot=N: a retained checkpoint the server never served is read from
// RocksDB on demand (vectors and counts); one the store's retention removed is a 404.
TEST_F(StateDirServerTest, PinnedQueriesReadRetainedCheckpointsAndCounts) {
  const std::vector<double> counts = {80, 70, 60, 50, 40, 30, 20, 10};
  for (int v = 1; v <= 5; ++v) {
    std::vector<double> c = counts;
    c[2] = 100.0 * v;  // "man" moves to the top as v grows
    Write(Toy(static_cast<float>(v)), 100 * v, c);
  }
  ServeOptions options;
  options.history_snapshots = 0;  // nothing older in memory: pins read the checkpoints
  StartServer(options);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(server_->snapshot_version(), 5u);
  Client client(server_->port());
  Reply r = client.Get("/v1/vectors/king?snapshot=4");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["vector"][0], 4.0);
  EXPECT_EQ(r.body["snapshot"], 4);
  r = client.Get("/v1/words?limit=2&snapshot=3");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["words"][0]["word"], "man");
  EXPECT_EQ(r.body["words"][0]["count"], 300.0);
  EXPECT_EQ(r.body["words"][1]["word"], "king");
  r = client.Get("/v1/words/man");
  EXPECT_EQ(r.body["count"], 500.0);
  EXPECT_EQ(r.body["rank"], 1);
  // The default retention keeps 3 checkpoints: 1 and 2 are gone.
  r = client.Get("/v1/vectors/king?snapshot=2");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body["error"].get<std::string>().find("snapshot 2 "), std::string::npos) << r.body;
  EXPECT_EQ(r.body["retained"], json::parse("[3, 4, 5]"));
}

TEST_F(StateDirServerTest, WaitsForTheFirstSnapshot) {
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  Client client(server_->port());
  EXPECT_EQ(client.Get("/healthz").status, 503);
  Write(Toy(), 10);
  WaitForVersion(1);
  EXPECT_EQ(client.Get("/healthz").status, 200);
}

}  // namespace
}  // namespace streamvec::api

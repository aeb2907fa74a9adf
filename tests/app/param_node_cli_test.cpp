// Runs the built `streamvec param-node` against an embedded broker started in this test process:
// usage errors, hand-encoded pushes merged and counted in /metrics, a clean stop on SIGINT, and
// `streamvec serve` answering a pushed word's vector from the node's state.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafkacpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli_util.h"
#include "streamvec/kafka/broker.h"
#include "streamvec/param/protocol.h"

namespace streamvec {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A streamvec child process whose output is read until a line matches `pattern` (an sscanf
// format reading one int: the port), then drained in the background.
class Child {
 public:
  Child(const std::vector<std::string>& args, const char* pattern) {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(out[1], 2);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> argv{const_cast<char*>(STREAMVEC_BINARY)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(STREAMVEC_BINARY, argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    std::FILE* f = ::fdopen(out[0], "r");
    char line[4096];
    while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr) {
      output_ += line;
      if (std::sscanf(line, pattern, &port_) == 1) break;
    }
    drain_ = std::thread([this, f] {
      char buf[4096];
      size_t n = 0;
      while (f != nullptr && (n = std::fread(buf, 1, sizeof buf, f)) > 0) output_.append(buf, n);
      if (f != nullptr) std::fclose(f);
    });
  }
  ~Child() {
    if (pid_ > 0 && !waited_) {
      ::kill(pid_, SIGKILL);
      Wait();
    }
    if (drain_.joinable()) drain_.join();
  }
  int port() const { return port_; }
  void Signal(int sig) { ::kill(pid_, sig); }
  int Wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  const std::string& Output() {
    if (drain_.joinable()) drain_.join();
    return output_;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool waited_ = false;
  std::string output_;
  std::thread drain_;
};


class ParamNodeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("streamvec_param_node_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(ParamNodeCliFlagsTest, BadFlagsExitTwoNamingTheFlag) {
  const std::string base = " --state /nonexistent/streamvec-node --brokers 127.0.0.1:1";
  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {"--shards 2 --state /tmp/x --brokers 127.0.0.1:1", "--shard"},
           {"--shard 2 --shards 2" + base, "--shard"},
           {"--shard 0 --shards 0" + base, "--shards"},
           {"--shard 0 --shards 1" + base + " --merge median", "--merge"},
           {"--shard 0 --shards 1" + base + " --merge-scale 1.5", "--merge-scale"},
           {"--shard 0 --shards 1" + base + " --publish-precision fp8", "--publish-precision"},
           {"--shard 0 --shards 1" + base + " --vocab-capacity 1", "--vocab-capacity"},
           {"--shard 0 --shards 1" + base + " --snapshot-every soon", "--snapshot-every"},
           {"--shard 0 --shards 1" + base + " --republish-every -1", "--republish-every"},
           {"--shard 0 --shards 1" + base + " --metrics nowhere", "--metrics"},
           {"--shard 0 --shards 1" + base + " --bootstrap-file /nonexistent/b", "not both"},
           {"--shard 0 --shards 1 --state /tmp/x", "--brokers or --bootstrap-file"},
           {"--shard 0 --shards 1" + base + " --kafka-config nonsense", "--kafka-config"}}) {
    const CliRun run = Shell("SV param-node " + args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.output;
    EXPECT_NE(run.output.find(flag), std::string::npos) << args << "\n" << run.output;
  }
}

TEST_F(ParamNodeCliTest, MergesPushesStopsOnSigintAndServeAnswersThePushedVector) {
  auto broker = EmbeddedBroker::Start({});
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  for (const char* t : {"cli.updates", "cli.params", "cli.rejected"}) {
    ASSERT_TRUE((*broker)->CreateTopic(t, 1).ok());
  }
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  ASSERT_EQ(conf->set("bootstrap.servers", (*broker)->bootstrap(), err), RdKafka::Conf::CONF_OK);
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), err));
  ASSERT_TRUE(producer) << err;
  ParamMessageHeader h;
  h.kind = ParamMessageKind::kPush;
  h.dim = 4;
  h.sender = 7;
  std::vector<ParamRecord> records(2);
  records[0].word = "cat";
  records[0].has_count = true;
  records[0].count = 5;
  records[0].input = {0.25f, -0.5f, 1.0f, 2.0f};
  records[0].output = {0.0f, 0.0f, 0.0f, 0.5f};
  records[1].word = "dog";
  records[1].has_count = true;
  records[1].count = 2;
  records[1].input = {1.0f, 1.0f, 1.0f, 1.0f};
  StatusOr<std::vector<std::string>> messages = EncodeParamMessages(h, records);
  ASSERT_TRUE(messages.ok()) << messages.status().ToString();
  messages->push_back("not a push");
  for (const std::string& m : *messages) {
    ASSERT_EQ(producer->produce("cli.updates", 0, RdKafka::Producer::RK_MSG_COPY,
                                const_cast<char*>(m.data()), m.size(), nullptr, 0, 0, nullptr),
              RdKafka::ERR_NO_ERROR);
  }
  ASSERT_EQ(producer->flush(10000), RdKafka::ERR_NO_ERROR);

  const std::string state = (dir_ / "node").string();
  Child node({"param-node", "--shard", "0", "--shards", "1", "--state", state, "--brokers",
              (*broker)->bootstrap(), "--prefix", "cli", "--merge", "sum", "--metrics",
              "127.0.0.1:0", "--snapshot-every", "3600s"},
             "metrics http://127.0.0.1:%d/metrics");
  ASSERT_GT(node.port(), 0) << node.Output();
  // Waits (60 s at most, a bound and not a timed assertion) for both messages to be consumed.
  std::string metrics;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    metrics = HttpGet(node.port(), "/metrics").second;
    if (Metric(metrics, "streamvec_param_node_messages_total{shard=\"0\"}") >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Metric(metrics, "streamvec_param_node_merges_total{shard=\"0\"}"), 1) << metrics;
  EXPECT_EQ(Metric(metrics, "streamvec_param_node_rejected_total{shard=\"0\"}"), 1) << metrics;
  EXPECT_EQ(Metric(metrics, "streamvec_param_node_rows{shard=\"0\"}"), 2) << metrics;
  EXPECT_EQ(HttpGet(node.port(), "/other").first, 404);
  node.Signal(SIGINT);
  ASSERT_EQ(node.Wait(), 0) << node.Output();
  EXPECT_NE(node.Output().find("param-node shard 0 of 1: 2 messages (1 rejected), 1 merged"),
            std::string::npos)
      << node.Output();

  Child serve({"serve", "--state", state, "--http", "127.0.0.1:0", "--http-threads", "2"},
              "serving http://127.0.0.1:%d");
  ASSERT_GT(serve.port(), 0) << serve.Output();
  const auto [code, body] = HttpGet(serve.port(), "/v1/vectors/cat");
  ASSERT_EQ(code, 200) << body;
  const nlohmann::json v = nlohmann::json::parse(body);
  const std::vector<float> want = {0.25f, -0.5f, 1.0f, 2.0f};
  EXPECT_EQ(v["vector"].get<std::vector<float>>(), want) << body;
  EXPECT_EQ(HttpGet(serve.port(), "/v1/vectors/dog").first, 200);
  serve.Signal(SIGINT);
  EXPECT_EQ(serve.Wait(), 0) << serve.Output();
}

// Waits (60 s at most: a bound, not a timed assertion) until `sample` reaches `at_least` in the
// node's /metrics; returns the last value.
double WaitForMetric(int port, const std::string& sample, double at_least) {
  double v = -1;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    v = Metric(HttpGet(port, "/metrics").second, sample);
    if (v >= at_least) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return v;
}

void Produce(RdKafka::Producer* producer, const std::string& topic, uint32_t sender,
             const std::string& word, std::vector<float> input) {
  ParamMessageHeader h;
  h.kind = ParamMessageKind::kPush;
  h.dim = static_cast<uint32_t>(input.size());
  h.sender = sender;
  ParamRecord r;
  r.word = word;
  r.has_count = true;
  r.count = 1;
  r.input = std::move(input);
  StatusOr<std::vector<std::string>> m = EncodeParamMessages(h, std::vector<ParamRecord>{r});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(producer->produce(topic, 0, RdKafka::Producer::RK_MSG_COPY, m->front().data(),
                              m->front().size(), nullptr, 0, 0, nullptr),
            RdKafka::ERR_NO_ERROR);
  ASSERT_EQ(producer->flush(10000), RdKafka::ERR_NO_ERROR);
}

// kill -9 after a snapshot and a later merge: the restarted node keeps what the snapshot held and
// merges what came after it again, once (sum: a double merge or a lost one changes the row).
TEST_F(ParamNodeCliTest, Sigkill9ThenRestartMergesEveryPushExactlyOnceIntoTheRows) {
  auto broker = EmbeddedBroker::Start({});
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  for (const char* t : {"k9.updates", "k9.params", "k9.rejected"}) {
    ASSERT_TRUE((*broker)->CreateTopic(t, 1).ok());
  }
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  ASSERT_EQ(conf->set("bootstrap.servers", (*broker)->bootstrap(), err), RdKafka::Conf::CONF_OK);
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), err));
  ASSERT_TRUE(producer) << err;
  const std::string state = (dir_ / "node").string();
  const std::vector<std::string> args = {"param-node", "--shard", "0", "--shards", "1",
                                         "--state", state, "--brokers", (*broker)->bootstrap(),
                                         "--prefix", "k9", "--merge", "sum"};
  Produce(producer.get(), "k9.updates", 1, "cat", {1.0f, 2.0f, 3.0f});
  {
    std::vector<std::string> a = args;
    for (const char* x : {"--snapshot-every", "0.5s", "--metrics", "127.0.0.1:0"}) a.push_back(x);
    Child node(a, "metrics http://127.0.0.1:%d/metrics");
    ASSERT_GT(node.port(), 0) << node.Output();
    ASSERT_GE(WaitForMetric(node.port(), "streamvec_param_node_snapshot_version{shard=\"0\"}", 1),
              1);
    Produce(producer.get(), "k9.updates", 2, "cat", {1.0f, 1.0f, 1.0f});
    ASSERT_GE(WaitForMetric(node.port(), "streamvec_param_node_merges_total{shard=\"0\"}", 2), 2);
    node.Signal(SIGKILL);
    EXPECT_EQ(node.Wait(), -1);
  }
  std::vector<std::string> a = args;
  std::string line = "SV";
  for (size_t i = 0; i < a.size(); ++i) line += " " + a[i];
  const CliRun restarted = Shell(line + " --max-idle 1");
  ASSERT_EQ(restarted.exit_code, 0) << restarted.output;
  EXPECT_NE(restarted.output.find("clock 2,"), std::string::npos) << restarted.output;
  const std::string out = (dir_ / "v.txt").string();
  ASSERT_EQ(Shell("SV export --state " + state + " --output " + out).exit_code, 0);
  std::FILE* f = std::fopen(out.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[256];
  const size_t got = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  EXPECT_EQ(std::string(buf, got), "1 3\ncat 2 3 4\n");
}

// Two shards, each run until idle; `serve` and `export` given both states answer the words of
// both.
TEST_F(ParamNodeCliTest, ServeAndExportJoinTheShardsStates) {
  auto broker = EmbeddedBroker::Start({});
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  ASSERT_TRUE((*broker)->CreateTopic("two.updates", 2).ok());
  ASSERT_TRUE((*broker)->CreateTopic("two.params", 2).ok());
  ASSERT_TRUE((*broker)->CreateTopic("two.rejected", 1).ok());
  // A word of each shard.
  std::string word[2];
  for (int i = 0; word[0].empty() || word[1].empty(); ++i) {
    const std::string w = "w" + std::to_string(i);
    std::string& slot = word[ShardOf(w, 2)];
    if (slot.empty()) slot = w;
  }
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  ASSERT_EQ(conf->set("bootstrap.servers", (*broker)->bootstrap(), err), RdKafka::Conf::CONF_OK);
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), err));
  ASSERT_TRUE(producer) << err;
  for (uint32_t shard = 0; shard < 2; ++shard) {
    ParamMessageHeader h;
    h.kind = ParamMessageKind::kPush;
    h.dim = 3;
    h.sender = 1;
    ParamRecord r;
    r.word = word[shard];
    r.has_count = true;
    r.count = 1 + 2 * shard;  // shard 1's word is the more frequent
    r.input = {1.0f + shard, 2.0f, 3.0f};
    StatusOr<std::vector<std::string>> m = EncodeParamMessages(h, std::vector<ParamRecord>{r});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_EQ(producer->produce("two.updates", static_cast<int32_t>(shard),
                                RdKafka::Producer::RK_MSG_COPY, m->front().data(),
                                m->front().size(), nullptr, 0, 0, nullptr),
              RdKafka::ERR_NO_ERROR);
  }
  ASSERT_EQ(producer->flush(10000), RdKafka::ERR_NO_ERROR);
  const std::string a = (dir_ / "a").string(), b = (dir_ / "b").string();
  for (const auto& [shard, state] : {std::pair{0, a}, std::pair{1, b}}) {
    const CliRun run = Shell("SV param-node --shard " + std::to_string(shard) +
                             " --shards 2 --prefix two --max-idle 1 --brokers " +
                             (*broker)->bootstrap() + " --state " + state);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("1 merged"), std::string::npos) << run.output;
  }

  const std::string out = (dir_ / "v.txt").string();
  const CliRun exported = Shell("SV export --state " + a + " --state " + b + " --output " + out);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  std::FILE* f = std::fopen(out.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[4096];
  const size_t got = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  const std::string text(buf, got);
  // The union in count order: shard 1's word (3) before shard 0's (1).
  EXPECT_EQ(text.rfind("2 3\n" + word[1] + " 2 2 3", 0), 0u) << text;
  EXPECT_NE(text.find(word[0] + " 1 2 3"), std::string::npos) << text;

  Child serve({"serve", "--state", a, "--state", b, "--http", "127.0.0.1:0", "--http-threads",
               "2"},
              "serving http://127.0.0.1:%d");
  ASSERT_GT(serve.port(), 0) << serve.Output();
  for (uint32_t shard = 0; shard < 2; ++shard) {
    const auto [code, body] = HttpGet(serve.port(), "/v1/vectors/" + word[shard]);
    ASSERT_EQ(code, 200) << body;
    EXPECT_EQ(nlohmann::json::parse(body)["vector"][0].get<float>(), 1.0f + shard) << body;
  }
  // The shards' counts come along: GET /v1/words lists the union with them, in count order.
  const auto [code, body] = HttpGet(serve.port(), "/v1/words");
  ASSERT_EQ(code, 200) << body;
  const nlohmann::json words = nlohmann::json::parse(body)["words"];
  ASSERT_EQ(words.size(), 2u) << body;
  EXPECT_EQ(words[0]["word"], word[1]) << body;
  EXPECT_EQ(words[0]["count"], 3.0) << body;
  EXPECT_EQ(words[1]["word"], word[0]) << body;
  EXPECT_EQ(words[1]["count"], 1.0) << body;
  serve.Signal(SIGINT);
  EXPECT_EQ(serve.Wait(), 0) << serve.Output();
}

}  // namespace
}  // namespace streamvec

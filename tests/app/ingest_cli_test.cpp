// Runs the built `streamvec broker` and `streamvec ingest`: usage errors, and a file ingested
// through a broker process read back by a librdkafka consumer.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../kafka/kafka_test_util.h"
#include "cli_util.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/kafka/document.h"

namespace streamvec {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;


// A port free on 127.0.0.1 right now.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

class IngestCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("streamvec_ingest_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (broker_pid_ > 0) {
      ::kill(broker_pid_, SIGTERM);
      int status = 0;
      ::waitpid(broker_pid_, &status, 0);
    }
    fs::remove_all(dir_);
  }

  // Starts `streamvec broker` in the background and waits for its bootstrap file.
  std::string StartBroker(const std::string& prefix, bool hold_trainers = false) {
    const std::string file = (dir_ / "bootstrap").string();
    broker_pid_ = ::fork();
    if (broker_pid_ == 0) {
      const std::string null_out = "/dev/null";
      std::freopen(null_out.c_str(), "w", stdout);
      ::execl(STREAMVEC_BINARY, STREAMVEC_BINARY, "broker", "--partitions", "2",
              "--bootstrap-file", file.c_str(), "--prefix", prefix.c_str(),
              hold_trainers ? "--hold-trainers" : static_cast<char*>(nullptr),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 600 && !fs::exists(file); ++i) {  // a group keeper takes ~7 s
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    StatusOr<std::string> bootstrap = ReadBootstrapFile(file);
    return bootstrap.ok() ? *bootstrap : "";
  }

  fs::path dir_;
  pid_t broker_pid_ = -1;
};

TEST_F(IngestCliTest, BadFlagsExitTwoNamingTheFlag) {
  CliRun run = Shell("SV ingest --from x.txt --brokers 127.0.0.1:1 --max-lag-bytes lots");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--max-lag-bytes"));

  run = Shell("SV ingest --brokers 127.0.0.1:1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--from"));

  run = Shell("SV ingest --from - --brokers 127.0.0.1:1 --kafka-config novalue");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--kafka-config"));

  run = Shell("SV ingest --from -");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--brokers"));

  run = Shell("SV broker --brokers 0");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--brokers"));
}

TEST_F(IngestCliTest, MissingInputOrBootstrapFileExitsTwo) {
  CliRun run = Shell("SV ingest --from '" + (dir_ / "nope.txt").string() +
                        "' --brokers 127.0.0.1:1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("nope.txt"));

  run = Shell("SV ingest --from - --bootstrap-file '" + (dir_ / "none").string() + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--bootstrap-file"));
}

TEST_F(IngestCliTest, StdinThroughABrokerProcessArrivesInTheTopic) {
  const std::string bootstrap = StartBroker("cli");
  ASSERT_FALSE(bootstrap.empty());
  const CliRun run =
      Shell("printf 'alpha beta\\n\\ngamma \\377\\ndelta' | SV ingest --from - --bootstrap-file '" +
         (dir_ / "bootstrap").string() + "' --prefix cli");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("ingest: 2 documents (2 delivered), 1 rejected"));

  testing::TestConsumer consumer(bootstrap, "cli.docs");
  const std::vector<testing::Record> records = consumer.Read(2, 10000);
  ASSERT_EQ(records.size(), 2u);
  std::vector<std::string> texts;
  for (const testing::Record& r : records) {
    StatusOr<Document> doc = ParseDocument(r.value);
    ASSERT_TRUE(doc.ok());
    EXPECT_EQ(doc->source, "stdin");
    texts.push_back(doc->text);
  }
  EXPECT_THAT(texts, ::testing::UnorderedElementsAre("alpha beta", "delta"));
}

// kill -9 of `ingest --offsets-file` while it waits for more stdin, then a restart given the whole
// input: every line arrives, none that the offsets file recorded as delivered arrives twice, and
// the restart does not send everything again.
TEST_F(IngestCliTest, KilledIngestResumesFromItsOffsetsFile) {
  const std::string bootstrap = StartBroker("res");
  ASSERT_FALSE(bootstrap.empty());
  constexpr int kLines = 4000;
  std::string input;
  std::vector<size_t> line_end;
  for (int i = 0; i < kLines; ++i) {
    input += "line " + std::to_string(i) + " of the resumed stream\n";
    line_end.push_back(input.size());
  }
  const std::string offsets = (dir_ / "offsets.json").string();
  const std::string bootstrap_file = (dir_ / "bootstrap").string();
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[0], 0);
    ::close(pipe_fds[1]);
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    ::execl(STREAMVEC_BINARY, STREAMVEC_BINARY, "ingest", "--from", "-", "--bootstrap-file",
            bootstrap_file.c_str(), "--prefix", "res", "--offsets-file", offsets.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipe_fds[0]);
  // The first half, then wait (stdin stays open) until the file records most of it delivered.
  const size_t half = line_end[kLines / 2 - 1];
  ASSERT_EQ(::write(pipe_fds[1], input.data(), half), static_cast<ssize_t>(half));
  int64_t recorded = 0;
  for (int i = 0; i < 400 && recorded < static_cast<int64_t>(line_end[kLines / 4]); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(offsets);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_discarded() && j.contains("positions") && j["positions"].contains("stdin")) {
      recorded = j["positions"]["stdin"].get<int64_t>();
    }
  }
  ASSERT_GE(recorded, static_cast<int64_t>(line_end[kLines / 4]));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(pipe_fds[1]);
  std::ifstream in(offsets);
  const int64_t at_kill = nlohmann::json::parse(in)["positions"]["stdin"].get<int64_t>();
  ASSERT_GE(at_kill, recorded);

  const std::string input_file = (dir_ / "input.txt").string();
  std::ofstream(input_file, std::ios::binary) << input;
  const CliRun run =
      Shell("SV ingest --from - --bootstrap-file '" + bootstrap_file +
            "' --prefix res --offsets-file '" + offsets + "' < '" + input_file + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("resuming 1 source(s)"));

  testing::TestConsumer consumer(bootstrap, "res.docs");
  std::map<int64_t, int> seen;  // document end offset -> times
  for (const testing::Record& r : consumer.Read(2 * kLines, 3000)) {
    StatusOr<Document> doc = ParseDocument(r.value);
    ASSERT_TRUE(doc.ok());
    ++seen[doc->offset];
  }
  int twice = 0;
  for (int i = 0; i < kLines; ++i) {
    const int64_t end = static_cast<int64_t>(line_end[i]);
    ASSERT_GE(seen[end], 1) << "line " << i << " never arrived";
    if (end <= at_kill) {
      EXPECT_EQ(seen[end], 1) << "line " << i << " recorded yet sent again";
    }
    twice += seen[end] > 1;
  }
  EXPECT_LT(twice, kLines / 4);
}

// `streamvec broker --hold-trainers` holds <prefix>.trainers: a trainer joins it and trains what
// ingest sent; a trainer with --assign is refused up front (the held group would refuse its
// commits, and the ingestor's flow control would wait for them forever).
TEST_F(IngestCliTest, TrainerJoinsTheBrokersHeldGroupAndAssignIsRefused) {
  ASSERT_FALSE(StartBroker("held", /*hold_trainers=*/true).empty());
  const std::string bs = "--bootstrap-file '" + (dir_ / "bootstrap").string() + "' --prefix held";
  CliRun run = Shell("printf 'alpha beta gamma\ndelta epsilon\n' | SV ingest --from - " + bs);
  ASSERT_EQ(run.exit_code, 0) << run.output;

  run = Shell("SV train " + bs + " --state '" + (dir_ / "assigned").string() +
              "' --assign all --max-idle 1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--assign: group held.trainers is held"));
  EXPECT_THAT(run.output, HasSubstr("--hold-trainers"));

  run = Shell("SV train " + bs + " --state '" + (dir_ / "joined").string() +
              "' --max-idle 2 --min-count 1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("group held.trainers is held on the embedded broker"));
  EXPECT_THAT(run.output, HasSubstr("group held.trainers, 2 documents"));
}

// `train --brokers ... --metrics HOST:PORT` serves the trainer's counters while it runs.
TEST_F(IngestCliTest, TrainerServesItsMetricsWhileItRuns) {
  ASSERT_FALSE(StartBroker("met").empty());
  const std::string file = (dir_ / "bootstrap").string();
  CliRun run = Shell("printf 'alpha beta gamma\\ndelta epsilon\\n' | SV ingest --from - "
                     "--bootstrap-file '" + file + "' --prefix met");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  run = Shell("SV train --input x --output y --metrics 127.0.0.1:0");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--metrics"));
  run = Shell("SV train --input x --output y --param-shards 2");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--param-shards is for a Kafka trainer"));
  run = Shell("SV train --bootstrap-file '" + file + "' --state '" + (dir_ / "s0").string() +
              "' --metrics nowhere");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--metrics must be HOST:PORT"));

  const int port = FreePort();
  const std::string state = (dir_ / "st").string();
  const std::string metrics = "127.0.0.1:" + std::to_string(port);
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    ::execl(STREAMVEC_BINARY, STREAMVEC_BINARY, "train", "--bootstrap-file", file.c_str(),
            "--prefix", "met", "--state", state.c_str(), "--min-count", "1", "--max-idle", "30",
            "--metrics", metrics.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::pair<int, std::string> scrape;
  for (int i = 0; i < 600 && Metric(scrape.second, "streamvec_train_documents_total") != 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    scrape = HttpGet(port, "/metrics");
  }
  EXPECT_EQ(scrape.first, 200);
  const std::string& body = scrape.second;
  EXPECT_THAT(body, HasSubstr("streamvec_train_documents_total 2\n"));
  EXPECT_THAT(body, HasSubstr("streamvec_train_words_total 5\n"));
  EXPECT_THAT(body, HasSubstr("# TYPE streamvec_consumer_lag_messages gauge"));
  EXPECT_EQ(HttpGet(port, "/v1/vectors/alpha").first, 404);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace streamvec

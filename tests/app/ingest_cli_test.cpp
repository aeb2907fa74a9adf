// Runs the built `streamvec broker` and `streamvec ingest`: usage errors, and a file ingested
// through a broker process read back by a librdkafka consumer.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../kafka/kafka_test_util.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/kafka/document.h"
#include "cli_util.h"

namespace streamvec {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;


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
  std::string StartBroker(const std::string& prefix) {
    const std::string file = (dir_ / "bootstrap").string();
    broker_pid_ = ::fork();
    if (broker_pid_ == 0) {
      const std::string null_out = "/dev/null";
      std::freopen(null_out.c_str(), "w", stdout);
      ::execl(STREAMVEC_BINARY, STREAMVEC_BINARY, "broker", "--partitions", "2",
              "--bootstrap-file", file.c_str(), "--prefix", prefix.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 600 && !fs::exists(file); ++i) {  // the group keeper takes ~7.5 s
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

// `streamvec broker` holds <prefix>.trainers: a trainer joins it and trains what ingest sent; a
// trainer with --assign is refused up front (the held group would refuse its commits, and the
// ingestor's flow control would wait for them forever).
TEST_F(IngestCliTest, TrainerJoinsTheBrokersHeldGroupAndAssignIsRefused) {
  ASSERT_FALSE(StartBroker("held").empty());
  const std::string bs = "--bootstrap-file '" + (dir_ / "bootstrap").string() + "' --prefix held";
  CliRun run = Shell("printf 'alpha beta gamma\ndelta epsilon\n' | SV ingest --from - " + bs);
  ASSERT_EQ(run.exit_code, 0) << run.output;

  run = Shell("SV train " + bs + " --state '" + (dir_ / "assigned").string() +
              "' --assign all --max-idle 1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--assign: group held.trainers is held"));
  EXPECT_THAT(run.output, HasSubstr("--no-hold-group"));

  run = Shell("SV train " + bs + " --state '" + (dir_ / "joined").string() +
              "' --max-idle 2 --min-count 1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("group held.trainers is held on the embedded broker"));
  EXPECT_THAT(run.output, HasSubstr("group held.trainers, 2 documents"));
}

}  // namespace
}  // namespace streamvec

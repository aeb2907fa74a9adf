// Runs the built `streamvec train --brokers ...` against an embedded broker started in this test
// process, and checks that `train --stream` snapshots hold the serving embedding too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafkacpp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli_util.h"
#include "streamvec/charmodel/char_model.h"
#include "streamvec/kafka/broker.h"
#include "streamvec/kafka/document.h"
#include "streamvec/store/embedding_entries.h"
#include "streamvec/store/state_store.h"

namespace streamvec {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;


class TrainKafkaCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("streamvec_train_kafka_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

constexpr char kKafkaFlags[] =
    " --kafka-config session.timeout.ms=6000 --kafka-config heartbeat.interval.ms=500"
    " --dim 8 --min-count 1 --vocab-capacity 64 --noise-table-size 4096 --threads 1 ";

TEST_F(TrainKafkaCliTest, TrainsEveryDocumentOfTheTopicAndExitsWhenIdle) {
  auto broker = EmbeddedBroker::Start({});
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  ASSERT_TRUE((*broker)->CreateTopic("cli.docs", 4).ok());
  ASSERT_TRUE((*broker)->CreateTopic("cli.rejected", 1).ok());
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  ASSERT_EQ(conf->set("bootstrap.servers", (*broker)->bootstrap(), err), RdKafka::Conf::CONF_OK);
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), err));
  ASSERT_TRUE(producer) << err;
  std::vector<std::string> messages;
  for (int i = 0; i < 60; ++i) {
    Document d;
    d.source = "file" + std::to_string(i % 3);
    d.id = d.source + ":" + std::to_string(i);
    d.text = "alpha beta gamma delta " + std::to_string(i % 5);
    d.offset = 10 * (i + 1);
    messages.push_back(DocumentToJson(d));
  }
  messages.push_back("garbage");
  for (const std::string& m : messages) {
    ASSERT_EQ(
        producer->produce("cli.docs", RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
                          const_cast<char*>(m.data()), m.size(), nullptr, 0, 0, nullptr),
        RdKafka::ERR_NO_ERROR);
  }
  ASSERT_EQ(producer->flush(10000), RdKafka::ERR_NO_ERROR);

  const std::string state = Path("state");
  CliRun run =
      Shell("SV train --brokers " + (*broker)->bootstrap() +
            " --prefix cli --group cli-trainers --state " + state + " --max-idle 1" + kKafkaFlags);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("60 documents (1 rejected), 300 words"));
  EXPECT_THAT(run.output, HasSubstr("group cli-trainers"));

  auto store = StateStore::Open(state, StateStore::Mode::kReadOnly);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  StateStore& s = **store;
  auto offsets = s.Get("kafka/offsets");
  ASSERT_TRUE(offsets.ok());
  EXPECT_THAT(*offsets, HasSubstr("\"topic\":\"cli.docs\""));
  auto positions = s.Get("ingest/positions");
  ASSERT_TRUE(positions.ok());
  EXPECT_EQ(*positions, R"({"file0":580,"file1":590,"file2":600})");
  auto embedding = ReadEmbeddingEntries([&s](const std::string& k) { return s.Get(k); });
  ASSERT_TRUE(embedding.ok()) << embedding.status().ToString();
  EXPECT_EQ(embedding->rows(), 9u);  // alpha beta gamma delta 0..4

  // While a process holds the state, a second trainer is refused with exit 2.
  auto holder = StateStore::Open(Path("held"), StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(holder.ok());
  store->reset();
  run = Shell("SV train --brokers " + (*broker)->bootstrap() + " --prefix cli --state " +
              Path("held") + " --max-idle 1" + kKafkaFlags);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--state"));
}

TEST_F(TrainKafkaCliTest, UsageErrorsNameTheFlag) {
  const std::string state = " --state " + Path("s");
  const std::string sv = "SV train --brokers 127.0.0.1:1" + state;
  const std::pair<std::string, std::string> cases[] = {
      // command, what its message names
      {"SV train --brokers 127.0.0.1:1 --group g", "--state"},
      {sv + " --input - --stream", "--stream"},
      {sv + " --kafka-config no-equals-sign", "--kafka-config"},
      {sv + " --kafka-config no.such.property=1", "no.such.property"},
      {"SV train --bootstrap-file " + Path("missing") + state, "--bootstrap-file"},
      {sv + " --snapshot-every 5x", "--snapshot-every"},
      {"SV train --group g" + state, "--brokers"},
      {sv + " --param-shards 1 --max-staleness -2", "--max-staleness"},
      {sv + " --param-shards 1 --pull-every -1", "--pull-every"},
      {sv + " --param-shards 1 --push-max-period 0", "--push-max-period"},
      {sv + " --param-shards 1 --delta-precision fp8",
       "--delta-precision: a precision must be fp32 or fp16"},
      {sv + " --model char-lstm --param-shards 1", "--param-shards"},
      {sv + " --model char-lstm --char-distill", "--char-distill"},
      {sv + " --char-mode replace", "--model char-lstm"},
      {sv + " --model char-lstm --char-batch-words 0", "--char-batch-words"},
      {sv + " --epochs 3", "--epochs applies to batch training"},
      {"SV train --input - --stream --state " + Path("st") + " --min-alpha 0.001",
       "--min-alpha applies to batch training only"},
      {"SV train --input - --epochs 2 --output " + Path("v.txt") + " --model char-lstm",
       "--epochs 2: more than one pass needs --input FILE"},
      {"SV train --input " + Path("in.txt") + " --output " + Path("v.txt") +
           " --model char-lstm --replica-sync 4",
       "--replica-sync applies to the sgns and cbow batch trainer only"},
  };
  for (const auto& [command, named] : cases) {
    const CliRun run = Shell(command);
    EXPECT_EQ(run.exit_code, 2) << command;
    EXPECT_THAT(run.output, HasSubstr(named)) << command;
  }
}

TEST_F(TrainKafkaCliTest, StdinStreamSnapshotsHoldTheServingEmbeddingAndMetadata) {
  { std::ofstream(Path("in.txt")) << "one two three four\none two three five\n"; }
  const CliRun run = Shell("SV train --input - --stream --state " + Path("s") +
                           " --dim 4 --min-count 1 --threads 1 < " + Path("in.txt"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto store = StateStore::Open(Path("s"), StateStore::Mode::kReadOnly);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  StateStore& s = **store;
  auto embedding = ReadEmbeddingEntries([&s](const std::string& k) { return s.Get(k); });
  ASSERT_TRUE(embedding.ok()) << embedding.status().ToString();
  EXPECT_EQ(embedding->dim, 4);
  EXPECT_EQ(embedding->rows(), 5u);
  EXPECT_EQ(embedding->words[0], "one");
  // The metadata, once the store keeps it (store/ is adding it): words and model settings.
  auto meta = s.CurrentMetadata();
  if (meta.ok()) {
    EXPECT_THAT(*meta, HasSubstr("\"words_seen\":8"));
    EXPECT_THAT(*meta, HasSubstr("\"dim\":4"));
  }
}

// --char-ngram-buckets brings its own distillation defaults (app/char_flags.h,
// ApplyCharModelDefaults); flags given win; without a bag the defaults are MIMICK's as before.
TEST_F(TrainKafkaCliTest, AnNgramBagBringsItsDistillationDefaultsAndGivenFlagsWin) {
  { std::ofstream(Path("bag.txt")) << "one two three four\none two three five\n"; }
  struct Shape {
    int hidden, char_dim;
    bool bidirectional;
    int ngram_buckets;
    uint64_t every_words;
    int batch_types;
  };
  auto trained = [&](const std::string& name, const std::string& flags) -> Shape {
    const CliRun run =
        Shell("SV train --input " + Path("bag.txt") + " --stream --state " + Path(name) +
              " --dim 4 --min-count 1 --threads 1 --char-distill " + flags);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    auto store = StateStore::Open(Path(name), StateStore::Mode::kReadOnly);
    if (!store.ok()) {
      ADD_FAILURE() << store.status().ToString();
      return {};
    }
    auto bytes = (*store)->Get(kCharModelEntry);
    auto distill = (*store)->Get("charmodel/distill");
    if (!bytes.ok() || !distill.ok()) {
      ADD_FAILURE() << "no character model in " << name;
      return {};
    }
    auto model = CharModel::Deserialize(*bytes);
    if (!model.ok()) {
      ADD_FAILURE() << model.status().ToString();
      return {};
    }
    const CharModelOptions& o = (*model)->options();
    const nlohmann::json j = nlohmann::json::parse(*distill);
    return {o.hidden,
            o.char_dim,
            o.bidirectional,
            o.ngram_buckets,
            j.at("every_words").get<uint64_t>(),
            j.at("batch_types").get<int>()};
  };
  Shape s = trained("bag", "--char-ngram-buckets 1000");
  EXPECT_EQ(s.ngram_buckets, 1000);
  EXPECT_EQ(s.hidden, 8);
  EXPECT_EQ(s.char_dim, 8);
  EXPECT_FALSE(s.bidirectional);
  EXPECT_EQ(s.every_words, 50000u);
  EXPECT_EQ(s.batch_types, 1024);
  s = trained("given", "--char-ngram-buckets 1000 --char-hidden 16 --char-distill-every 7000");
  EXPECT_EQ(s.hidden, 16);
  EXPECT_EQ(s.every_words, 7000u);
  EXPECT_EQ(s.batch_types, 1024);
  s = trained("mimick", "");
  EXPECT_EQ(s.ngram_buckets, 0);
  EXPECT_EQ(s.hidden, 50);
  EXPECT_EQ(s.char_dim, 20);
  EXPECT_TRUE(s.bidirectional);
  EXPECT_EQ(s.every_words, 1000000u);
  EXPECT_EQ(s.batch_types, 256);
}

}  // namespace
}  // namespace streamvec

// The embedded broker (librdkafka's mock cluster) with real librdkafka clients on 127.0.0.1.
#include "streamvec/kafka/broker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kafka_test_util.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/kafka/consumer_lag.h"
#include "streamvec/kafka/rdkafka_conf.h"

namespace streamvec {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using testing::Record;
using testing::TestConsumer;

KafkaOptions Options(const EmbeddedBroker& broker) {
  KafkaOptions options;
  options.brokers = broker.bootstrap();
  return options;
}

std::unique_ptr<EmbeddedBroker> StartBroker(int brokers = 1, int partitions = 4) {
  StatusOr<std::unique_ptr<EmbeddedBroker>> broker =
      EmbeddedBroker::Start({.brokers = brokers, .partitions = partitions});
  SV_CHECK(broker.ok());
  return std::move(broker).value();
}

TEST(EmbeddedBrokerTest, RejectsCountsOutOfRange) {
  EXPECT_EQ(EmbeddedBroker::Start({.brokers = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EmbeddedBroker::Start({.brokers = 17}).status().code(),
            StatusCode::kInvalidArgument);
  StatusOr<std::unique_ptr<EmbeddedBroker>> bad = EmbeddedBroker::Start({.partitions = 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--partitions"));
}

TEST(EmbeddedBrokerTest, BootstrapListsOneLoopbackPortPerBroker) {
  auto broker = StartBroker(3);
  EXPECT_THAT(broker->bootstrap(),
              MatchesRegex("127\\.0\\.0\\.1:[0-9]+,127\\.0\\.0\\.1:[0-9]+,127\\.0\\.0\\.1:[0-9]+"));
}

TEST(EmbeddedBrokerTest, CreateTopicIsIdempotentAndValidates) {
  auto broker = StartBroker();
  EXPECT_TRUE(broker->CreateTopic("t.docs").ok());
  EXPECT_TRUE(broker->CreateTopic("t.docs").ok());
  EXPECT_EQ(broker->CreateTopic("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(broker->CreateTopic("x", -3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(broker->SetBrokerUp(9, false).code(), StatusCode::kInvalidArgument);
}

TEST(EmbeddedBrokerTest, ProducerAndConsumerExchangeKeyedMessagesInOrder) {
  auto broker = StartBroker(2, 4);
  ASSERT_TRUE(broker->CreateTopic("ex.docs").ok());
  std::vector<Record> sent;
  for (int i = 0; i < 2000; ++i) {
    sent.push_back({.key = "source-" + std::to_string(i % 5), .value = "message " +
                                                                      std::to_string(i)});
  }
  ASSERT_EQ(testing::ProduceAll(broker->bootstrap(), "ex.docs", sent), 0);

  TestConsumer consumer(broker->bootstrap(), "ex.docs");
  EXPECT_EQ(consumer.partitions(), 4);
  const std::vector<Record> got = consumer.Read(sent.size());
  ASSERT_EQ(got.size(), sent.size());
  // Per key: one partition, and the messages in the order they were produced.
  std::map<std::string, std::vector<int>> by_key;
  std::map<std::string, std::set<int32_t>> partitions;
  for (const Record& r : got) {
    by_key[r.key].push_back(std::stoi(r.value.substr(8)));
    partitions[r.key].insert(r.partition);
  }
  ASSERT_EQ(by_key.size(), 5u);
  for (const auto& [key, values] : by_key) {
    EXPECT_EQ(partitions[key].size(), 1u) << key;
    ASSERT_EQ(values.size(), 400u);
    for (size_t i = 1; i < values.size(); ++i) EXPECT_EQ(values[i], values[i - 1] + 5);
  }
}

// A consumer of `topic` in `group` that joins by subscribing (the trainer's default), with the
// session and heartbeat a trainer takes in a held group. With `slow_ms`, it takes that long after
// each JoinGroup response before it syncs, as a trainer does on busy cores.
class GroupMember {
 public:
  GroupMember(const std::string& bootstrap, const std::string& group, const std::string& topic,
              int slow_ms = 0)
      : slow_ms_(slow_ms) {
    rd_kafka_conf_t* conf = testing::TestConf(
        bootstrap, {{"group.id", group},
                    {"enable.auto.commit", "false"},
                    {"session.timeout.ms", std::to_string(kHeldGroupSessionMs)},
                    {"heartbeat.interval.ms", std::to_string(kHeldGroupHeartbeatMs)}});
    SV_CHECK(rd_kafka_conf_interceptor_add_on_new(conf, "test-join-count", AddJoinCounter, this) ==
             RD_KAFKA_RESP_ERR_NO_ERROR);
    char err[512];
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    SV_CHECK(rk_ != nullptr);
    rd_kafka_poll_set_consumer(rk_);
    rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, topic.c_str(), RD_KAFKA_PARTITION_UA);
    SV_CHECK(rd_kafka_subscribe(rk_, topics) == RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(topics);
  }
  ~GroupMember() {
    rd_kafka_consumer_close(rk_);
    rd_kafka_destroy(rk_);
  }
  GroupMember(const GroupMember&) = delete;
  GroupMember& operator=(const GroupMember&) = delete;

  // Polls once; returns the assignment as "topic/partition" strings.
  std::set<std::string> Poll() {
    if (rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 20)) rd_kafka_message_destroy(m);
    std::set<std::string> out;
    rd_kafka_topic_partition_list_t* parts = nullptr;
    if (rd_kafka_assignment(rk_, &parts) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      for (int i = 0; i < parts->cnt; ++i) {
        out.insert(std::string(parts->elems[i].topic) + "/" +
                   std::to_string(parts->elems[i].partition));
      }
      rd_kafka_topic_partition_list_destroy(parts);
    }
    return out;
  }

  // JoinGroup responses received so far: 1 for a member that joined in one go.
  int joins() const { return joins_.load(); }

 private:
  static rd_kafka_resp_err_t AddJoinCounter(rd_kafka_t* rk, const rd_kafka_conf_t*, void* self,
                                            char*, size_t) {
    return rd_kafka_interceptor_add_on_response_received(rk, "test-join-count", CountJoin, self);
  }
  // librdkafka 2.0.2 calls an on_response_received interceptor twice for one response (same
  // thread, same arguments): a response is counted, and waited for, once.
  static rd_kafka_resp_err_t CountJoin(rd_kafka_t*, int, const char*, int32_t, int16_t api_key,
                                       int16_t, int32_t, size_t, int64_t rtt,
                                       rd_kafka_resp_err_t err, void* self) {
    auto* member = static_cast<GroupMember*>(self);
    if (api_key != 11 /* JoinGroup */ || err != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rtt == member->last_join_rtt_) {
      return RD_KAFKA_RESP_ERR_NO_ERROR;
    }
    member->last_join_rtt_ = rtt;
    member->joins_.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(member->slow_ms_));
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  }

  const int slow_ms_;
  int64_t last_join_rtt_ = -1;  // only touched on the coordinator's broker thread
  std::atomic<int> joins_{0};
  rd_kafka_t* rk_ = nullptr;
};

// Polls every member until their assignments have `sizes` partitions (in order) or 30 s pass.
std::vector<std::set<std::string>> AwaitAssignments(const std::vector<GroupMember*>& members,
                                                    const std::vector<size_t>& sizes) {
  std::vector<std::set<std::string>> got(members.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    bool done = true;
    for (size_t i = 0; i < members.size(); ++i) {
      got[i] = members[i]->Poll();
      done = done && got[i].size() == sizes[i];
    }
    if (done) break;
  }
  return got;
}

// The group keeper takes no partition of the trainers' topic, and the group still rebalances as
// members come and go: one member gets every partition, two share them, the one left takes them
// all back.
TEST(EmbeddedBrokerTest, HeldGroupAssignsEveryPartitionToItsMembersAndStillRebalances) {
  auto broker = StartBroker(1, 4);
  ASSERT_TRUE(broker->CreateTopic("held.docs").ok());
  ASSERT_TRUE(broker->HoldGroup("held.trainers").ok());
  EXPECT_TRUE(broker->HoldGroup("held.trainers").ok());  // idempotent
  EXPECT_EQ(broker->HoldGroup("").code(), StatusCode::kInvalidArgument);
  const std::set<std::string> all = {"held.docs/0", "held.docs/1", "held.docs/2", "held.docs/3"};

  auto a = std::make_unique<GroupMember>(broker->bootstrap(), "held.trainers", "held.docs");
  EXPECT_EQ(AwaitAssignments({a.get()}, {4})[0], all);

  GroupMember b(broker->bootstrap(), "held.trainers", "held.docs");
  std::vector<std::set<std::string>> shared = AwaitAssignments({a.get(), &b}, {2, 2});
  std::set<std::string> both = shared[0];
  both.insert(shared[1].begin(), shared[1].end());
  EXPECT_EQ(shared[0].size(), 2u);
  EXPECT_EQ(both, all);  // disjoint halves, nothing to the keeper

  a.reset();  // leaves the group
  EXPECT_EQ(AwaitAssignments({&b}, {4})[0], all);
}

// A member whose SyncGroup comes a little after its JoinGroup response (a trainer starting on
// busy cores) still joins in one go: the keeper, the leader, syncs after it. (librdkafka 2.0's
// mock answers a SyncGroup that comes after the leader's with INVALID_REQUEST, and the member
// rejoined a second later.)
TEST(EmbeddedBrokerTest, SlowMemberOfAHeldGroupJoinsInOneGo) {
  auto broker = StartBroker(1, 4);
  ASSERT_TRUE(broker->CreateTopic("slow.docs").ok());
  ASSERT_TRUE(broker->HoldGroup("slow.trainers").ok());
  for (int round = 0; round < 3; ++round) {
    GroupMember member(broker->bootstrap(), "slow.trainers", "slow.docs", /*slow_ms=*/10);
    EXPECT_EQ(AwaitAssignments({&member}, {4})[0].size(), 4u);
    EXPECT_EQ(member.joins(), 1) << "round " << round;
  }
}

// The reason ingest/ needs flow control: the mock keeps a ring of about 5 MiB per partition and
// silently drops the oldest data when a producer runs ahead of its consumers.
TEST(EmbeddedBrokerTest, MockDropsOldestDataBeyondItsRingWithoutFlowControl) {
  auto broker = StartBroker(1, 1);
  ASSERT_TRUE(broker->CreateTopic("ring.docs", 1).ok());
  std::vector<Record> sent;
  const std::string filler(1024, 'x');
  for (int i = 0; i < 8 * 1024; ++i) sent.push_back({.key = "k", .value = filler});  // 8 MiB
  ASSERT_EQ(testing::ProduceAll(broker->bootstrap(), "ring.docs", sent), 0);  // all acked

  StatusOr<GroupLag> lag =
      ConsumerGroupLag(Options(*broker), "nobody", "ring.docs");
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  ASSERT_EQ(lag->partitions.size(), 1u);
  EXPECT_EQ(lag->partitions[0].high, 8 * 1024);
  EXPECT_GT(lag->partitions[0].low, 0) << "the ring should have dropped the oldest message sets";

  TestConsumer consumer(broker->bootstrap(), "ring.docs");
  const std::vector<Record> got = consumer.Read(sent.size(), 1500);
  EXPECT_LT(got.size(), sent.size());
  EXPECT_LE(got.size() * filler.size(), size_t{6} << 20);
}

TEST(ConsumerGroupLagTest, CountsFromLowWatermarkUntilCommittedThenFromCommit) {
  auto broker = StartBroker(1, 3);
  ASSERT_TRUE(broker->CreateTopic("lag.docs").ok());
  std::vector<Record> sent;
  for (int i = 0; i < 30; ++i) {
    sent.push_back({.key = "k", .value = "v" + std::to_string(i), .partition = i % 3});
  }
  ASSERT_EQ(testing::ProduceAll(broker->bootstrap(), "lag.docs", sent), 0);
  const KafkaOptions options = Options(*broker);

  StatusOr<std::unique_ptr<ConsumerGroupLagProbe>> probe =
      ConsumerGroupLagProbe::Create(options, "lag.trainers");
  ASSERT_TRUE(probe.ok());
  StatusOr<GroupLag> lag = (*probe)->Query("lag.docs");
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(lag->total, 30);
  EXPECT_EQ(lag->max_partition, 10);
  ASSERT_EQ(lag->partitions.size(), 3u);
  for (const PartitionLag& p : lag->partitions) {
    EXPECT_EQ(p.committed, -1);
    EXPECT_EQ(p.high, 10);
  }

  // A group member reads 12 messages and commits them.
  TestConsumer consumer(broker->bootstrap(), "lag.docs", "lag.trainers");
  ASSERT_EQ(consumer.Read(12).size(), 12u);
  ASSERT_TRUE(consumer.Commit());
  lag = (*probe)->Query("lag.docs");
  ASSERT_TRUE(lag.ok());
  EXPECT_EQ(lag->total, 30 - 12);
  int64_t committed = 0;
  for (const PartitionLag& p : lag->partitions) committed += std::max<int64_t>(p.committed, 0);
  EXPECT_EQ(committed, 12);

  // Another group's commits do not count.
  StatusOr<GroupLag> other = ConsumerGroupLag(options, "other.group", "lag.docs");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->total, 30);
}

TEST(ConsumerGroupLagTest, MissingTopicIsNotFoundAndDeadBrokerIsIoError) {
  auto broker = StartBroker();
  const KafkaOptions options = Options(*broker);
  StatusOr<GroupLag> lag = ConsumerGroupLag(options, "g", "no.such.topic");
  ASSERT_FALSE(lag.ok());
  EXPECT_EQ(lag.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(lag.status().message(), HasSubstr("no.such.topic"));

  ASSERT_TRUE(broker->CreateTopic("up.docs").ok());
  ASSERT_TRUE(broker->SetBrokerUp(1, false).ok());
  lag = ConsumerGroupLag(options, "g", "up.docs", 500);
  ASSERT_FALSE(lag.ok());
  EXPECT_EQ(lag.status().code(), StatusCode::kIoError);
  ASSERT_TRUE(broker->SetBrokerUp(1, true).ok());

  EXPECT_EQ(ConsumerGroupLagProbe::Create(options, "").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(KafkaConfigTest, PropertiesParseAndOverrideDefaults) {
  StatusOr<std::pair<std::string, std::string>> p = ParseKafkaProperty("linger.ms=20");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->first, "linger.ms");
  EXPECT_EQ(p->second, "20");
  EXPECT_FALSE(ParseKafkaProperty("novalue").ok());
  EXPECT_FALSE(ParseKafkaProperty("=5").ok());

  KafkaOptions options;
  options.brokers = "127.0.0.1:1";
  options.properties = {{"linger.ms", "20"}};
  StatusOr<rd_kafka_conf_t*> conf = MakeRdKafkaConf(options, {{"linger.ms", "5"}});
  ASSERT_TRUE(conf.ok());
  char value[64];
  size_t size = sizeof value;
  ASSERT_EQ(rd_kafka_conf_get(*conf, "linger.ms", value, &size), RD_KAFKA_CONF_OK);
  EXPECT_STREQ(value, "20");
  rd_kafka_conf_destroy(*conf);

  options.properties = {{"no.such.property", "1"}};
  conf = MakeRdKafkaConf(options);
  ASSERT_FALSE(conf.ok());
  EXPECT_THAT(conf.status().message(), HasSubstr("no.such.property"));
  EXPECT_FALSE(MakeRdKafkaConf(KafkaOptions{}).ok());
}

// An idempotent producer keeps one request in flight on the embedded broker (which does not
// check its sequence numbers) and when the cluster is unknown; on a Kafka cluster, librdkafka's
// defaults.
TEST(KafkaConfigTest, IdempotentProducerKeepsOneRequestInFlightOnTheEmbeddedBroker) {
  auto broker = EmbeddedBroker::Start({});
  ASSERT_TRUE(broker.ok());
  KafkaOptions options;
  options.brokers = (*broker)->bootstrap();
  const std::string id = KafkaClusterId(options, 5000);
  EXPECT_TRUE(IsEmbeddedBrokerClusterId(id)) << id;
  const std::vector<std::pair<std::string, std::string>> one_in_flight = {
      {"max.in.flight.requests.per.connection", "1"}};
  EXPECT_EQ(IdempotentProducerDefaults(id), one_in_flight);
  EXPECT_EQ(IdempotentProducerDefaults(""), one_in_flight);
  EXPECT_TRUE(IdempotentProducerDefaults("Xbq7yU3bQ2a6Hh-Ryc1Ayw").empty());  // a Kafka cluster's
  EXPECT_FALSE(IsEmbeddedBrokerClusterId("Xbq7yU3bQ2a6Hh-Ryc1Ayw"));

  options.brokers = "127.0.0.1:1";  // nothing listens there
  EXPECT_EQ(KafkaClusterId(options, 200), "");
}

}  // namespace
}  // namespace streamvec

// ParamNode against the embedded broker and a real state directory: hand-encoded pushes from two
// fake trainers, the rows the node publishes on `.params`, rejections, and a restart from the
// snapshot.
#include "streamvec/node/param_node.h"

#include <gtest/gtest.h>
#include <librdkafka/rdkafkacpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "streamvec/kafka/broker.h"
#include "streamvec/kafka/consumer_lag.h"
#include "streamvec/kafka/document.h"
#include "streamvec/param/protocol.h"

namespace streamvec {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kPrefix[] = "pn";
constexpr uint32_t kDim = 2;

ParamRecord Push(const std::string& word, double count, std::vector<float> input,
                 std::vector<float> output = {}) {
  ParamRecord r;
  r.word = word;
  r.has_count = count > 0;
  r.count = count;
  r.input = std::move(input);
  r.output = std::move(output);
  return r;
}

// One push message of `sender` (a fake trainer).
std::string PushMessage(uint32_t sender, uint64_t sequence, std::vector<ParamRecord> records,
                        uint32_t dim = kDim) {
  ParamMessageHeader h;
  h.kind = ParamMessageKind::kPush;
  h.dim = dim;
  h.sender = sender;
  h.sequence = sequence;
  StatusOr<std::vector<std::string>> m = EncodeParamMessages(h, records);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->size(), 1u);
  return m->front();
}

// The newest row record and vocabulary record of each word seen on `.params`, and the largest
// node clock.
struct Published {
  std::map<std::string, ParamRecord> rows;
  std::map<std::string, ParamRecord> vocabulary;
  uint64_t clock = 0;
};

class ParamNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');  // parameterised tests
    dir_ = fs::temp_directory_path() /
           ("streamvec_param_node_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto b = EmbeddedBroker::Start({});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    broker_ = std::move(b).value();
    std::string err;
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    ASSERT_EQ(conf->set("bootstrap.servers", broker_->bootstrap(), err), RdKafka::Conf::CONF_OK);
    // A long linger: once the producer knows the topic, the messages of one Send go out as one
    // message set, so the node consumes them in one batch (one merge round per row). flush()
    // sends at once, whatever the linger. A first Send may still split (see the merge test).
    ASSERT_EQ(conf->set("linger.ms", "1000", err), RdKafka::Conf::CONF_OK);
    producer_.reset(RdKafka::Producer::create(conf.get(), err));
    ASSERT_TRUE(producer_) << err;
  }
  void TearDown() override {
    (void)StopNode();
    fs::remove_all(dir_);
  }

  ParamNodeOptions Options() const {
    ParamNodeOptions o;
    o.kafka.brokers = broker_->bootstrap();
    o.kafka.topic_prefix = kPrefix;
    o.state_dir = (dir_ / "state").string();
    o.create_topics_on = broker_.get();
    o.publish_every_s = 0;
    o.snapshot_every_s = 3600;  // only the final snapshot
    return o;
  }

  // Creates the node (and its topics), calls `before_run` if given, then runs the node on a
  // thread.
  void StartNode(const ParamNodeOptions& o, const std::function<void()>& before_run = {}) {
    auto n = ParamNode::Create(o);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    node_ = std::move(n).value();
    if (before_run) before_run();
    stop_.store(false);
    thread_ = std::thread([this] { run_status_ = node_->Run(stop_); });
  }
  Status StopNode() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    node_.reset();
    return run_status_;
  }

  // Produces `messages` to partition 0 of `.updates` in one go.
  void Send(const std::vector<std::string>& messages) {
    for (const std::string& m : messages) {
      ASSERT_EQ(producer_->produce(UpdatesTopic(kPrefix), 0, RdKafka::Producer::RK_MSG_COPY,
                                   const_cast<char*>(m.data()), m.size(), nullptr, 0, 0, nullptr),
                RdKafka::ERR_NO_ERROR);
    }
    ASSERT_EQ(producer_->flush(10000), RdKafka::ERR_NO_ERROR);
  }

  // A consumer of `.params` partition 0 from its beginning, in consumer group `group` (it never
  // commits).
  std::unique_ptr<RdKafka::KafkaConsumer> ParamsReader(const std::string& group) {
    std::string err;
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    conf->set("bootstrap.servers", broker_->bootstrap(), err);
    conf->set("group.id", group, err);
    conf->set("enable.auto.commit", "false", err);
    conf->set("fetch.wait.max.ms", "10", err);
    std::unique_ptr<RdKafka::KafkaConsumer> c(RdKafka::KafkaConsumer::create(conf.get(), err));
    EXPECT_TRUE(c) << err;
    if (!c) return c;
    std::vector<RdKafka::TopicPartition*> parts{
        RdKafka::TopicPartition::create(ParamsTopic(kPrefix), 0, RdKafka::Topic::OFFSET_BEGINNING)};
    c->assign(parts);
    RdKafka::TopicPartition::destroy(parts);
    return c;
  }

  // Calls on_row for every row record that `c` reads from `.params` until done() holds or 30 s
  // have passed (a bound on the wait, not a timed assertion). A message that does not decode
  // fails the test (EXPECT: callers may have a thread to join first) and is skipped.
  static void ForEachPublishedRow(RdKafka::KafkaConsumer* c, const std::function<bool()>& done,
                                  const std::function<void(const ParamRecord&)>& on_row) {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (c != nullptr && !done() && Clock::now() < deadline) {
      std::unique_ptr<RdKafka::Message> m(c->consume(100));
      if (m->err() != RdKafka::ERR_NO_ERROR) continue;
      StatusOr<ParamMessage> d =
          DecodeParamMessage(std::string_view(static_cast<const char*>(m->payload()), m->len()));
      EXPECT_TRUE(d.ok()) << d.status().ToString();
      if (!d.ok() || d->header.kind != ParamMessageKind::kRows) continue;
      for (const ParamRecord& r : d->records) on_row(r);
    }
  }

  // Reads `.params` partition 0 from the beginning until a publication of clock >= `clock` has
  // been seen (60 s at most: a bound on the wait, not a timed assertion).
  Published ReadParams(uint64_t clock) {
    Published p;
    std::unique_ptr<RdKafka::KafkaConsumer> c = ParamsReader("test-reader");
    if (!c) return p;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    bool seen = false;
    while (Clock::now() < deadline) {
      std::unique_ptr<RdKafka::Message> m(c->consume(100));
      if (m->err() != RdKafka::ERR_NO_ERROR) {
        if (seen) break;  // caught up after the wanted publication
        continue;
      }
      StatusOr<ParamMessage> d = DecodeParamMessage(
          std::string_view(static_cast<const char*>(m->payload()), m->len()));
      EXPECT_TRUE(d.ok()) << d.status().ToString();
      if (!d.ok()) continue;
      p.clock = std::max(p.clock, d->header.sender_clock);
      if (d->header.sender_clock >= clock) seen = true;
      if (d->header.kind == ParamMessageKind::kVocabulary) {
        for (ParamRecord& r : d->records) p.vocabulary[r.word] = std::move(r);
      }
      if (d->header.kind != ParamMessageKind::kRows) continue;
      for (ParamRecord& r : d->records) p.rows[r.word] = std::move(r);
    }
    c->close();
    EXPECT_TRUE(seen) << "no publication of clock " << clock;
    return p;
  }

  std::vector<nlohmann::json> ReadRejected(size_t want) {
    std::vector<nlohmann::json> out;
    std::string err;
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    conf->set("bootstrap.servers", broker_->bootstrap(), err);
    conf->set("group.id", "test-rejected", err);
    std::unique_ptr<RdKafka::KafkaConsumer> c(RdKafka::KafkaConsumer::create(conf.get(), err));
    std::vector<RdKafka::TopicPartition*> parts{RdKafka::TopicPartition::create(
        RejectedTopic(kPrefix), 0, RdKafka::Topic::OFFSET_BEGINNING)};
    c->assign(parts);
    RdKafka::TopicPartition::destroy(parts);
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (out.size() < want && Clock::now() < deadline) {
      std::unique_ptr<RdKafka::Message> m(c->consume(100));
      if (m->err() != RdKafka::ERR_NO_ERROR) continue;
      out.push_back(nlohmann::json::parse(
          std::string(static_cast<const char*>(m->payload()), m->len())));
    }
    c->close();
    return out;
  }

  fs::path dir_;
  std::unique_ptr<EmbeddedBroker> broker_;
  std::unique_ptr<RdKafka::Producer> producer_;
  std::unique_ptr<ParamNode> node_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Status run_status_;
};

void ExpectRow(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(got[j], want[j], 1e-5) << "component " << j;
}

class ParamNodeMergeTest : public ParamNodeTest,
                           public ::testing::WithParamInterface<MergeRule> {};

// Two fake trainers push deltas for one row in one batch; the node's published row is the
// rule's result, computed here by hand. New rows start as the mean of the senders' initial rows.
TEST_P(ParamNodeMergeTest, PublishedRowsEqualTheHandComputedMerge) {
  ParamNodeOptions o = Options();
  o.merge.rule = GetParam();
  o.publish_precision = ParamPrecision::kFp32;  // the merge's exact floats (fp16 by default)
  // Round 1: "cat" is new (sender 1 alone: its whole row); "dog" is new at both senders. Sent
  // before the node runs, so that its first fetch finds both messages in the log: the producer's
  // first Send can go out as two message sets (it learns the topic's partitions while flushing),
  // and a node already polling could then merge them in two batches (CI, under the sanitizers:
  // dog's second row added as a step, not averaged with the first).
  StartNode(o, [&] {
    Send({PushMessage(1, 0, {Push("cat", 3, {1.0f, 2.0f}, {0.5f, -0.5f}),
                             Push("dog", 1, {1.0f, 0.0f})}),
          PushMessage(2, 0, {Push("dog", 1, {0.0f, 3.0f})})});
  });
  Published first = ReadParams(2);
  ASSERT_TRUE(first.rows.count("cat") && first.rows.count("dog"));
  ExpectRow(first.rows["cat"].input, {1.0, 2.0});
  ExpectRow(first.rows["cat"].output, {0.5, -0.5});
  ExpectRow(first.rows["dog"].input, {0.5, 1.5});  // the mean, under every rule
  EXPECT_EQ(first.rows["dog"].count, 2.0);

  // Round 2: both senders push a delta for cat's input row, in one batch.
  const double d1[2] = {0.1f, 0.2f}, d2[2] = {-0.2f, 0.4f};
  Send({PushMessage(1, 1, {Push("cat", 1, {0.1f, 0.2f})}),
        PushMessage(2, 1, {Push("cat", 1, {-0.2f, 0.4f})})});
  Published second = ReadParams(4);
  ASSERT_TRUE(second.rows.count("cat"));
  std::vector<double> want = {1.0, 2.0};
  switch (GetParam()) {
    case MergeRule::kSum:
      for (int j = 0; j < 2; ++j) want[j] += d1[j] + d2[j];
      break;
    case MergeRule::kAverage:
      for (int j = 0; j < 2; ++j) want[j] += (d1[j] + d2[j]) / 2;
      break;
    case MergeRule::kScaledSum:  // the sum over sqrt(T), T = 2 trainers seen on the shard
      for (int j = 0; j < 2; ++j) want[j] += (d1[j] + d2[j]) / std::sqrt(2.0);
      break;
    case MergeRule::kAdaSum: {
      // (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b
      const double dot = d1[0] * d2[0] + d1[1] * d2[1];
      const double aa = d1[0] * d1[0] + d1[1] * d1[1], bb = d2[0] * d2[0] + d2[1] * d2[1];
      for (int j = 0; j < 2; ++j) {
        want[j] += (1 - dot / (2 * aa)) * d1[j] + (1 - dot / (2 * bb)) * d2[j];
      }
      break;
    }
    case MergeRule::kDownpour: {
      // Row-wise Adagrad, one step per sender in consumption order: G += mean(g^2),
      // row += eta / sqrt(G + eps) g.
      double g = 0;
      for (const double* d : {d1, d2}) {
        g += (d[0] * d[0] + d[1] * d[1]) / 2;
        const double lr = o.merge.eta / std::sqrt(g + o.merge.epsilon);
        for (int j = 0; j < 2; ++j) want[j] += lr * d[j];
      }
      break;
    }
  }
  ExpectRow(second.rows["cat"].input, want);
  // No output delta was pushed: the publication carries the input row only (the output row
  // went out in round 1 and has not changed since).
  EXPECT_TRUE(second.rows["cat"].output.empty());
  EXPECT_EQ(second.rows["cat"].count, 5.0);
  ASSERT_TRUE(StopNode().ok());
}

INSTANTIATE_TEST_SUITE_P(Rules, ParamNodeMergeTest,
                         ::testing::Values(MergeRule::kDownpour, MergeRule::kAverage,
                                           MergeRule::kSum, MergeRule::kAdaSum,
                                           MergeRule::kScaledSum),
                         [](const auto& info) { return std::string(MergeRuleName(info.param)); });

// A trainer that admits a word anew pushes its whole rows (its initialisation and what it learned
// since) marked initial: a shard holding the word merges them as a step under its rule (here the
// sum), a shard that does not starts the word from them; the count counts either way.
TEST_F(ParamNodeTest, InitialRowsOfAWordTheShardHoldsAreMergedAsAStep) {
  ParamNodeOptions o = Options();
  o.merge.rule = MergeRule::kSum;
  StartNode(o);
  Send({PushMessage(1, 0, {Push("cat", 2, {1.0f, 2.0f})})});
  Published first = ReadParams(1);
  ASSERT_TRUE(first.rows.count("cat"));
  ExpectRow(first.rows["cat"].input, {1.0, 2.0});
  ParamRecord again = Push("cat", 3, {9.0f, -9.0f});
  again.initial = true;
  ParamRecord fresh = Push("owl", 2, {0.5f, 0.25f});
  fresh.initial = true;
  Send({PushMessage(2, 0, {again, fresh})});
  Published second = ReadParams(2);
  ASSERT_TRUE(second.rows.count("cat") && second.rows.count("owl"));
  ExpectRow(second.rows["cat"].input, {10.0, -7.0});
  EXPECT_EQ(second.rows["cat"].count, 5.0);
  ExpectRow(second.rows["owl"].input, {0.5, 0.25});
  ASSERT_TRUE(StopNode().ok());
}

// --merge-scale: four trainers push to the shard, then one pushes a delta of a row; the scaled
// merge adds it times the given factor, or with 0 (auto) times 1/sqrt(4). The stats report the
// factor merged with and the trainers seen (the gauges streamvec_param_node_merge_scale and
// _active_trainers).
class ParamNodeMergeScaleTest : public ParamNodeTest,
                                public ::testing::WithParamInterface<double> {};

TEST_P(ParamNodeMergeScaleTest, TheScaledMergeUsesTheGivenFactorOrOneOverSqrtT) {
  ParamNodeOptions o = Options();
  o.merge_scale = GetParam();
  o.publish_precision = ParamPrecision::kFp32;
  StartNode(o, [&] {
    Send({PushMessage(1, 0, {Push("cat", 1, {1.0f, 2.0f})}),
          PushMessage(2, 0, {Push("owl", 1, {1.0f, 1.0f})}),
          PushMessage(3, 0, {Push("elk", 1, {1.0f, 1.0f})}),
          PushMessage(4, 0, {Push("yak", 1, {1.0f, 1.0f})})});
  });
  ASSERT_TRUE(ReadParams(4).rows.count("cat"));
  Send({PushMessage(1, 1, {Push("cat", 1, {0.5f, -1.0f})})});
  Published p = ReadParams(5);
  ASSERT_TRUE(p.rows.count("cat"));
  const double scale = GetParam() > 0 ? GetParam() : 0.5;
  ExpectRow(p.rows["cat"].input, {1.0 + scale * 0.5, 2.0 - scale * 1.0});
  const ParamNodeStats s = node_->stats();
  EXPECT_EQ(s.active_trainers, 4u);
  EXPECT_DOUBLE_EQ(s.merge_scale, scale);
  ASSERT_TRUE(StopNode().ok());
}

INSTANTIATE_TEST_SUITE_P(Scales, ParamNodeMergeScaleTest, ::testing::Values(0.0, 0.3),
                         [](const auto& info) {
                           return std::string(info.param > 0 ? "Fixed" : "Auto");
                         });

TEST_F(ParamNodeTest, BadMessagesAreRejectedWithTheReasonAndTheStreamGoesOn) {
  ParamNodeOptions o = Options();
  o.dim = kDim;
  StartNode(o);
  const std::string good = PushMessage(1, 0, {Push("cat", 1, {1.0f, 1.0f})});
  std::string rows_kind = good;
  rows_kind[6] = static_cast<char>(ParamMessageKind::kRows);  // a publication, not a push
  Send({std::string(60, 'x'),                                  // not a param message
        good.substr(0, good.size() - 3),                       // truncated
        PushMessage(1, 1, {Push("cat", 1, {1.0f, 1.0f, 1.0f})}, 3),  // another dim
        rows_kind,
        PushMessage(2, 0, {Push("cat", 1, {1.0f, 3.0f})})});
  Published p = ReadParams(1);
  ASSERT_TRUE(p.rows.count("cat"));
  ExpectRow(p.rows["cat"].input, {1.0, 3.0});
  std::vector<nlohmann::json> rejected = ReadRejected(4);
  ASSERT_EQ(rejected.size(), 4u);
  EXPECT_NE(rejected[0]["reason"].get<std::string>().find("bad magic"), std::string::npos);
  EXPECT_NE(rejected[1]["reason"].get<std::string>().find("truncated"), std::string::npos);
  EXPECT_NE(rejected[2]["reason"].get<std::string>().find("dim 3 != expected 2"),
            std::string::npos);
  EXPECT_NE(rejected[3]["reason"].get<std::string>().find("pushes only"), std::string::npos);
  EXPECT_EQ(rejected[1]["origin"].get<std::string>(), UpdatesTopic(kPrefix) + "/0@1");
  const ParamNodeStats s = node_->stats();
  EXPECT_EQ(s.rejected, 4u);
  EXPECT_EQ(s.merges, 1u);
  EXPECT_EQ(s.messages, 5u);
  EXPECT_EQ(s.next_offset, 5);
  ASSERT_TRUE(StopNode().ok());
}

// The trainers' flow control waits on the node's read position, not on its snapshots: the
// node commits what it merged to the read group at once, while the snapshot group (what a
// restart resumes from) moves only with a snapshot. A restarted node resets the read group to
// where it resumes.
TEST_F(ParamNodeTest, ReadPositionIsCommittedAsItMergesAndResetOnRestart) {
  ParamNodeOptions o = Options();
  o.snapshot_bytes = 0;  // only the final snapshot
  StartNode(o);
  Send({PushMessage(1, 0, {Push("cat", 1, {1.0f, 2.0f})}),
        PushMessage(1, 1, {Push("dog", 1, {3.0f, 4.0f})})});
  ReadParams(2);
  auto committed = [&](const std::string& group) {
    StatusOr<GroupLag> lag = ConsumerGroupLag(o.kafka, group, UpdatesTopic(kPrefix));
    return lag.ok() && !lag->partitions.empty() ? lag->partitions[0].committed : int64_t{-2};
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (committed(ParamNodesReadGroup(kPrefix)) != 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(committed(ParamNodesReadGroup(kPrefix)), 2);
  EXPECT_EQ(committed(ParamNodesGroup(kPrefix)), -1);  // no snapshot yet
  ASSERT_TRUE(StopNode().ok());                        // final snapshot: offset 2
  EXPECT_EQ(committed(ParamNodesGroup(kPrefix)), 2);

  // A read position ahead of the snapshot (as after a crash) is set back to it on start.
  {
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    std::string err;
    ASSERT_EQ(conf->set("bootstrap.servers", o.kafka.brokers, err), RdKafka::Conf::CONF_OK);
    ASSERT_EQ(conf->set("group.id", ParamNodesReadGroup(kPrefix), err), RdKafka::Conf::CONF_OK);
    std::unique_ptr<RdKafka::KafkaConsumer> c(RdKafka::KafkaConsumer::create(conf.get(), err));
    ASSERT_NE(c, nullptr) << err;
    std::vector<RdKafka::TopicPartition*> list{
        RdKafka::TopicPartition::create(UpdatesTopic(kPrefix), 0, 5)};
    EXPECT_EQ(c->commitSync(list), RdKafka::ERR_NO_ERROR);
    RdKafka::TopicPartition::destroy(list);
    c->close();
  }
  ASSERT_EQ(committed(ParamNodesReadGroup(kPrefix)), 5);
  StartNode(o);
  const auto restart_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (committed(ParamNodesReadGroup(kPrefix)) != 2 &&
         std::chrono::steady_clock::now() < restart_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(committed(ParamNodesReadGroup(kPrefix)), 2);
  ASSERT_TRUE(StopNode().ok());
}

// The bytes trigger of snapshots bounds what each trainer keeps copies of until a snapshot
// covers them: it counts each sender's pushes, so three senders of one message each do not
// trigger a snapshot that one sender's three messages do.
TEST_F(ParamNodeTest, ASnapshotComesOnceOneSendersPushesReachSnapshotBytes) {
  ParamNodeOptions o = Options();
  const std::vector<ParamRecord> records = {Push("cat", 1, {1.0f, 2.0f})};
  const size_t size = PushMessage(1, 0, records).size();
  o.snapshot_bytes = size * 5 / 2;
  StartNode(o);
  auto committed = [&](const std::string& group) {
    StatusOr<GroupLag> lag = ConsumerGroupLag(o.kafka, group, UpdatesTopic(kPrefix));
    return lag.ok() && !lag->partitions.empty() ? lag->partitions[0].committed : int64_t{-2};
  };
  auto wait_for = [&](const std::string& group, int64_t offset) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (committed(group) != offset && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return committed(group);
  };
  // Three senders, one message each: 3 x size in all, each under snapshot_bytes.
  Send({PushMessage(1, 0, records), PushMessage(2, 0, records), PushMessage(3, 0, records)});
  ASSERT_EQ(wait_for(ParamNodesReadGroup(kPrefix), 3), 3);
  // Sender 1 reaches it with two more: a snapshot covers the five.
  Send({PushMessage(1, 1, records), PushMessage(1, 2, records)});
  EXPECT_EQ(wait_for(ParamNodesGroup(kPrefix), 5), 5);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (node_->stats().snapshots == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(node_->stats().snapshots, 1u);  // none after the first three messages
  ASSERT_TRUE(StopNode().ok());
}

TEST_F(ParamNodeTest, RestartResumesFromTheSnapshotAndMergesNothingTwice) {
  ParamNodeOptions o = Options();
  o.merge.rule = MergeRule::kSum;
  StartNode(o);
  Send({PushMessage(1, 0,
                    {Push("cat", 2, {1.0f, 2.0f}, {3.0f, 4.0f}), Push("dog", 1, {5.0f, 6.0f})}),
        PushMessage(1, 1, {Push("cat", 1, {0.5f, 0.5f})})});
  Published before = ReadParams(2);
  ExpectRow(before.rows["cat"].input, {1.5, 2.5});
  ASSERT_TRUE(StopNode().ok());  // final snapshot
  // Committed to the nodes' group once the snapshot was durable.
  StatusOr<GroupLag> lag =
      ConsumerGroupLag(o.kafka, ParamNodesGroup(kPrefix), UpdatesTopic(kPrefix));
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(lag->partitions.at(0).committed, 2);

  StartNode(o);
  {
    const ParamNodeStats s = node_->stats();
    EXPECT_EQ(s.rows, 2u);
    EXPECT_EQ(s.clock, 2u);
    EXPECT_EQ(s.next_offset, 2);  // past both merged messages
    EXPECT_EQ(s.dim, kDim);
  }
  Send({PushMessage(2, 0, {Push("cat", 1, {1.0f, 1.0f})})});
  Published after = ReadParams(3);
  // Only the new push is merged on top of the restored row (a re-merge would add 1.5, 2.5).
  ExpectRow(after.rows["cat"].input, {2.5, 3.5});
  ExpectRow(after.rows["cat"].output, {3.0, 4.0});
  EXPECT_EQ(after.rows["cat"].count, 4.0);
  // The restored node republished the rows it holds.
  ExpectRow(after.rows["dog"].input, {5.0, 6.0});
  const ParamNodeStats s = node_->stats();
  EXPECT_EQ(s.merges, 1u);
  EXPECT_EQ(s.messages, 1u);
  EXPECT_EQ(s.clock, 3u);
  ASSERT_TRUE(StopNode().ok());
}

TEST_F(ParamNodeTest, AStateOfAnotherShardIsRefused) {
  ParamNodeOptions o = Options();
  StartNode(o);
  ASSERT_TRUE(StopNode().ok());
  o.shard = 1;
  o.shards = 2;
  auto n = ParamNode::Create(o);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("holds shard 0 of 1"), std::string::npos)
      << n.status().ToString();
}

TEST_F(ParamNodeTest, EvictedWordsLoseTheirRowsAndTheVocabularyStaysBounded) {
  ParamNodeOptions o = Options();
  o.vocab_capacity = 2;
  o.merge.rule = MergeRule::kSum;
  StartNode(o);
  Send({PushMessage(1, 0, {Push("a", 5, {1.0f, 1.0f}), Push("b", 4, {2.0f, 2.0f})})});
  Published first = ReadParams(1);
  EXPECT_EQ(first.vocabulary["a"].count, 5.0);
  EXPECT_EQ(first.vocabulary["b"].count, 4.0);
  Send({PushMessage(1, 1, {Push("c", 1, {3.0f, 3.0f})})});  // evicts b, the smallest count
  Published p = ReadParams(2);
  ExpectRow(p.rows["c"].input, {3.0, 3.0});
  // The vocabulary changes are published: b removed, c entered at b's count plus 1.
  EXPECT_TRUE(p.vocabulary["b"].removed);
  EXPECT_TRUE(p.vocabulary["c"].has_count);
  EXPECT_EQ(p.vocabulary["c"].count, 5.0);
  EXPECT_EQ(p.vocabulary["c"].count_error, 4.0);
  const ParamNodeStats s = node_->stats();
  EXPECT_EQ(s.rows, 2u);
  EXPECT_EQ(s.evictions, 1u);
  // A later row of the evicted word, without a count, is dropped: the word has no row and the
  // counts do not hold it.
  Send({PushMessage(2, 0, {Push("b", 0, {9.0f, 9.0f})})});
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (node_->stats().messages < 3 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const ParamNodeStats after = node_->stats();
  EXPECT_EQ(after.messages, 3u);
  EXPECT_EQ(after.rows_dropped, 1u);
  EXPECT_EQ(after.rows, 2u);
  ASSERT_TRUE(StopNode().ok());
}

// The publication budget: a batch that changes many rows is published over several turns, each
// within publish_max_bytes, and every row goes out.
TEST_F(ParamNodeTest, PublicationsStayWithinTheByteBudgetPerTurnAndCarryEveryRow) {
  ParamNodeOptions o = Options();
  o.publish_max_bytes = 1024;
  StartNode(o);
  std::vector<ParamRecord> records;
  for (int i = 0; i < 100; ++i) records.push_back(Push("w" + std::to_string(i), 1, {1.0f, 2.0f}));
  Send({PushMessage(1, 0, records)});
  std::unique_ptr<RdKafka::KafkaConsumer> c = ParamsReader("test-budget");
  ASSERT_TRUE(c);
  std::set<std::string> words;
  size_t rows_messages = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (words.size() < records.size() && Clock::now() < deadline) {
    std::unique_ptr<RdKafka::Message> m(c->consume(100));
    if (m->err() != RdKafka::ERR_NO_ERROR) continue;
    StatusOr<ParamMessage> d = DecodeParamMessage(
        std::string_view(static_cast<const char*>(m->payload()), m->len()));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    if (d->header.kind != ParamMessageKind::kRows) continue;
    ++rows_messages;
    EXPECT_LE(m->len(), o.publish_max_bytes + kParamHeaderBytes);
    for (const ParamRecord& r : d->records) words.insert(r.word);
  }
  c->close();
  EXPECT_EQ(words.size(), records.size());
  EXPECT_GE(rows_messages, 3u);  // 100 rows of about 40 bytes: at least 4 turns of 1 KiB
  ASSERT_TRUE(StopNode().ok());
}

// A turn that cannot publish every pending row goes on where the last one stopped: rows that
// change again at every turn (the frequent words) do not hold back the others. Before, every
// turn started from the first word in order, and the words late in it waited while pushes came.
TEST_F(ParamNodeTest, ABusyPublicationBudgetStillReachesEveryRow) {
  ParamNodeOptions o = Options();
  o.publish_max_bytes = 1024;  // about 30 rows a turn
  o.publish_every_s = 0.2;     // many pushes come in between any two turns
  StartNode(o);
  auto word = [](int i) {
    char b[8];
    std::snprintf(b, sizeof b, "w%03d", i);
    return std::string(b);
  };
  std::vector<ParamRecord> all;
  for (int i = 0; i < 100; ++i) all.push_back(Push(word(i), 1, {1.0f, 2.0f}));
  // The first 40 words (more than a turn holds) change again and again, from before the other
  // 60 come until the test has read them all.
  // Their own producer, without the fixture's linger: a push reaches the node before each turn.
  std::string err;
  std::unique_ptr<RdKafka::Conf> pconf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  ASSERT_EQ(pconf->set("bootstrap.servers", broker_->bootstrap(), err), RdKafka::Conf::CONF_OK);
  ASSERT_EQ(pconf->set("linger.ms", "0", err), RdKafka::Conf::CONF_OK);
  std::unique_ptr<RdKafka::Producer> hot_producer(RdKafka::Producer::create(pconf.get(), err));
  ASSERT_TRUE(hot_producer) << err;
  std::atomic<bool> done{false};
  std::thread pusher([&] {
    for (uint64_t seq = 1; !done.load(); ++seq) {
      std::vector<ParamRecord> hot;
      for (int i = 0; i < 40; ++i) hot.push_back(Push(word(i), 1, {0.5f, 0.5f}));
      std::string m = PushMessage(1, seq, hot);
      hot_producer->produce(UpdatesTopic(kPrefix), 0, RdKafka::Producer::RK_MSG_COPY, m.data(),
                            m.size(), nullptr, 0, 0, nullptr);
      hot_producer->poll(0);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    hot_producer->flush(10000);
  });
  const auto hot_deadline = Clock::now() + std::chrono::seconds(30);  // a bound, not a timing
  while (node_->stats().clock < 5 && Clock::now() < hot_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Send({PushMessage(2, 0, all)});
  std::unique_ptr<RdKafka::KafkaConsumer> c = ParamsReader("test-busy-budget");
  std::set<std::string> words;
  ForEachPublishedRow(
      c.get(), [&] { return words.size() >= all.size(); },
      [&](const ParamRecord& r) { words.insert(r.word); });
  done.store(true);
  pusher.join();
  if (c) c->close();
  // Every word was published while the first 40 kept changing (the final publication, which
  // carries everything, comes only at the stop below).
  EXPECT_EQ(words.size(), all.size());
  ASSERT_TRUE(StopNode().ok());
}

// `.params` keeps only recent publications: a trainer that joins late gets a row that no longer
// changes from a republication sweep, which publishes every held row again.
TEST_F(ParamNodeTest, ASweepRepublishesRowsThatNoLongerChange) {
  ParamNodeOptions o = Options();
  o.publish_every_s = 0.05;
  o.republish_every_s = 0.5;
  StartNode(o);
  std::vector<ParamRecord> all;
  for (int i = 0; i < 20; ++i) all.push_back(Push("w" + std::to_string(i), 1, {1.0f, 2.0f}));
  Send({PushMessage(1, 0, all)});  // the only push: no row changes after it
  std::unique_ptr<RdKafka::KafkaConsumer> c = ParamsReader("test-sweep");
  std::map<std::string, int> seen;
  auto every_word_twice = [&] {
    if (seen.size() < all.size()) return false;
    for (const auto& [word, n] : seen) {
      if (n < 2) return false;
    }
    return true;
  };
  ForEachPublishedRow(c.get(), every_word_twice, [&](const ParamRecord& r) {
    ++seen[r.word];
    ExpectRow(r.input, {1.0, 2.0});  // the same row, published again
  });
  if (c) c->close();
  EXPECT_TRUE(every_word_twice()) << seen.size() << " words seen";
  EXPECT_GE(node_->stats().republished_rows, all.size());
  ASSERT_TRUE(StopNode().ok());
}

// Without sweeps (republish_every_s 0) a row is published once per change.
TEST_F(ParamNodeTest, WithoutSweepsAnUnchangedRowIsPublishedOnce) {
  ParamNodeOptions o = Options();
  o.publish_every_s = 0.05;
  o.republish_every_s = 0;
  StartNode(o);
  Send({PushMessage(1, 0, {Push("cat", 1, {1.0f, 2.0f})})});
  ASSERT_TRUE(ReadParams(1).rows.count("cat"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // turns that could republish
  EXPECT_EQ(node_->stats().published_rows, 1u);
  EXPECT_EQ(node_->stats().republished_rows, 0u);
  ASSERT_TRUE(StopNode().ok());
}

}  // namespace
}  // namespace streamvec

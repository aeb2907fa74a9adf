// Two trainers and two parameter-node shards on the embedded broker: one parameter space.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../kafka/kafka_test_util.h"
#include "../trainer/small_learner.h"
#include "streamvec/kafka/broker.h"
#include "streamvec/kafka/document.h"
#include "streamvec/node/param_node.h"
#include "streamvec/param/protocol.h"
#include "streamvec/store/embedding_entries.h"
#include "streamvec/store/snapshot_reader.h"
#include "streamvec/trainer/kafka_trainer.h"
#include "streamvec/trainer/param_client.h"

namespace streamvec {
namespace {

namespace fs = std::filesystem;

// Documents for one trainer: words of its own ("<own>0".."<own>5") and shared ones.
std::vector<testing::Record> Documents(const std::string& own, int32_t partition) {
  std::vector<testing::Record> out;
  for (int i = 0; i < 200; ++i) {
    Document d;
    d.id = own + std::to_string(i);
    d.source = own;
    d.text = "the " + own + std::to_string(i % 6) + " and the " + own + std::to_string((i + 1) % 6) +
             " river bank stone " + own + std::to_string((i + 2) % 6);
    out.push_back({.key = own, .value = DocumentToJson(d), .partition = partition});
  }
  return out;
}

// A fresh directory under the temporary one, named for this process.
fs::path FreshDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A small trainer (dim 8, 64 words) on `broker` that reads partition `partition` of
// <prefix>.docs (manual assignment) and pushes to `shards` shards as sender `id`.
KafkaTrainerOptions SmallTrainerOptions(EmbeddedBroker* broker, const std::string& prefix,
                                        const fs::path& state_dir, int32_t partition,
                                        uint32_t id, uint32_t shards) {
  KafkaTrainerOptions o;
  o.kafka.brokers = broker->bootstrap();
  o.kafka.topic_prefix = prefix;
  o.state_dir = state_dir.string();
  o.assign = true;
  o.assign_partitions = {partition};
  o.learner.dim = 8;
  o.learner.vocab_capacity = 64;
  o.learner.min_count = 2;
  o.learner.noise_table_size = 4096;
  o.learner.sample = 0;
  o.micro_batch_max_docs = 20;
  o.param_shards = shards;
  o.trainer_id = id;
  return o;
}

// An embedded broker whose topics have `partitions` partitions, with <prefix>.docs and
// <prefix>.rejected (one partition) created.
StatusOr<std::unique_ptr<EmbeddedBroker>> BrokerWithDocs(const std::string& prefix,
                                                         int partitions) {
  StatusOr<std::unique_ptr<EmbeddedBroker>> broker =
      EmbeddedBroker::Start({.brokers = 1, .partitions = partitions});
  if (!broker.ok()) return broker.status();
  if (Status s = (*broker)->CreateTopic(DocsTopic(prefix), partitions); !s.ok()) return s;
  if (Status s = (*broker)->CreateTopic(RejectedTopic(prefix), 1); !s.ok()) return s;
  return broker;
}

// One shard's options on `broker` (one partition) for topic prefix `prefix`, its state in
// `dir`/node; a fresh `dir`.
ParamNodeOptions OneShardOptions(EmbeddedBroker* broker, const std::string& prefix,
                                 const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  ParamNodeOptions no;
  no.kafka.brokers = broker->bootstrap();
  no.kafka.topic_prefix = prefix;
  no.state_dir = (dir / "node").string();
  no.create_topics_on = broker;
  return no;
}

// One parameter-node shard of prefix `prefix` running on a thread (publishing every 50 ms), its
// state in a temporary directory removed once it stopped.
class RunningShard {
 public:
  void Start(EmbeddedBroker* broker, const std::string& prefix) {
    dir_ =
        fs::temp_directory_path() / ("streamvec_dist_" + prefix + "_" + std::to_string(getpid()));
    ParamNodeOptions o = OneShardOptions(broker, prefix, dir_);
    o.publish_every_s = 0.05;
    StatusOr<std::unique_ptr<ParamNode>> n = ParamNode::Create(o);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    node_ = std::move(n).value();
    thread_ = std::thread([this] { status_ = node_->Run(stop_); });
  }
  ~RunningShard() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    EXPECT_TRUE(status_.ok()) << status_.ToString();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

 private:
  fs::path dir_;
  std::unique_ptr<ParamNode> node_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Status status_;
};

// Trainers A and B each read one partition of the documents (manual assignment) and push to two
// shards; every word either trained ends up in the shard ShardOf names, merged from the pushes,
// and the shards' union (what `serve --state S0 --state S1` serves) holds both trainers' words.
TEST(DistributedTest, TwoTrainersAndTwoShardsLearnOneEmbedding) {
  const fs::path dir = FreshDir("streamvec_dist");
  auto broker = BrokerWithDocs("dist", 2);
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();

  std::vector<std::unique_ptr<ParamNode>> nodes;
  for (uint32_t shard = 0; shard < 2; ++shard) {
    ParamNodeOptions o;
    o.kafka.brokers = (*broker)->bootstrap();
    o.kafka.topic_prefix = "dist";
    o.shard = shard;
    o.shards = 2;
    o.state_dir = (dir / ("node" + std::to_string(shard))).string();
    o.create_topics_on = broker->get();
    o.publish_every_s = 0.05;
    StatusOr<std::unique_ptr<ParamNode>> n = ParamNode::Create(o);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    nodes.push_back(std::move(n).value());
  }
  std::atomic<bool> stop_nodes{false};
  std::vector<std::thread> node_threads;
  std::vector<Status> node_status(2);
  for (int i = 0; i < 2; ++i) {
    node_threads.emplace_back([&, i] { node_status[i] = nodes[i]->Run(stop_nodes); });
  }

  ASSERT_EQ(testing::ProduceAll((*broker)->bootstrap(), DocsTopic("dist"), Documents("alpha", 0)),
            0);
  ASSERT_EQ(testing::ProduceAll((*broker)->bootstrap(), DocsTopic("dist"), Documents("beta", 1)),
            0);
  std::vector<std::unique_ptr<KafkaTrainer>> trainers;
  for (int t = 0; t < 2; ++t) {
    KafkaTrainerOptions o =
        SmallTrainerOptions(broker->get(), "dist", dir / ("trainer" + std::to_string(t)), t,
                            static_cast<uint32_t>(t + 1), /*shards=*/2);
    o.group = "dist.trainers" + std::to_string(t);
    o.max_idle_s = 2;
    o.push_every_words = 300;
    StatusOr<std::unique_ptr<KafkaTrainer>> k = KafkaTrainer::Create(o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    trainers.push_back(std::move(k).value());
  }
  std::atomic<bool> stop_trainers{false};
  std::vector<std::thread> trainer_threads;
  std::vector<Status> trainer_status(2);
  for (int t = 0; t < 2; ++t) {
    trainer_threads.emplace_back([&, t] { trainer_status[t] = trainers[t]->Run(stop_trainers); });
  }
  for (std::thread& t : trainer_threads) t.join();  // --max-idle ends them
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(trainer_status[t].ok()) << trainer_status[t].ToString();
    const KafkaTrainerStats s = trainers[t]->stats();
    EXPECT_EQ(s.documents, 200u);
    EXPECT_GE(s.param.pushes, 2u);
    EXPECT_GT(s.param.rows_pushed, 0u);
  }
  // The nodes merge what is on .updates, then stop with a final snapshot.
  for (int i = 0; i < 600; ++i) {
    if (nodes[0]->stats().lag == 0 && nodes[1]->stats().lag == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop_nodes = true;
  for (std::thread& t : node_threads) t.join();
  ASSERT_TRUE(node_status[0].ok()) << node_status[0].ToString();
  ASSERT_TRUE(node_status[1].ok()) << node_status[1].ToString();

  std::set<std::string> union_words;
  std::vector<Embeddings> parts;
  std::vector<std::vector<double>> counts;
  for (uint32_t shard = 0; shard < 2; ++shard) {
    EXPECT_GT(nodes[shard]->stats().merges, 0u);
    auto reader = SnapshotReader::OpenNewest((dir / ("node" + std::to_string(shard))).string());
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    const auto get = [&](const std::string& key) { return (*reader)->Get(key); };
    StatusOr<Embeddings> e = ReadEmbeddingEntries(get);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    for (const std::string& w : e->words) {
      EXPECT_EQ(ShardOf(w, 2), shard) << w;
      union_words.insert(w);
    }
    // The shard's words come with their counts, most frequent first.
    StatusOr<std::vector<double>> c = ReadEmbeddingCounts(get, e->rows());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_TRUE(std::is_sorted(c->rbegin(), c->rend()));
    EXPECT_GT(c->front(), 0.0);
    counts.push_back(std::move(*c));
    parts.push_back(std::move(*e));
  }
  for (const std::string w : {"the", "river", "alpha0", "alpha5", "beta0", "beta5"}) {
    EXPECT_TRUE(union_words.count(w)) << w;
  }
  // Their union (serve and export of both states) is in count order.
  std::vector<double> joined_counts;
  StatusOr<Embeddings> joined = InterleaveEmbeddings(std::move(parts), &counts, &joined_counts);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->rows(), union_words.size());
  EXPECT_EQ(joined_counts.size(), joined->rows());
  EXPECT_TRUE(std::is_sorted(joined_counts.rbegin(), joined_counts.rend()));
  EXPECT_EQ(joined->words.front(), "the");
  fs::remove_all(dir);
}

// A trainer whose push interval is never reached (--push-every far beyond the stream): once
// the stream goes quiet it pushes what it trained, so the shard merges the trainer's words while
// the trainer still runs, not only when it stops.
TEST(DistributedTest, AQuietStreamsTrainingReachesTheShardBeforeTheTrainerStops) {
  const fs::path dir = FreshDir("streamvec_dist_quiet");
  auto broker = BrokerWithDocs("quiet", 1);
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  ParamNodeOptions no = OneShardOptions(broker->get(), "quiet", dir);
  no.publish_every_s = 0.05;
  StatusOr<std::unique_ptr<ParamNode>> node = ParamNode::Create(no);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  std::atomic<bool> stop_node{false};
  Status node_status;
  std::thread node_thread([&] { node_status = (*node)->Run(stop_node); });

  ASSERT_EQ(testing::ProduceAll((*broker)->bootstrap(), DocsTopic("quiet"), Documents("alpha", 0)),
            0);
  KafkaTrainerOptions o =
      SmallTrainerOptions(broker->get(), "quiet", dir / "trainer", 0, /*id=*/1, /*shards=*/1);
  o.group = "quiet.trainers";
  o.max_idle_s = 0;  // runs until stopped
  o.push_every_words = uint64_t{1} << 40;
  StatusOr<std::unique_ptr<KafkaTrainer>> trainer = KafkaTrainer::Create(o);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  std::atomic<bool> stop_trainer{false};
  Status trainer_status;
  std::thread trainer_thread([&] { trainer_status = (*trainer)->Run(stop_trainer); });

  bool merged_while_running = false;
  for (int i = 0; i < 600 && !merged_while_running; ++i) {  // up to 30 s
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    merged_while_running = (*node)->stats().merges > 0;
  }
  const KafkaTrainerStats running = (*trainer)->stats();
  stop_trainer = true;
  trainer_thread.join();
  stop_node = true;
  node_thread.join();
  ASSERT_TRUE(trainer_status.ok()) << trainer_status.ToString();
  ASSERT_TRUE(node_status.ok()) << node_status.ToString();
  EXPECT_TRUE(merged_while_running) << "the shard merged nothing while the trainer ran";
  EXPECT_EQ(running.documents, 200u);
  fs::remove_all(dir);
}

// One document far longer than --push-every (40,000 words, pushes every 4096): the trainer
// trains it in pieces and pushes after the pieces that reach the interval, not once per
// document (without the pieces: one push at the document's end and the final one).
TEST(DistributedTest, ADocumentLongerThanThePushIntervalPushesWithinIt) {
  const fs::path dir = FreshDir("streamvec_dist_long_trainer");
  auto broker = BrokerWithDocs("long", 1);
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  RunningShard shard;
  ASSERT_NO_FATAL_FAILURE(shard.Start(broker->get(), "long"));

  Document d;
  d.id = "long";
  d.source = "long";
  for (int i = 0; i < 10000; ++i) {
    d.text += "the river bank w" + std::to_string(i % 50) + " ";
  }
  ASSERT_EQ(testing::ProduceAll((*broker)->bootstrap(), DocsTopic("long"),
                                {{.key = "long", .value = DocumentToJson(d), .partition = 0}}),
            0);
  KafkaTrainerOptions o =
      SmallTrainerOptions(broker->get(), "long", dir / "trainer", 0, /*id=*/1, /*shards=*/1);
  o.group = "long.trainers";
  o.max_idle_s = 1;
  o.push_every_words = 4096;
  StatusOr<std::unique_ptr<KafkaTrainer>> trainer = KafkaTrainer::Create(o);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  std::atomic<bool> stop_trainer{false};
  const Status trainer_status = (*trainer)->Run(stop_trainer);
  ASSERT_TRUE(trainer_status.ok()) << trainer_status.ToString();
  const KafkaTrainerStats s = (*trainer)->stats();
  EXPECT_EQ(s.documents, 1u);
  EXPECT_GT(s.words_trained, 36000u);
  // 40,000 words in pieces of 4096: a push after about every piece from the second on.
  EXPECT_GE(s.param.pushes, 8u);
  fs::remove_all(dir);
}

// Without --push-every a trainer pushes every kGroupPushWords over the trainers that share the
// topic (the topic's partitions over its own): 2 of 8 partitions push as one of four trainers,
// all 8 as one alone, 1 of 8 as one of eight (never below kMinGroupPushWords); --push-every
// wins when given. The interval is the gauge streamvec_train_param_push_interval_words.
// --group-counts auto is on from kGroupCountsMinTrainers trainers (4 of 8 partitions: two, off);
// on and off hold whatever the share. So is the push schedule: without --push-hot-rows the
// kPushHotRowsMany most frequent rows go out every push from kPushHotRowsManyFromTrainers
// trainers, kPushHotRows below; a number given holds (gauge streamvec_train_param_push_hot_rows).
TEST(DistributedTest, TheDefaultPushIntervalFollowsTheTrainersShareOfThePartitions) {
  const fs::path dir = FreshDir("streamvec_dist_interval");
  auto broker = BrokerWithDocs("interval", 8);
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  StatusOr<std::unique_ptr<ParamNode>> node =
      ParamNode::Create(OneShardOptions(broker->get(), "interval", dir));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  using Counts = KafkaTrainerOptions::GroupCounts;
  struct Case {
    std::vector<int32_t> partitions;
    uint64_t push_every;  // the option; 0: by the share
    uint64_t want;
    Counts counts;         // --group-counts
    uint64_t want_counts;  // whether the group's counts are on
    std::optional<uint32_t> hot_rows;  // --push-hot-rows; unset: auto
    uint64_t want_hot_rows;
  };
  const uint64_t few = kPushHotRows, many = kPushHotRowsMany;
  const Case cases[] = {
      {{0, 1}, 0, kGroupPushWords / 4, Counts::kAuto, 1, {}, many},
      {{0, 1, 2, 3, 4, 5, 6, 7}, 0, kGroupPushWords, Counts::kAuto, 0, {}, few},
      {{5}, 0, std::max(kMinGroupPushWords, kGroupPushWords / 8), Counts::kAuto, 1, {}, many},
      {{0, 1}, 1000, 1000, Counts::kAuto, 1, {}, many},
      {{0, 1, 2, 3}, 0, kGroupPushWords / 2, Counts::kAuto, 0, {}, few},
      {{0, 1, 2, 3}, 0, kGroupPushWords / 2, Counts::kOn, 1, 0, 0},
      {{5}, 0, std::max(kMinGroupPushWords, kGroupPushWords / 8), Counts::kOff, 0, 4096, 4096},
      {{0, 1}, 1000, 1000, Counts::kOff, 0, {}, many}};
  int n = 0;
  for (const Case& c : cases) {
    KafkaTrainerOptions o = SmallTrainerOptions(
        broker->get(), "interval", dir / ("trainer" + std::to_string(n)), 0, /*id=*/1, 1);
    o.group = "interval.trainers" + std::to_string(n++);
    o.assign_partitions = c.partitions;
    o.push_every_words = c.push_every;
    o.group_counts = c.counts;
    o.push_hot_rows = c.hot_rows;
    o.max_idle_s = 0.5;
    StatusOr<std::unique_ptr<KafkaTrainer>> trainer = KafkaTrainer::Create(o);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    std::atomic<bool> stop{false};
    ASSERT_TRUE((*trainer)->Run(stop).ok());
    EXPECT_EQ((*trainer)->stats().param.push_every_words, c.want)
        << c.partitions.size() << " of 8 partitions, --push-every " << c.push_every;
    EXPECT_EQ((*trainer)->stats().param.group_counts, c.want_counts)
        << c.partitions.size() << " of 8 partitions";
    EXPECT_EQ((*trainer)->stats().param.push_hot_rows, c.want_hot_rows)
        << c.partitions.size() << " of 8 partitions";
  }
  fs::remove_all(dir);
}

// A learner of dim 100 that admits 12,000 words (w0 .. w11999) in one micro-batch: a first push
// of about 10 MB, twice the embedded broker's ring per partition.
StreamingOptions TwelveThousandWordsOptions() {
  StreamingOptions lo;
  lo.dim = 100;
  lo.vocab_capacity = 16384;
  lo.min_count = 2;
  lo.noise_table_size = 1 << 16;
  lo.sample = 0;
  return lo;
}

void TrainTwelveThousandWords(StreamingLearner* learner) {
  std::vector<std::string> lines;
  for (int rep = 0; rep < 2; ++rep) {
    for (int d = 0; d < 120; ++d) {
      std::string line;
      for (int w = 0; w < 100; ++w) line += "w" + std::to_string(d * 100 + w) + " ";
      lines.push_back(line);
    }
  }
  ASSERT_TRUE(learner->TrainMicroBatch({lines.begin(), lines.end()}).ok());
}

// A trainer's options towards that shard, as sender 1.
ParamClientOptions OneShardClientOptions(EmbeddedBroker* broker, const std::string& prefix) {
  ParamClientOptions po;
  po.kafka.brokers = broker->bootstrap();
  po.kafka.topic_prefix = prefix;
  po.sender = 1;
  return po;
}

// A first push of about 10 MB (12,000 new words of dim 100) through one shard: twice the
// embedded broker's ring per partition. The trainer waits for the shard to read what it pushed
// (flow control on the shard's read position), so every push message is merged and no row is
// lost.
TEST(DistributedTest, APushLargerThanTheRingReachesTheShardWhole) {
  const fs::path dir =
      fs::temp_directory_path() / ("streamvec_dist_ring_" + std::to_string(getpid()));
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  StatusOr<std::unique_ptr<ParamNode>> node =
      ParamNode::Create(OneShardOptions(broker->get(), "ring", dir));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  std::atomic<bool> stop_node{false};
  Status node_status;
  std::thread node_thread([&] { node_status = (*node)->Run(stop_node); });

  StreamingLearner learner(TwelveThousandWordsOptions());
  TrainTwelveThousandWords(&learner);
  ParamClientOptions po = OneShardClientOptions(broker->get(), "ring");
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Sync(/*force=*/true).ok());
  ASSERT_TRUE((*client)->Flush(10000).ok());
  const ParamClientStats ps = (*client)->stats();
  EXPECT_EQ(ps.rows_pushed, 12000u);
  EXPECT_GT(ps.push_bytes, uint64_t{8} << 20);  // more than the ring holds (~5 MiB)

  for (int i = 0; i < 1200 && (*node)->stats().merges < ps.push_messages; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop_node = true;
  node_thread.join();
  ASSERT_TRUE(node_status.ok()) << node_status.ToString();
  EXPECT_EQ((*node)->stats().merges, ps.push_messages);
  EXPECT_EQ((*node)->stats().rows, 12000u);
  EXPECT_EQ((*node)->stats().rows_dropped, 0u);
  fs::remove_all(dir);
}

// The same push without flow control (as when several trainers pass the lag check at once) and
// before the shard runs: the broker's ring drops the oldest half. The shard finds the gap in its
// partition's offsets and publishes it; the trainer pushes those messages again, so every row
// still reaches the shard.
TEST(DistributedTest, PushesTheBrokerDroppedArePushedAgain) {
  const fs::path dir =
      fs::temp_directory_path() / ("streamvec_dist_gap_" + std::to_string(getpid()));
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  ParamNodeOptions no = OneShardOptions(broker->get(), "gap", dir);
  no.publish_every_s = 0.05;
  StatusOr<std::unique_ptr<ParamNode>> node = ParamNode::Create(no);
  ASSERT_TRUE(node.ok()) << node.status().ToString();

  StreamingLearner learner(TwelveThousandWordsOptions());
  TrainTwelveThousandWords(&learner);
  ParamClientOptions po = OneShardClientOptions(broker->get(), "gap");
  po.max_lag_bytes = 0;
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Sync(/*force=*/true).ok());
  ASSERT_TRUE((*client)->Flush(10000).ok());
  EXPECT_GT((*client)->stats().push_bytes, uint64_t{8} << 20);  // more than the ring holds

  std::atomic<bool> stop_node{false};
  Status node_status;
  std::thread node_thread([&] { node_status = (*node)->Run(stop_node); });
  for (int i = 0; i < 1200 && (*node)->stats().rows < 12000; ++i) {
    ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());  // reads the gap, pushes again
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop_node = true;
  node_thread.join();
  ASSERT_TRUE(node_status.ok()) << node_status.ToString();
  const ParamNodeStats ns = (*node)->stats();
  EXPECT_GE(ns.gaps, 1u);
  EXPECT_GT(ns.lost_messages, 0u);
  EXPECT_GE((*client)->stats().repushed_messages, ns.lost_messages);
  EXPECT_EQ(ns.rows, 12000u);
  EXPECT_EQ(ns.rows_dropped, 0u);
  fs::remove_all(dir);
}

using testing::SmallLearnerOptions;

const std::vector<std::string> kLines = {"the cat sat on the mat", "the dog sat on the log",
                                         "a cat and a dog and the mat"};

// --max-staleness 0 against a running shard: each push round waits until the shard merged the
// previous one, so after every Sync only the round just pushed can be unacknowledged.
TEST(DistributedTest, MaxStalenessZeroHasEveryPushMergedBeforeTheNext) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  RunningShard shard;
  ASSERT_NO_FATAL_FAILURE(shard.Start(broker->get(), "st0"));
  StreamingLearner learner(SmallLearnerOptions());
  ParamClientOptions po;
  po.kafka.brokers = (*broker)->bootstrap();
  po.kafka.topic_prefix = "st0";
  po.sender = 1;
  po.push_every_words = 1;
  po.max_staleness = 0;
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const int rounds = 12;
  for (int i = 0; i < rounds; ++i) {
    ASSERT_TRUE(learner.TrainMicroBatch({kLines.begin(), kLines.end()}).ok());
    ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
    // The bound is checked before a push (at most max_staleness unmerged rounds); the round
    // just pushed adds one.
    EXPECT_LE((*client)->stats().unacked_rounds, 1u) << "after round " << i + 1;
  }
  EXPECT_EQ((*client)->stats().pushes, static_cast<uint64_t>(rounds));
  EXPECT_GT((*client)->stats().pull_messages, 0u);
}

// With no shard running nothing is acknowledged: the second push round waits (consuming
// .params) until the stop flag is raised, then goes out.
TEST(DistributedTest, MaxStalenessWaitsForAShardThatIsDownUntilStop) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  ASSERT_TRUE((*broker)->CreateTopic(UpdatesTopic("down"), 1).ok());
  ASSERT_TRUE((*broker)->CreateTopic(ParamsTopic("down"), 1).ok());
  StreamingLearner learner(SmallLearnerOptions());
  std::atomic<bool> stop{false};
  ParamClientOptions po;
  po.kafka.brokers = (*broker)->bootstrap();
  po.kafka.topic_prefix = "down";
  po.sender = 1;
  po.push_every_words = 1;
  po.max_staleness = 0;
  po.max_lag_bytes = 0;  // no flow control: only the staleness bound can hold a push back
  po.stop = &stop;
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE(learner.TrainMicroBatch({kLines.begin(), kLines.end()}).ok());
  ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());  // round 1: nothing to wait for
  ASSERT_TRUE(learner.TrainMicroBatch({kLines.begin(), kLines.end()}).ok());
  std::atomic<bool> returned{false};
  Status synced;
  std::thread sync([&] {
    synced = (*client)->Sync(/*force=*/false);  // round 2 waits for round 1
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(returned.load());  // still waiting: no shard will ever acknowledge round 1
  stop = true;
  sync.join();
  EXPECT_TRUE(synced.ok()) << synced.ToString();
  const ParamClientStats ps = (*client)->stats();
  EXPECT_EQ(ps.pushes, 2u);  // at stop the round goes out
  EXPECT_EQ(ps.unacked_rounds, 2u);
  EXPECT_GT(ps.staleness_wait_seconds, 0.0);
}

// --pull-every larger than what is trained: publications are consumed (and wait, one row per
// word) but applied only by a forced Sync.
TEST(DistributedTest, PullEveryKeepsPublishedRowsUntilTheyAreDue) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  RunningShard shard;
  ASSERT_NO_FATAL_FAILURE(shard.Start(broker->get(), "pull"));
  StreamingLearner learner(SmallLearnerOptions());
  ParamClientOptions po;
  po.kafka.brokers = (*broker)->bootstrap();
  po.kafka.topic_prefix = "pull";
  po.sender = 1;
  po.push_every_words = 1;
  po.pull_every_words = uint64_t{1} << 40;
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(learner.TrainMicroBatch({kLines.begin(), kLines.end()}).ok());
    ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
  }
  // Nothing trained from here on: no more pushes, the shard's publications catch up with them.
  for (int i = 0; i < 500 && (*client)->stats().rows_pending == 0; ++i) {
    ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ParamClientStats ps = (*client)->stats();
  EXPECT_GT(ps.pull_messages, 0u);
  EXPECT_GT(ps.rows_pending, 0u);
  EXPECT_EQ(ps.rows_applied, 0u);
  ASSERT_TRUE((*client)->Sync(/*force=*/true).ok());
  ps = (*client)->stats();
  EXPECT_GT(ps.rows_applied, 0u);
  EXPECT_EQ(ps.rows_pending, 0u);
}

}  // namespace
}  // namespace streamvec

// A trainer's pushes to and pulls from the parameter node (ParamClient) on the embedded broker.
#include "streamvec/trainer/param_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "../kafka/kafka_test_util.h"
#include "small_learner.h"
#include "streamvec/kafka/broker.h"

namespace streamvec {
namespace {

using testing::SmallLearnerOptions;

std::vector<std::string_view> Text(const std::vector<std::string>& lines) {
  return {lines.begin(), lines.end()};
}

// Options of a client of `broker`'s <prefix>.updates and <prefix>.params, one partition each
// (created here), that pushes after every trained word.
ParamClientOptions OneShardClient(EmbeddedBroker& broker, const std::string& prefix) {
  EXPECT_TRUE(broker.CreateTopic(prefix + ".updates", 1).ok());
  EXPECT_TRUE(broker.CreateTopic(prefix + ".params", 1).ok());
  ParamClientOptions po;
  po.kafka.brokers = broker.bootstrap();
  po.kafka.topic_prefix = prefix;
  po.push_every_words = 1;
  return po;
}

// Options of a client with sender id 7 that pushes after every trained word to `shards`
// partitions of pc.updates (created here), the messages SumPushes reads.
ParamClientOptions PushingClient(EmbeddedBroker& broker, uint32_t shards) {
  EXPECT_TRUE(broker.CreateTopic("pc.updates", static_cast<int>(shards)).ok());
  ParamClientOptions po;
  po.kafka.brokers = broker.bootstrap();
  po.kafka.topic_prefix = "pc";
  po.shards = shards;
  po.sender = 7;
  po.push_every_words = 1;
  return po;
}

// Syncs `client` until it has applied `rows` published rows in all (5 s at most).
void SyncUntilApplied(ParamClient& client, uint64_t rows) {
  for (int i = 0; i < 100 && client.stats().rows_applied < rows; ++i) {
    ASSERT_TRUE(client.Sync(/*force=*/false).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Produces `records` as one message with header `h` on partition 0 of `topic`.
void Publish(EmbeddedBroker& broker, const std::string& topic, const ParamMessageHeader& h,
             const std::vector<ParamRecord>& records) {
  StatusOr<std::vector<std::string>> messages = EncodeParamMessages(h, records);
  ASSERT_TRUE(messages.ok());
  ASSERT_EQ(messages->size(), 1u);
  ASSERT_EQ(testing::ProduceAll(broker.bootstrap(), topic,
                                {{.key = "", .value = (*messages)[0], .partition = 0}}),
            0);
}

struct PushedSums {
  std::map<std::string, std::vector<float>> input, output;  // word -> sum of its pushed deltas
  std::map<std::string, int> pushes;                        // word -> push messages carrying it
};

// Reads every push message of `client` from <prefix>.updates and sums each word's deltas.
void SumPushes(const std::string& bootstrap, const ParamClient& client, uint32_t shards,
               PushedSums* sums) {
  testing::TestConsumer consumer(bootstrap, "pc.updates");
  const std::vector<testing::Record> got = consumer.Read(client.stats().push_messages, 5000);
  ASSERT_EQ(got.size(), client.stats().push_messages);
  for (const testing::Record& r : got) {
    StatusOr<ParamMessage> m = DecodeParamMessage(r.value, {.dim = 8});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->header.kind, ParamMessageKind::kPush);
    EXPECT_EQ(m->header.sender, 7u);
    for (const ParamRecord& rec : m->records) {
      EXPECT_EQ(static_cast<int32_t>(ShardOf(rec.word, shards)), r.partition) << rec.word;
      if (rec.input.empty() && rec.output.empty()) continue;  // a count alone
      sums->pushes[rec.word] += 1;
      auto& in = sums->input[rec.word];
      auto& out = sums->output[rec.word];
      in.resize(8, 0.0f);
      out.resize(8, 0.0f);
      // A table whose row did not move since the word's last push is absent.
      for (int j = 0; j < 8 && !rec.input.empty(); ++j) in[j] += rec.input[j];
      for (int j = 0; j < 8 && !rec.output.empty(); ++j) out[j] += rec.output[j];
    }
  }
}

// Every admitted word's pushed deltas sum to its rows in the learner.
void ExpectSumsAreTheRows(StreamingLearner& learner, PushedSums& sums) {
  std::vector<std::string> words;
  std::vector<uint32_t> slots;
  std::vector<double> counts;
  learner.AdmittedSlots(&words, &slots, &counts);
  ASSERT_GE(words.size(), 6u);
  const StreamingLearner::RowTables t = learner.MutableRowTables();
  for (size_t i = 0; i < words.size(); ++i) {
    ASSERT_TRUE(sums.input.count(words[i])) << words[i];
    for (int j = 0; j < 8; ++j) {
      // Within float rounding: a push rebases by the rounded delta, so the receiver's sum is the
      // tracker's base and the last rounding residual waits for the next push.
      // (summing many pushes' deltas in float: a few ulps of the largest partial sum).
      EXPECT_NEAR(sums.input[words[i]][j], t.input[slots[i] * t.stride + j], 1e-6) << words[i];
      EXPECT_NEAR(sums.output[words[i]][j], t.output[slots[i] * t.stride + j], 1e-6) << words[i];
    }
  }
}

// Every pushed delta of a word, summed in push order, is its row (to float rounding): the node
// starts a word from zero and the first push carries the whole row. Each word goes to its
// ShardOf partition.
TEST(ParamClientTest, PushedDeltasSumToTheTrainersRowsOnTheWordsShards) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 2});
  ASSERT_TRUE(broker.ok());
  StreamingLearner learner(SmallLearnerOptions());
  ParamClientOptions po = PushingClient(**broker, 2);
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  const std::vector<std::string> lines = {"the cat sat on the mat", "the dog sat on the log",
                                          "a cat and a dog and the mat"};
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(learner.TrainMicroBatch(Text(lines)).ok());
    ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
  }
  ASSERT_TRUE((*client)->Flush(10000).ok());
  EXPECT_EQ((*client)->stats().pushes, 3u);
  EXPECT_EQ((*client)->stats().rows_deferred, 0u);  // fewer words than push_hot_rows
  PushedSums sums;
  SumPushes((*broker)->bootstrap(), **client, 2, &sums);
  ExpectSumsAreTheRows(learner, sums);
}

// A push carries only the tables whose rows moved since the word's last push: a word that was
// only a context or a negative in a round has its output row in the push and no input row, and
// a word the round did not touch at all is not in it (no delta, no count).
TEST(ParamClientTest, APushLeavesOutTheRowsThatDidNotMove) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  StreamingLearner learner(SmallLearnerOptions());
  ParamClientOptions po = PushingClient(**broker, 1);
  po.precision = ParamPrecision::kFp16;  // rounding residuals stay behind after each push
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const std::vector<std::string> all = {"the cat sat on the mat", "the dog sat on the log",
                                        "a cat and a dog and the mat"};
  ASSERT_TRUE(learner.TrainMicroBatch(Text(all)).ok());
  ASSERT_TRUE(learner.TrainMicroBatch(Text(all)).ok());  // every word admitted (min_count 2)
  ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
  ASSERT_TRUE((*client)->Flush(10000).ok());
  const uint64_t first_messages = (*client)->stats().push_messages;
  // "log" and "on" are not in this round: their input rows do not move.
  ASSERT_TRUE(learner.TrainMicroBatch(Text({"the cat sat", "a dog and a cat"})).ok());
  ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
  ASSERT_TRUE((*client)->Flush(10000).ok());
  testing::TestConsumer consumer((*broker)->bootstrap(), "pc.updates");
  const std::vector<testing::Record> got = consumer.Read((*client)->stats().push_messages, 5000);
  ASSERT_EQ(got.size(), (*client)->stats().push_messages);
  std::map<std::string, const ParamRecord*> second;
  std::vector<ParamMessage> messages;
  for (size_t i = first_messages; i < got.size(); ++i) {
    StatusOr<ParamMessage> m = DecodeParamMessage(got[i].value, {.dim = 8});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    messages.push_back(std::move(m).value());
  }
  for (const ParamMessage& m : messages) {
    for (const ParamRecord& r : m.records) second[r.word] = &r;
  }
  for (const std::string w : {"the", "cat", "sat", "a", "dog", "and"}) {
    ASSERT_TRUE(second.count(w)) << w;
    EXPECT_EQ(second[w]->input.size(), 8u) << w;  // trained as a centre word
    EXPECT_EQ(second[w]->output.size(), 8u) << w;
  }
  size_t output_only = 0;
  for (const std::string w : {"log", "on", "mat"}) {
    if (!second.count(w)) continue;  // not even drawn as a negative
    EXPECT_TRUE(second[w]->input.empty()) << w;
    EXPECT_EQ(second[w]->output.size(), 8u) << w;
    EXPECT_FALSE(second[w]->has_count) << w;
    ++output_only;
  }
  EXPECT_GT(output_only, 0u);  // 5 negatives a pair over a 9-word noise table
}

// The push schedule: with push_hot_rows 1 the most frequent word goes out every round and rarer
// ones in fewer rounds; what a round defers is not lost (the final, forced push carries it),
// so the pushed deltas still sum to the rows.
TEST(ParamClientTest, ThePushScheduleDefersRareRowsAndLosesNothing) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  StreamingLearner learner(SmallLearnerOptions());
  ParamClientOptions po = PushingClient(**broker, 1);
  po.push_hot_rows = 1;
  po.push_max_period = 4;
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  const std::vector<std::string> lines = {"the the the cat sat on the mat",
                                          "the the dog sat on the log",
                                          "a cat and a dog and the mat the"};
  const int rounds = 9;
  for (int round = 0; round < rounds; ++round) {
    ASSERT_TRUE(learner.TrainMicroBatch(Text(lines)).ok());
    ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
  }
  EXPECT_GT((*client)->stats().rows_deferred, 0u);
  PushedSums before;
  ASSERT_TRUE((*client)->Flush(10000).ok());
  SumPushes((*broker)->bootstrap(), **client, 1, &before);
  // "the" (most frequent, level 0) in every round after its first, whole-row push.
  EXPECT_EQ(before.pushes["the"], rounds);
  // "log" (rarest) at most every 4 rounds, after its first push.
  EXPECT_LE(before.pushes["log"], 1 + rounds / 4);
  EXPECT_GE(before.pushes["log"], 1);

  ASSERT_TRUE((*client)->Sync(/*force=*/true).ok());
  ASSERT_TRUE((*client)->Flush(10000).ok());
  PushedSums sums;
  SumPushes((*broker)->bootstrap(), **client, 1, &sums);
  ExpectSumsAreTheRows(learner, sums);
}

// A published row replaces the trainer's copy, keeping what the trainer learned since its last
// push; a publication that does not decode is skipped and counted.
TEST(ParamClientTest, AppliesPublishedRowsAndSkipsBadOnes) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  StreamingLearner learner(SmallLearnerOptions());
  ParamClientOptions po = OneShardClient(**broker, "pp");
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(learner.TrainMicroBatch(Text({"the cat sat on the mat", "the cat sat"})).ok());
  ASSERT_TRUE((*client)->Sync(/*force=*/true).ok());  // "cat" pushed: the node knows it now
  ASSERT_TRUE((*client)->Flush(5000).ok());           // delivered: its offset (0) is known

  ParamMessageHeader h;
  h.kind = ParamMessageKind::kRows;
  h.dim = 8;
  h.sender_clock = 42;
  h.base_clock = 1;  // the merged watermark: past the push at offset 0
  ParamRecord cat;
  cat.word = "cat";
  cat.input = {1, 2, 3, 4, 5, 6, 7, 8};
  cat.output = {-1, -2, -3, -4, -5, -6, -7, -8};
  ParamRecord unknown = cat;
  unknown.word = "zebra";  // not held by this trainer: skipped
  StatusOr<std::vector<std::string>> rows = EncodeParamMessages(h, std::vector{cat, unknown});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(testing::ProduceAll((*broker)->bootstrap(), "pp.params",
                                {{.key = "", .value = "not a message", .partition = 0},
                                 {.key = "", .value = (*rows)[0], .partition = 0}}),
            0);
  ASSERT_NO_FATAL_FAILURE(SyncUntilApplied(**client, 1));
  EXPECT_EQ((*client)->stats().rows_applied, 1u);
  EXPECT_EQ((*client)->stats().rejected, 1u);
  EXPECT_EQ((*client)->stats().node_clock, 42u);
  const StreamingLearner::RowTables t = learner.MutableRowTables();
  const int64_t slot = learner.SlotOf("cat");
  ASSERT_GE(slot, 0);
  for (int j = 0; j < 8; ++j) {  // nothing trained since the push: exactly the node's row
    EXPECT_EQ(t.input[slot * t.stride + j], cat.input[j]);
    EXPECT_EQ(t.output[slot * t.stride + j], cat.output[j]);
  }

  // Trained further and pushed again (offset 1); a publication from before the shard merged
  // that push (watermark 1) is taken with the push's deltas added back, not in place of them.
  ASSERT_TRUE(learner.TrainMicroBatch(Text({"the cat sat on the mat", "a cat sat"})).ok());
  std::vector<float> delta_in(8), delta_out(8);
  {
    const StreamingLearner::RowTables u = learner.MutableRowTables();
    for (int j = 0; j < 8; ++j) {
      delta_in[j] = u.input[slot * u.stride + j] - cat.input[j];
      delta_out[j] = u.output[slot * u.stride + j] - cat.output[j];
    }
  }
  ASSERT_TRUE((*client)->Sync(/*force=*/true).ok());
  ASSERT_TRUE((*client)->Flush(5000).ok());
  ParamRecord older = cat;
  for (int j = 0; j < 8; ++j) older.input[j] = 10.0f + j;
  for (int j = 0; j < 8; ++j) older.output[j] = -10.0f - j;
  ASSERT_NO_FATAL_FAILURE(Publish(**broker, "pp.params", h, {older}));  // still watermark 1
  ASSERT_NO_FATAL_FAILURE(SyncUntilApplied(**client, 2));
  EXPECT_EQ((*client)->stats().rows_applied, 2u);
  EXPECT_EQ((*client)->stats().rows_corrected, 1u);
  const StreamingLearner::RowTables v = learner.MutableRowTables();
  for (int j = 0; j < 8; ++j) {
    EXPECT_NEAR(v.input[slot * v.stride + j], older.input[j] + delta_in[j], 1e-5);
    EXPECT_NEAR(v.output[slot * v.stride + j], older.output[j] + delta_out[j], 1e-5);
  }

  // A publication of one row (the shard merged nothing into the other since it last published
  // it): that row is taken, the other stays as the trainer has it.
  const std::vector<float> output_before(v.output + slot * v.stride,
                                         v.output + slot * v.stride + 8);
  ParamRecord input_only;
  input_only.word = "cat";
  input_only.input = {7, 7, 7, 7, 7, 7, 7, 7};
  h.base_clock = 2;  // past both pushes
  ASSERT_NO_FATAL_FAILURE(Publish(**broker, "pp.params", h, {input_only}));
  ASSERT_NO_FATAL_FAILURE(SyncUntilApplied(**client, 3));
  EXPECT_EQ((*client)->stats().rows_applied, 3u);
  const StreamingLearner::RowTables w = learner.MutableRowTables();
  for (int j = 0; j < 8; ++j) {  // nothing trained since the last push
    EXPECT_EQ(w.input[slot * w.stride + j], 7.0f);
    EXPECT_EQ(w.output[slot * w.stride + j], output_before[j]);
  }
}

// A held word's publications go to its row; when the learner gives its slot to another word,
// the row the node has of it is kept (and a publication of one of its rows meanwhile replaces
// that one), and the word starts from it again when it comes back (not from a fresh row, which
// its next push would add to the node's as a second vector).
TEST(ParamClientTest, AWordEvictedHereComesBackWithTheNodesRow) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  StreamingOptions options = SmallLearnerOptions();
  options.vocab_capacity = 8;
  StreamingLearner learner(options);
  ParamClientOptions po = OneShardClient(**broker, "pe");
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(learner.TrainMicroBatch(Text({"the cat sat on the mat", "the cat sat"})).ok());
  ASSERT_TRUE((*client)->Sync(/*force=*/true).ok());  // "cat" pushed
  ASSERT_TRUE((*client)->Flush(5000).ok());

  ParamMessageHeader h;
  h.kind = ParamMessageKind::kRows;
  h.dim = 8;
  h.sender_clock = 42;
  h.base_clock = 1;  // past the push
  ParamRecord cat;
  cat.word = "cat";
  cat.input = {1, 2, 3, 4, 5, 6, 7, 8};
  cat.output = {-1, -2, -3, -4, -5, -6, -7, -8};
  ASSERT_NO_FATAL_FAILURE(Publish(**broker, "pe.params", h, {cat}));
  ASSERT_NO_FATAL_FAILURE(SyncUntilApplied(**client, 1));
  ASSERT_EQ((*client)->stats().rows_applied, 1u);
  ASSERT_GE(learner.SlotOf("cat"), 0);

  // Words seen three times each push "cat" (seen twice) out of the 8 slots; no Sync meanwhile.
  std::vector<std::string> others;
  for (int i = 0; i < 40; ++i) {
    const std::string w = "w" + std::to_string(i);
    others.push_back(w + " " + w + " " + w);
  }
  ASSERT_TRUE(learner.TrainMicroBatch(Text(others)).ok());
  ASSERT_LT(learner.SlotOf("cat"), 0);
  const uint64_t from_node = (*client)->stats().rows_from_node;

  // A publication of one of its rows while it is away replaces that row of the kept ones.
  ParamRecord input_only;
  input_only.word = "cat";
  input_only.input = {9, 9, 9, 9, 9, 9, 9, 9};
  h.sender_clock = 43;
  ASSERT_NO_FATAL_FAILURE(Publish(**broker, "pe.params", h, {input_only}));
  for (int i = 0; i < 100 && (*client)->stats().node_clock < 43; ++i) {
    ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ((*client)->stats().node_clock, 43u);
  ASSERT_LT(learner.SlotOf("cat"), 0);

  // Back: one-word sentences train nothing, so its row is the one it started from.
  ASSERT_TRUE(learner.TrainMicroBatch(Text({"cat", "cat", "cat", "cat", "cat", "cat"})).ok());
  ASSERT_GE(learner.SlotOf("cat"), 0);
  EXPECT_EQ((*client)->stats().rows_from_node, from_node + 1);
  const float* in = learner.InputRow("cat");
  ASSERT_NE(in, nullptr);
  EXPECT_TRUE(std::equal(input_only.input.begin(), input_only.input.end(), in));
  const StreamingLearner::RowTables t = learner.MutableRowTables();
  const float* out = t.output + learner.SlotOf("cat") * t.stride;
  EXPECT_TRUE(std::equal(cat.output.begin(), cat.output.end(), out));
}

// With pull_every, published rows wait: a newer publication of a word replaces its waiting row,
// a word the node removed loses it (the rows listed after it keep theirs, and can still be
// replaced), and the application takes the newest of each.
TEST(ParamClientTest, WaitingRowsAreReplacedDroppedAndAppliedAtTheirTime) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  StreamingLearner learner(SmallLearnerOptions());
  ParamClientOptions po = OneShardClient(**broker, "pq");
  po.pull_every_words = uint64_t{1} << 40;
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(learner.TrainMicroBatch(Text({"the cat sat on the mat", "the cat sat on the mat"}))
                  .ok());
  ASSERT_TRUE((*client)->Sync(/*force=*/true).ok());  // every word pushed
  ASSERT_TRUE((*client)->Flush(5000).ok());           // delivered: its offsets are known

  ParamMessageHeader h;
  h.dim = 8;
  h.sender_clock = 1;
  h.base_clock = 1000;  // the merged watermark: past every push
  auto row = [](const std::string& word, float base) {
    ParamRecord r;
    r.word = word;
    for (int j = 0; j < 8; ++j) r.input.push_back(base + static_cast<float>(j));
    for (int j = 0; j < 8; ++j) r.output.push_back(-base - static_cast<float>(j));
    return r;
  };
  uint64_t produced = 0;
  auto publish = [&](ParamMessageKind kind, const std::vector<ParamRecord>& records) {
    h.kind = kind;
    StatusOr<std::vector<std::string>> m = EncodeParamMessages(h, records);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_EQ(m->size(), 1u);
    ASSERT_EQ(testing::ProduceAll((*broker)->bootstrap(), "pq.params",
                                  {{.key = "", .value = (*m)[0], .partition = 0}}),
              0);
    ++produced;
    for (int i = 0; i < 100 && (*client)->stats().pull_messages < produced; ++i) {
      ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ((*client)->stats().pull_messages, produced);
  };
  publish(ParamMessageKind::kRows, {row("cat", 10), row("sat", 20), row("mat", 30)});
  EXPECT_EQ((*client)->stats().rows_pending, 3u);
  ParamRecord removed;
  removed.word = "cat";
  removed.removed = true;
  publish(ParamMessageKind::kVocabulary, {removed});  // the first waiting row goes
  EXPECT_EQ((*client)->stats().rows_pending, 2u);
  // Replace the waiting rows of sat and of mat (which took cat's place in the list).
  publish(ParamMessageKind::kRows, {row("sat", 40), row("mat", 50)});
  EXPECT_EQ((*client)->stats().rows_pending, 2u);
  EXPECT_EQ((*client)->stats().rows_applied, 0u);

  ASSERT_TRUE((*client)->Sync(/*force=*/true).ok());  // due at a forced sync
  EXPECT_EQ((*client)->stats().rows_applied, 2u);
  EXPECT_EQ((*client)->stats().rows_pending, 0u);
  const ParamRecord sat = row("sat", 40), mat = row("mat", 50), cat = row("cat", 10);
  const float* sat_in = learner.InputRow("sat");
  const float* mat_in = learner.InputRow("mat");
  const float* cat_in = learner.InputRow("cat");
  ASSERT_NE(sat_in, nullptr);
  ASSERT_NE(mat_in, nullptr);
  ASSERT_NE(cat_in, nullptr);
  // Nothing trained since the push: exactly the published rows.
  EXPECT_TRUE(std::equal(sat.input.begin(), sat.input.end(), sat_in));
  EXPECT_TRUE(std::equal(mat.input.begin(), mat.input.end(), mat_in));
  EXPECT_FALSE(std::equal(cat.input.begin(), cat.input.end(), cat_in));
}

// The distributed seam of the learner: a word's fresh rows come from the row initializer when
// it has them, else (word-seeded) from a hash of the word, the same in every learner whatever
// order the words arrive in. One-word sentences train nothing, so the rows stay as initialised.
TEST(ParamClientTest, LearnerStartsWordsFromTheInitializerOrFromTheWordsHash) {
  StreamingLearner a(SmallLearnerOptions()), b(SmallLearnerOptions());
  a.SetWordSeededInit(true);
  b.SetWordSeededInit(true);
  const std::vector<float> node_in = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> node_out = {-1, -2, -3, -4, -5, -6, -7, -8};
  std::vector<std::string> asked;
  b.SetRowInitializer([&](std::string_view word, uint32_t, float* in, float* out) {
    asked.emplace_back(word);
    if (word != "zebra") return false;
    std::copy(node_in.begin(), node_in.end(), in);
    std::copy(node_out.begin(), node_out.end(), out);
    return true;
  });
  ASSERT_TRUE(a.TrainMicroBatch(Text({"cat", "dog", "cat", "dog"})).ok());
  ASSERT_TRUE(b.TrainMicroBatch(Text({"dog", "zebra", "cat", "zebra", "dog", "cat"})).ok());
  EXPECT_EQ(asked, (std::vector<std::string>{"dog", "zebra", "cat"}));
  for (const char* w : {"cat", "dog"}) {
    const float* ra = a.InputRow(w);
    const float* rb = b.InputRow(w);
    ASSERT_NE(ra, nullptr) << w;
    ASSERT_NE(rb, nullptr) << w;
    bool nonzero = false;
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(ra[j], rb[j]) << w << " " << j;
      nonzero = nonzero || ra[j] != 0.0f;
    }
    EXPECT_TRUE(nonzero) << w;
  }
  const float* dog = a.InputRow("dog");
  const float* cat = a.InputRow("cat");
  EXPECT_FALSE(std::equal(dog, dog + 8, cat));  // each word its own row
  const float* zebra = b.InputRow("zebra");
  ASSERT_NE(zebra, nullptr);
  EXPECT_TRUE(std::equal(node_in.begin(), node_in.end(), zebra));
}

// A word this trainer gives a slot starts from the newest row a shard published for it, also
// after thousands of words came and left the node's vocabulary (the client's filter over the
// published words is rebuilt then: the words still held keep theirs), and a word the node
// removed starts from its word-seeded row.
TEST(ParamClientTest, AWordStartsFromItsPublishedRowAfterVocabularyChurn) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  StreamingOptions options = SmallLearnerOptions();
  options.vocab_capacity = 20000;  // the client keeps as many published words
  StreamingLearner learner(options);
  ParamClientOptions po = OneShardClient(**broker, "pw");
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  auto row_of = [](int i, float sign) {
    std::vector<float> v(8);
    for (int j = 0; j < 8; ++j) v[j] = sign * static_cast<float>(i * 8 + j + 1) / 1024.0f;
    return v;
  };
  ParamMessageHeader h;
  h.dim = 8;
  h.sender_clock = 1;
  auto publish = [&](ParamMessageKind kind, const std::vector<ParamRecord>& records) {
    h.kind = kind;
    StatusOr<std::vector<std::string>> messages = EncodeParamMessages(h, records);
    ASSERT_TRUE(messages.ok()) << messages.status().ToString();
    std::vector<testing::Record> out;
    for (std::string& m : *messages) out.push_back({.key = "", .value = m, .partition = 0});
    h.sequence += messages->size();
    ASSERT_EQ(testing::ProduceAll((*broker)->bootstrap(), "pw.params", out), 0);
  };
  // 9000 words published, all but the first 1000 removed, 9000 others published.
  constexpr int kWords = 9000, kKept = 1000;
  std::vector<ParamRecord> first, removed, second;
  for (int i = 0; i < kWords; ++i) {
    ParamRecord r;
    r.word = "old" + std::to_string(i);
    r.input = row_of(i, 1.0f);
    r.output = row_of(i, -1.0f);
    first.push_back(r);
    if (i >= kKept) {
      ParamRecord gone;
      gone.word = r.word;
      gone.removed = true;
      removed.push_back(gone);
    }
    r.word = "new" + std::to_string(i);
    second.push_back(r);
  }
  publish(ParamMessageKind::kRows, first);
  publish(ParamMessageKind::kVocabulary, removed);
  publish(ParamMessageKind::kRows, second);
  const uint64_t messages = h.sequence;
  for (int i = 0; i < 200 && (*client)->stats().pull_messages < messages; ++i) {
    ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ((*client)->stats().pull_messages, messages);

  const std::vector<std::string> published = {"old0", "old999", "new0", "new1", "new4096",
                                              "new8999"};
  const std::vector<std::string> gone = {"old1000", "old8999"};
  std::vector<std::string> lines;  // one-word sentences train nothing: rows stay as they started
  for (const auto* list : {&published, &gone}) {
    for (const std::string& w : *list) lines.insert(lines.end(), {w, w});
  }
  ASSERT_TRUE(learner.TrainMicroBatch(Text(lines)).ok());
  EXPECT_EQ((*client)->stats().rows_from_node, published.size());
  for (const std::string& w : published) {
    const float* in = learner.InputRow(w);
    ASSERT_NE(in, nullptr) << w;
    const std::vector<float> want = row_of(std::stoi(w.substr(3)), 1.0f);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), in)) << w;
  }
  StreamingLearner seeded(options);
  seeded.SetWordSeededInit(true);
  ASSERT_TRUE(seeded.TrainMicroBatch(Text(lines)).ok());
  for (const std::string& w : gone) {
    const float* got = learner.InputRow(w);
    const float* own = seeded.InputRow(w);
    ASSERT_NE(got, nullptr) << w;
    ASSERT_NE(own, nullptr) << w;
    EXPECT_TRUE(std::equal(own, own + 8, got)) << w;
  }
}

// The group's vocabulary: the shards' published counts, less what this trainer pushed of each
// word, admit words this trainer alone has seen fewer than min_count times, held or taken later,
// and weigh its noise distribution. With group_counts off, its own counts alone.
TEST(ParamClientTest, GroupCountsAdmitWordsTheTrainerSawTooRarely) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  for (const std::string prefix : {"pg", "pn"}) {
    SCOPED_TRACE(prefix);
    StreamingOptions options = SmallLearnerOptions();
    options.min_count = 3;
    StreamingLearner learner(options);
    ParamClientOptions po = OneShardClient(**broker, prefix);
    po.group_counts = prefix == "pg";
    StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    ASSERT_TRUE(
        learner
            .TrainMicroBatch(Text({"the cat saw a rare bird", "the rare cat sat", "the cat ran"}))
            .ok());
    ASSERT_TRUE((*client)->Sync(/*force=*/true).ok());  // "the" and "cat" go out, count 3 each
    ASSERT_TRUE((*client)->Flush(5000).ok());
    EXPECT_TRUE(learner.Admitted("the"));
    EXPECT_FALSE(learner.Admitted("rare"));  // 2 of 3

    // The shard counts "the" 10 times (our 3 and 7 more), "rare" 4 (none of ours: we never
    // pushed it) and "kiwi", which we never saw, 4.5 with an error of 0.5 (guaranteed 4).
    ParamMessageHeader h;
    h.kind = ParamMessageKind::kVocabulary;
    h.dim = 8;
    std::vector<ParamRecord> counts(3);
    counts[0].word = "kiwi";
    counts[0].count = 4.5;
    counts[0].count_error = 0.5;
    counts[1].word = "rare";
    counts[1].count = 4.0;
    counts[2].word = "the";
    counts[2].count = 10.0;
    for (ParamRecord& r : counts) r.has_count = true;
    StatusOr<std::vector<std::string>> vocab = EncodeParamMessages(h, counts);
    ASSERT_TRUE(vocab.ok());
    ASSERT_EQ(testing::ProduceAll((*broker)->bootstrap(), prefix + ".params",
                                  {{.key = "", .value = (*vocab)[0], .partition = 0}}),
              0);
    for (int i = 0; i < 100 && (*client)->stats().pull_messages == 0; ++i) {
      ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ((*client)->stats().pull_messages, 1u);
    ASSERT_TRUE(learner.TrainMicroBatch(Text({"a kiwi fell"})).ok());
    if (po.group_counts) {
      EXPECT_EQ((*client)->stats().group_counts_raised, 2u);  // "the" and "rare"
      EXPECT_EQ(learner.GroupCount("the"), 7.0);
      EXPECT_EQ(learner.GroupCount("rare"), 4.0);
      EXPECT_TRUE(learner.Admitted("rare"));
      EXPECT_EQ(learner.GroupCount("kiwi"), 4.0);
      EXPECT_TRUE(learner.Admitted("kiwi"));  // 1 of ours and 4 of the others
    } else {
      EXPECT_EQ((*client)->stats().group_counts_raised, 0u);
      EXPECT_EQ(learner.GroupCount("the"), 0.0);
      EXPECT_FALSE(learner.Admitted("rare"));
      EXPECT_FALSE(learner.Admitted("kiwi"));
    }
    EXPECT_FALSE(learner.Admitted("fell"));
  }
}

TEST(ParamClientTest, RefusesNoShardsAndADeviceLearner) {
  StreamingLearner learner(SmallLearnerOptions());
  ParamClientOptions po;
  po.kafka.brokers = "127.0.0.1:1";
  po.shards = 0;
  EXPECT_EQ(ParamClient::Create(po, &learner).status().code(), StatusCode::kInvalidArgument);
  po.shards = 1;
  po.push_every_words = 0;
  EXPECT_EQ(ParamClient::Create(po, &learner).status().code(), StatusCode::kInvalidArgument);
}

// A trainer the embedded broker's ring overtook on <prefix>.params (it had read one
// publication, then fell behind by more than the ring holds) reads on from the oldest
// publication the ring still holds, not from its end: the newest rows are not skipped, and the
// overtaking is counted.
TEST(ParamClientTest, ATrainerTheRingOvertookReadsOnFromTheOldestPublicationLeft) {
  auto broker = EmbeddedBroker::Start({.brokers = 1, .partitions = 1});
  ASSERT_TRUE(broker.ok());
  StreamingLearner learner(SmallLearnerOptions());
  ParamClientOptions po = OneShardClient(**broker, "po");
  // The client's fetcher stops once 1 MiB waits unread in its queue (librdkafka fetches ahead
  // of the application up to this bound): a trainer busy training while the shard publishes.
  po.kafka.properties = {{"queued.max.messages.kbytes", "1024"}};
  StatusOr<std::unique_ptr<ParamClient>> client = ParamClient::Create(po, &learner);
  ASSERT_TRUE(client.ok());
  ParamMessageHeader h;
  h.kind = ParamMessageKind::kRows;
  h.dim = 8;
  ParamRecord first;
  first.word = "dog";
  first.input = std::vector<float>(8, 1.0f);
  first.output = std::vector<float>(8, 2.0f);
  ASSERT_NO_FATAL_FAILURE(Publish(**broker, "po.params", h, {first}));
  for (int i = 0; i < 100 && (*client)->stats().pull_messages < 1; ++i) {
    ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ((*client)->stats().pull_messages, 1u);
  // 16 MiB the client does not read (undecodable filler: rejected, skipped), then the rows of
  // "cat", which this trainer has not met yet: its first occurrence must start from them.
  std::vector<testing::Record> filler;
  for (int i = 0; i < 32; ++i) {
    filler.push_back({.key = "", .value = std::string(size_t{512} << 10, 'x'), .partition = 0});
  }
  ASSERT_EQ(testing::ProduceAll((*broker)->bootstrap(), "po.params", filler), 0);
  ParamRecord cat;
  cat.word = "cat";
  cat.input = {1, 2, 3, 4, 5, 6, 7, 8};
  cat.output = {-1, -2, -3, -4, -5, -6, -7, -8};
  h.sender_clock = 9;
  ASSERT_NO_FATAL_FAILURE(Publish(**broker, "po.params", h, {cat}));
  for (int i = 0; i < 200 && (*client)->stats().node_clock < 9; ++i) {
    ASSERT_TRUE((*client)->Sync(/*force=*/false).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE((*client)->stats().pulls_lost, 1u);  // the ring had dropped some filler
  EXPECT_EQ((*client)->stats().rejected + (*client)->stats().pulls_lost, filler.size());
  EXPECT_EQ((*client)->stats().node_clock, 9u);  // and the last publication was read
  ASSERT_TRUE(learner.TrainMicroBatch(Text({"the cat sat"})).ok());
  EXPECT_EQ((*client)->stats().rows_from_node, 1u);
}

// A client that fails to start (here: a librdkafka property that does not exist) leaves the
// learner as it was: it trains as a learner that never met a client, bit for bit (no word-seeded
// initialisation, no row initializer into the freed client, no group counts).
TEST(ParamClientTest, AClientThatFailsToStartLeavesTheLearnerAsItWas) {
  StreamingLearner learner(SmallLearnerOptions());
  StreamingLearner untouched(SmallLearnerOptions());
  ParamClientOptions po;
  po.kafka.brokers = "127.0.0.1:1";
  po.kafka.properties = {{"no.such.property", "1"}};
  po.group_counts = true;
  EXPECT_FALSE(ParamClient::Create(po, &learner).ok());
  const std::vector<std::string_view> batch = {"the cat sat on the mat the cat",
                                               "a dog sat on a log a dog"};
  ASSERT_TRUE(learner.TrainMicroBatch(batch).ok());
  ASSERT_TRUE(untouched.TrainMicroBatch(batch).ok());
  std::vector<std::string> words, other_words;
  std::vector<float> vectors, other_vectors;
  learner.ExportVectors(&words, &vectors);
  untouched.ExportVectors(&other_words, &other_vectors);
  ASSERT_FALSE(words.empty());
  EXPECT_EQ(words, other_words);
  EXPECT_EQ(vectors, other_vectors);
}

}  // namespace
}  // namespace streamvec

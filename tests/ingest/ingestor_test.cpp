// The file/directory/stdin connector against the embedded broker, read back with a plain
// librdkafka consumer: exactly-once content, offsets, rejections, follow, resume, flow control.
#include "streamvec/ingest/ingestor.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "../kafka/kafka_test_util.h"
#include "compress_util.h"
#include "streamvec/ingest/language.h"
#include "streamvec/kafka/broker.h"
#include "streamvec/kafka/consumer_lag.h"
#include "streamvec/kafka/document.h"

namespace streamvec {
namespace {

using ::testing::HasSubstr;
using testing::Record;
using testing::TestConsumer;
namespace fs = std::filesystem;

std::vector<std::string> Words(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::vector<std::string> words;
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

class IngestorTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(4); }

  void Start(int partitions) {
    broker_.reset();
    StatusOr<std::unique_ptr<EmbeddedBroker>> broker =
        EmbeddedBroker::Start({.brokers = 1, .partitions = partitions});
    ASSERT_TRUE(broker.ok());
    broker_ = std::move(broker).value();
    ASSERT_TRUE(broker_->CreateTopic("t.docs").ok());
    ASSERT_TRUE(broker_->CreateTopic("t.rejected").ok());
    dir_ = fs::temp_directory_path() /
           ("streamvec_ingest_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text, bool append = false) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
    out << text;
    return fs::absolute(p).lexically_normal().string();
  }

  IngestOptions Options(const std::string& from) {
    IngestOptions o;
    o.kafka.brokers = broker_->bootstrap();
    o.kafka.topic_prefix = "t";
    o.from = from;
    o.poll_interval_ms = 50;
    return o;
  }

  // Runs an ingestor to completion (no follow).
  // The first `n` records of t.rejected (waiting up to 10 s), parsed.
  std::vector<nlohmann::json> Rejections(size_t n) {
    TestConsumer consumer(broker_->bootstrap(), "t.rejected");
    std::vector<nlohmann::json> out;
    for (const Record& r : consumer.Read(n, 10000)) out.push_back(nlohmann::json::parse(r.value));
    return out;
  }

  IngestStats RunToEnd(const IngestOptions& options) {
    StatusOr<std::unique_ptr<Ingestor>> ingestor = Ingestor::Create(options);
    EXPECT_TRUE(ingestor.ok()) << ingestor.status().ToString();
    if (!ingestor.ok()) return {};
    std::atomic<bool> stop{false};
    const Status s = (*ingestor)->Run(stop);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return (*ingestor)->stats();
  }

  // Parses every record as a Document (failing the test on a malformed one), in source order:
  // by source, then offset (documents are spread over the partitions, so the consumer sees them
  // in no particular order across partitions).
  static std::vector<Document> Docs(const std::vector<Record>& records) {
    std::vector<Document> docs;
    for (const Record& r : records) {
      StatusOr<Document> d = ParseDocument(r.value);
      EXPECT_TRUE(d.ok()) << d.status().ToString();
      if (!d.ok()) continue;
      EXPECT_EQ(r.key, d->source);
      docs.push_back(std::move(d).value());
    }
    std::stable_sort(docs.begin(), docs.end(), [](const Document& a, const Document& b) {
      return a.source != b.source ? a.source < b.source : a.offset < b.offset;
    });
    return docs;
  }

  std::unique_ptr<EmbeddedBroker> broker_;
  fs::path dir_;
};

// The group's rate comes from its committed offsets over the window: commits every 2 s of 1000
// messages are 500 messages/s; a group that commits nothing, or a window too short, gives no rate.
TEST(ConsumptionRateTest, RateOfCommittedOffsetsOverTheWindow) {
  ConsumptionRate rate(/*window_seconds=*/10, /*min_span_seconds=*/2);
  EXPECT_EQ(rate.MessagesPerSecond(), -1);
  rate.Add(0.0, 0);
  rate.Add(1.0, 0);
  EXPECT_EQ(rate.MessagesPerSecond(), -1);  // nothing committed yet
  for (int k = 1; k <= 10; ++k) {
    rate.Add(2.0 * k - 0.5, 1000 * (k - 1));  // queries between the commits
    rate.Add(2.0 * k, 1000 * k);
  }
  EXPECT_NEAR(rate.MessagesPerSecond(), 500, 1e-9);  // (10000 - 5000) / (20 - 10)
  rate.Add(30.0, 10000);
  rate.Add(40.0, 10000);
  EXPECT_EQ(rate.MessagesPerSecond(), -1);  // stalled for the whole window
  rate.Add(41.0, 10500);
  // From t = 30, the newest sample at or before the window's start (31): 500 in 11 s.
  EXPECT_NEAR(rate.MessagesPerSecond(), 500.0 / 11, 1e-9);
  ConsumptionRate short_window(10, 2);
  short_window.Add(0.0, 0);
  short_window.Add(1.5, 900);
  EXPECT_EQ(short_window.MessagesPerSecond(), -1);  // spans less than 2 s
}

TEST(ConsumptionRateTest, TimeBoundedBudgetStaysBetweenFloorAndCap) {
  const int64_t cap = 64 << 20, floor = 8 << 20;
  EXPECT_EQ(TimeBoundedLagBudget(cap, floor, -1, 10), cap);        // no rate yet
  EXPECT_EQ(TimeBoundedLagBudget(cap, floor, 1e6, 0), cap);        // bound off
  EXPECT_EQ(TimeBoundedLagBudget(cap, floor, 25e6, 10), cap);      // a fast trainer: the ring
  EXPECT_EQ(TimeBoundedLagBudget(cap, floor, 2e6, 10), 20000000);  // 2 MB/s x 10 s
  EXPECT_EQ(TimeBoundedLagBudget(cap, floor, 1e5, 10), floor);     // never under the floor
}

TEST_F(IngestorTest, EveryLineArrivesOnceWithItsEndOffset) {
  std::mt19937 gen(3);
  std::uniform_int_distribution<int> words(1, 30);
  std::string text;
  std::vector<std::pair<std::string, int64_t>> expected;  // line, offset past it
  for (int i = 0; i < 3000; ++i) {
    if (i % 97 == 0) text += "\n";        // empty lines are skipped
    if (i % 101 == 0) text += "  \t \n";  // and so are blank ones
    std::string line = "line" + std::to_string(i);
    for (int k = words(gen); k > 0; --k) line += " w" + std::to_string(gen() % 1000);
    const bool last = i == 2999;
    text += line + (last ? "" : "\n");  // the last line has no '\n'
    expected.emplace_back(line, static_cast<int64_t>(text.size()));
  }
  const std::string path = Write("a.txt", text);
  const IngestStats stats = RunToEnd(Options(path));
  EXPECT_EQ(stats.documents_produced, 3000);
  EXPECT_EQ(stats.documents_delivered, 3000);
  EXPECT_EQ(stats.rejected, 0);
  EXPECT_EQ(stats.input_bytes, static_cast<int64_t>(text.size()));
  EXPECT_EQ(stats.lines, 3000 + 31 + 30);

  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  const std::vector<Document> docs = Docs(consumer.Read(3000, 10000));
  ASSERT_EQ(docs.size(), 3000u);
  EXPECT_TRUE(consumer.Read(1, 300).empty());
  // The [start, offset) ranges tile the file (blank lines fall inside the next document's range).
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_EQ(docs[i].start, i == 0 ? 0 : docs[i - 1].offset);
    EXPECT_EQ(docs[i].source, path);
    EXPECT_EQ(docs[i].text, expected[i].first);
    EXPECT_EQ(docs[i].offset, expected[i].second);
    const int64_t start = expected[i].second - static_cast<int64_t>(expected[i].first.size()) -
                          (i + 1 == docs.size() ? 0 : 1);
    EXPECT_EQ(docs[i].id, path + ":" + std::to_string(start));
    if (i > 0) { EXPECT_GT(docs[i].offset, docs[i - 1].offset); }
  }
}

// Each document carries the language CLD2 finds in it ("" when it is not sure), unless turned off.
TEST_F(IngestorTest, DocumentsCarryTheirDetectedLanguage) {
  const std::string path = Write(
      "langs.txt",
      "The quick brown fox jumps over the lazy dog and then runs far into the deep forest where "
      "it lives with its family.\n"
      "Der schnelle braune Fuchs springt über den faulen Hund und läuft dann weit in den tiefen "
      "Wald, wo er mit seiner Familie lebt.\n"
      "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。\n"
      "ok\n");
  RunToEnd(Options(path));
  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  std::vector<Document> docs = Docs(consumer.Read(4, 10000));
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0].lang, "en");
  EXPECT_EQ(docs[1].lang, "de");
  EXPECT_EQ(docs[2].lang, "ja");
  EXPECT_EQ(docs[3].lang, "");  // too short to say
  EXPECT_EQ(DetectLanguage(""), "");
  EXPECT_EQ(DetectLanguage(std::string("caf\xC3", 4)), "");  // invalid UTF-8: not reliable
}

TEST_F(IngestorTest, LanguageDetectionCanBeTurnedOff) {
  const std::string path = Write("en.txt",
                                 "The quick brown fox jumps over the lazy dog and then runs far "
                                 "into the deep forest where it lives with its family.\n");
  IngestOptions o = Options(path);
  o.detect_language = false;
  RunToEnd(o);
  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  std::vector<Document> docs = Docs(consumer.Read(1, 10000));
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].lang, "");
}

TEST_F(IngestorTest, LongLineIsSplitAndKeepsEveryWordOnce) {
  std::mt19937 gen(5);
  std::string line;
  while (line.size() < 3 * kMaxDocumentTextBytes + 12345) {
    line += "word" + std::to_string(gen() % 100000) + (gen() % 7 == 0 ? "  " : " ");
  }
  line += "tail";
  const std::string text = line + "\nshort line\n";
  const std::string path = Write("long.txt", text);
  const IngestStats stats = RunToEnd(Options(path));
  EXPECT_EQ(stats.lines, 2);

  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  const std::vector<Document> docs = Docs(consumer.Read(1000, 2000));
  ASSERT_GE(docs.size(), 5u);
  std::vector<std::string> words;
  int64_t previous = 0;
  for (size_t i = 0; i + 1 < docs.size(); ++i) {
    EXPECT_LE(docs[i].text.size(), kMaxDocumentTextBytes);
    // Each piece's id names its start and its offset is just past it (the last: past '\n').
    const int64_t start = std::stoll(docs[i].id.substr(path.size() + 1));
    EXPECT_EQ(text.compare(start, docs[i].text.size(), docs[i].text), 0);
    const int64_t own_end = start + static_cast<int64_t>(docs[i].text.size());
    EXPECT_EQ(docs[i].offset, i + 2 == docs.size() ? static_cast<int64_t>(line.size() + 1)
                                                   : own_end);
    EXPECT_GT(docs[i].offset, previous);
    previous = docs[i].offset;
    for (std::string& w : Words(docs[i].text)) words.push_back(std::move(w));
  }
  EXPECT_EQ(words, Words(line));
  EXPECT_EQ(docs.back().text, "short line");
  EXPECT_EQ(docs.back().offset, static_cast<int64_t>(text.size()));
}

TEST_F(IngestorTest, InvalidUtf8LineIsRejectedWithReasonAndTheRestGoesThrough) {
  const std::string text = "good one\nbad \xFF\xFE line\ngood two\n";
  const std::string path = Write("mixed.txt", text);
  const IngestStats stats = RunToEnd(Options(path));
  EXPECT_EQ(stats.documents_delivered, 2);
  EXPECT_EQ(stats.rejected, 1);

  TestConsumer docs_consumer(broker_->bootstrap(), "t.docs");
  const std::vector<Document> docs = Docs(docs_consumer.Read(2, 10000));
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].text, "good one");
  EXPECT_EQ(docs[1].text, "good two");

  const std::vector<nlohmann::json> rejected = Rejections(1);
  ASSERT_EQ(rejected.size(), 1u);
  const nlohmann::json& j = rejected[0];
  EXPECT_EQ(j.at("reason").get<std::string>(), "invalid UTF-8 at byte 13");
  EXPECT_EQ(j.at("origin").get<std::string>(), path + ":9");
  EXPECT_THAT(j.at("payload").get<std::string>(), HasSubstr("line"));
}

// Binary data given as text: a line holding a NUL or another non-whitespace control byte is
// rejected with the byte and its offset; tabs and carriage returns are text.
TEST_F(IngestorTest, LineWithAControlByteIsRejectedWithReasonAndTheRestGoesThrough) {
  const std::string text = std::string("good\tone\r\nELF\x7f bin") + '\0' + "ary\ngood two\n";
  const std::string path = Write("binary.txt", text);
  const IngestStats stats = RunToEnd(Options(path));
  EXPECT_EQ(stats.documents_delivered, 2);
  EXPECT_EQ(stats.rejected, 1);
  TestConsumer docs_consumer(broker_->bootstrap(), "t.docs");
  const std::vector<Document> docs = Docs(docs_consumer.Read(2, 10000));
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1].text, "good two");
  const std::vector<nlohmann::json> rejected = Rejections(1);
  ASSERT_EQ(rejected.size(), 1u);
  const nlohmann::json& j = rejected[0];
  EXPECT_EQ(j.at("reason").get<std::string>(), "control byte 0x7F at byte 13");
}

TEST_F(IngestorTest, DocPerFileSendsEachFileOfADirectoryAsOneDocument) {
  const std::string a = Write("d/a.txt", "first line\nsecond line\n");
  const std::string b = Write("d/sub/b.txt", "bee");
  Write("d/.hidden", "never sent\n");
  IngestOptions options = Options((dir_ / "d").string());
  options.doc_per_file = true;
  const IngestStats stats = RunToEnd(options);
  EXPECT_EQ(stats.documents_delivered, 2);
  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  std::map<std::string, Document> by_source;
  for (Document& d : Docs(consumer.Read(2, 10000))) by_source[d.source] = d;
  ASSERT_EQ(by_source.size(), 2u);
  EXPECT_EQ(by_source[a].text, "first line\nsecond line");
  EXPECT_EQ(by_source[a].offset, 23);
  EXPECT_EQ(by_source[a].id, a + ":0");
  EXPECT_EQ(by_source[b].text, "bee");
}

TEST_F(IngestorTest, DirectoryFollowPicksUpNewFilesAndAppendedLines) {
  const std::string a = Write("in/a.txt", "one\ntwo\n");
  IngestOptions options = Options((dir_ / "in").string());
  options.follow = true;
  StatusOr<std::unique_ptr<Ingestor>> ingestor = Ingestor::Create(options);
  ASSERT_TRUE(ingestor.ok());
  std::atomic<bool> stop{false};
  Status result;
  std::thread runner([&] { result = (*ingestor)->Run(stop); });

  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  std::vector<Document> docs = Docs(consumer.Read(2, 10000));
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1].text, "two");

  Write("in/a.txt", "three\nfou", /*append=*/true);  // "fou" is not a complete line yet
  const std::string b = Write("in/b.txt", "bee\n");
  std::vector<Document> more = Docs(consumer.Read(2, 10000));
  ASSERT_EQ(more.size(), 2u);
  std::set<std::string> texts;
  for (const Document& d : more) texts.insert(d.text);
  EXPECT_EQ(texts, (std::set<std::string>{"three", "bee"}));
  for (const Document& d : more) {
    if (d.source == a) {
      EXPECT_EQ(d.offset, 14);  // past "three\n", not past "fou"
    }
  }

  Write("in/a.txt", "r\n", /*append=*/true);
  more = Docs(consumer.Read(1, 10000));
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].text, "four");
  EXPECT_EQ(more[0].id, a + ":14");

  stop = true;
  runner.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  EXPECT_EQ((*ingestor)->stats().documents_delivered, 5);
}

TEST_F(IngestorTest, ResumeFromStartPositionsSkipsWhatWasSent) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "sentence number " + std::to_string(i) + "\n";
  const std::string path = Write("r.txt", text);
  RunToEnd(Options(path));
  TestConsumer first(broker_->bootstrap(), "t.docs");
  const std::vector<Document> docs = Docs(first.Read(100, 10000));
  ASSERT_EQ(docs.size(), 100u);

  // A restarted connector resumes after document 41 (what a trainer snapshot would record).
  ASSERT_TRUE(broker_->CreateTopic("r.docs").ok());
  ASSERT_TRUE(broker_->CreateTopic("r.rejected").ok());
  IngestOptions options = Options(path);
  options.kafka.topic_prefix = "r";
  options.start_positions[path] = docs[41].offset;
  const IngestStats stats = RunToEnd(options);
  EXPECT_EQ(stats.documents_delivered, 58);
  TestConsumer second(broker_->bootstrap(), "r.docs");
  const std::vector<Document> resumed = Docs(second.Read(58, 10000));
  ASSERT_EQ(resumed.size(), 58u);
  EXPECT_TRUE(second.Read(1, 300).empty());
  for (size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_EQ(resumed[i].id, docs[42 + i].id);
    EXPECT_EQ(resumed[i].text, docs[42 + i].text);
    EXPECT_EQ(resumed[i].offset, docs[42 + i].offset);
  }
}

// --offsets-file: a run records the delivered end of its source; a second run on the grown file
// sends only the appended lines; a file that is not an offsets file is refused at Create.
TEST_F(IngestorTest, OffsetsFileResumesAfterWhatWasDelivered) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "first part line " + std::to_string(i) + "\n";
  const std::string path = Write("o.txt", text);
  const std::string offsets = (dir_ / "offsets.json").string();
  IngestOptions options = Options(path);
  options.offsets_file = offsets;
  EXPECT_EQ(RunToEnd(options).documents_delivered, 50);
  std::ifstream in(offsets);
  const nlohmann::json saved = nlohmann::json::parse(in);
  EXPECT_EQ(saved["positions"][path].get<int64_t>(), static_cast<int64_t>(text.size()));

  std::string more;
  for (int i = 0; i < 20; ++i) more += "second part line " + std::to_string(i) + "\n";
  Write("o.txt", more, /*append=*/true);
  EXPECT_EQ(RunToEnd(options).documents_delivered, 20);
  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  const std::vector<Document> docs = Docs(consumer.Read(70, 10000));
  ASSERT_EQ(docs.size(), 70u);
  EXPECT_TRUE(consumer.Read(1, 300).empty());
  EXPECT_EQ(docs[50].text, "second part line 0");
  EXPECT_EQ(docs[69].offset, static_cast<int64_t>(text.size() + more.size()));

  for (const std::string bad : {"{bad", "{\"positions\": {\"x\": -3}}", "[]"}) {
    std::ofstream(offsets, std::ios::trunc) << bad;
    StatusOr<std::unique_ptr<Ingestor>> ingestor = Ingestor::Create(options);
    ASSERT_FALSE(ingestor.ok()) << bad;
    EXPECT_EQ(ingestor.status().code(), StatusCode::kCorruption);
    EXPECT_THAT(ingestor.status().message(), HasSubstr(offsets));
  }
}

// More than the mock's ring (5 MiB) goes into ONE partition while the group commits slowly; flow
// control keeps the uncommitted part under budget, so the ring rotates (the low watermark moves)
// yet the consumer reads every document. Without flow control the same volume loses its oldest
// part: EmbeddedBrokerTest.MockDropsOldestDataBeyondItsRingWithoutFlowControl in tests/kafka.
TEST_F(IngestorTest, FlowControlLosesNothingWhenOnePartitionCarriesMoreThanTheRing) {
  Start(1);
  std::string text;
  const std::string filler(380, 'x');
  const int kLines = 16000;  // ~6.5 MiB of documents
  for (int i = 0; i < kLines; ++i) text += "doc" + std::to_string(i) + " " + filler + "\n";
  const std::string path = Write("big.txt", text);
  IngestOptions options = Options(path);
  options.max_lag_bytes = 1 << 20;
  StatusOr<std::unique_ptr<Ingestor>> ingestor = Ingestor::Create(options);
  ASSERT_TRUE(ingestor.ok());
  std::atomic<bool> stop{false};
  Status result;
  std::thread runner([&] { result = (*ingestor)->Run(stop); });

  // The trainers' group: reads in batches and commits after each, a little slowly.
  TestConsumer consumer(broker_->bootstrap(), "t.docs", "t.trainers");
  std::set<std::string> seen;
  size_t duplicates = 0;
  while (seen.size() < static_cast<size_t>(kLines)) {
    const std::vector<Record> batch = consumer.Read(200, 5000);
    if (batch.empty()) break;
    for (const Document& d : Docs(batch)) {
      if (!seen.insert(d.text.substr(0, d.text.find(' '))).second) ++duplicates;
    }
    ASSERT_TRUE(consumer.Commit());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  runner.join();
  ASSERT_TRUE(result.ok()) << result.ToString();
  EXPECT_EQ(seen.size(), static_cast<size_t>(kLines));
  EXPECT_EQ(duplicates, 0u);
  const IngestStats stats = (*ingestor)->stats();
  EXPECT_EQ(stats.documents_delivered, kLines);
  EXPECT_GT(stats.message_bytes, int64_t{6} << 20);
  EXPECT_GT(stats.throttled_seconds, 0.0);

  KafkaOptions kafka;
  kafka.brokers = broker_->bootstrap();
  StatusOr<GroupLag> lag = ConsumerGroupLag(kafka, "t.trainers", "t.docs");
  ASSERT_TRUE(lag.ok());
  EXPECT_GT(lag->partitions[0].low, 0) << "the ring rotated: older data is gone from the broker";
  EXPECT_EQ(lag->total, 0);
}

// A produce request refused with a retriable error while later ones are in flight: every
// document reported delivered is in the log, once. The embedded broker does not check an
// idempotent producer's sequence numbers, and librdkafka takes a later request's success as
// acknowledging the messages before it, so with several requests in flight the refused one was
// reported delivered and never written (a document lost in about two runs of three of this test
// with librdkafka's default of 5 in flight).
TEST_F(IngestorTest, ProduceRequestRefusedWhileOthersAreInFlightLosesNothing) {
  Start(1);
  const std::string path = Write("e.txt", "");
  IngestOptions options = Options(path);
  options.follow = true;
  options.poll_interval_ms = 10;
  // Many small requests, so that several are in flight when the first of a round is refused.
  options.kafka.properties = {{"linger.ms", "0"}, {"batch.num.messages", "10"}};
  StatusOr<std::unique_ptr<Ingestor>> ingestor = Ingestor::Create(options);
  ASSERT_TRUE(ingestor.ok()) << ingestor.status().ToString();
  std::atomic<bool> stop{false};
  Status result;
  std::thread runner([&] { result = (*ingestor)->Run(stop); });
  constexpr int kRounds = 20, kLinesPerRound = 400;  // within the 4 MiB lag budget
  int lines = 0;
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_TRUE(broker_->PushRequestErrors(0, 1, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS).ok());
    std::string text;
    for (int i = 0; i < kLinesPerRound; ++i, ++lines) text += "doc" + std::to_string(lines) + "\n";
    Write("e.txt", text, /*append=*/true);
    for (int wait = 0; wait < 1000 && (*ingestor)->stats().documents_delivered < lines; ++wait) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ((*ingestor)->stats().documents_delivered, lines) << "round " << round;
  }
  stop = true;
  runner.join();
  ASSERT_TRUE(result.ok()) << result.ToString();

  KafkaOptions kafka;
  kafka.brokers = broker_->bootstrap();
  StatusOr<GroupLag> lag = ConsumerGroupLag(kafka, "nobody", "t.docs");
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(lag->partitions.at(0).high, lines) << "documents acknowledged but not in the log";
  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  std::set<std::string> seen;
  for (const Document& d : Docs(consumer.Read(lines + 1, 1000))) seen.insert(d.text);
  EXPECT_EQ(seen.size(), static_cast<size_t>(lines));
}

TEST_F(IngestorTest, UnreachableBrokerIsRetriedNotFatal) {
  const std::string path = Write("u.txt", "hello world\n");
  IngestOptions options = Options(path);
  options.kafka.brokers = "127.0.0.1:1";  // nothing listens there
  options.stop_flush_timeout_ms = 200;
  StatusOr<std::unique_ptr<Ingestor>> ingestor = Ingestor::Create(options);
  ASSERT_TRUE(ingestor.ok());
  std::atomic<bool> stop{false};
  Status result;
  std::thread runner([&] { result = (*ingestor)->Run(stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stop = true;
  runner.join();
  EXPECT_TRUE(result.ok()) << result.ToString();  // nothing was produced, so nothing is lost
  EXPECT_EQ((*ingestor)->stats().documents_delivered, 0);
  EXPECT_EQ((*ingestor)->stats().documents_produced, 0);
}

TEST_F(IngestorTest, CreateValidatesOptions) {
  IngestOptions options = Options((dir_ / "missing.txt").string());
  EXPECT_EQ(Ingestor::Create(options).status().code(), StatusCode::kNotFound);
  options.from = "";
  EXPECT_EQ(Ingestor::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.from = Write("x.txt", "x\n");
  options.max_lag_bytes = -1;
  EXPECT_EQ(Ingestor::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.max_lag_bytes = 0;
  options.kafka.properties = {{"no.such.property", "1"}};
  EXPECT_THAT(Ingestor::Create(options).status().message(), HasSubstr("no.such.property"));
}

// Lines of natural-looking text for the compressed-input tests.
std::string Lines(int n, const std::string& tag) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += tag + " line " + std::to_string(i) + " with some words " + std::to_string(i * 13) +
            "\n";
  }
  return text;
}

// gzip, xz and zstd files are told by their content, whatever they are called, and go through as
// their decoded lines: document offsets are positions in the decoded text (what a resume skips).
TEST_F(IngestorTest, CompressedFilesArriveDecodedWhateverTheirNames) {
  const std::string g = Lines(2000, "gzip"), x = Lines(2000, "xz"), z = Lines(2000, "zstd");
  const std::string gz = Write("in/a.txt", testing::Gzip(g));
  const std::string xz = Write("in/b.gz", testing::Xz(x));
  const std::string zst = Write("in/c", testing::Zstd(z));
  const std::string plain = Write("in/d.xz", "plain text\n");
  const IngestStats stats = RunToEnd(Options((dir_ / "in").string()));
  EXPECT_EQ(stats.documents_delivered, 6001);
  EXPECT_EQ(stats.rejected, 0);
  EXPECT_EQ(stats.input_bytes, static_cast<int64_t>(g.size() + x.size() + z.size() + 11));
  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  const std::vector<Document> docs = Docs(consumer.Read(6001, 20000));
  ASSERT_EQ(docs.size(), 6001u);
  std::map<std::string, std::string> rebuilt;  // source -> its documents' lines
  std::map<std::string, int64_t> last_offset;
  for (const Document& d : docs) {
    rebuilt[d.source] += d.text + "\n";
    EXPECT_EQ(d.start, last_offset[d.source]);
    last_offset[d.source] = d.offset;
  }
  EXPECT_TRUE(rebuilt[gz] == g);
  EXPECT_TRUE(rebuilt[xz] == x);
  EXPECT_TRUE(rebuilt[zst] == z);
  EXPECT_EQ(rebuilt[plain], "plain text\n");
  EXPECT_EQ(last_offset[xz], static_cast<int64_t>(x.size()));
}

// A truncated and a corrupt file: each gets a record in <prefix>.rejected naming the file, what is
// wrong and the decoded offset reached; the lines decoded before are sent, and the other files of
// the directory go through.
TEST_F(IngestorTest, TruncatedOrCorruptCompressedFileIsRejectedAndTheRestGoesOn) {
  const std::string text = Lines(30000, "cut");  // ~1.2 MB: several decoded chunks
  const std::string xz_bytes = testing::Xz(text);
  const std::string cut = Write("in/a-cut.xz", xz_bytes.substr(0, xz_bytes.size() / 2));
  std::string gz_bytes = testing::Gzip(Lines(100, "bad"));
  gz_bytes[gz_bytes.size() - 6] ^= 0x01;  // the CRC-32 in the member's trailer
  const std::string bad = Write("in/b-bad.gz", gz_bytes);
  const std::string good = Write("in/c-good.zst", testing::Zstd(Lines(10, "good")));
  const IngestStats stats = RunToEnd(Options((dir_ / "in").string()));
  EXPECT_EQ(stats.rejected, 2);

  const std::vector<nlohmann::json> rejected = Rejections(2);
  ASSERT_EQ(rejected.size(), 2u);
  std::map<std::string, std::string> reason;  // origin's file -> reason
  for (const nlohmann::json& j : rejected) {
    const std::string origin = j.at("origin").get<std::string>();
    reason[origin.substr(0, origin.rfind(':'))] = j.at("reason").get<std::string>();
  }
  EXPECT_THAT(reason[cut], HasSubstr(cut + ": corrupt xz data"));
  EXPECT_THAT(reason[cut], HasSubstr("truncated"));
  EXPECT_THAT(reason[bad], HasSubstr(bad + ": corrupt gzip data (incorrect data check)"));

  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  const std::vector<Document> docs =
      Docs(consumer.Read(static_cast<size_t>(stats.documents_delivered), 20000));
  ASSERT_EQ(docs.size(), static_cast<size_t>(stats.documents_delivered));
  std::map<std::string, std::string> rebuilt;
  for (const Document& d : docs) rebuilt[d.source] += d.text + "\n";
  EXPECT_EQ(rebuilt[good], Lines(10, "good"));
  // What was decoded of the cut file before its end is kept: a prefix of its text (its last line
  // possibly cut), most of the half that is there.
  ASSERT_GT(rebuilt[cut].size(), text.size() / 4);
  EXPECT_EQ(text.compare(0, rebuilt[cut].size() - 1, rebuilt[cut], 0, rebuilt[cut].size() - 1),
            0);
}

// A restarted connector resumes a compressed file at a decoded offset a trainer recorded.
TEST_F(IngestorTest, ResumeInsideACompressedFileSkipsTheDecodedBytesSent) {
  const std::string text = Lines(100, "resume");
  const std::string path = Write("r.zst", testing::Zstd(text));
  RunToEnd(Options(path));
  TestConsumer first(broker_->bootstrap(), "t.docs");
  const std::vector<Document> docs = Docs(first.Read(100, 10000));
  ASSERT_EQ(docs.size(), 100u);
  ASSERT_TRUE(broker_->CreateTopic("r.docs").ok());
  ASSERT_TRUE(broker_->CreateTopic("r.rejected").ok());
  IngestOptions options = Options(path);
  options.kafka.topic_prefix = "r";
  options.start_positions[path] = docs[41].offset;
  EXPECT_EQ(RunToEnd(options).documents_delivered, 58);
  TestConsumer second(broker_->bootstrap(), "r.docs");
  const std::vector<Document> resumed = Docs(second.Read(58, 10000));
  ASSERT_EQ(resumed.size(), 58u);
  for (size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_EQ(resumed[i].id, docs[42 + i].id);
    EXPECT_EQ(resumed[i].text, docs[42 + i].text);
  }
}

// Following a directory: a compressed file that is still being written is read as far as it
// goes (its end reported), and read on from there once it is complete.
TEST_F(IngestorTest, FollowedCompressedFileIsReadOnWhenItGrows) {
  const std::string text = Lines(20000, "grow");
  const std::string bytes = testing::Gzip(text);
  const std::string path = Write("in/g.gz", bytes.substr(0, bytes.size() / 2));
  IngestOptions options = Options((dir_ / "in").string());
  options.follow = true;
  StatusOr<std::unique_ptr<Ingestor>> ingestor = Ingestor::Create(options);
  ASSERT_TRUE(ingestor.ok());
  std::atomic<bool> stop{false};
  Status result;
  std::thread runner([&] { result = (*ingestor)->Run(stop); });
  ASSERT_EQ(Rejections(1).size(), 1u);  // the half file ends inside the member
  Write("in/g.gz", bytes.substr(bytes.size() / 2), /*append=*/true);
  TestConsumer consumer(broker_->bootstrap(), "t.docs");
  const size_t want = Words(text).size();
  size_t words = 0;
  std::vector<Document> docs;
  for (int tries = 0; tries < 100 && words < want; ++tries) {
    for (Document& d : Docs(consumer.Read(100000, 200))) {
      words += Words(d.text).size();
      docs.push_back(std::move(d));
    }
  }
  std::sort(docs.begin(), docs.end(),
            [](const Document& a, const Document& b) { return a.offset < b.offset; });
  std::string rebuilt;
  for (const Document& d : docs) rebuilt += d.text + "\n";
  stop = true;
  runner.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  // Every word once: the line cut where the half file ended is two documents.
  const std::vector<std::string> got = Words(rebuilt), expected = Words(text);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i]) << "word " << i;
  }
}

}  // namespace
}  // namespace streamvec

namespace streamvec {
namespace {

// Manual benchmark: STREAMVEC_INGEST_BENCH_FILE=path ingest_test
//   --gtest_also_run_disabled_tests --gtest_filter=*ProduceRate*
// Ingests the file through a 16-partition embedded broker while a group member keeps up
// (commits after every batch), and prints the rate.
TEST_F(IngestorTest, DISABLED_ProduceRateWithAConsumerKeepingUp) {
  const char* file = std::getenv("STREAMVEC_INGEST_BENCH_FILE");
  if (file == nullptr) GTEST_SKIP() << "set STREAMVEC_INGEST_BENCH_FILE";
  Start(16);
  StatusOr<std::unique_ptr<Ingestor>> ingestor = Ingestor::Create(Options(file));
  ASSERT_TRUE(ingestor.ok());
  std::atomic<bool> stop{false};
  Status result;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<bool> finished{false};
  std::thread runner([&] {
    result = (*ingestor)->Run(stop);
    finished = true;
  });
  TestConsumer consumer(broker_->bootstrap(), "t.docs", "t.trainers");
  int64_t consumed = 0, bytes = 0;
  while (true) {
    // Commit whatever arrived as soon as the stream pauses (a trainer that keeps up).
    const std::vector<Record> batch = consumer.Read(64, 20);
    if (batch.empty()) {
      if (finished && consumed == (*ingestor)->stats().documents_delivered) break;
      continue;
    }
    consumed += static_cast<int64_t>(batch.size());
    for (const Record& r : batch) bytes += static_cast<int64_t>(r.value.size());
    ASSERT_TRUE(consumer.Commit());
  }
  runner.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const IngestStats stats = (*ingestor)->stats();
  std::printf("bench: %lld docs produced, %lld consumed, %.1f MB in %.2f s = %.1f MB/s, "
              "throttled %.2f s\n",
              static_cast<long long>(stats.documents_produced), static_cast<long long>(consumed),
              stats.input_bytes / 1e6, seconds, stats.input_bytes / 1e6 / seconds,
              stats.throttled_seconds);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(consumed, stats.documents_delivered);
}

}  // namespace
}  // namespace streamvec

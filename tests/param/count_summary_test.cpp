// Mergeable count summaries: hand-computed space-saving and merge steps, and the proven bounds
// on Zipf streams split over several trainers (merged whole, or pushed as exact deltas).
#include "streamvec/param/count_summary.h"

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace streamvec {
namespace {

using ::testing::HasSubstr;

TEST(CountSummaryTest, ExactWhileTheWordsFit) {
  CountSummary s(4);
  for (const char* w : {"a", "b", "a", "c", "a", "b"}) s.Add(w);
  EXPECT_EQ(s.total(), 6.0);
  EXPECT_EQ(s.floor(), 0.0);
  EXPECT_EQ(s.Estimate("a"), 3.0);
  EXPECT_EQ(s.Guaranteed("a"), 3.0);
  EXPECT_EQ(s.Estimate("b"), 2.0);
  EXPECT_EQ(s.Estimate("zzz"), 0.0);
  const std::vector<CountEntry> e = s.Entries();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].word, "a");
  EXPECT_EQ(e[1].word, "b");
  EXPECT_EQ(e[2].word, "c");
}

TEST(CountSummaryTest, FullSummaryEvictsTheSmallestCountAndRaisesTheFloor) {
  CountSummary s(2);
  s.Add("a", 3);
  s.Add("b");
  s.Add("c");  // full: b (count 1) leaves, c enters at 1 + 1 with error 1
  EXPECT_FALSE(s.Contains("b"));
  EXPECT_EQ(s.floor(), 1.0);
  EXPECT_EQ(s.Estimate("c"), 2.0);
  EXPECT_EQ(s.Guaranteed("c"), 1.0);
  EXPECT_EQ(s.Estimate("b"), 1.0);  // the floor bounds a word not held
  s.Add("d", 0.5);  // weighted: c (2) and a (3) held, c is the smallest: d enters at 2.5
  EXPECT_FALSE(s.Contains("c"));
  EXPECT_EQ(s.floor(), 2.0);
  EXPECT_EQ(s.Estimate("d"), 2.5);
  EXPECT_EQ(s.Guaranteed("d"), 0.5);
  EXPECT_EQ(s.total(), 5.5);
}

// Space-saving step by step (Metwally et al. 2005) against a plain reference: every held word's
// count and error, the floor, and so every eviction's victim (the smallest count, ties in word
// order), on a stream where held words keep growing between evictions.
TEST(CountSummaryTest, EvictionsMatchAReferenceSpaceSavingOnARandomStream) {
  constexpr size_t kCapacity = 20;
  CountSummary s(kCapacity);
  std::map<std::string, std::pair<double, double>> ref;  // word -> (count, error)
  double floor = 0.0;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> weight(1, 3);
  for (int i = 0; i < 20000; ++i) {
    // About Zipf over 200 words: frequent words are held and grow, rare ones churn.
    const int rank = static_cast<int>(std::floor(std::exp(std::uniform_real_distribution<double>(
        0.0, std::log(200.0))(rng))));
    const std::string w = "w" + std::to_string(rank);
    const double c = weight(rng);
    s.Add(w, c);
    if (auto it = ref.find(w); it != ref.end()) {
      it->second.first += c;
    } else {
      if (ref.size() >= kCapacity) {
        auto victim = ref.begin();
        for (auto j = ref.begin(); j != ref.end(); ++j) {
          if (j->second.first < victim->second.first) victim = j;  // first in word order on ties
        }
        floor = std::max(floor, victim->second.first);
        ref.erase(victim);
      }
      ref[w] = {floor + c, floor};
    }
    ASSERT_EQ(s.size(), ref.size()) << "after " << i + 1 << " words";
    ASSERT_EQ(s.floor(), floor) << "after " << i + 1 << " words";
    for (const auto& [word, held] : ref) {
      ASSERT_TRUE(s.Contains(word)) << word << " after " << i + 1 << " words";
      ASSERT_EQ(s.Estimate(word), held.first) << word;
      ASSERT_EQ(s.Estimate(word) - s.Guaranteed(word), held.second) << word;
    }
  }
}

TEST(CountSummaryTest, MergeMatchesTheHandComputedMisraGriesStep) {
  // A: x 5, y 3, z 1. B: x 2, w 4, v 2. Capacity 3. Counters added: x 7, w 4, y 3, v 2, z 1;
  // the 3rd largest, 3, is subtracted: x 4, w 1 stay; floor = 0 + 0 + 3; counts x 4 + 3 = 7,
  // w 1 + 3 = 4, both exact (guaranteed counts 7 and 4 from the parts).
  CountSummary a(3), b(3);
  a.Add("x", 5);
  a.Add("y", 3);
  a.Add("z", 1);
  b.Add("x", 2);
  b.Add("w", 4);
  b.Add("v", 2);
  a.Merge(b);
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a.total(), 17.0);
  EXPECT_EQ(a.floor(), 3.0);
  EXPECT_EQ(a.Estimate("x"), 7.0);
  EXPECT_EQ(a.Guaranteed("x"), 7.0);
  EXPECT_EQ(a.Estimate("w"), 4.0);
  EXPECT_EQ(a.Guaranteed("w"), 4.0);
  EXPECT_FALSE(a.Contains("y"));
  EXPECT_EQ(a.Estimate("y"), 3.0);  // true count 3 <= floor
}

TEST(CountSummaryTest, TakeChangesGivesCountAndRemovalRecordsSinceTheLastCall) {
  CountSummary s(2);
  s.Add("b");
  s.Add("a", 2);
  std::vector<ParamRecord> r = s.TakeChanges();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].word, "a");
  EXPECT_TRUE(r[0].has_count);
  EXPECT_EQ(r[0].count, 2.0);
  EXPECT_EQ(r[1].word, "b");
  EXPECT_EQ(r[1].count, 1.0);
  EXPECT_TRUE(s.TakeChanges().empty());
  s.Add("c");  // evicts b: c enters at 2 with error 1
  r = s.TakeChanges();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].word, "b");
  EXPECT_TRUE(r[0].removed);
  EXPECT_FALSE(r[0].has_count);
  EXPECT_EQ(r[1].word, "c");
  EXPECT_EQ(r[1].count, 2.0);
  EXPECT_EQ(r[1].count_error, 1.0);
  s.Add("a");  // a 3
  s.Add("d");  // evicts c (2 < 3): d enters at 3
  s.Add("c");  // a and d both hold 3: the smaller word, a, is evicted; c enters at 4
  r = s.TakeChanges();
  std::vector<std::string> words;
  for (const ParamRecord& x : r) words.push_back(x.word + (x.removed ? "-" : "+"));
  EXPECT_EQ(words, (std::vector<std::string>{"a-", "c+", "d+"}));
  // They encode as one vocabulary message.
  ParamMessageHeader h;
  h.kind = ParamMessageKind::kVocabulary;
  h.dim = 100;
  EXPECT_TRUE(EncodeParamMessages(h, r).ok());
  // A merge reports the words it dropped: counters c 1, d 0, x 100, y 50; the 2nd largest, 50,
  // is subtracted and only x stays (y was never held here: no record).
  CountSummary other(2);
  other.Add("x", 100);
  other.Add("y", 50);
  s.Merge(other);
  r = s.TakeChanges();
  words.clear();
  for (const ParamRecord& x : r) words.push_back(x.word + (x.removed ? "-" : "+"));
  EXPECT_EQ(words, (std::vector<std::string>{"c-", "d-", "x+"}));
}

// With a minimum growth, a count already reported comes again only once it grew by that
// fraction; a word held anew and a removal come at once.
TEST(CountSummaryTest, TakeChangesWithAMinimumGrowthReportsCountsThatGrewEnough) {
  CountSummary s(3);
  s.Add("a", 32);
  s.Add("b", 2);
  ASSERT_EQ(s.TakeChanges(1.0 / 16).size(), 2u);  // first reports
  s.Add("a");                                     // 33 of 32 reported: below 34, not yet
  s.Add("b");                                     // 3 of 2
  std::vector<ParamRecord> r = s.TakeChanges(1.0 / 16);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].word, "b");
  EXPECT_EQ(r[0].count, 3.0);
  s.Add("a");  // 34: grew by 1/16
  s.Add("c");  // new: reported at once
  r = s.TakeChanges(1.0 / 16);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].word, "a");
  EXPECT_EQ(r[0].count, 34.0);
  EXPECT_EQ(r[1].word, "c");
  s.Add("a");     // 35 of 34: not yet
  s.Add("d", 5);  // evicts c (1): its removal and d's count
  r = s.TakeChanges(1.0 / 16);
  std::vector<std::string> words;
  for (const ParamRecord& x : r) words.push_back(x.word + (x.removed ? "-" : "+"));
  EXPECT_EQ(words, (std::vector<std::string>{"c-", "d+"}));
  // Without a minimum every change is reported.
  s.Add("a");
  r = s.TakeChanges();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].count, 36.0);
}

// TakeRemoved takes the removals alone, in word order, and TakeChanges then gives the counts: a
// word counted many times once, with its latest count; a word evicted and added back once, as a
// count; a word evicted after its count changed only as the removal TakeRemoved took.
TEST(CountSummaryTest, TakeRemovedTakesTheRemovalsAndLeavesTheCounts) {
  CountSummary s(2);
  s.Add("m", 5);
  s.Add("k", 1);
  ASSERT_EQ(s.TakeChanges().size(), 2u);
  s.Add("k");
  s.Add("z");  // evicts k (2 < 5) after its count changed: z enters at 3 with error 2
  for (int i = 0; i < 4; ++i) s.Add("m");  // m 9
  s.Add("k");  // evicts z (3): k back at 4 with error 3
  s.Add("b");  // evicts k (4): b enters at 5
  EXPECT_EQ(s.TakeRemoved(), (std::vector<std::string>{"k", "z"}));
  EXPECT_TRUE(s.TakeRemoved().empty());
  std::vector<ParamRecord> r = s.TakeChanges();
  std::vector<std::string> words;
  for (const ParamRecord& x : r) {
    words.push_back(x.word + (x.removed ? "-" : "+") + std::to_string(static_cast<int>(x.count)));
  }
  EXPECT_EQ(words, (std::vector<std::string>{"b+5", "m+9"}));
  s.Add("b");
  s.Add("k");  // evicts b (6 < 9): k enters at 7, then k twice more
  s.Add("k");
  s.Add("k");
  r = s.TakeChanges();  // without a TakeRemoved: the removal comes here
  words.clear();
  for (const ParamRecord& x : r) {
    words.push_back(x.word + (x.removed ? "-" : "+") + std::to_string(static_cast<int>(x.count)));
  }
  EXPECT_EQ(words, (std::vector<std::string>{"b-0", "k+9"}));
  EXPECT_TRUE(s.TakeChanges().empty());
  // CountOf: Estimate and Estimate - Guaranteed in one look-up, held or not.
  for (const char* w : {"k", "m", "b", "never"}) {
    double count = -1.0, error = -1.0;
    s.CountOf(w, &count, &error);
    EXPECT_EQ(count, s.Estimate(w)) << w;
    EXPECT_EQ(error, s.Estimate(w) - s.Guaranteed(w)) << w;
  }
  double count = 0.0, error = 0.0;
  s.CountOf("k", &count, &error);
  EXPECT_EQ(count, 9.0);
  EXPECT_EQ(error, 6.0);
}

// A Zipf(s) stream over `vocab` words ("w0" most frequent).
std::vector<std::string> ZipfStream(std::mt19937_64& rng, size_t vocab, double s, size_t n) {
  std::vector<double> weights(vocab);
  for (size_t r = 0; r < vocab; ++r) weights[r] = 1.0 / std::pow(static_cast<double>(r + 1), s);
  std::discrete_distribution<size_t> zipf(weights.begin(), weights.end());
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back("w" + std::to_string(zipf(rng)));
  return out;
}

// Checks every bound of count_summary.h against the exact counts.
void ExpectBounds(const CountSummary& s, const std::map<std::string, double>& exact, double n) {
  const double k = static_cast<double>(s.capacity());
  EXPECT_EQ(s.total(), n);
  EXPECT_LE(s.floor(), n / k);
  double excess = 0.0;
  for (const CountEntry& e : s.Entries()) {
    const auto it = exact.find(e.word);
    const double f = it == exact.end() ? 0.0 : it->second;
    EXPECT_LE(e.count - e.error, f) << e.word;
    EXPECT_GE(e.count, f) << e.word;
    EXPECT_GE(e.error, 0.0) << e.word;
    EXPECT_LE(e.error, s.floor()) << e.word;
    excess += e.count - s.floor();
  }
  EXPECT_LE(s.floor(), (n - excess) / k + 1e-9);
  for (const auto& [word, f] : exact) {
    if (f > n / k) {
      EXPECT_TRUE(s.Contains(word)) << word << " count " << f << " > n/k";
    }
    if (!s.Contains(word)) {
      EXPECT_LE(f, s.floor()) << word;
    }
    EXPECT_LE(std::abs(s.Estimate(word) - f), n / k) << word;
  }
}

TEST(CountSummaryTest, MergedTrainerSummariesOfZipfStreamsKeepTheProvenBounds) {
  std::mt19937_64 rng(21);
  for (double s : {0.8, 1.1, 1.5}) {
    const size_t k = 150;
    const std::vector<std::string> stream = ZipfStream(rng, 20000, s, 120000);
    std::map<std::string, double> exact;
    for (const std::string& w : stream) exact[w] += 1.0;
    // Four trainers, each reading a random quarter (a consumer group's partitions interleave).
    std::vector<CountSummary> trainers(4, CountSummary(k));
    std::uniform_int_distribution<int> pick(0, 3);
    for (const std::string& w : stream) trainers[pick(rng)].Add(w);
    // Merged as a tree: (0 + 1) + (2 + 3).
    trainers[0].Merge(trainers[1]);
    trainers[2].Merge(trainers[3]);
    trainers[0].Merge(trainers[2]);
    ExpectBounds(trainers[0], exact, static_cast<double>(stream.size()));
    // The heaviest words come out in the exact order.
    const std::vector<CountEntry> top = trainers[0].Entries();
    for (size_t r = 0; r < 5; ++r) EXPECT_EQ(top[r].word, "w" + std::to_string(r)) << s;
  }
}

TEST(CountSummaryTest, ChainOfManyMergesDoesNotWidenTheBound) {
  // A node merging summary after summary: the floor stays under n / k however many merges.
  std::mt19937_64 rng(22);
  const size_t k = 100;
  const std::vector<std::string> stream = ZipfStream(rng, 5000, 1.0, 60000);
  std::map<std::string, double> exact;
  for (const std::string& w : stream) exact[w] += 1.0;
  CountSummary node(k);
  for (size_t start = 0; start < stream.size(); start += 1000) {
    CountSummary part(k);
    for (size_t i = start; i < start + 1000; ++i) part.Add(stream[i]);
    node.Merge(part);
  }
  ExpectBounds(node, exact, static_cast<double>(stream.size()));
}

TEST(CountSummaryTest, ExactPushedDeltasKeepTheBounds) {
  // Trainers push, per micro-batch, the exact count of every word they saw in it; the node adds
  // them (AddPushed) in the order the pushes arrive.
  std::mt19937_64 rng(23);
  const size_t k = 200;
  const std::vector<std::string> stream = ZipfStream(rng, 20000, 1.1, 100000);
  std::map<std::string, double> exact;
  for (const std::string& w : stream) exact[w] += 1.0;
  CountSummary node(k);
  for (size_t start = 0; start < stream.size(); start += 2500) {
    std::map<std::string, double> batch;
    for (size_t i = start; i < start + 2500; ++i) batch[stream[i]] += 1.0;
    std::vector<ParamRecord> records;
    for (const auto& [w, c] : batch) {
      ParamRecord r;
      r.word = w;
      r.has_count = true;
      r.count = c;
      records.push_back(r);
    }
    ASSERT_TRUE(node.AddPushed(records).ok());
  }
  ExpectBounds(node, exact, static_cast<double>(stream.size()));
  ParamRecord inexact;
  inexact.word = "w1";
  inexact.has_count = true;
  inexact.count = 5;
  inexact.count_error = 1;
  const double before = node.total();
  Status st = node.AddPushed(std::vector<ParamRecord>{inexact});
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("record 0 (word 'w1'): a pushed count must be an exact"));
  EXPECT_EQ(node.total(), before);
}

TEST(CountSummaryTest, EntriesRoundTripAndBrokenInvariantsAreRefused) {
  std::mt19937_64 rng(24);
  CountSummary s(50);
  for (const std::string& w : ZipfStream(rng, 2000, 1.0, 5000)) s.Add(w);
  StatusOr<CountSummary> back = CountSummary::FromEntries(50, s.Entries(), s.total(), s.floor());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->total(), s.total());
  EXPECT_EQ(back->floor(), s.floor());
  const std::vector<CountEntry> a = s.Entries(), b = back->Entries();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].word, b[i].word);
    EXPECT_EQ(a[i].count, b[i].count);
    EXPECT_EQ(a[i].error, b[i].error);
  }
  // And as vocabulary records through the wire format.
  ParamMessageHeader h;
  h.kind = ParamMessageKind::kVocabulary;
  h.dim = 100;
  StatusOr<std::vector<std::string>> wire = EncodeParamMessages(h, s.ToRecords());
  ASSERT_TRUE(wire.ok()) << wire.status().ToString();
  std::vector<CountEntry> decoded;
  for (const std::string& m : *wire) {
    StatusOr<ParamMessage> msg = DecodeParamMessage(m);
    ASSERT_TRUE(msg.ok()) << msg.status().ToString();
    for (const ParamRecord& r : msg->records) {
      decoded.push_back(CountEntry{r.word, r.count, r.count_error});
    }
  }
  EXPECT_TRUE(CountSummary::FromEntries(50, decoded, s.total(), s.floor()).ok());

  auto why = [](size_t cap, std::vector<CountEntry> e, double total, double floor) {
    StatusOr<CountSummary> r = CountSummary::FromEntries(cap, e, total, floor);
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : r.status().message();
  };
  EXPECT_THAT(why(2, {{"a", 3, 0}, {"b", 2, 0}, {"c", 1, 0}}, 6, 0), HasSubstr("exceed capacity"));
  EXPECT_THAT(why(4, {{"a", 3, 0}, {"a", 2, 0}}, 5, 0), HasSubstr("entry 1 (word 'a'): repeated"));
  EXPECT_THAT(why(4, {{"a", 3, 2}}, 20, 1), HasSubstr("error 2.000000 is outside [0, floor"));
  EXPECT_THAT(why(4, {{"a", 0.5, 0}}, 20, 1), HasSubstr("below the floor"));
  EXPECT_THAT(why(4, {{"a", 3, 0}}, 2, 0), HasSubstr("total 2.000000 is too small"));
  EXPECT_THAT(why(4, {{"a", 3, 0}}, 3, 1), HasSubstr("too small"));  // needs 2 + 4 * 1
}

}  // namespace
}  // namespace streamvec

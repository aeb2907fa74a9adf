// The <prefix>.updates / <prefix>.params wire format: round trips at both precisions, splitting
// at the byte limit, and a named rejection for every kind of bad input.
#include "streamvec/param/protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace streamvec {
namespace {

using ::testing::HasSubstr;

ParamMessageHeader PushHeader(uint32_t dim, ParamPrecision p = ParamPrecision::kFp32) {
  ParamMessageHeader h;
  h.kind = ParamMessageKind::kPush;
  h.dim = dim;
  h.precision = p;
  h.sender = 7;
  h.sequence = 100;
  h.sender_clock = 123456789;
  h.base_clock = 120000000;
  return h;
}

std::vector<float> RandomVector(std::mt19937& rng, uint32_t dim, float scale = 0.05f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(dim);
  for (float& x : v) x = u(rng);
  return v;
}

// Records of every push shape: count only, input only, output only, all three.
std::vector<ParamRecord> PushRecords(std::mt19937& rng, uint32_t dim, size_t n) {
  const char* words[] = {"the", "caf\xC3\xA9", "\xE6\x97\xA5\xE6\x9C\xAC", "naïve", "x"};
  std::vector<ParamRecord> records;
  for (size_t i = 0; i < n; ++i) {
    ParamRecord r;
    r.word = std::string(words[i % 5]) + std::to_string(i);
    const int shape = static_cast<int>(i % 4);
    if (shape == 0 || shape == 3) {
      r.has_count = true;
      r.count = static_cast<double>(1 + i);
    }
    if (shape == 1 || shape == 3) r.input = RandomVector(rng, dim);
    if (shape == 2 || shape == 3) r.output = RandomVector(rng, dim);
    records.push_back(std::move(r));
  }
  return records;
}

std::string EncodeOne(const ParamMessageHeader& h, const std::vector<ParamRecord>& records) {
  StatusOr<std::vector<std::string>> m = EncodeParamMessages(h, records);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return "";
  EXPECT_EQ(m->size(), 1u);
  return m->empty() ? "" : m->front();
}

template <typename T>
void Poke(std::string& bytes, size_t offset, T v) {
  std::memcpy(bytes.data() + offset, &v, sizeof v);
}

std::string Rejection(std::string_view bytes, const ParamExpectations& expect = {}) {
  StatusOr<ParamMessage> m = DecodeParamMessage(bytes, expect);
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : m.status().message();
}

TEST(ParamProtocolTest, Fp32RoundTripKeepsEveryFieldBitForBit) {
  std::mt19937 rng(1);
  const std::vector<ParamRecord> records = PushRecords(rng, 37, 12);
  const ParamMessageHeader h = PushHeader(37);
  const std::string bytes = EncodeOne(h, records);
  StatusOr<ParamMessage> m = DecodeParamMessage(bytes, {ParamModelKind::kSgns, 37});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->header.version, kParamProtocolVersion);
  EXPECT_EQ(m->header.kind, ParamMessageKind::kPush);
  EXPECT_EQ(m->header.model, ParamModelKind::kSgns);
  EXPECT_EQ(m->header.precision, ParamPrecision::kFp32);
  EXPECT_EQ(m->header.dim, 37u);
  EXPECT_EQ(m->header.sender, 7u);
  EXPECT_EQ(m->header.record_count, 12u);
  EXPECT_EQ(m->header.sequence, 100u);
  EXPECT_EQ(m->header.sender_clock, 123456789u);
  EXPECT_EQ(m->header.base_clock, 120000000u);
  ASSERT_EQ(m->records.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(m->records[i].word, records[i].word);
    EXPECT_EQ(m->records[i].has_count, records[i].has_count);
    EXPECT_EQ(m->records[i].count, records[i].count);
    EXPECT_EQ(m->records[i].count_error, 0.0);
    EXPECT_FALSE(m->records[i].removed);
    EXPECT_EQ(m->records[i].input, records[i].input);
    EXPECT_EQ(m->records[i].output, records[i].output);
  }
  // Header, then per record: 2 + word + 1, 16 for a count, 37 * 4 per row.
  size_t expected = kParamHeaderBytes;
  for (const ParamRecord& r : records) expected += ParamRecordBytes(r, 37, ParamPrecision::kFp32);
  EXPECT_EQ(bytes.size(), expected);
  EXPECT_EQ(bytes.substr(0, 4), "SVPM");
}

TEST(ParamProtocolTest, Fp16CarriesEigenHalfRoundingInHalfTheBytes) {
  std::mt19937 rng(2);
  std::vector<ParamRecord> records = PushRecords(rng, 64, 8);
  records[1].input[0] = 65504.0f;    // fp16's largest finite value
  records[1].input[1] = -6.0e-8f;    // subnormal in fp16
  records[1].input[2] = 1.0f / 3.0f;
  const std::string b16 = EncodeOne(PushHeader(64, ParamPrecision::kFp16), records);
  const std::string b32 = EncodeOne(PushHeader(64, ParamPrecision::kFp32), records);
  StatusOr<ParamMessage> m = DecodeParamMessage(b16);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->header.precision, ParamPrecision::kFp16);
  size_t row_values = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    for (int which = 0; which < 2; ++which) {
      const std::vector<float>& sent = which == 0 ? records[i].input : records[i].output;
      const std::vector<float>& got = which == 0 ? m->records[i].input : m->records[i].output;
      ASSERT_EQ(got.size(), sent.size());
      for (size_t j = 0; j < sent.size(); ++j) {
        EXPECT_EQ(got[j], static_cast<float>(Eigen::half(sent[j])));
        ++row_values;
      }
    }
  }
  EXPECT_EQ(m->records[1].input[0], 65504.0f);
  EXPECT_NEAR(m->records[1].input[2], 1.0f / 3.0f, 1e-4);
  EXPECT_EQ(b32.size() - b16.size(), 2 * row_values);
}

// A message decoded into one that held another (more records, other fields, a publication)
// equals the same message decoded fresh: nothing of the earlier one is left over.
TEST(ParamProtocolTest, DecodingIntoAReusedMessageLeavesNothingOfTheLastOne) {
  std::mt19937 rng(3);
  ParamMessageHeader rows;
  rows.kind = ParamMessageKind::kRows;
  rows.dim = 16;
  rows.sender = 2;
  rows.sender_clock = 99;
  rows.base_clock = 98;
  std::vector<ParamRecord> published;
  for (int i = 0; i < 9; ++i) {
    ParamRecord r;
    r.word = "published" + std::to_string(i);
    r.has_count = true;
    r.count = 50.0 + i;
    r.count_error = 3.0;
    r.input = RandomVector(rng, 16);
    r.output = RandomVector(rng, 16);
    published.push_back(std::move(r));
  }
  const std::string first = EncodeOne(rows, published);
  const std::string second =
      EncodeOne(PushHeader(16, ParamPrecision::kFp16), PushRecords(rng, 16, 6));
  ParamMessage reused;
  ASSERT_TRUE(DecodeParamMessageInto(first, {}, reused).ok());
  ASSERT_EQ(reused.records.size(), 9u);
  ASSERT_TRUE(DecodeParamMessageInto(second, {}, reused).ok());
  StatusOr<ParamMessage> fresh = DecodeParamMessage(second);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(reused.header.kind, ParamMessageKind::kPush);
  EXPECT_EQ(reused.header.sender, fresh->header.sender);
  EXPECT_EQ(reused.header.base_clock, fresh->header.base_clock);
  ASSERT_EQ(reused.records.size(), fresh->records.size());
  for (size_t i = 0; i < fresh->records.size(); ++i) {
    const ParamRecord& a = reused.records[i];
    const ParamRecord& b = fresh->records[i];
    EXPECT_EQ(a.word, b.word) << i;
    EXPECT_EQ(a.has_count, b.has_count) << i;
    EXPECT_EQ(a.count, b.count) << i;
    EXPECT_EQ(a.count_error, b.count_error) << i;
    EXPECT_EQ(a.removed, b.removed) << i;
    EXPECT_EQ(a.initial, b.initial) << i;
    EXPECT_EQ(a.input, b.input) << i;
    EXPECT_EQ(a.output, b.output) << i;
  }
  // The first message again: its 9 records reuse the rows of the 9 decoded first (the 3 that
  // the shorter message left waited in `spare`), nothing is allocated.
  std::set<const float*> rows_before;
  for (const ParamRecord& r : reused.records) rows_before.insert(r.input.data());
  for (const ParamRecord& r : reused.spare) rows_before.insert(r.input.data());
  ASSERT_EQ(rows_before.size(), 9u);
  ASSERT_TRUE(DecodeParamMessageInto(first, {}, reused).ok());
  ASSERT_EQ(reused.records.size(), 9u);
  std::set<const float*> rows_after;
  for (const ParamRecord& r : reused.records) rows_after.insert(r.input.data());
  EXPECT_EQ(rows_after, rows_before);
  for (size_t i = 0; i < published.size(); ++i) {
    EXPECT_EQ(reused.records[i].word, published[i].word) << i;
    EXPECT_EQ(reused.records[i].input, published[i].input) << i;
  }
  // A rejected message names its problem as DecodeParamMessage does.
  std::string bad = second;
  bad.resize(bad.size() - 3);
  const Status s = DecodeParamMessageInto(bad, {}, reused);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), Rejection(bad));
}

TEST(ParamProtocolTest, EncoderSplitsIntoMessagesUnderTheByteLimitInOrder) {
  std::mt19937 rng(3);
  const std::vector<ParamRecord> records = PushRecords(rng, 100, 500);
  const size_t limit = 16 << 10;
  StatusOr<std::vector<std::string>> messages =
      EncodeParamMessages(PushHeader(100), records, limit);
  ASSERT_TRUE(messages.ok()) << messages.status().ToString();
  ASSERT_GT(messages->size(), 10u);
  size_t next = 0;
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string& bytes = (*messages)[i];
    EXPECT_LE(bytes.size(), limit);
    StatusOr<ParamMessage> m = DecodeParamMessage(bytes, {ParamModelKind::kSgns, 100});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->header.sequence, 100 + i);
    ASSERT_FALSE(m->records.empty());
    for (const ParamRecord& r : m->records) {
      ASSERT_LT(next, records.size());
      EXPECT_EQ(r.word, records[next].word);
      EXPECT_EQ(r.input, records[next].input);
      ++next;
    }
    // Full messages: the next record would not have fitted.
    if (i + 1 < messages->size()) {
      EXPECT_GT(bytes.size() + ParamRecordBytes(records[next], 100, ParamPrecision::kFp32),
                limit);
    }
  }
  EXPECT_EQ(next, records.size());
  StatusOr<std::vector<std::string>> none = EncodeParamMessages(PushHeader(100), {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(ParamProtocolTest, EncoderRefusesWhatTheDecoderWouldReject) {
  std::mt19937 rng(4);
  auto why = [](const ParamMessageHeader& h, std::vector<ParamRecord> records,
                size_t limit = kDefaultMaxParamMessageBytes) {
    StatusOr<std::vector<std::string>> m = EncodeParamMessages(h, records, limit);
    EXPECT_FALSE(m.ok());
    return m.ok() ? "" : m.status().message();
  };
  ParamRecord good;
  good.word = "word";
  good.input = RandomVector(rng, 8);
  ParamRecord r = good;
  r.input.pop_back();
  EXPECT_THAT(why(PushHeader(8), {good, r}), HasSubstr("record 1 (word 'word'): input row has 7"));
  r = good;
  r.output = RandomVector(rng, 8);
  r.output[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(why(PushHeader(8), {r}), HasSubstr("output row component 5 is not finite"));
  r = good;
  r.input[2] = 70000.0f;
  EXPECT_THAT(why(PushHeader(8, ParamPrecision::kFp16), {r}),
              HasSubstr("input row component 2 is beyond fp16's range"));
  r = good;
  r.word = "bad\xC3";
  EXPECT_THAT(why(PushHeader(8), {r}), HasSubstr("record 0: word is not valid UTF-8 at byte 3"));
  r = good;
  r.word = "";
  EXPECT_THAT(why(PushHeader(8), {r}), HasSubstr("word is empty"));
  r = good;
  r.word = std::string(1001, 'a');
  EXPECT_THAT(why(PushHeader(8), {r}), HasSubstr("1001 bytes, over 1000"));
  r = good;
  r.removed = true;
  EXPECT_THAT(why(PushHeader(8), {r}), HasSubstr("a push cannot remove a word"));
  r = good;
  r.has_count = true;
  r.count = 2.0;
  r.count_error = 3.0;
  EXPECT_THAT(why(PushHeader(8), {r}), HasSubstr("count error 3.000000 is outside [0, count"));
  ParamMessageHeader h = PushHeader(8);
  h.dim = 0;
  EXPECT_THAT(why(h, {good}), HasSubstr("dim 0 is outside [1, 10000]"));
  EXPECT_THAT(why(PushHeader(8), {good}, 60), HasSubstr("do not fit a message of at most 60"));
}

TEST(ParamProtocolTest, KindsAllowOnlyTheirFields) {
  std::mt19937 rng(5);
  ParamMessageHeader rows;
  rows.kind = ParamMessageKind::kRows;
  rows.dim = 4;
  ParamRecord row;
  row.word = "w";
  row.output = RandomVector(rng, 4);
  row.has_count = true;
  row.count = 10.5;
  row.count_error = 2.5;
  ParamRecord count_only;
  count_only.word = "c";
  count_only.has_count = true;
  count_only.count = 3.0;
  ParamRecord removed;
  removed.word = "gone";
  removed.removed = true;
  EXPECT_TRUE(EncodeParamMessages(rows, std::vector<ParamRecord>{row}).ok());
  EXPECT_FALSE(EncodeParamMessages(rows, std::vector<ParamRecord>{count_only}).ok());
  ParamMessageHeader vocab = rows;
  vocab.kind = ParamMessageKind::kVocabulary;
  const std::string bytes = EncodeOne(vocab, {count_only, removed});
  StatusOr<ParamMessage> m = DecodeParamMessage(bytes, {ParamModelKind::kSgns, 4});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->records.size(), 2u);
  EXPECT_TRUE(m->records[0].has_count);
  EXPECT_EQ(m->records[0].count, 3.0);
  EXPECT_TRUE(m->records[1].removed);
  EXPECT_FALSE(m->records[1].has_count);
  StatusOr<std::vector<std::string>> bad =
      EncodeParamMessages(vocab, std::vector<ParamRecord>{row});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("a vocabulary record cannot carry a row"));
  // A rows message rewritten as a vocabulary message: the decoder names the same rule.
  std::string forged = EncodeOne(rows, {row});
  forged[6] = static_cast<char>(ParamMessageKind::kVocabulary);
  EXPECT_THAT(Rejection(forged), HasSubstr("record 0 (word 'w'): a vocabulary record cannot"));
}

TEST(ParamProtocolTest, DecoderNamesTruncationAtEveryCut) {
  std::mt19937 rng(6);
  const std::string bytes = EncodeOne(PushHeader(5), PushRecords(rng, 5, 6));
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    const std::string why = Rejection(std::string_view(bytes).substr(0, cut));
    EXPECT_THAT(why, HasSubstr("truncated at byte " + std::to_string(cut))) << cut;
  }
  // Record 0 ("the0", a count) ends at byte 71; record 1 ("café1", an input row) has its
  // length, word and fields in bytes 71..79 and its row from 80.
  EXPECT_EQ(Rejection(std::string_view(bytes).substr(0, 80)),
            "truncated at byte 80: record 1 (word 'caf\xC3\xA9" "1')'s input row needs 20 bytes at "
            "byte 80, 0 left");
  EXPECT_EQ(Rejection(std::string_view(bytes).substr(0, 49)),
            "truncated at byte 49: 6 records need at least 24 bytes after the header, 1 left");
}

TEST(ParamProtocolTest, DecoderNamesEachHeaderProblem) {
  std::mt19937 rng(7);
  const std::string good = EncodeOne(PushHeader(16), PushRecords(rng, 16, 3));
  std::string b = good;
  Poke<uint32_t>(b, 0, 0x12345678u);
  EXPECT_EQ(Rejection(b), "bad magic 0x12345678 (expected 0x4D505653, \"SVPM\")");
  b = good;
  Poke<uint16_t>(b, 4, 3);
  EXPECT_EQ(Rejection(b), "protocol version 3 is newer than supported version 1");
  // A newer version is reported even when the rest of its header is unreadable to us.
  EXPECT_EQ(Rejection(b.substr(0, 6)), "protocol version 3 is newer than supported version 1");
  EXPECT_EQ(Rejection(good, {ParamModelKind::kSgns, 100}), "dim 16 != expected 100");
  EXPECT_EQ(Rejection(good, {ParamModelKind::kCharLstm, 0}), "model sgns != expected char-lstm");
  b = good;
  b[7] = 9;
  EXPECT_EQ(Rejection(b), "unknown model 9");
  b = good;
  b[8] = 3;
  EXPECT_EQ(Rejection(b), "unknown precision 3");
  b = good;
  b[10] = 1;
  EXPECT_EQ(Rejection(b), "reserved header bytes 9..11 are not zero");
  b = good;
  Poke<uint32_t>(b, 12, 20000);
  EXPECT_EQ(Rejection(b), "dim 20000 is outside [1, 10000]");
  b = good;
  Poke<uint32_t>(b, 20, 0xFFFFFFFFu);
  EXPECT_THAT(Rejection(b), HasSubstr("4294967295 records need at least 17179869180 bytes"));
}

TEST(ParamProtocolTest, DecoderNamesEachRecordProblem) {
  ParamRecord r;
  r.word = "cat";
  r.has_count = true;
  r.count = 4.0;
  r.input.assign(4, 0.25f);
  r.output.assign(4, -0.5f);
  const std::string good = EncodeOne(PushHeader(4), {r, r});
  // Layout of record 0: length at 48, word at 50, fields at 53, count at 54, error at 62, input
  // at 70, output at 86.
  std::string b = good;
  Poke<float>(b, 86 + 4 * 3, std::numeric_limits<float>::infinity());
  EXPECT_EQ(Rejection(b), "record 0 (word 'cat'): output row component 3 is not finite");
  b = good;
  Poke<double>(b, 54, std::nan(""));
  EXPECT_EQ(Rejection(b), "record 0 (word 'cat'): count or its error is not finite");
  b = good;
  Poke<double>(b, 54, -1.0);
  EXPECT_EQ(Rejection(b), "record 0 (word 'cat'): count -1.000000 is negative");
  b = good;
  b[51] = '\xFF';
  EXPECT_EQ(Rejection(b), "record 0: word is not valid UTF-8 at byte 1");
  b = good;
  b[51] = '\0';
  EXPECT_EQ(Rejection(b), "record 0: word holds a NUL byte");
  b = good;
  Poke<uint16_t>(b, 48, 0);
  EXPECT_THAT(Rejection(b), HasSubstr("record 0: word is empty"));
  b = good;
  b[53] = 0x20;
  EXPECT_EQ(Rejection(b), "record 0 (word 'cat'): unknown field bits 32");
  b = good;
  b[53] = 0x10;
  EXPECT_EQ(Rejection(b), "record 0 (word 'cat'): an initial record carries no row");
  b = good;
  b[53] = 0;
  EXPECT_EQ(Rejection(b), "record 0 (word 'cat'): a push record carries neither a count nor a row");
  b = good + "xyz";
  EXPECT_EQ(Rejection(b), "3 trailing bytes after record 1, at byte " +
                              std::to_string(good.size()));
  // An fp16 row decoding to infinity (0x7C00) is refused too.
  ParamMessageHeader h16 = PushHeader(4, ParamPrecision::kFp16);
  ParamRecord half = r;
  half.has_count = false;
  half.output.clear();
  b = EncodeOne(h16, {half});
  Poke<uint16_t>(b, 54 + 2, 0x7C00);
  EXPECT_EQ(Rejection(b), "record 0 (word 'cat'): input row component 1 is not finite");
}

TEST(ParamProtocolTest, MutatedMessagesAreDecodedOrRejectedWithAReason) {
  // In-process twin of bench/param/fuzz: random byte flips, cuts and insertions of valid
  // messages never crash the decoder; an accepted mutant encodes back to its own bytes.
  std::mt19937 rng(8);
  std::vector<std::string> seeds;
  for (ParamPrecision p : {ParamPrecision::kFp32, ParamPrecision::kFp16}) {
    seeds.push_back(EncodeOne(PushHeader(6, p), PushRecords(rng, 6, 9)));
  }
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string b = seeds[trial % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % b.size();
      switch (rng() % 4) {
        case 0: b[at] = static_cast<char>(rng()); break;
        case 1: b[at] = static_cast<char>(b[at] ^ (1 << (rng() % 8))); break;
        case 2: b.resize(at + 1); break;
        default: b.insert(at, 1, static_cast<char>(rng())); break;
      }
    }
    StatusOr<ParamMessage> m = DecodeParamMessage(b);
    if (!m.ok()) {
      ASSERT_FALSE(m.status().message().empty());
      ++rejected;
      continue;
    }
    ++accepted;
    if (m->records.empty()) continue;
    StatusOr<std::vector<std::string>> again = EncodeParamMessages(m->header, m->records);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    ASSERT_EQ(again->size(), 1u);
    ASSERT_EQ(again->front(), b) << "trial " << trial;
  }
  // Both outcomes occur (flips inside vectors, counts or clocks are often still valid).
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}

TEST(ParamProtocolTest, NamesRoundTripAndTopicsFollowThePrefix) {
  EXPECT_EQ(UpdatesTopic("streamvec"), "streamvec.updates");
  EXPECT_EQ(ParamsTopic("run7"), "run7.params");
  EXPECT_EQ(ParamMessageKindName(ParamMessageKind::kVocabulary), "vocabulary");
  EXPECT_EQ(ParamModelKindName(ParamModelKind::kCharLstm), "char-lstm");
  for (ParamPrecision p : {ParamPrecision::kFp32, ParamPrecision::kFp16}) {
    StatusOr<ParamPrecision> back = ParseParamPrecision(ParamPrecisionName(p));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, p);
  }
  StatusOr<ParamPrecision> bad = ParseParamPrecision("bf16");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("precision must be fp32 or fp16"));
}

TEST(ParamProtocolTest, ShardOfIsStableAndInRange) {
  for (uint32_t shards : {1u, 2u, 3u, 7u, 64u}) {
    for (const char* w : {"the", "of", "zebra", "\xE6\x97\xA5"}) {
      const uint32_t s = ShardOf(w, shards);
      EXPECT_LT(s, shards);
      EXPECT_EQ(s, ShardOf(std::string(w), shards));
    }
  }
  EXPECT_EQ(ShardOf("anything", 1), 0u);
}

TEST(ParamProtocolTest, FrequentWordsOfARealTextSpreadOverShards) {
  std::ifstream in(std::string(STREAMVEC_TEST_DATA) + "/streaming/wiki-80k.txt");
  ASSERT_TRUE(in) << "missing test data";
  std::map<std::string, uint64_t> counts;
  std::string w;
  while (in >> w) ++counts[w];
  std::vector<std::pair<uint64_t, std::string>> by_count;
  for (const auto& [word, c] : counts) by_count.emplace_back(c, word);
  std::sort(by_count.rbegin(), by_count.rend());
  ASSERT_GT(by_count.size(), 1000u);
  // A shard's merge work follows the rows pushed to it (each row goes out once per push round,
  // whatever its count), so what must spread is the frequent words themselves: the 200 and the
  // 1000 most frequent words fall on every shard in fair shares (binomial: within 4 standard
  // deviations of n / shards). (Their token mass cannot spread as evenly: the 10 most frequent
  // words carry a quarter of the tokens.)
  for (uint32_t shards : {2u, 4u, 8u}) {
    for (size_t top : {size_t{200}, size_t{1000}}) {
      std::vector<int> words(shards, 0);
      for (size_t i = 0; i < top; ++i) ++words[ShardOf(by_count[i].second, shards)];
      const double p = 1.0 / shards;
      const double mean = top * p, sd = std::sqrt(top * p * (1.0 - p));
      for (uint32_t s = 0; s < shards; ++s) {
        EXPECT_GT(words[s], mean - 4 * sd) << "top " << top << ", " << shards << " shards";
        EXPECT_LT(words[s], mean + 4 * sd) << "top " << top << ", " << shards << " shards";
      }
    }
  }
}

// The initial flag survives a round trip on a push with a row and is refused elsewhere.
TEST(ParamProtocolTest, InitialRowsAreMarkedInPushesOnly) {
  ParamMessageHeader h;
  h.kind = ParamMessageKind::kPush;
  h.dim = 2;
  ParamRecord r;
  r.word = "new";
  r.initial = true;
  r.input = {1.0f, 2.0f};
  StatusOr<std::vector<std::string>> m = EncodeParamMessages(h, std::vector{r});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  StatusOr<ParamMessage> back = DecodeParamMessage((*m)[0]);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->records[0].initial);
  r.initial = false;
  m = EncodeParamMessages(h, std::vector{r});
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(DecodeParamMessage((*m)[0])->records[0].initial);
  r.initial = true;
  h.kind = ParamMessageKind::kRows;
  EXPECT_THAT(EncodeParamMessages(h, std::vector{r}).status().message(),
              HasSubstr("only a push marks initial rows"));
}

// A publication carries the shard's merged watermark in the base-clock field, round trip.
TEST(ParamProtocolTest, APublicationCarriesItsMergedWatermark) {
  ParamMessageHeader h;
  h.kind = ParamMessageKind::kRows;
  h.dim = 2;
  h.sender = 1;
  h.base_clock = 4711;
  ParamRecord r;
  r.word = "rows";
  r.input = {1.0f, 2.0f};
  StatusOr<std::vector<std::string>> m = EncodeParamMessages(h, std::vector{r});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  StatusOr<ParamMessage> back = DecodeParamMessage((*m)[0]);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->header.kind, ParamMessageKind::kRows);
  EXPECT_EQ(back->header.base_clock, 4711u);
}

// A gap (node -> trainers): one message without records, the lost offsets [sender_clock,
// base_clock) in its header; records, an empty range or a forged record count are refused.
TEST(ParamProtocolTest, AGapCarriesItsLostOffsetsAndNoRecords) {
  ParamMessageHeader h;
  h.kind = ParamMessageKind::kGap;
  h.dim = 2;
  h.sender = 3;
  h.sender_clock = 17;
  h.base_clock = 40;
  StatusOr<std::vector<std::string>> m = EncodeParamMessages(h, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 1u);
  EXPECT_EQ((*m)[0].size(), kParamHeaderBytes);
  StatusOr<ParamMessage> back = DecodeParamMessage((*m)[0], {ParamModelKind::kSgns, 2});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->header.kind, ParamMessageKind::kGap);
  EXPECT_EQ(ParamMessageKindName(back->header.kind), "gap");
  EXPECT_EQ(back->header.sender, 3u);
  EXPECT_EQ(back->header.sender_clock, 17u);
  EXPECT_EQ(back->header.base_clock, 40u);
  EXPECT_TRUE(back->records.empty());

  ParamRecord r;
  r.word = "w";
  r.has_count = true;
  r.count = 1.0;
  StatusOr<std::vector<std::string>> with = EncodeParamMessages(h, std::vector{r});
  ASSERT_FALSE(with.ok());
  EXPECT_THAT(with.status().message(), HasSubstr("a gap message carries no records"));
  ParamMessageHeader empty = h;
  empty.sender_clock = 40;
  StatusOr<std::vector<std::string>> none = EncodeParamMessages(empty, {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "a gap's first lost offset 40 is not below its end 40");
  std::string b = (*m)[0];
  Poke<uint64_t>(b, 32, 41);
  EXPECT_EQ(Rejection(b), "a gap's first lost offset 41 is not below its end 40");
  // A vocabulary message relabelled as a gap: its records are refused by count.
  ParamMessageHeader vocab = h;
  vocab.kind = ParamMessageKind::kVocabulary;
  std::string forged = EncodeOne(vocab, {r});
  forged[6] = static_cast<char>(ParamMessageKind::kGap);
  EXPECT_EQ(Rejection(forged), "a gap message carries no records, not 1");
}

// Which records went into which message: each message's header record count, read without
// decoding; bytes shorter than a header give 0.
TEST(ParamProtocolTest, RecordCountOfEachEncodedMessage) {
  ParamMessageHeader h;
  h.dim = 2;
  std::vector<ParamRecord> records(5);
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].word = "w" + std::to_string(i);
    records[i].input = {1.0f, 2.0f};
  }
  const size_t per = ParamRecordBytes(records[0], 2, ParamPrecision::kFp32);
  StatusOr<std::vector<std::string>> m =
      EncodeParamMessages(h, records, kParamHeaderBytes + 2 * per);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ(ParamMessageRecordCount((*m)[0]), 2u);
  EXPECT_EQ(ParamMessageRecordCount((*m)[1]), 2u);
  EXPECT_EQ(ParamMessageRecordCount((*m)[2]), 1u);
  EXPECT_EQ(ParamMessageRecordCount(std::string_view((*m)[0]).substr(0, 20)), 0u);
}

}  // namespace
}  // namespace streamvec

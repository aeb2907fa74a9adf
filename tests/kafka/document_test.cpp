// The <prefix>.docs wire format: round trips, validation messages, SplitText, UTF-8 checks.
#include "streamvec/kafka/document.h"
#include "streamvec/tokenizer/utf8.h"

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace streamvec {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Words(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::vector<std::string> words;
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

TEST(DocumentTest, RoundTripKeepsEveryField) {
  Document doc;
  doc.id = "/data/a.txt:120";
  doc.source = "/data/a.txt";
  doc.url = "https://example.org/a";
  doc.title = "A \"quoted\" title";
  doc.text = "caf\xC3\xA9 na\xC3\xAFve \xE2\x82\xAC 12\n\ttab";
  doc.lang = "en";
  doc.published_at = "2026-11-22T10:00:00Z";
  doc.fetched_at = "2026-11-22T10:00:05Z";
  doc.offset = 12345;
  doc.start = 12000;
  StatusOr<Document> back = ParseDocument(DocumentToJson(doc));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->id, doc.id);
  EXPECT_EQ(back->source, doc.source);
  EXPECT_EQ(back->url, doc.url);
  EXPECT_EQ(back->title, doc.title);
  EXPECT_EQ(back->text, doc.text);
  EXPECT_EQ(back->lang, doc.lang);
  EXPECT_EQ(back->published_at, doc.published_at);
  EXPECT_EQ(back->fetched_at, doc.fetched_at);
  EXPECT_EQ(back->offset, 12345);
  EXPECT_EQ(back->start, 12000);
}

TEST(DocumentTest, InvalidUtf8IsReplacedAndTheDocumentStillParses) {
  Document doc;
  doc.id = "a";
  doc.source = "s";
  doc.title = "bad \xC3 title";
  doc.text = "ok \xFF\xFE text";
  const std::string json = DocumentToJson(doc);
  EXPECT_EQ(FindInvalidUtf8(json), std::string_view::npos);
  StatusOr<Document> back = ParseDocument(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->text, "ok \xEF\xBF\xBD\xEF\xBF\xBD text");  // U+FFFD each
  EXPECT_EQ(back->title, "bad \xEF\xBF\xBD title");
}

TEST(DocumentTest, RandomTextRoundTripsByteForByte) {
  // Every ASCII byte (controls, quotes, backslashes, NUL) and multi-byte characters, in long
  // runs and alone: the writer's SIMD scan must stop at each character that needs escaping.
  const std::vector<std::string> pieces = {"plain words ", "\"", "\\", "/", std::string("\0", 1),
                                           "\x01", "\x1F", "\x7F", "\n", "\t", "\r",
                                           "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                                           std::string(40, 'x')};
  std::mt19937 rng(7);
  for (int round = 0; round < 500; ++round) {
    Document doc;
    doc.id = "id:" + std::to_string(round);
    doc.source = "src";
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) doc.text += pieces[rng() % pieces.size()];
    StatusOr<Document> back = ParseDocument(DocumentToJson(doc));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->text, doc.text);
  }
}

TEST(DocumentTest, EmptyOptionalFieldsAreLeftOut) {
  Document doc;
  doc.id = "x:0";
  doc.source = "x";
  doc.text = "hello";
  const std::string json = DocumentToJson(doc);
  EXPECT_EQ(json.find("url"), std::string::npos) << json;
  EXPECT_EQ(json.find("offset"), std::string::npos) << json;
  StatusOr<Document> back = ParseDocument(json);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->offset, -1);
  EXPECT_TRUE(back->title.empty());
}

TEST(DocumentTest, NullOptionalsAndUnknownFieldsAreAccepted) {
  StatusOr<Document> doc = ParseDocument(
      R"({"id":"a","source":"s","text":"t","url":null,"extra":[1,2],"offset":7})");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->offset, 7);
  EXPECT_TRUE(doc->url.empty());
}

TEST(DocumentTest, ARepeatedFieldTakesItsLastValue) {
  StatusOr<Document> doc = ParseDocument(
      R"({"id":"a","source":"s","text":"first","offset":1,"text":"second","offset":9})");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->text, "second");
  EXPECT_EQ(doc->offset, 9);
}

TEST(DocumentTest, EscapesAndNonAsciiTextSurviveTheRoundTrip) {
  Document doc;
  doc.id = "a";
  doc.source = "s";
  doc.text = "quote \" backslash \\ tab \t newline \n nul \x01 caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC";
  StatusOr<Document> back = ParseDocument(DocumentToJson(doc));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->text, doc.text);
  back = ParseDocument(R"({"id":"a","source":"s","text":"\u00e9\ud83d\ude00\u0041"})");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->text, "\xC3\xA9\xF0\x9F\x98\x80" "A");
}

struct BadCase {
  const char* json;
  const char* reason;
};

TEST(DocumentTest, RejectionsNameWhatIsWrong) {
  const std::vector<BadCase> cases = {
      {"{\"id\": ", "not JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"id":"a","source":"s"})", "field 'text' is missing"},
      {R"({"source":"s","text":"t"})", "field 'id' is missing"},
      {R"({"id":"a","text":"t"})", "field 'source' is missing"},
      {R"({"id":5,"source":"s","text":"t"})", "field 'id' must be a string"},
      {R"({"id":"","source":"s","text":"t"})", "field 'id' is empty"},
      {R"({"id":"a","source":"s","text":""})", "field 'text' is empty"},
      {R"({"id":"a","source":"s","text":"t","title":3})", "field 'title' must be a string"},
      {R"({"id":"a","source":"s","text":"t","offset":-1})", "field 'offset'"},
      {R"({"id":"a","source":"s","text":"t","offset":1.5})", "field 'offset'"},
      {R"({"id":"a","source":"s","text":"t","offset":"3"})", "field 'offset'"},
      {R"({"id":"a","source":"s","text":"t","offset":3,"start":-2})", "field 'start'"},
      {R"({"id":"a","source":"s","text":"t","offset":3,"start":4})", "field 'start' needs"},
      {R"({"id":"a","source":"s","text":"t","start":0})", "field 'start' needs"},
      {"{\"id\":\"a\",\"source\":\"s\",\"text\":\"\xFF\xFE\"}", "not JSON"},
      {R"({"id":"a","source":"s","text":"t","offset":18446744073709551615})", "field 'offset'"},
      {R"({"id":"a","source":"s","text":"t"} trailing)", "not JSON"},
      {R"({"id":null,"source":"s","text":"t"})", "field 'id' is missing"},
  };
  for (const BadCase& c : cases) {
    StatusOr<Document> doc = ParseDocument(c.json);
    ASSERT_FALSE(doc.ok()) << c.json;
    EXPECT_EQ(doc.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(doc.status().message(), HasSubstr(c.reason)) << c.json;
  }
}

TEST(DocumentTest, OversizedTextAndMessageAreRejected) {
  Document doc;
  doc.id = "a";
  doc.source = "s";
  doc.text = std::string(kMaxDocumentTextBytes + 1, 'x');
  StatusOr<Document> parsed = ParseDocument(DocumentToJson(doc));
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("over the limit of 262144"));
  const std::string huge(kMaxDocumentMessageBytes + 1, ' ');
  parsed = ParseDocument(huge);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("message is 1048577 bytes"));
}

TEST(DocumentTest, SplitTextKeepsEveryWordOnceInOrder) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> len(1, 12), sep(0, 9);
  std::string text;
  for (int i = 0; i < 200000; ++i) {
    for (int k = len(gen); k > 0; --k) text += static_cast<char>('a' + (i + k) % 26);
    text += sep(gen) == 0 ? "  \t" : " ";
  }
  const size_t max_bytes = 10000;
  const auto pieces = SplitText(text, max_bytes);
  ASSERT_GT(pieces.size(), text.size() / max_bytes);
  std::vector<std::string> joined;
  size_t previous_end = 0;
  for (const auto& [start, length] : pieces) {
    ASSERT_LE(length, max_bytes);
    ASSERT_GE(start, previous_end);
    const std::string_view piece(text.data() + start, length);
    EXPECT_NE(piece.front(), ' ');
    EXPECT_NE(piece.back(), ' ');
    for (std::string& w : Words(piece)) joined.push_back(std::move(w));
    previous_end = start + length;
  }
  EXPECT_EQ(joined, Words(text));
}

TEST(DocumentTest, SplitTextCutsAnOverlongWordAtCharacterBoundaries) {
  std::string word;
  for (int i = 0; i < 100; ++i) word += "\xC3\xA9";  // 200 bytes of 2-byte characters
  const std::string text = "ab " + word + " cd";
  const auto pieces = SplitText(text, 15);
  for (const auto& [start, length] : pieces) {
    const std::string_view piece(text.data() + start, length);
    EXPECT_LE(length, 15u);
    EXPECT_EQ(FindInvalidUtf8(piece), std::string_view::npos) << "piece at " << start;
  }
  EXPECT_EQ(pieces.front(), std::make_pair(size_t{0}, size_t{2}));
  const std::string last = text.substr(pieces.back().first, pieces.back().second);
  EXPECT_EQ(last.substr(last.size() - 2), "cd");
}

TEST(DocumentTest, SplitTextDropsWhitespaceOnlyInput) {
  EXPECT_TRUE(SplitText(" \t\r\n  ").empty());
  EXPECT_TRUE(SplitText("").empty());
  const auto one = SplitText("  hello world \r");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], std::make_pair(size_t{2}, size_t{11}));
}

TEST(DocumentTest, RejectionCarriesReasonOriginAndABoundedPayload) {
  const std::string payload = "bad \xFF bytes" + std::string(10000, 'x');
  const std::string json = RejectionToJson("invalid UTF-8 at byte 4", "/d/a.txt:100", payload);
  EXPECT_THAT(json, HasSubstr("\"reason\":\"invalid UTF-8 at byte 4\""));
  EXPECT_THAT(json, HasSubstr("\"origin\":\"/d/a.txt:100\""));
  EXPECT_LT(json.size(), 4096u + 200u);
  EXPECT_EQ(FindInvalidUtf8(json), std::string_view::npos);  // the bad byte was replaced
}

TEST(DocumentTest, TopicNamesFollowThePrefix) {
  EXPECT_EQ(DocsTopic("streamvec"), "streamvec.docs");
  EXPECT_EQ(RejectedTopic("t1"), "t1.rejected");
}

// Ranges of one source given out of order: the prefix moves only over contiguous ranges, and a
// range that fills a gap absorbs those kept beyond it.
TEST(SourcePositionsTest, PrefixGrowsOnlyOverContiguousRanges) {
  SourcePositions p({{"a", 10}});
  p.Cover("a", 30, 40);  // beyond a gap [10, 30)
  EXPECT_EQ(p.positions().at("a"), 10);
  p.Cover("a", 20, 30);
  EXPECT_EQ(p.positions().at("a"), 10);
  p.Cover("a", 10, 20);  // fills the gap: 20, 30 and 40 follow
  EXPECT_EQ(p.positions().at("a"), 40);
  p.Cover("a", 0, 15);  // behind the prefix: no move back
  EXPECT_EQ(p.positions().at("a"), 40);
  p.Cover("b", -1, 7);  // no start: in-order producer
  EXPECT_EQ(p.positions().at("b"), 7);
  p.Cover("b", 20, 25);
  p.Reset("b", 0);  // the source starts over: the range kept beyond 7 is dropped
  p.Cover("b", 0, 20);
  EXPECT_EQ(p.positions().at("b"), 20);
}

}  // namespace
}  // namespace streamvec

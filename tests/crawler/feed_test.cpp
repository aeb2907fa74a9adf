// ParseFeed against the real shared feeds: item counts, rejections with reasons, encodings,
// fields; HtmlToText and NormalizeDate.
#include "streamvec/ingest/crawler/feed.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "crawler_test_util.h"

namespace streamvec::crawler {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::CrawlerDataDir;
using testing::FeedsDir;
using testing::ReadFile;
using testing::SharedFeedsDir;
namespace fs = std::filesystem;

struct Expectation {
  std::string path;
  bool reject = false;
  int items = 0;
  std::string reason;
};

std::vector<Expectation> LoadExpectations() {
  std::ifstream in(CrawlerDataDir() / "feed_expectations.tsv");
  std::vector<Expectation> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Expectation e;
    std::string kind, value;
    std::getline(fields, e.path, '\t');
    std::getline(fields, kind, '\t');
    std::getline(fields, value);
    e.reject = kind == "reject";
    if (e.reject) {
      e.reason = value;
    } else {
      e.items = std::stoi(value);
    }
    out.push_back(e);
  }
  return out;
}

TEST(FeedParserTest, EveryIndexedFeedParsesWithItsItemCountOrIsRejectedWithItsReason) {
  const std::vector<Expectation> expectations = LoadExpectations();
  ASSERT_EQ(expectations.size(), 96u);  // every feed in INDEX.tsv (html-articles excluded)
  int checked = 0, missing = 0, rejected = 0;
  for (const Expectation& e : expectations) {
    fs::path path = FeedsDir() / e.path;
    if (!fs::exists(path)) path = SharedFeedsDir() / e.path;
    if (!fs::exists(path)) {
      ++missing;  // a large feed not copied into tests/data, and no shared data set here
      continue;
    }
    ++checked;
    StatusOr<Feed> feed = ParseFeed(ReadFile(path), "http://example.com/feed");
    if (e.reject) {
      ++rejected;
      ASSERT_FALSE(feed.ok()) << e.path << " should be rejected";
      EXPECT_EQ(feed.status().code(), StatusCode::kInvalidArgument) << e.path;
      EXPECT_THAT(feed.status().message(), HasSubstr(e.reason)) << e.path;
    } else {
      ASSERT_TRUE(feed.ok()) << e.path << ": " << feed.status().ToString();
      EXPECT_EQ(static_cast<int>(feed->items.size()), e.items) << e.path;
      for (const FeedItem& item : feed->items) EXPECT_FALSE(item.id.empty()) << e.path;
    }
  }
  EXPECT_GE(checked, 88);
  EXPECT_EQ(rejected, missing > 0 ? rejected : 11);  // 9 not well-formed + 2 not feeds
}

TEST(FeedParserTest, Rss2ItemFieldsAreExtracted) {
  StatusOr<Feed> feed = ParseFeed(ReadFile(FeedsDir() / "feed-rs/rss2/rss_2.0_spec_1.xml"));
  ASSERT_TRUE(feed.ok()) << feed.status().ToString();
  ASSERT_EQ(feed->items.size(), 2u);
  EXPECT_EQ(feed->format, FeedFormat::kRss);
  for (const FeedItem& item : feed->items) {
    EXPECT_FALSE(item.text.empty());
    EXPECT_THAT(item.text, Not(HasSubstr("&lt;")));
    EXPECT_THAT(item.id, HasSubstr("scriptingnews.userland.com"));
    EXPECT_EQ(item.link, item.id);  // a guid is a permalink by default
    EXPECT_THAT(item.published_at, ::testing::MatchesRegex("....-..-..T..:..:..Z"));
  }
}

TEST(FeedParserTest, ContentEncodedHtmlBecomesText) {
  StatusOr<Feed> feed = ParseFeed(ReadFile(FeedsDir() / "rss-parser/content-encoded.rss"));
  ASSERT_TRUE(feed.ok()) << feed.status().ToString();
  ASSERT_EQ(feed->items.size(), 7u);
  for (const FeedItem& item : feed->items) {
    EXPECT_THAT(item.text, Not(HasSubstr("<p")));
    EXPECT_THAT(item.text, Not(HasSubstr("&amp;")));
    EXPECT_GT(item.text.size(), 20u);
  }
}

TEST(FeedParserTest, AtomEntryUsesAlternateLinkAndContent) {
  StatusOr<Feed> feed = ParseFeed(ReadFile(FeedsDir() / "rss-parser/heise.atom"));
  ASSERT_TRUE(feed.ok()) << feed.status().ToString();
  EXPECT_EQ(feed->format, FeedFormat::kAtom);
  ASSERT_EQ(feed->items.size(), 15u);
  EXPECT_THAT(feed->items[0].link, HasSubstr("heise.de"));
  EXPECT_FALSE(feed->items[0].title.empty());
  EXPECT_FALSE(feed->items[0].published_at.empty());
}

TEST(FeedParserTest, RelativeLinksResolveAgainstXmlBase) {
  StatusOr<Feed> feed = ParseFeed(
      "<rss><channel><item xml:base=\"http://a.example/dir/\"><link>page.html</link></item>"
      "<item><link>/x</link></item></channel></rss>",
      "http://b.example/feed.xml");
  ASSERT_TRUE(feed.ok()) << feed.status().ToString();
  ASSERT_EQ(feed->items.size(), 2u);
  EXPECT_EQ(feed->items[0].link, "http://a.example/dir/page.html");
  EXPECT_EQ(feed->items[1].link, "http://b.example/x");
}

TEST(FeedParserTest, Iso88591DeclaredFeedIsDecodedToUtf8) {
  StatusOr<Feed> feed = ParseFeed(ReadFile(FeedsDir() / "feed-rs/rss0/rss_0.91_encoding_1.xml"));
  ASSERT_TRUE(feed.ok()) << feed.status().ToString();
  EXPECT_THAT(feed->title, HasSubstr("Dicas t\xC3\xA9" "cnicas"));  // "técnicas"
  StatusOr<Feed> de = ParseFeed(ReadFile(FeedsDir() / "feed-rs/xml/xml_iso8859.xml"));
  ASSERT_TRUE(de.ok()) << de.status().ToString();
  ASSERT_EQ(de->items.size(), 1u);
  EXPECT_THAT(de->items[0].title, HasSubstr("Glasfaserf\xC3\xB6rderung"));  // "ö"
}

TEST(FeedParserTest, Windows1252BytesInALatin1FeedBecomeSmartQuotes) {
  // 0x93/0x94 are C1 controls in ISO-8859-1 but quotes in Windows-1252 (what publishers mean).
  const std::string body =
      "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><rss version=\"2.0\"><channel>"
      "<item><title>\x93" "Caf\xE9\x94</title><guid>1</guid></item></channel></rss>";
  StatusOr<Feed> feed = ParseFeed(body);
  ASSERT_TRUE(feed.ok()) << feed.status().ToString();
  EXPECT_EQ(feed->items[0].title, "\xE2\x80\x9C" "Caf\xC3\xA9\xE2\x80\x9D");
}

TEST(FeedParserTest, HttpCharsetOverridesTheXmlDeclarationAndBomOverridesBoth) {
  const std::string latin = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><rss><channel><item>"
                            "<title>M\xFC" "nchen</title><guid>1</guid></item></channel></rss>";
  EXPECT_FALSE(ParseFeed(latin).ok());  // declared UTF-8, but 0xFC is not UTF-8
  StatusOr<Feed> feed = ParseFeed(latin, "", "iso-8859-1");
  ASSERT_TRUE(feed.ok()) << feed.status().ToString();
  EXPECT_EQ(feed->items[0].title, "M\xC3\xBCnchen");

  const std::string bom = "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><rss>"
                          "<channel><item><title>M\xC3\xBCnchen</title><guid>1</guid></item>"
                          "</channel></rss>";
  StatusOr<Feed> with_bom = ParseFeed(bom, "", "iso-8859-1");
  ASSERT_TRUE(with_bom.ok()) << with_bom.status().ToString();
  EXPECT_EQ(with_bom->items[0].title, "M\xC3\xBCnchen");
}

TEST(FeedParserTest, UndeclaredLatin1IsRejectedUnlessHttpNamesTheCharset) {
  const std::string body = "<rss><channel><item><title>Gr\xFC\xDF" "e</title></item></channel></rss>";
  EXPECT_THAT(ParseFeed(body).status().message(), HasSubstr("Input is not proper UTF-8"));
  StatusOr<Feed> feed = ParseFeed(body, "", "ISO-8859-1");
  ASSERT_TRUE(feed.ok()) << feed.status().ToString();
  EXPECT_EQ(feed->items[0].title, "Gr\xC3\xBC\xC3\x9F" "e");
  EXPECT_THAT(feed->items[0].id, ::testing::StartsWith("sha256:"));
}

TEST(FeedParserTest, ExternalEntitiesAreNotLoaded) {
  const std::string body =
      "<?xml version=\"1.0\"?><!DOCTYPE rss [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
      "<rss><channel><item><title>a &x; b</title><guid>1</guid></item></channel></rss>";
  StatusOr<Feed> feed = ParseFeed(body);
  if (feed.ok()) {
    ASSERT_EQ(feed->items.size(), 1u);
    EXPECT_THAT(feed->items[0].title, Not(HasSubstr("root:")));
  }
}

TEST(FeedParserTest, EmptyAndNonFeedDocumentsAreRejected) {
  EXPECT_THAT(ParseFeed("").status().message(), HasSubstr("empty document"));
  EXPECT_THAT(ParseFeed("<html><body>hi</body></html>").status().message(),
              HasSubstr("not a feed: root element <html>"));
  EXPECT_THAT(ParseFeed("<rss><channel>").status().message(),
              HasSubstr("not well-formed XML"));
}

TEST(HtmlToTextTest, BlocksBecomeLinesAndScriptsDisappear) {
  EXPECT_EQ(HtmlToText("<p>One &amp; <b>two</b></p><script>x()</script><p>three<br>four</p>"
                       "<!-- hidden -->"),
            "One & two\nthree\nfour");
  EXPECT_EQ(HtmlToText("plain   text\n with  spaces"), "plain text with spaces");
}

TEST(NormalizeDateTest, Rfc822AndIso8601BecomeRfc3339Utc) {
  EXPECT_EQ(NormalizeDate("Wed, 02 Oct 2002 13:00:00 GMT"), "2002-10-02T13:00:00Z");
  EXPECT_EQ(NormalizeDate("Wed, 02 Oct 2002 15:00:00 +0200"), "2002-10-02T13:00:00Z");
  EXPECT_EQ(NormalizeDate("2 Oct 2002 08:00 EST"), "2002-10-02T13:00:00Z");
  EXPECT_EQ(NormalizeDate("2003-12-13T18:30:02.25+01:00"), "2003-12-13T17:30:02Z");
  EXPECT_EQ(NormalizeDate("2003-12-13"), "2003-12-13T00:00:00Z");
  EXPECT_EQ(NormalizeDate("yesterday"), "");
  EXPECT_EQ(NormalizeDate("2003-13-45T00:00:00Z"), "");
}

}  // namespace
}  // namespace streamvec::crawler

// The crawler end to end against a local HTTP server serving the real shared feeds: Kafka
// output, conditional GET, retries with Retry-After, redirects (and a refused private hop),
// slow / truncated / oversized bodies, robots.txt, dedup across restarts and syndicated copies.
#include "streamvec/ingest/crawler/crawler.h"

#include <netinet/in.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../kafka/kafka_test_util.h"
#include "crawler_test_util.h"
#include "streamvec/ingest/crawler/fetcher.h"
#include "streamvec/ingest/crawler/robots.h"
#include "streamvec/kafka/broker.h"
#include "test_http_server.h"

namespace streamvec::crawler {
namespace {

using ::testing::HasSubstr;
using testing::FeedsDir;
using testing::HttpRequest;
using testing::HttpResponse;
using testing::ReadFile;
using testing::TestHttpServer;
namespace fs = std::filesystem;

const std::string& Heise() {
  static const std::string body = ReadFile(FeedsDir() / "rss-parser/heise.atom");  // 15 entries
  return body;
}
const std::string& Spec() {
  static const std::string body = ReadFile(FeedsDir() / "feed-rs/rss2/rss_2.0_spec_1.xml");  // 2
  return body;
}

HttpResponse Ok(const std::string& body, const std::string& type = "application/xml") {
  HttpResponse r;
  r.body = body;
  r.headers = {{"Content-Type", type}};
  return r;
}

FetchRequest Req(const std::string& url) {
  FetchRequest r;
  r.url = url;
  return r;
}

HttpResponse NotFound() {
  HttpResponse r;
  r.status = 404;
  r.body = "not found";
  return r;
}

// Options for fast tests: no politeness delay, short waits, 127.0.0.1 allowed.
CrawlerOptions FastOptions(std::vector<std::string> feeds, std::vector<Document>* out) {
  CrawlerOptions o;
  o.feeds = std::move(feeds);
  o.once = true;
  o.min_host_delay_seconds = 0;
  o.backoff_base_seconds = 0.01;
  o.fetch.allow_private = true;
  o.fetch.timeout_seconds = 5;
  if (out != nullptr) o.sink = [out](const Document& d) { out->push_back(d); };
  return o;
}

std::unique_ptr<Crawler> MakeCrawler(CrawlerOptions o) {
  StatusOr<std::unique_ptr<Crawler>> c = Crawler::Create(std::move(o));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       ("streamvec_crawler_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir;
}

TEST(CrawlerTest, EmitsEveryItemToKafkaKeyedByFeedUrl) {
  TestHttpServer server([](const HttpRequest& req) {
    return req.path == "/heise.atom" ? Ok(Heise()) : NotFound();
  });
  StatusOr<std::unique_ptr<EmbeddedBroker>> broker = EmbeddedBroker::Start({.partitions = 4});
  ASSERT_TRUE(broker.ok());
  ASSERT_TRUE((*broker)->CreateTopic("t.docs").ok());
  CrawlerOptions o = FastOptions({server.Url("/heise.atom")}, nullptr);
  o.kafka.brokers = (*broker)->bootstrap();
  o.kafka.topic_prefix = "t";
  std::unique_ptr<Crawler> crawler = MakeCrawler(o);
  ASSERT_NE(crawler, nullptr);
  std::atomic<bool> stop{false};
  ASSERT_TRUE(crawler->Run(stop).ok());
  EXPECT_EQ(crawler->stats().items_emitted, 15);

  streamvec::testing::TestConsumer consumer((*broker)->bootstrap(), "t.docs");
  const std::vector<streamvec::testing::Record> records = consumer.Read(15);
  ASSERT_EQ(records.size(), 15u);
  std::set<std::string> ids;
  for (const auto& r : records) {
    EXPECT_EQ(r.key, server.Url("/heise.atom"));
    StatusOr<Document> doc = ParseDocument(r.value);
    ASSERT_TRUE(doc.ok()) << doc.status().ToString();
    EXPECT_EQ(doc->source, server.Url("/heise.atom"));
    EXPECT_FALSE(doc->text.empty());
    EXPECT_THAT(doc->url, HasSubstr("heise.de"));
    ids.insert(doc->id);
  }
  EXPECT_EQ(ids.size(), 15u);
}

TEST(CrawlerTest, ConditionalGetTurnsTheSecondCrawlIntoA304) {
  TestHttpServer server([](const HttpRequest& req) {
    if (req.path != "/feed") return NotFound();
    auto it = req.headers.find("if-none-match");
    if (it != req.headers.end() && it->second == "\"v1\"") {
      HttpResponse r;
      r.status = 304;
      return r;
    }
    HttpResponse r = Ok(Heise());
    r.headers.push_back({"ETag", "\"v1\""});
    r.headers.push_back({"Last-Modified", "Wed, 01 May 2024 10:00:00 GMT"});
    return r;
  });
  std::vector<Document> docs;
  std::unique_ptr<Crawler> crawler = MakeCrawler(FastOptions({server.Url("/feed")}, &docs));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(crawler->Run(stop).ok());
  ASSERT_TRUE(crawler->Run(stop).ok());
  const CrawlStats s = crawler->stats();
  EXPECT_EQ(s.feeds_fetched, 1);
  EXPECT_EQ(s.not_modified, 1);
  EXPECT_EQ(docs.size(), 15u);
  const std::vector<HttpRequest> reqs = server.Requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().headers.at("if-modified-since"), "Wed, 01 May 2024 10:00:00 GMT");
  EXPECT_THAT(reqs.back().headers.at("user-agent"), HasSubstr("streamvec-crawler/0.1"));
}

TEST(CrawlerTest, RestartWithTheSameStateEmitsNothingTwice) {
  TestHttpServer server([](const HttpRequest& req) {
    return req.path == "/feed" ? Ok(Heise()) : NotFound();
  });
  const fs::path state = TempDir("restart");
  std::atomic<bool> stop{false};
  std::vector<Document> first, second;
  {
    CrawlerOptions o = FastOptions({server.Url("/feed")}, &first);
    o.state_dir = state.string();
    std::unique_ptr<Crawler> c = MakeCrawler(o);
    ASSERT_TRUE(c->Run(stop).ok());
  }
  {
    CrawlerOptions o = FastOptions({server.Url("/feed")}, &second);
    o.state_dir = state.string();
    std::unique_ptr<Crawler> c = MakeCrawler(o);
    ASSERT_TRUE(c->Run(stop).ok());
    EXPECT_EQ(c->stats().duplicates_skipped, 15);
  }
  EXPECT_EQ(first.size(), 15u);
  EXPECT_TRUE(second.empty());
  fs::remove_all(state);
}

TEST(CrawlerTest, SyndicatedCopyInAnotherFeedIsADuplicate) {
  TestHttpServer server([](const HttpRequest& req) {
    if (req.path == "/a" || req.path == "/b") return Ok(Spec());
    return NotFound();
  });
  std::vector<Document> docs;
  std::unique_ptr<Crawler> c = MakeCrawler(FastOptions({server.Url("/a"), server.Url("/b")}, &docs));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(c->Run(stop).ok());
  EXPECT_EQ(docs.size(), 2u);
  EXPECT_EQ(c->stats().duplicates_skipped, 2);
}

TEST(CrawlerTest, RetriesA429AfterRetryAfter) {
  std::atomic<int> calls{0};
  TestHttpServer server([&calls](const HttpRequest& req) {
    if (req.path != "/feed") return NotFound();
    if (calls++ == 0) {
      HttpResponse r;
      r.status = 429;
      r.headers = {{"Retry-After", "0"}};
      return r;
    }
    return Ok(Spec());
  });
  std::vector<Document> docs;
  std::unique_ptr<Crawler> c = MakeCrawler(FastOptions({server.Url("/feed")}, &docs));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(c->Run(stop).ok());
  EXPECT_EQ(c->stats().retries, 1);
  EXPECT_EQ(server.Hits("/feed"), 2);
  EXPECT_EQ(docs.size(), 2u);
}

TEST(CrawlerTest, PersistentServerErrorFailsAfterMaxAttemptsAndNamesTheFeed) {
  TestHttpServer server([](const HttpRequest& req) {
    HttpResponse r;
    r.status = req.path == "/feed" ? 503 : 404;
    return r;
  });
  CrawlerOptions o = FastOptions({server.Url("/feed")}, nullptr);
  std::vector<Document> docs;
  o.sink = [&docs](const Document& d) { docs.push_back(d); };
  o.max_attempts = 3;
  std::unique_ptr<Crawler> c = MakeCrawler(o);
  std::atomic<bool> stop{false};
  const Status s = c->Run(stop);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(server.Url("/feed") + ": http 503"));
  EXPECT_EQ(server.Hits("/feed"), 3);
  EXPECT_EQ(c->stats().errors.at("http_5xx"), 1);
}

TEST(CrawlerTest, FollowsRedirectsToTheFeed) {
  TestHttpServer server([](const HttpRequest& req) {
    if (req.path == "/old") {
      HttpResponse r;
      r.status = 301;
      r.headers = {{"Location", "/new"}};
      return r;
    }
    return req.path == "/new" ? Ok(Spec()) : NotFound();
  });
  std::vector<Document> docs;
  std::unique_ptr<Crawler> c = MakeCrawler(FastOptions({server.Url("/old")}, &docs));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(c->Run(stop).ok());
  EXPECT_EQ(docs.size(), 2u);
}

TEST(CrawlerTest, RedirectToAPrivateAddressIsRefused) {
  TestHttpServer server([](const HttpRequest& req) {
    if (req.path == "/feed") {
      HttpResponse r;
      r.status = 302;
      r.headers = {{"Location", "http://169.254.169.254/latest/meta-data/"}};
      return r;
    }
    if (req.path == "/internal") {
      HttpResponse r;
      r.status = 302;
      r.headers = {{"Location", "http://10.0.0.1/feed"}};
      return r;
    }
    return NotFound();
  });
  std::vector<Document> docs;
  CrawlerOptions o = FastOptions({server.Url("/feed"), server.Url("/internal")}, &docs);
  o.fetch.allow_private = false;
  o.fetch.allow_addresses = {"127.0.0.1"};  // the test server only; every other private hop
  o.fetch.connect_timeout_seconds = 2;
  std::unique_ptr<Crawler> c = MakeCrawler(o);
  std::atomic<bool> stop{false};
  const Status s = c->Run(stop);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("non-public address 169.254.169.254"));
  EXPECT_THAT(s.message(), HasSubstr("non-public address 10.0.0.1"));
  EXPECT_EQ(c->stats().errors.at("blocked"), 2);
  EXPECT_TRUE(docs.empty());
}

TEST(FetcherTest, LoopbackIsRefusedWithoutAllowPrivate) {
  TestHttpServer server([](const HttpRequest&) { return Ok(Spec()); });
  Fetcher fetcher(FetchOptions{});
  const FetchResponse r = fetcher.Fetch(Req(server.Url("/feed")));
  EXPECT_EQ(r.error, FetchError::kBlocked);
  EXPECT_THAT(r.error_message, HasSubstr("127.0.0.1"));
  EXPECT_EQ(server.Hits("/feed"), 0);
}

TEST(FetcherTest, RedirectLoopStopsAtTheLimit) {
  TestHttpServer server([](const HttpRequest&) {
    HttpResponse r;
    r.status = 302;
    r.headers = {{"Location", "/loop"}};
    return r;
  });
  FetchOptions o;
  o.allow_private = true;
  o.max_redirects = 3;
  Fetcher fetcher(o);
  const FetchResponse r = fetcher.Fetch(Req(server.Url("/start")));
  EXPECT_EQ(r.error, FetchError::kTooManyRedirects);
  EXPECT_EQ(server.Hits("/loop"), 3);
}

TEST(FetcherTest, SlowBodyTimesOut) {
  TestHttpServer server([](const HttpRequest&) {
    HttpResponse r = Ok(Spec());
    r.pause_ms_after_first_bytes = 3000;
    return r;
  });
  FetchOptions o;
  o.allow_private = true;
  o.timeout_seconds = 0.3;
  Fetcher fetcher(o);
  const FetchResponse r = fetcher.Fetch(Req(server.Url("/slow")));
  EXPECT_EQ(r.error, FetchError::kTimeout) << r.error_message;
  EXPECT_TRUE(r.body.empty());
}

TEST(FetcherTest, TruncatedAndOversizedBodiesAreErrors) {
  TestHttpServer server([](const HttpRequest& req) {
    HttpResponse r = Ok(Heise());
    if (req.path == "/truncated") r.send_only = Heise().size() / 2;
    return r;
  });
  FetchOptions o;
  o.allow_private = true;
  Fetcher fetcher(o);
  EXPECT_EQ(fetcher.Fetch(Req(server.Url("/truncated"))).error, FetchError::kTruncated);
  o.max_body_bytes = 1000;
  Fetcher small(o);
  EXPECT_EQ(small.Fetch(Req(server.Url("/whole"))).error, FetchError::kTooLarge);
}

TEST(CrawlerTest, TruncatedAndBrokenFeedsFailButTheCrawlGoesOn) {
  const std::string broken = ReadFile(FeedsDir() / "feed-rs/rss2/rss_2.0_dbengines.xml");
  TestHttpServer server([&broken](const HttpRequest& req) {
    if (req.path == "/truncated") {
      HttpResponse r = Ok(Heise());
      r.send_only = 500;
      return r;
    }
    if (req.path == "/broken") return Ok(broken);
    if (req.path == "/good") return Ok(Spec());
    return NotFound();
  });
  std::vector<Document> docs;
  CrawlerOptions o = FastOptions(
      {server.Url("/truncated"), server.Url("/broken"), server.Url("/good")}, &docs);
  o.max_attempts = 1;
  std::unique_ptr<Crawler> c = MakeCrawler(o);
  std::atomic<bool> stop{false};
  const Status s = c->Run(stop);
  EXPECT_THAT(s.message(), HasSubstr("2 of 3 feeds failed"));
  EXPECT_THAT(s.message(), HasSubstr(server.Url("/truncated") + ": truncated"));
  EXPECT_THAT(s.message(), HasSubstr(server.Url("/broken") + ": not well-formed XML: Entity 'nbsp'"));
  EXPECT_EQ(docs.size(), 2u);
  EXPECT_EQ(c->stats().errors.at("truncated"), 1);
  EXPECT_EQ(c->stats().errors.at("parse"), 1);
}

TEST(CrawlerTest, RobotsTxtDisallowIsHonoured) {
  TestHttpServer server([](const HttpRequest& req) {
    if (req.path == "/robots.txt") {
      return Ok("User-agent: *\nDisallow:\n\nUser-agent: streamvec-crawler\nDisallow: /private/\n",
                "text/plain");
    }
    return Ok(Spec());
  });
  std::vector<Document> docs;
  std::unique_ptr<Crawler> c = MakeCrawler(
      FastOptions({server.Url("/private/feed"), server.Url("/public/feed")}, &docs));
  std::atomic<bool> stop{false};
  const Status s = c->Run(stop);
  EXPECT_THAT(s.message(), HasSubstr("disallowed by robots.txt"));
  EXPECT_EQ(server.Hits("/private/feed"), 0);
  EXPECT_EQ(server.Hits("/robots.txt"), 1);
  EXPECT_EQ(docs.size(), 2u);
  EXPECT_EQ(c->stats().robots_denied, 1);
}

TEST(CrawlerTest, FileFeedsAreConfinedToTheAllowedDirectory) {
  std::vector<Document> docs;
  CrawlerOptions o = FastOptions(
      {"file://" + (FeedsDir() / "feed-rs/rss2/rss_2.0_spec_1.xml").string(), "file:///etc/passwd",
       "file://" + (FeedsDir() / "feed-rs/../../feeds/../../CMakeLists.txt").string()},
      &docs);
  o.fetch.allow_file_dir = (FeedsDir() / "feed-rs").string();
  std::unique_ptr<Crawler> c = MakeCrawler(o);
  std::atomic<bool> stop{false};
  const Status s = c->Run(stop);
  EXPECT_THAT(s.message(), HasSubstr("2 of 3 feeds failed"));
  EXPECT_THAT(s.message(), HasSubstr("outside the allowed directory"));
  EXPECT_EQ(docs.size(), 2u);
  CrawlerOptions none = FastOptions({"file:///etc/passwd"}, &docs);
  EXPECT_EQ(Crawler::Create(none).status().code(), StatusCode::kInvalidArgument);
}

TEST(FetcherTest, PublicAddressClassification) {
  auto v4 = [](const char* text) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, text, &a.sin_addr);
    return IsPublicAddress(reinterpret_cast<sockaddr*>(&a));
  };
  auto v6 = [](const char* text) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    inet_pton(AF_INET6, text, &a.sin6_addr);
    return IsPublicAddress(reinterpret_cast<sockaddr*>(&a));
  };
  EXPECT_TRUE(v4("93.184.216.34"));
  EXPECT_TRUE(v4("8.8.8.8"));
  for (const char* a : {"127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
                        "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
                        "255.255.255.255"}) {
    EXPECT_FALSE(v4(a)) << a;
  }
  EXPECT_TRUE(v4("172.32.0.1"));
  EXPECT_TRUE(v6("2606:4700::1111"));
  for (const char* a : {"::1", "::", "fe80::1", "fd00:ec2::254", "fc00::1", "::ffff:127.0.0.1",
                        "::ffff:10.0.0.1", "64:ff9b::a00:1", "ff02::1", "2001:db8::1"}) {
    EXPECT_FALSE(v6(a)) << a;
  }
}

TEST(RobotsTest, LongestMatchWinsAndOurGroupBeatsTheStarGroup) {
  const RobotsRules r = RobotsRules::Parse(
      "User-agent: *\nDisallow: /\n\n"
      "User-agent: Streamvec-Crawler\nUser-agent: other\nDisallow: /private\n"
      "Allow: /private/ok\nDisallow: /*.pdf$\nCrawl-delay: 2.5\n",
      kRobotsToken);
  EXPECT_TRUE(r.Allowed("/"));
  EXPECT_FALSE(r.Allowed("/private/x"));
  EXPECT_TRUE(r.Allowed("/private/ok/page"));
  EXPECT_FALSE(r.Allowed("/docs/a.pdf"));
  EXPECT_TRUE(r.Allowed("/docs/a.pdf?x=1"));
  EXPECT_DOUBLE_EQ(r.crawl_delay_seconds(), 2.5);
  const RobotsRules star = RobotsRules::Parse("User-agent: *\nDisallow: /\n", kRobotsToken);
  EXPECT_FALSE(star.Allowed("/feed"));
  EXPECT_TRUE(star.Allowed("/robots.txt"));
  EXPECT_TRUE(RobotsRules().Allowed("/anything"));
  EXPECT_FALSE(RobotsRules::DisallowAll().Allowed("/"));
}

TEST(CrawlerTest, ReadFeedsFileSkipsCommentsAndMakesPathsFileUrls) {
  const fs::path dir = TempDir("feedsfile");
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "feeds.txt");
    out << "# comment\n\nhttp://example.com/rss\n  sub/feed.xml  \n";
  }
  StatusOr<std::vector<std::string>> urls = ReadFeedsFile((dir / "feeds.txt").string());
  ASSERT_TRUE(urls.ok());
  ASSERT_EQ(urls->size(), 2u);
  EXPECT_EQ((*urls)[0], "http://example.com/rss");
  EXPECT_EQ((*urls)[1], "file://" + (dir / "sub/feed.xml").string());
  EXPECT_EQ(ReadFeedsFile((dir / "missing").string()).status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace streamvec::crawler

// The feed crawler: feed URLs in, documents out to Kafka topic <prefix>.docs (or to a sink).
//
// Each pass fetches every due feed (Fetcher: safety rules, limits), parses it (ParseFeed) and
// turns each new item into a Document: id = the item id (GUID / atom:id / link), source = the
// feed URL (the message key: one feed's items stay in one partition, in order), url = the item
// link, title, text = the title and the item text (or, with fetch_articles, the page's main text
// from ExtractArticle, falling back to the item text), published_at, fetched_at.
//
// Politeness: requests to one origin are spaced by at least min_host_delay_seconds (or the
// robots.txt Crawl-delay when larger, capped at max_crawl_delay_seconds); robots.txt is fetched
// once per origin per robots_ttl_seconds and honoured for feeds, articles and every redirect hop
// (4xx: all allowed, 5xx/unreachable: all disallowed). Conditional GET: the ETag and
// Last-Modified of each feed are kept in the state and sent back; a 304 counts as not_modified.
// Retries: a 429, a 5xx, a timeout or a connection error is retried up to max_attempts times,
// waiting max(Retry-After, backoff_base_seconds x 2^attempt) capped at max_backoff_seconds;
// between passes a failing feed is skipped for the same exponential delay.
//
// Dedup (state_dir, RocksDB): an item is emitted once. Keys are the item id (scoped by feed) and
// the SHA-256 of its normalised title + text (global: a syndicated copy in another feed is a
// duplicate). Keys are written only after the broker acknowledged the documents (at least once:
// a crash between the two re-emits, never loses). Without state_dir dedup lives in memory.
//
// A broken feed (fetch error, not well-formed, not a feed) is counted, logged and reported; the
// pass goes on with the next feed.
//
// Thread safety: Run is called from one thread at a time; stats() from any thread.
#ifndef STREAMVEC_INGEST_CRAWLER_CRAWLER_H_
#define STREAMVEC_INGEST_CRAWLER_CRAWLER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/ingest/crawler/fetcher.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/kafka/document.h"

namespace streamvec::crawler {

struct CrawlerOptions {
  std::vector<std::string> feeds;  // feed URLs: http://, https://, file:// (see fetch.allow_file_dir)
  KafkaOptions kafka;              // brokers and topic prefix; unused when `sink` is set
  // When set, documents go here instead of Kafka (--dry-run prints them); called on Run's thread.
  std::function<void(const Document&)> sink;
  std::string state_dir;           // RocksDB dedup + conditional-GET state; "" = in memory only
  bool once = false;               // one pass over the feeds, then Run returns
  double interval_seconds = 900;   // time between passes over the same feed
  bool fetch_articles = false;     // replace item text by the linked page's main text
  FetchOptions fetch;              // safety rules and limits of every request
  double min_host_delay_seconds = 1.0;  // between two requests to one origin
  double max_crawl_delay_seconds = 30;  // cap on a robots.txt Crawl-delay
  double robots_ttl_seconds = 86400;    // how long a robots.txt is trusted
  int max_attempts = 3;                 // tries per fetch for retryable failures
  double backoff_base_seconds = 1.0;    // first retry wait (doubles each attempt)
  double max_backoff_seconds = 300;     // cap on one wait, Retry-After included; a longer
                                        // Retry-After fails the fetch for this pass
  double delivery_timeout_seconds = 30; // waiting for the broker's acknowledgements per feed
};

// Counters since Create. Safe to read from any thread while Run works.
struct CrawlStats {
  int64_t feeds_fetched = 0;        // feed responses with a body (2xx)
  int64_t not_modified = 0;         // 304 answers to conditional GETs
  int64_t articles_fetched = 0;     // article pages fetched and extracted
  int64_t items_seen = 0;           // items parsed from feeds
  int64_t items_emitted = 0;        // documents produced (acknowledged) or sunk
  int64_t duplicates_skipped = 0;   // items already emitted (same id or same content)
  int64_t retries = 0;              // fetch attempts repeated after 429/5xx/timeouts
  int64_t robots_denied = 0;        // URLs not fetched because robots.txt disallows them
  int64_t parse_errors = 0;         // feeds that were not well-formed or not feeds
  std::map<std::string, int64_t> errors;  // fetch failures by FetchErrorName ("timeout", ...)
                                          // plus "http_4xx"/"http_5xx", "robots", "parse", "kafka"
};

// "fetched 3, not modified 1, items 40, emitted 38, duplicates 2, retries 1, errors
// {timeout: 1}" — the summary line `streamvec crawl` prints.
std::string FormatStats(const CrawlStats& stats);

class Crawler {
 public:
  // Validates options, opens the state (RocksDB) and creates the producer (does not contact the
  // broker). Errors: InvalidArgument (no feeds, no brokers without a sink, bad interval, a
  // librdkafka property refused), IoError (state dir cannot be opened, e.g. in use).
  static StatusOr<std::unique_ptr<Crawler>> Create(CrawlerOptions options);
  ~Crawler();
  Crawler(const Crawler&) = delete;
  Crawler& operator=(const Crawler&) = delete;

  // Crawls until `stop` becomes true (or, with once, after one pass). Returns OK when every feed
  // of the last pass was fetched (or not modified) and parsed and its documents delivered; else
  // an error whose message names each failed feed with its reason ("2 of 5 feeds failed: URL:
  // not well-formed XML: ...; URL: http 404"). Without once, per-feed failures are only logged
  // and counted, and Run returns OK at stop unless the state or producer failed.
  Status Run(const std::atomic<bool>& stop);

  CrawlStats stats() const;

 private:
  struct Impl;
  explicit Crawler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads a feeds file: one URL per line; blank lines and lines starting with '#' ignored; a bare
// path (no scheme) becomes a file:// URL made absolute against the file's directory.
// Errors: NotFound / IoError for the file, InvalidArgument when it lists no URL.
StatusOr<std::vector<std::string>> ReadFeedsFile(const std::string& path);

}  // namespace streamvec::crawler

#endif  // STREAMVEC_INGEST_CRAWLER_CRAWLER_H_

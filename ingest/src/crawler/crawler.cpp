// The crawl loop: schedule, politeness, robots.txt, retries, dedup, documents to Kafka.
#include "streamvec/ingest/crawler/crawler.h"

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "crawl_state.h"
#include "encoding.h"
#include "hash.h"
#include "streamvec/ingest/crawler/extract.h"
#include "streamvec/ingest/crawler/feed.h"
#include "streamvec/ingest/crawler/robots.h"
#include "streamvec/ingest/language.h"
#include "streamvec/kafka/rdkafka_conf.h"

namespace streamvec::crawler {
namespace {

using Clock = std::chrono::steady_clock;

std::string NowRfc3339() {
  const time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Lower-cased words joined by single spaces: the content a syndicated copy shares.
std::string NormalizeForHash(const std::string& text) {
  std::string out;
  bool space = false;
  for (unsigned char c : text) {
    if (std::isspace(c)) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(static_cast<char>(std::tolower(c)));
  }
  return out;
}

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

struct RobotsEntry {
  RobotsRules rules;
  Clock::time_point expires;
};

struct FeedSchedule {
  Clock::time_point next_due{};
  int failures = 0;
};

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* msg, void*) {
  auto* ok = static_cast<int*>(msg->_private);
  if (ok != nullptr) *ok = msg->err == RD_KAFKA_RESP_ERR_NO_ERROR ? 1 : -1;
}

}  // namespace

std::string FormatStats(const CrawlStats& s) {
  std::string out = "fetched " + std::to_string(s.feeds_fetched) + ", not modified " +
                    std::to_string(s.not_modified) + ", articles " +
                    std::to_string(s.articles_fetched) + ", items " +
                    std::to_string(s.items_seen) + ", emitted " + std::to_string(s.items_emitted) +
                    ", duplicates " + std::to_string(s.duplicates_skipped) + ", retries " +
                    std::to_string(s.retries) + ", robots denied " +
                    std::to_string(s.robots_denied) + ", errors {";
  bool first = true;
  for (const auto& [kind, n] : s.errors) {
    out += (first ? "" : ", ") + kind + ": " + std::to_string(n);
    first = false;
  }
  return out + "}";
}

StatusOr<std::vector<std::string>> ReadFeedsFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound("feeds file " + path + " does not exist");
  std::ifstream in(path);
  if (!in) return Status::IoError("cannot read feeds file " + path);
  const fs::path dir = fs::absolute(path, ec).parent_path();
  std::vector<std::string> urls;
  std::string line;
  while (std::getline(in, line)) {
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    const size_t e = line.find_last_not_of(" \t\r");
    std::string url = line.substr(b, e - b + 1);
    if (url.find("://") == std::string::npos) {
      url = "file://" + (dir / url).lexically_normal().string();
    }
    urls.push_back(url);
  }
  if (urls.empty()) return Status::InvalidArgument("feeds file " + path + " lists no URL");
  return urls;
}

struct Crawler::Impl {
  CrawlerOptions options;
  std::unique_ptr<Fetcher> fetcher;
  std::unique_ptr<internal::CrawlState> state;
  rd_kafka_t* producer = nullptr;
  std::string docs_topic;
  std::map<std::string, RobotsEntry> robots;
  std::map<std::string, Clock::time_point> host_next;  // origin -> earliest next request
  std::map<std::string, FeedSchedule> schedule;
  const std::atomic<bool>* stop = nullptr;
  // Set when a hop was refused because its robots.txt could not even be requested safely (a
  // blocked address or URL): the hop is then reported as that error, not as a robots denial.
  FetchResponse hop_block;

  mutable std::mutex mu;
  CrawlStats stats;  // GUARDED_BY(mu)

  ~Impl() {
    if (producer != nullptr) {
      rd_kafka_flush(producer, 2000);
      rd_kafka_destroy(producer);
    }
  }

  void Count(int64_t CrawlStats::*field, int64_t n = 1) {
    std::lock_guard<std::mutex> lock(mu);
    stats.*field += n;
  }
  void CountError(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu);
    ++stats.errors[kind];
  }

  // Sleeps until `until` or stop; false when stopped.
  bool SleepUntil(Clock::time_point until) {
    while (Clock::now() < until) {
      if (stop->load()) return false;
      std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(),
                                                            std::chrono::milliseconds(50)));
    }
    return !stop->load();
  }

  double HostDelay(const std::string& origin) {
    double delay = options.min_host_delay_seconds;
    auto it = robots.find(origin);
    if (it != robots.end()) {
      delay = std::max(delay, std::min(options.max_crawl_delay_seconds,
                                       it->second.rules.crawl_delay_seconds()));
    }
    return delay;
  }

  // Waits for the origin's politeness slot and takes it.
  bool WaitForHost(const std::string& origin) {
    auto it = host_next.find(origin);
    if (it != host_next.end() && !SleepUntil(it->second)) return false;
    host_next[origin] = Clock::now() + Seconds(HostDelay(origin));
    return true;
  }

  const RobotsRules& Robots(const std::string& origin) {
    auto it = robots.find(origin);
    if (it != robots.end() && it->second.expires > Clock::now()) return it->second.rules;
    RobotsEntry entry;
    double ttl = options.robots_ttl_seconds;
    FetchRequest req;
    req.url = origin + "/robots.txt";
    req.before_hop = [this](const std::string& url) { return WaitForHost(UrlOrigin(url)); };
    const FetchResponse r = fetcher->Fetch(req);
    if (r.ok() && r.status >= 200 && r.status < 300) {
      entry.rules = RobotsRules::Parse(r.body, kRobotsToken);
    } else if (r.error == FetchError::kHttpStatus && r.status >= 400 && r.status < 500) {
      entry.rules = RobotsRules();  // no robots.txt: everything allowed (RFC 9309 2.3.1.3)
    } else if (r.error == FetchError::kBlocked || r.error == FetchError::kBadUrl) {
      hop_block = r;  // the origin itself is off limits; no point caching
      static const RobotsRules kNone = RobotsRules::DisallowAll();
      return kNone;
    } else {
      entry.rules = RobotsRules::DisallowAll();  // unreachable: assume disallowed (2.3.1.4)
      ttl = std::min(ttl, 300.0);
      spdlog::warn("crawl: robots.txt of {} unavailable ({}); not crawling it for now", origin,
                   r.error_message.empty() ? "http " + std::to_string(r.status)
                                           : r.error_message);
    }
    entry.expires = Clock::now() + Seconds(ttl);
    return (robots[origin] = std::move(entry)).rules;
  }

  // before_hop: robots.txt, then the politeness delay.
  bool BeforeHop(const std::string& url) {
    const std::string origin = UrlOrigin(url);
    if (origin.empty()) return false;
    if (!Robots(origin).Allowed(UrlPathAndQuery(url))) {
      if (hop_block.error != FetchError::kNone) return false;
      Count(&CrawlStats::robots_denied);
      return false;
    }
    return WaitForHost(origin);
  }

  static bool Retryable(const FetchResponse& r) {
    return (r.error == FetchError::kHttpStatus && (r.status == 429 || r.status >= 500)) ||
           r.error == FetchError::kTimeout || r.error == FetchError::kConnect ||
           r.error == FetchError::kTruncated;
  }

  FetchResponse FetchWithRetry(FetchRequest req) {
    req.before_hop = [this](const std::string& url) { return BeforeHop(url); };
    FetchResponse r;
    for (int attempt = 0;; ++attempt) {
      hop_block = FetchResponse();
      r = fetcher->Fetch(req);
      if (r.error == FetchError::kRobots && hop_block.error != FetchError::kNone) {
        r.error = hop_block.error;
        r.error_message = hop_block.error_message;
      }
      if (!Retryable(r) || attempt + 1 >= options.max_attempts || stop->load()) return r;
      const double wait = std::max(r.retry_after_seconds,
                                   options.backoff_base_seconds * std::pow(2.0, attempt));
      if (wait > options.max_backoff_seconds) return r;
      spdlog::info("crawl: {}; retrying in {:.1f} s", r.error_message, wait);
      Count(&CrawlStats::retries);
      if (!SleepUntil(Clock::now() + Seconds(wait))) return r;
    }
  }

  static std::string ErrorKind(const FetchResponse& r) {
    if (r.error == FetchError::kHttpStatus) return r.status >= 500 ? "http_5xx" : "http_4xx";
    return FetchErrorName(r.error);
  }

  // Produces `docs`, waits for acknowledgements; returns how many were delivered (a prefix is
  // not guaranteed: `delivered[i]` says which).
  Status Emit(const std::string& feed_url, const std::vector<Document>& docs,
              std::vector<int>* delivered) {
    delivered->assign(docs.size(), 0);
    if (options.sink) {
      for (size_t i = 0; i < docs.size(); ++i) {
        options.sink(docs[i]);
        (*delivered)[i] = 1;
      }
      return Status::Ok();
    }
    for (size_t i = 0; i < docs.size(); ++i) {
      const std::string value = DocumentToJson(docs[i]);
      while (true) {
        const rd_kafka_resp_err_t err = rd_kafka_producev(
            producer, RD_KAFKA_V_TOPIC(docs_topic.c_str()),
            RD_KAFKA_V_KEY(feed_url.data(), feed_url.size()),
            RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&(*delivered)[i]),
            RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || stop->load()) {
          return Status::IoError(std::string("kafka produce: ") + rd_kafka_err2str(err));
        }
        rd_kafka_poll(producer, 100);
      }
      rd_kafka_poll(producer, 0);
    }
    const auto deadline = Clock::now() + Seconds(options.delivery_timeout_seconds);
    while (rd_kafka_outq_len(producer) > 0 && Clock::now() < deadline) {
      rd_kafka_poll(producer, 100);
      if (std::all_of(delivered->begin(), delivered->end(), [](int d) { return d != 0; })) break;
    }
    // Messages still in flight must not keep pointers into `delivered`: purge them.
    if (rd_kafka_outq_len(producer) > 0) {
      rd_kafka_purge(producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
      rd_kafka_flush(producer, 1000);
    }
    const int64_t failed =
        std::count_if(delivered->begin(), delivered->end(), [](int d) { return d != 1; });
    if (failed > 0) {
      return Status::IoError("kafka: " + std::to_string(failed) + " of " +
                             std::to_string(docs.size()) + " documents not acknowledged");
    }
    return Status::Ok();
  }

  // One feed: fetch, parse, dedup, emit. Returns the reason on failure.
  Status CrawlFeed(const std::string& url) {
    FetchRequest req;
    req.url = url;
    req.if_none_match = state->Get("etag\t" + url);
    req.if_modified_since = state->Get("lm\t" + url);
    const FetchResponse r = FetchWithRetry(req);
    if (r.error == FetchError::kRobots) {
      CountError("robots");
      return Status::FailedPrecondition("disallowed by robots.txt");
    }
    if (!r.ok()) {
      CountError(ErrorKind(r));
      return Status::IoError(r.error == FetchError::kHttpStatus
                                 ? "http " + std::to_string(r.status)
                                 : std::string(FetchErrorName(r.error)) + ": " + r.error_message);
    }
    if (r.status == 304) {
      Count(&CrawlStats::not_modified);
      return Status::Ok();
    }
    if (r.status < 200 || r.status >= 300) {
      CountError("http_status");
      return Status::IoError("unexpected http " + std::to_string(r.status));
    }
    Count(&CrawlStats::feeds_fetched);
    StatusOr<Feed> feed =
        ParseFeed(r.body, r.final_url, internal::CharsetFromContentType(r.content_type));
    if (!feed.ok()) {
      Count(&CrawlStats::parse_errors);
      CountError("parse");
      return feed.status();
    }
    Count(&CrawlStats::items_seen, static_cast<int64_t>(feed->items.size()));
    const std::string fetched_at = NowRfc3339();
    std::vector<Document> docs;
    std::vector<std::vector<std::string>> keys_per_doc;
    std::unordered_set<std::string> batch_keys;
    for (const FeedItem& item : feed->items) {
      if (stop->load()) break;
      const std::string id_key = "id\t" + url + "\t" + item.id;
      const std::string hash_key =
          "h\t" + internal::Sha256Hex(NormalizeForHash(item.title + "\n" + item.text));
      if (state->Contains(id_key) || state->Contains(hash_key) || batch_keys.count(id_key) ||
          batch_keys.count(hash_key)) {
        Count(&CrawlStats::duplicates_skipped);
        continue;
      }
      batch_keys.insert(id_key);
      batch_keys.insert(hash_key);
      Document doc;
      doc.id = item.id;
      doc.source = url;
      doc.url = item.link;
      doc.title = item.title;
      doc.published_at = item.published_at;
      doc.fetched_at = fetched_at;
      std::string body = item.text;
      if (options.fetch_articles && !item.link.empty()) {
        FetchRequest areq;
        areq.url = item.link;
        const FetchResponse page = FetchWithRetry(areq);
        if (page.ok() && page.status >= 200 && page.status < 300) {
          StatusOr<Article> article =
              ExtractArticle(page.body, internal::CharsetFromContentType(page.content_type));
          if (article.ok() && article->text.size() > body.size()) {
            body = article->text;
            doc.lang = article->lang;
          }
          Count(&CrawlStats::articles_fetched);
        } else {
          CountError("article_" + (page.ok() ? std::string("status") : ErrorKind(page)));
        }
      }
      doc.text = item.title.empty() ? body : body.empty() ? item.title : item.title + "\n" + body;
      if (doc.text.empty()) continue;
      if (doc.lang.empty()) doc.lang = DetectLanguage(doc.text);  // the page did not say it
      const std::vector<std::pair<size_t, size_t>> pieces = SplitText(doc.text);
      const std::string whole = doc.text;
      for (size_t p = 0; p < pieces.size(); ++p) {
        Document piece = doc;
        piece.text = whole.substr(pieces[p].first, pieces[p].second);
        if (p > 0) piece.id = doc.id + "#" + std::to_string(p + 1);
        docs.push_back(std::move(piece));
        keys_per_doc.push_back(p + 1 == pieces.size() ? std::vector<std::string>{id_key, hash_key}
                                                      : std::vector<std::string>{});
      }
    }
    std::vector<int> delivered;
    const Status emitted = Emit(url, docs, &delivered);
    // Record what the broker acknowledged (an item's keys ride on its last piece).
    std::vector<std::pair<std::string, std::string>> pairs;
    int64_t n = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
      if (delivered[i] != 1) continue;
      ++n;
      for (const std::string& k : keys_per_doc[i]) pairs.emplace_back(k, "");
    }
    Count(&CrawlStats::items_emitted, n);
    if (emitted.ok() && !stop->load()) {
      // Validators only once everything of this version was delivered.
      if (!r.etag.empty()) pairs.emplace_back("etag\t" + url, r.etag);
      if (!r.last_modified.empty()) pairs.emplace_back("lm\t" + url, r.last_modified);
    }
    SV_RETURN_IF_ERROR(state->Put(pairs));
    if (!emitted.ok()) CountError("kafka");
    return emitted;
  }

  // One pass over the due feeds. Fills `failures` with "URL: reason".
  void Pass(std::vector<std::string>* failures, bool all) {
    for (const std::string& url : options.feeds) {
      if (stop->load()) return;
      FeedSchedule& sched = schedule[url];
      if (!all && sched.next_due > Clock::now()) continue;
      const Status s = CrawlFeed(url);
      if (s.ok()) {
        sched.failures = 0;
        sched.next_due = Clock::now() + Seconds(options.interval_seconds);
      } else {
        ++sched.failures;
        const double backoff = std::min(options.max_backoff_seconds,
                                        options.backoff_base_seconds *
                                            std::pow(2.0, std::min(sched.failures, 20)));
        sched.next_due = Clock::now() + Seconds(options.interval_seconds + backoff);
        spdlog::warn("crawl: {}: {}", url, s.message());
        failures->push_back(url + ": " + s.message());
      }
    }
  }
};

Crawler::Crawler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Crawler::~Crawler() = default;

StatusOr<std::unique_ptr<Crawler>> Crawler::Create(CrawlerOptions options) {
  if (options.feeds.empty()) return Status::InvalidArgument("no feeds to crawl");
  if (!(options.interval_seconds > 0)) {
    return Status::InvalidArgument("interval must be positive seconds");
  }
  if (options.max_attempts < 1) return Status::InvalidArgument("max_attempts must be >= 1");
  for (const std::string& url : options.feeds) {
    const std::string scheme = UrlScheme(url);
    if (scheme != "http" && scheme != "https" && scheme != "file") {
      return Status::InvalidArgument("feed URL " + url + ": not http, https or file");
    }
    if (scheme == "file" && options.fetch.allow_file_dir.empty()) {
      return Status::InvalidArgument("feed URL " + url +
                                     ": file URLs need an allowed directory (--allow-file-dir)");
    }
  }
  auto impl = std::make_unique<Impl>();
  if (!options.sink) {
    std::vector<std::pair<std::string, std::string>> defaults = {
        {"enable.idempotence", "true"}, {"acks", "all"}, {"linger.ms", "20"}};
    for (auto& p : IdempotentProducerDefaults(options.kafka)) {
      defaults.push_back(std::move(p));
    }
    StatusOr<rd_kafka_conf_t*> conf = MakeRdKafkaConf(options.kafka, defaults);
    if (!conf.ok()) return conf.status();
    rd_kafka_conf_set_dr_msg_cb(*conf, &OnDelivery);
    char err[512];
    impl->producer = rd_kafka_new(RD_KAFKA_PRODUCER, *conf, err, sizeof(err));
    if (impl->producer == nullptr) {
      rd_kafka_conf_destroy(*conf);
      return Status::InvalidArgument(std::string("kafka producer: ") + err);
    }
    impl->docs_topic = DocsTopic(options.kafka.topic_prefix);
  }
  StatusOr<std::unique_ptr<internal::CrawlState>> state =
      internal::CrawlState::Open(options.state_dir);
  if (!state.ok()) return state.status();
  impl->state = std::move(state).value();
  impl->fetcher = std::make_unique<Fetcher>(options.fetch);
  impl->options = std::move(options);
  return std::unique_ptr<Crawler>(new Crawler(std::move(impl)));
}

Status Crawler::Run(const std::atomic<bool>& stop) {
  Impl& s = *impl_;
  s.stop = &stop;
  if (s.options.once) {
    std::vector<std::string> failures;
    s.Pass(&failures, /*all=*/true);
    if (stop.load() && failures.empty()) return Status::Ok();
    if (failures.empty()) return Status::Ok();
    std::string msg = std::to_string(failures.size()) + " of " +
                      std::to_string(s.options.feeds.size()) + " feeds failed: ";
    for (size_t i = 0; i < failures.size(); ++i) msg += (i ? "; " : "") + failures[i];
    return Status::IoError(msg);
  }
  while (!stop.load()) {
    std::vector<std::string> failures;
    s.Pass(&failures, /*all=*/false);
    Clock::time_point next = Clock::now() + Seconds(s.options.interval_seconds);
    for (const auto& [url, sched] : s.schedule) next = std::min(next, sched.next_due);
    spdlog::info("crawl: {}", FormatStats(stats()));
    if (!s.SleepUntil(next)) break;
  }
  return Status::Ok();
}

CrawlStats Crawler::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace streamvec::crawler

// streamvec crawl: feeds into <prefix>.docs (or JSON lines with --dry-run);
// streamvec extract: the main text of one HTML page (a file or a URL).
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "pipeline_metrics.h"
#include "stop_signal.h"
#include "streamvec/ingest/crawler/crawler.h"
#include "streamvec/ingest/crawler/extract.h"
#include "streamvec/ingest/crawler/fetcher.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/kafka/document.h"

namespace streamvec::app {
namespace {


struct CrawlFlags {
  std::string feeds_file;
  std::vector<std::string> feed_urls;
  bool once = false;
  bool dry_run = false;
  double interval = 900;
  bool fetch_articles = false;
  bool allow_private = false;
  std::string allow_file_dir;
  std::string brokers;
  std::string bootstrap_file;
  std::string prefix = "streamvec";
  std::string state;
  double host_delay = 1.0;
  double timeout = 30;
  int64_t max_body_bytes = int64_t{8} << 20;
  int max_redirects = 5;
  std::string metrics;  // --metrics HOST:PORT
  std::vector<std::string> kafka_config;
};

int RunCrawl(const CrawlFlags& flags) {
  crawler::CrawlerOptions options;
  if (!flags.feeds_file.empty()) {
    StatusOr<std::vector<std::string>> urls = crawler::ReadFeedsFile(flags.feeds_file);
    if (!urls.ok()) {
      std::fprintf(stderr, "streamvec crawl: --feeds: %s\n", urls.status().message().c_str());
      return 2;
    }
    options.feeds = *urls;
  }
  options.feeds.insert(options.feeds.end(), flags.feed_urls.begin(), flags.feed_urls.end());
  if (options.feeds.empty()) {
    std::fprintf(stderr, "streamvec crawl: give --feeds FILE or --feeds-url URL\n");
    return 2;
  }
  options.once = flags.once;
  options.interval_seconds = flags.interval;
  options.fetch_articles = flags.fetch_articles;
  options.state_dir = flags.state;
  options.min_host_delay_seconds = flags.host_delay;
  options.fetch.allow_private = flags.allow_private;
  options.fetch.allow_file_dir = flags.allow_file_dir;
  options.fetch.timeout_seconds = flags.timeout;
  options.fetch.max_body_bytes = flags.max_body_bytes;
  options.fetch.max_redirects = flags.max_redirects;
  options.kafka.topic_prefix = flags.prefix;
  if (flags.dry_run) {
    options.sink = [](const Document& doc) {
      const std::string line = DocumentToJson(doc) + "\n";
      std::fwrite(line.data(), 1, line.size(), stdout);
    };
  } else {
    if (!flags.brokers.empty() && !flags.bootstrap_file.empty()) {
      std::fprintf(stderr, "streamvec crawl: give --brokers or --bootstrap-file, not both\n");
      return 2;
    }
    options.kafka.brokers = flags.brokers;
    if (!flags.bootstrap_file.empty()) {
      StatusOr<std::string> bootstrap = ReadBootstrapFile(flags.bootstrap_file);
      if (!bootstrap.ok()) {
        std::fprintf(stderr, "streamvec crawl: --bootstrap-file: %s\n",
                     bootstrap.status().message().c_str());
        return 2;
      }
      options.kafka.brokers = *bootstrap;
    }
    if (options.kafka.brokers.empty()) {
      std::fprintf(stderr,
                   "streamvec crawl: --brokers or --bootstrap-file is required (or --dry-run)\n");
      return 2;
    }
    for (const std::string& text : flags.kafka_config) {
      StatusOr<std::pair<std::string, std::string>> p = ParseKafkaProperty(text);
      if (!p.ok()) {
        std::fprintf(stderr, "streamvec crawl: %s\n", p.status().message().c_str());
        return 2;
      }
      options.kafka.properties.push_back(*p);
    }
  }
  StatusOr<std::unique_ptr<crawler::Crawler>> c = crawler::Crawler::Create(std::move(options));
  if (!c.ok()) {
    std::fprintf(stderr, "streamvec crawl: %s\n", c.status().message().c_str());
    return c.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  crawler::Crawler* crawl = c->get();
  StatusOr<std::unique_ptr<api::MetricsEndpoint>> metrics = StartMetrics(flags.metrics, [crawl]() {
    std::string out;
    AppendCrawlMetrics(&out, crawl->stats());
    AppendProcessMetrics(&out);
    return out;
  });
  if (!metrics.ok()) {
    std::fprintf(stderr, "streamvec crawl: %s\n", metrics.status().message().c_str());
    return 2;
  }
  const Status s = (*c)->Run(StopOnSignals());
  std::fflush(stdout);
  std::fprintf(stderr, "crawl: %s\n", crawler::FormatStats((*c)->stats()).c_str());
  if (!s.ok()) {
    std::fprintf(stderr, "streamvec crawl: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}

struct ExtractFlags {
  std::string input;
  bool allow_private = false;
  bool show_title = false;
};

int RunExtract(const ExtractFlags& flags) {
  std::string body, charset;
  const std::string scheme = crawler::UrlScheme(flags.input);
  if (scheme == "http" || scheme == "https") {
    crawler::FetchOptions fo;
    fo.allow_private = flags.allow_private;
    crawler::Fetcher fetcher(fo);
    crawler::FetchRequest request;
    request.url = flags.input;
    crawler::FetchResponse r = fetcher.Fetch(request);
    if (!r.ok()) {
      std::fprintf(stderr, "streamvec extract: %s\n", r.error_message.c_str());
      return 1;
    }
    body = std::move(r.body);
    const size_t pos = r.content_type.find("charset=");
    if (pos != std::string::npos) charset = r.content_type.substr(pos + 8);
  } else {
    std::ifstream in(flags.input, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "streamvec extract: cannot read %s\n", flags.input.c_str());
      return 2;
    }
    std::ostringstream s;
    s << in.rdbuf();
    body = s.str();
  }
  StatusOr<crawler::Article> article = crawler::ExtractArticle(body, charset);
  if (!article.ok()) {
    std::fprintf(stderr, "streamvec extract: %s: %s\n", flags.input.c_str(),
                 article.status().message().c_str());
    return 1;
  }
  if (flags.show_title && !article->title.empty()) std::printf("%s\n\n", article->title.c_str());
  std::printf("%s\n", article->text.c_str());
  return 0;
}

}  // namespace

void RegisterCrawlCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<CrawlFlags>();
  CLI::App* cmd = root.add_subcommand(
      "crawl",
      "Crawl RSS/Atom feeds (politely: robots.txt, per-host delay, conditional GET) and send "
      "each new item to <prefix>.docs, keyed by feed URL.");
  cmd->add_option("--feeds", flags->feeds_file,
                  "file with one feed URL per line (http, https, file; # comments)");
  cmd->add_option("--feeds-url", flags->feed_urls, "a feed URL (repeatable)");
  cmd->add_flag("--once", flags->once, "crawl each feed once and exit (non-zero if any failed)");
  cmd->add_flag("--dry-run", flags->dry_run, "print documents as JSON lines instead of producing");
  cmd->add_option("--interval", flags->interval, "seconds between two crawls of a feed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--fetch-articles", flags->fetch_articles,
                "fetch each item's page and use its main text");
  cmd->add_flag("--allow-private", flags->allow_private,
                "allow loopback/private/link-local addresses (default: refused)");
  cmd->add_option("--allow-file-dir", flags->allow_file_dir,
                  "allow file:// feeds under this directory");
  cmd->add_option("--brokers", flags->brokers, "Kafka bootstrap servers HOST:PORT[,...]");
  cmd->add_option("--bootstrap-file", flags->bootstrap_file,
                  "read the bootstrap servers from this file (written by streamvec broker)");
  cmd->add_option("--prefix", flags->prefix, "topic prefix")->capture_default_str();
  cmd->add_option("--state", flags->state,
                  "directory of the crawler's RocksDB state (dedup, ETags); default: memory");
  cmd->add_option("--host-delay", flags->host_delay,
                  "minimum seconds between two requests to one host")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--timeout", flags->timeout, "seconds for one HTTP request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-body-bytes", flags->max_body_bytes, "largest response body accepted")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-redirects", flags->max_redirects, "redirects followed per request")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kafka-config", flags->kafka_config,
                  "extra librdkafka property name=value (repeatable)");
  cmd->add_option("--metrics", flags->metrics,
                  "serve Prometheus metrics at http://HOST:PORT/metrics (feeds fetched, items, "
                  "duplicates, errors by kind; port 0 picks one)");
  cmd->callback([flags, exit_code]() { *exit_code = RunCrawl(*flags); });
}

void RegisterExtractCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<ExtractFlags>();
  CLI::App* cmd = root.add_subcommand(
      "extract", "Print the main text of an HTML page (a file or an http/https URL).");
  cmd->add_option("input", flags->input, "FILE or URL")->required();
  cmd->add_flag("--allow-private", flags->allow_private,
                "allow loopback/private/link-local addresses for a URL");
  cmd->add_flag("--title", flags->show_title, "print the page title first");
  cmd->callback([flags, exit_code]() { *exit_code = RunExtract(*flags); });
}

}  // namespace streamvec::app

// streamvec ingest: files, a directory (optionally followed) or stdin into <prefix>.docs.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "pipeline_metrics.h"
#include "stop_signal.h"
#include "streamvec/base/heap.h"
#include "streamvec/ingest/ingestor.h"
#include "streamvec/kafka/client_config.h"

namespace streamvec::app {
namespace {


struct IngestFlags {
  std::string from;
  bool doc_per_file = false;
  bool no_detect_lang = false;
  bool follow = false;
  std::string offsets_file;
  std::string brokers;
  std::string bootstrap_file;
  std::string prefix = "streamvec";
  std::string group;
  int64_t max_lag_bytes = 0;
  int64_t max_partition_lag_bytes = 0;
  double max_lag_seconds = 10.0;
  std::string metrics;  // --metrics HOST:PORT
  std::vector<std::string> kafka_config;
};

int RunIngest(const IngestFlags& flags) {
  // Each document becomes a JSON message (up to 256 KiB) that librdkafka copies and frees once
  // delivered; with glibc's defaults those blocks go back to the kernel and are faulted in again
  // (7-8k page faults for 100 MB of text, 0.46-0.54 CPU-s; kept for reuse, 3.5-4.8k and
  // 0.39-0.43 CPU-s).
  KeepFreedMemoryForReuse(size_t{256} << 20);
  IngestOptions options;
  options.from = flags.from;
  options.doc_per_file = flags.doc_per_file;
  options.detect_language = !flags.no_detect_lang;
  options.follow = flags.follow;
  options.offsets_file = flags.offsets_file;
  options.group = flags.group;
  options.max_lag_bytes = flags.max_lag_bytes;
  options.max_partition_lag_bytes = flags.max_partition_lag_bytes;
  options.max_lag_seconds = flags.max_lag_seconds;
  options.kafka.topic_prefix = flags.prefix;
  if (!flags.brokers.empty() && !flags.bootstrap_file.empty()) {
    std::fprintf(stderr, "streamvec ingest: give --brokers or --bootstrap-file, not both\n");
    return 2;
  }
  if (!flags.bootstrap_file.empty()) {
    StatusOr<std::string> bootstrap = ReadBootstrapFile(flags.bootstrap_file);
    if (!bootstrap.ok()) {
      std::fprintf(stderr, "streamvec ingest: --bootstrap-file: %s\n",
                   bootstrap.status().message().c_str());
      return 2;
    }
    options.kafka.brokers = *bootstrap;
  } else {
    options.kafka.brokers = flags.brokers;
  }
  if (options.kafka.brokers.empty()) {
    std::fprintf(stderr, "streamvec ingest: --brokers or --bootstrap-file is required\n");
    return 2;
  }
  for (const std::string& text : flags.kafka_config) {
    StatusOr<std::pair<std::string, std::string>> p = ParseKafkaProperty(text);
    if (!p.ok()) {
      std::fprintf(stderr, "streamvec ingest: %s\n", p.status().message().c_str());
      return 2;
    }
    options.kafka.properties.push_back(*p);
  }
  StatusOr<std::unique_ptr<Ingestor>> ingestor = Ingestor::Create(options);
  if (!ingestor.ok()) {
    std::fprintf(stderr, "streamvec ingest: %s\n", ingestor.status().message().c_str());
    const StatusCode code = ingestor.status().code();
    return code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound ? 2 : 1;
  }
  Ingestor* ingest = ingestor->get();
  StatusOr<std::unique_ptr<api::MetricsEndpoint>> metrics = StartMetrics(flags.metrics, [ingest]() {
    std::string out;
    AppendIngestMetrics(&out, ingest->stats());
    AppendProcessMetrics(&out);
    return out;
  });
  if (!metrics.ok()) {
    std::fprintf(stderr, "streamvec ingest: %s\n", metrics.status().message().c_str());
    return 2;
  }
  const std::atomic<bool>& stop = StopOnSignals();
  const auto start = std::chrono::steady_clock::now();
  const Status s = (*ingestor)->Run(stop);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const IngestStats st = (*ingestor)->stats();
  std::printf(
      "ingest: %lld documents (%lld delivered), %lld rejected, %lld lines, %lld input bytes, "
      "%lld message bytes, %.2f s, %.1f MB/s, throttled %.2f s\n",
      static_cast<long long>(st.documents_produced),
      static_cast<long long>(st.documents_delivered), static_cast<long long>(st.rejected),
      static_cast<long long>(st.lines), static_cast<long long>(st.input_bytes),
      static_cast<long long>(st.message_bytes), seconds,
      seconds > 0 ? st.input_bytes / seconds / 1e6 : 0.0, st.throttled_seconds);
  if (!s.ok()) {
    std::fprintf(stderr, "streamvec ingest: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterIngestCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<IngestFlags>();
  CLI::App* cmd = root.add_subcommand(
      "ingest",
      "Send a file, a directory or stdin to <prefix>.docs, one document per line, waiting while "
      "the trainers' consumer group lags more than the budget.");
  cmd->add_option("--from", flags->from,
                  "a file, a directory or - for stdin; gzip, xz and zstd files (told by "
                  "content) are decoded")
      ->required();
  cmd->add_flag("--doc-per-file", flags->doc_per_file, "one document per file, not per line");
  cmd->add_flag("--no-detect-lang", flags->no_detect_lang,
                "do not detect each document's language (CLD2; the 'lang' field stays empty)");
  cmd->add_flag("--follow", flags->follow,
                "keep watching for new files and appended lines (like tail -F)");
  cmd->add_option("--offsets-file", flags->offsets_file,
                  "keep each source's delivered position in this JSON file and resume from it "
                  "after a restart (like Kafka Connect's offset.storage.file.filename)");
  cmd->add_option("--brokers", flags->brokers, "Kafka bootstrap servers HOST:PORT[,...]");
  cmd->add_option("--bootstrap-file", flags->bootstrap_file,
                  "read the bootstrap servers from this file (written by streamvec broker)");
  cmd->add_option("--prefix", flags->prefix, "topic prefix")->capture_default_str();
  cmd->add_option("--group", flags->group,
                  "consumer group whose lag is watched (default <prefix>.trainers)");
  cmd->add_option("--max-lag-bytes", flags->max_lag_bytes,
                  "flow-control budget over all partitions, bytes (0: 80% of partitions x 5 MiB)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-partition-lag-bytes", flags->max_partition_lag_bytes,
                  "flow-control budget for one partition, bytes (0: 80% of 5 MiB)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-lag-seconds", flags->max_lag_seconds,
                  "also keep the total lag under the group's measured consumption rate times "
                  "this many seconds (at least twice the partition budget; 0: bytes only)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--kafka-config", flags->kafka_config,
                  "extra librdkafka property name=value (repeatable)");
  cmd->add_option("--metrics", flags->metrics,
                  "serve Prometheus metrics at http://HOST:PORT/metrics (documents, bytes, "
                  "rejections, throttled seconds; port 0 picks one)");
  cmd->callback([flags, exit_code]() { *exit_code = RunIngest(*flags); });
}

}  // namespace streamvec::app

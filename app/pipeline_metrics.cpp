#include "pipeline_metrics.h"

#include <cstdio>
#include <utility>

#include "host_port.h"
#include "streamvec/api/prometheus.h"

namespace streamvec::app {
namespace {

// write_bytes of /proc/self/io (0 where it cannot be read).
uint64_t ProcessWriteBytes() {
  std::FILE* f = std::fopen("/proc/self/io", "r");
  if (f == nullptr) return 0;
  char line[128];
  unsigned long long bytes = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "write_bytes: %llu", &bytes) == 1) break;
  }
  std::fclose(f);
  return bytes;
}

}  // namespace

void AppendIngestMetrics(std::string* out, const IngestStats& is, int64_t trainer_rejected) {
  api::AppendMetric(out, "streamvec_ingest_documents_total", "counter",
                    "Documents the file connector produced and the broker acknowledged.",
                    static_cast<double>(is.documents_delivered));
  api::AppendMetric(out, "streamvec_ingest_bytes_total", "counter",
                    "Source bytes the file connector consumed.",
                    static_cast<double>(is.input_bytes));
  api::AppendMetric(out, "streamvec_ingest_rejected_total", "counter",
                    "Inputs sent to <prefix>.rejected (connector and trainer).",
                    static_cast<double>(is.rejected + trainer_rejected));
  api::AppendMetric(out, "streamvec_ingest_throttled_seconds_total", "counter",
                    "Seconds the connector waited for the trainers (flow control).",
                    is.throttled_seconds);
}

void AppendTrainerMetrics(std::string* out, const KafkaTrainerStats& ts, double words_per_second) {
  api::AppendMetric(out, "streamvec_train_documents_total", "counter",
                    "Documents trained by this process.", static_cast<double>(ts.documents));
  api::AppendMetric(out, "streamvec_train_documents_skipped_language_total", "counter",
                    "Documents skipped for a language outside --lang.",
                    static_cast<double>(ts.skipped_language));
  *out +=
      "# HELP streamvec_train_documents_by_language_total Documents trained by this process, "
      "by their language ('' when none was named or detected).\n"
      "# TYPE streamvec_train_documents_by_language_total counter\n";
  for (const auto& [lang, n] : ts.documents_by_language) {
    *out += "streamvec_train_documents_by_language_total{lang=\"" + api::EscapeLabel(lang) +
            "\"} " + std::to_string(n) + "\n";
  }
  api::AppendMetric(out, "streamvec_train_words_total", "counter",
                    "Words counted by the learner in this process.", static_cast<double>(ts.words));
  api::AppendMetric(
      out, "streamvec_train_words_per_second", "gauge",
      "Words trained per second over the last report interval (run) or since the previous "
      "scrape (train --metrics).",
      words_per_second);
  api::AppendMetric(out, "streamvec_train_loss", "gauge",
                    "Mean SGNS loss per positive pair of the last micro-batch, nats.", ts.loss);
  api::AppendMetric(out, "streamvec_consumer_lag_messages", "gauge",
                    "Messages of <prefix>.docs not yet consumed by the trainer (-1: unknown).",
                    static_cast<double>(ts.lag));
  api::AppendMetric(out, "streamvec_snapshot_bytes", "gauge",
                    "Entry bytes of the last trainer snapshot (publication or checkpoint).",
                    static_cast<double>(ts.snapshot_bytes));
  api::AppendMetric(out, "streamvec_snapshot_entry_bytes_total", "counter",
                    "Entry bytes of this process's trainer snapshots, changed or not.",
                    static_cast<double>(ts.snapshot_bytes_total));
  api::AppendMetric(
      out, "streamvec_snapshot_written_bytes_total", "counter",
      "Entry bytes this process's trainer snapshots wrote (entries whose bytes changed).",
      static_cast<double>(ts.snapshot_written_bytes_total));
  api::AppendMetric(out, "streamvec_snapshots_total", "counter",
                    "Trainer snapshots written by this process (publications and checkpoints).",
                    static_cast<double>(ts.snapshots));
  api::AppendMetric(out, "streamvec_checkpoints_total", "counter",
                    "Recovery checkpoints written by this process.",
                    static_cast<double>(ts.checkpoints));
  api::AppendMetric(
      out, "streamvec_state_disk_bytes", "gauge",
      "Bytes of the state directory after the last snapshot (checkpoints' shared files once).",
      static_cast<double>(ts.state_disk_bytes));
  api::AppendMetric(out, "streamvec_vocab_words", "gauge", "Words held by the learner.",
                    static_cast<double>(ts.vocab_size));
  api::AppendMetric(out, "streamvec_vocab_evictions_total", "counter",
                    "Words that lost their vocabulary slot (space-saving).",
                    static_cast<double>(ts.evictions));
}

void AppendParamMetrics(std::string* out, const ParamClientStats& ps) {
  api::AppendMetric(out, "streamvec_train_param_pushes_total", "counter",
                    "Push rounds to the parameter node (<prefix>.updates).",
                    static_cast<double>(ps.pushes));
  api::AppendMetric(out, "streamvec_train_param_push_bytes_total", "counter",
                    "Bytes of the pushed messages.", static_cast<double>(ps.push_bytes));
  api::AppendMetric(out, "streamvec_train_param_rows_pushed_total", "counter",
                    "Word records pushed (row deltas and counts).",
                    static_cast<double>(ps.rows_pushed));
  api::AppendMetric(out, "streamvec_train_param_rows_deferred_total", "counter",
                    "Moved rows a push round left for a later one (the push schedule).",
                    static_cast<double>(ps.rows_deferred));
  api::AppendMetric(out, "streamvec_train_param_group_counts", "gauge",
                    "1 while words are admitted and drawn as negatives by the group's counts "
                    "(--group-counts), else 0.",
                    static_cast<double>(ps.group_counts));
  api::AppendMetric(out, "streamvec_train_param_group_counts_raised_total", "counter",
                    "Held words whose group count a shard's published count raised "
                    "(--group-counts).",
                    static_cast<double>(ps.group_counts_raised));
  api::AppendMetric(out, "streamvec_train_param_pull_bytes_total", "counter",
                    "Bytes of the node's publications consumed (<prefix>.params).",
                    static_cast<double>(ps.pull_bytes));
  api::AppendMetric(out, "streamvec_train_param_pulls_lost_total", "counter",
                    "Publications the broker dropped before this trainer read them.",
                    static_cast<double>(ps.pulls_lost));
  api::AppendMetric(out, "streamvec_train_param_rows_applied_total", "counter",
                    "Published rows applied to words this trainer holds.",
                    static_cast<double>(ps.rows_applied));
  api::AppendMetric(out, "streamvec_train_param_rows_corrected_total", "counter",
                    "Published rows applied with this trainer's deltas the shard had not merged "
                    "yet added back.",
                    static_cast<double>(ps.rows_corrected));
  api::AppendMetric(out, "streamvec_train_param_rows_from_node_total", "counter",
                    "Words admitted with the shards' newest published row.",
                    static_cast<double>(ps.rows_from_node));
  api::AppendMetric(out, "streamvec_train_param_rows_stale_total", "counter",
                    "Published rows skipped because the shard had not merged this trainer's "
                    "last push of them yet.",
                    static_cast<double>(ps.rows_stale));
  api::AppendMetric(out, "streamvec_train_param_rejected_total", "counter",
                    "Publications that did not decode (skipped).",
                    static_cast<double>(ps.rejected));
  api::AppendMetric(out, "streamvec_train_param_repushed_messages_total", "counter",
                    "Push messages sent again because a shard reported them dropped by the "
                    "broker before it read them.",
                    static_cast<double>(ps.repushed_messages));
  api::AppendMetric(out, "streamvec_train_param_node_clock", "gauge",
                    "Newest node clock applied (push messages the node had merged).",
                    static_cast<double>(ps.node_clock));
  api::AppendMetric(out, "streamvec_train_param_staleness_wait_seconds_total", "counter",
                    "Seconds spent waiting for the shards to merge earlier pushes "
                    "(--max-staleness).",
                    ps.staleness_wait_seconds);
  api::AppendMetric(out, "streamvec_train_param_unacked_rounds", "gauge",
                    "Push rounds from the oldest a shard has not merged to the newest (0: all "
                    "merged).",
                    static_cast<double>(ps.unacked_rounds));
  api::AppendMetric(out, "streamvec_train_param_rows_pending", "gauge",
                    "Published rows read and waiting to be applied (--pull-every).",
                    static_cast<double>(ps.rows_pending));
  api::AppendMetric(out, "streamvec_train_param_push_interval_words", "gauge",
                    "Trained words between two pushes now (--push-every, or by the trainers "
                    "sharing the partitions).",
                    static_cast<double>(ps.push_every_words));
  api::AppendMetric(out, "streamvec_train_param_push_hot_rows", "gauge",
                    "Rows of the most frequent words that go out every push now "
                    "(--push-hot-rows; 0: every moved row every push).",
                    static_cast<double>(ps.push_hot_rows));
}

namespace {

// One family with one sample per item, labelled `label`="<first + index>".
template <typename T, typename F>
void AppendLabelledFamily(std::string* out, const char* name, const char* type, const char* help,
                          const char* label, const std::vector<T>& items, uint32_t first, F value) {
  api::AppendMetricHeader(out, name, type, help);
  for (size_t k = 0; k < items.size(); ++k) {
    *out += std::string(name) + "{" + label + "=\"" + std::to_string(first + k) + "\"} " +
            api::PromNumber(static_cast<double>(value(items[k]))) + "\n";
  }
}

}  // namespace

void AppendParamNodeMetrics(std::string* out, const std::vector<ParamNodeStats>& shards,
                            uint32_t first_shard) {
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    AppendLabelledFamily(out, name, type, help, "shard", shards, first_shard, value);
  };
  using S = ParamNodeStats;
  family("streamvec_param_node_messages_total", "counter",
         "Messages consumed from <prefix>.updates.", [](const S& s) { return s.messages; });
  family("streamvec_param_node_received_bytes_total", "counter",
         "Bytes consumed from <prefix>.updates.", [](const S& s) { return s.bytes_in; });
  family("streamvec_param_node_merges_total", "counter", "Push messages merged.",
         [](const S& s) { return s.merges; });
  family("streamvec_param_node_merge_rounds_total", "counter",
         "Row rounds applied (one per row and consumed batch).",
         [](const S& s) { return s.rounds; });
  family("streamvec_param_node_rows_dropped_total", "counter",
         "Pushed rows of words the shard does not hold.",
         [](const S& s) { return s.rows_dropped; });
  family("streamvec_param_node_rejected_total", "counter", "Messages sent to <prefix>.rejected.",
         [](const S& s) { return s.rejected; });
  family("streamvec_param_node_lost_messages_total", "counter",
         "<prefix>.updates messages the broker dropped before the shard read them (announced "
         "as gaps: their senders push them again).",
         [](const S& s) { return s.lost_messages; });
  family("streamvec_param_node_published_messages_total", "counter",
         "Messages produced to <prefix>.params.", [](const S& s) { return s.published_messages; });
  family("streamvec_param_node_published_bytes_total", "counter",
         "Bytes produced to <prefix>.params.", [](const S& s) { return s.bytes_out; });
  family("streamvec_param_node_published_rows_total", "counter", "Row records published.",
         [](const S& s) { return s.published_rows; });
  family("streamvec_param_node_republished_rows_total", "counter",
         "Row records published again, unchanged, by a republication sweep.",
         [](const S& s) { return s.republished_rows; });
  family("streamvec_param_node_evictions_total", "counter",
         "Words that left the shard's vocabulary.", [](const S& s) { return s.evictions; });
  family("streamvec_param_node_snapshots_total", "counter", "Snapshots written.",
         [](const S& s) { return s.snapshots; });
  family("streamvec_param_node_merge_seconds_total", "counter",
         "Seconds spent decoding and merging.", [](const S& s) { return s.merge_seconds; });
  family("streamvec_param_node_clock", "gauge",
         "Node clock: push messages merged over the state's life.",
         [](const S& s) { return s.clock; });
  family("streamvec_param_node_rows", "gauge", "Words held, each with an input and an output row.",
         [](const S& s) { return s.rows; });
  family("streamvec_param_node_updates_lag_messages", "gauge",
         "Messages of the shard's <prefix>.updates partition not merged yet (-1: unknown).",
         [](const S& s) { return s.lag; });
  family("streamvec_param_node_snapshot_version", "gauge", "Version of the last snapshot.",
         [](const S& s) { return s.snapshot_version; });
  family("streamvec_param_node_active_trainers", "gauge",
         "Trainers that pushed to the shard in the last 30 s.",
         [](const S& s) { return s.active_trainers; });
  family("streamvec_param_node_merge_scale", "gauge",
         "Factor of the scaled merge's sum at its last merge (--merge-scale; 0 before the first "
         "or under another rule).",
         [](const S& s) { return s.merge_scale; });
}

void AppendLabelledTrainerMetrics(std::string* out,
                                  const std::vector<KafkaTrainerStats>& trainers) {
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    AppendLabelledFamily(out, name, type, help, "trainer", trainers, 0, value);
  };
  using T = KafkaTrainerStats;
  family("streamvec_run_trainer_documents_total", "counter", "Documents trained by the trainer.",
         [](const T& t) { return t.documents; });
  family("streamvec_run_trainer_words_total", "counter", "Words counted by the trainer's learner.",
         [](const T& t) { return t.words; });
  family("streamvec_run_trainer_lag_messages", "gauge",
         "Messages behind the high watermarks of the trainer's partitions (-1: unknown).",
         [](const T& t) { return t.lag; });
  family("streamvec_train_param_pushes_total", "counter",
         "Push rounds to the parameter node (<prefix>.updates).",
         [](const T& t) { return t.param.pushes; });
  family("streamvec_train_param_push_bytes_total", "counter", "Bytes of the pushed messages.",
         [](const T& t) { return t.param.push_bytes; });
  family("streamvec_train_param_rows_pushed_total", "counter",
         "Word records pushed (row deltas and counts).",
         [](const T& t) { return t.param.rows_pushed; });
  family("streamvec_train_param_pull_bytes_total", "counter",
         "Bytes of the node's publications consumed (<prefix>.params).",
         [](const T& t) { return t.param.pull_bytes; });
  family("streamvec_train_param_pulls_lost_total", "counter",
         "Publications the broker dropped before this trainer read them.",
         [](const T& t) { return t.param.pulls_lost; });
  family("streamvec_train_param_rows_applied_total", "counter",
         "Published rows applied to words this trainer holds.",
         [](const T& t) { return t.param.rows_applied; });
  family("streamvec_train_param_node_clock", "gauge",
         "Newest node clock applied (push messages the node had merged).",
         [](const T& t) { return t.param.node_clock; });
  family("streamvec_train_param_staleness_wait_seconds_total", "counter",
         "Seconds spent waiting for the shards to merge earlier pushes (--max-staleness).",
         [](const T& t) { return t.param.staleness_wait_seconds; });
  family("streamvec_train_param_unacked_rounds", "gauge",
         "Push rounds from the oldest a shard has not merged to the newest (0: all merged).",
         [](const T& t) { return t.param.unacked_rounds; });
  family("streamvec_train_param_rows_pending", "gauge",
         "Published rows read and waiting to be applied (--pull-every).",
         [](const T& t) { return t.param.rows_pending; });
  family("streamvec_train_param_push_interval_words", "gauge",
         "Trained words between two pushes now (--push-every, or by the trainers sharing the "
         "partitions).",
         [](const T& t) { return t.param.push_every_words; });
  family("streamvec_train_param_push_hot_rows", "gauge",
         "Rows of the most frequent words that go out every push now (--push-hot-rows; 0: every "
         "moved row every push).",
         [](const T& t) { return t.param.push_hot_rows; });
  family("streamvec_train_param_group_counts", "gauge",
         "1 while words are admitted and drawn as negatives by the group's counts "
         "(--group-counts), else 0.",
         [](const T& t) { return t.param.group_counts; });
}

void AppendCrawlMetrics(std::string* out, const crawler::CrawlStats& cs) {
  api::AppendMetric(out, "streamvec_crawl_feeds_fetched_total", "counter",
                    "Feed responses with a body.", static_cast<double>(cs.feeds_fetched));
  api::AppendMetric(out, "streamvec_crawl_not_modified_total", "counter",
                    "304 answers to conditional GETs.", static_cast<double>(cs.not_modified));
  api::AppendMetric(out, "streamvec_crawl_items_emitted_total", "counter",
                    "Feed items produced as documents.", static_cast<double>(cs.items_emitted));
  api::AppendMetric(out, "streamvec_crawl_duplicates_skipped_total", "counter",
                    "Feed items skipped as already emitted.",
                    static_cast<double>(cs.duplicates_skipped));
  api::AppendMetricHeader(out, "streamvec_crawl_errors_total", "counter",
                          "Crawl failures by kind.");
  for (const auto& [kind, n] : cs.errors) {
    *out += "streamvec_crawl_errors_total{kind=\"" + api::EscapeLabel(kind) + "\"} " +
            std::to_string(n) + "\n";
  }
}

void AppendProcessMetrics(std::string* out) {
  api::AppendMetric(
      out, "streamvec_process_write_bytes_total", "counter",
      "Bytes this process caused to be written to storage (/proc/self/io write_bytes).",
      static_cast<double>(ProcessWriteBytes()));
}

std::string PipelineMetrics(const IngestStats& is, const KafkaTrainerStats& ts,
                            const crawler::CrawlStats* cs, double words_per_second) {
  std::string out;
  AppendIngestMetrics(&out, is, static_cast<int64_t>(ts.rejected));
  AppendTrainerMetrics(&out, ts, words_per_second);
  AppendProcessMetrics(&out);
  if (cs != nullptr) AppendCrawlMetrics(&out, *cs);
  return out;
}

StatusOr<std::unique_ptr<api::MetricsEndpoint>> StartMetrics(const std::string& flag,
                                                             std::function<std::string()> text) {
  if (flag.empty()) return std::unique_ptr<api::MetricsEndpoint>();
  std::string host;
  int port = 0;
  if (!ParseHostPort(flag, &host, &port)) {
    return Status::InvalidArgument("--metrics must be HOST:PORT (127.0.0.1:9100), not '" + flag +
                                   "'");
  }
  StatusOr<std::unique_ptr<api::MetricsEndpoint>> endpoint =
      api::MetricsEndpoint::Start(host, port, std::move(text));
  if (endpoint.ok()) {
    const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    std::printf("metrics http://%s:%d/metrics\n", shown.c_str(), (*endpoint)->port());
    std::fflush(stdout);
  }
  return endpoint;
}

}  // namespace streamvec::app

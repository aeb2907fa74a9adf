// `streamvec param-node --shard I --shards N --state DIR (--brokers B | --bootstrap-file F) ...`:
// one parameter-node shard (node/param_node.h, docs/distributed.md) until SIGINT or SIGTERM.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "commands.h"
#include "host_port.h"
#include "pipeline_metrics.h"
#include "stop_signal.h"
#include "streamvec/api/metrics_endpoint.h"
#include "streamvec/base/heap.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/node/param_node.h"

namespace streamvec::app {
namespace {

struct ParamNodeFlags {
  int64_t shard = -1;
  int64_t shards = -1;
  std::string state;
  std::string brokers;
  std::string bootstrap_file;
  std::string prefix = "streamvec";
  std::string merge = std::string(MergeRuleName(MergeOptions{}.rule));
  int64_t vocab_capacity = 100000;
  int64_t dim = 0;
  float eta = MergeOptions{}.eta;
  std::string merge_scale = "auto";
  std::string snapshot_every = "5s";
  double publish_every = ParamNodeOptions{}.publish_every_s;
  int64_t publish_max_bytes = static_cast<int64_t>(ParamNodeOptions{}.publish_max_bytes);
  double republish_every = ParamNodeOptions{}.republish_every_s;
  std::string publish_precision = "fp16";
  double max_idle = 0;
  std::string metrics;
  std::vector<std::string> kafka_config;
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "streamvec param-node: %s\n", message.c_str());
  return 2;
}

// "5s" or "5": seconds, > 0.
bool ParseSeconds(std::string text, double* seconds) {
  if (!text.empty() && text.back() == 's') text.pop_back();
  if (text.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !(v > 0) || v > 1e9) return false;
  *seconds = v;
  return true;
}

int RunParamNode(const ParamNodeFlags& f) {
  ParamNodeOptions o;
  if (f.shards < 1 || f.shards > 4096) return Usage("--shards must be in [1, 4096]");
  if (f.shard < 0 || f.shard >= f.shards) {
    return Usage("--shard must be in [0, --shards - 1], not " + std::to_string(f.shard));
  }
  o.shard = static_cast<uint32_t>(f.shard);
  o.shards = static_cast<uint32_t>(f.shards);
  o.state_dir = f.state;
  // Each merged batch's decoded pushes and each snapshot's copy of the rows are freed at a high
  // rate; kept for reuse instead of faulted in again (base/heap.h).
  KeepFreedMemoryForReuse(size_t{256} << 20);
  if (!f.brokers.empty() && !f.bootstrap_file.empty()) {
    return Usage("give --brokers or --bootstrap-file, not both");
  }
  if (f.brokers.empty() && f.bootstrap_file.empty()) {
    return Usage("--brokers or --bootstrap-file is required");
  }
  o.kafka.brokers = f.brokers;
  if (!f.bootstrap_file.empty()) {
    StatusOr<std::string> b = ReadBootstrapFile(f.bootstrap_file);
    if (!b.ok()) return Usage("--bootstrap-file: " + b.status().message());
    o.kafka.brokers = *b;
  }
  if (f.prefix.empty()) return Usage("--prefix must not be empty");
  o.kafka.topic_prefix = f.prefix;
  for (const std::string& text : f.kafka_config) {
    StatusOr<std::pair<std::string, std::string>> p = ParseKafkaProperty(text);
    if (!p.ok()) return Usage("--kafka-config: " + p.status().message());
    o.kafka.properties.push_back(*p);
  }
  StatusOr<MergeRule> rule = ParseMergeRule(f.merge);
  if (!rule.ok()) return Usage(rule.status().message());
  o.merge.rule = *rule;
  if (!(f.eta > 0)) return Usage("--eta must be positive");
  o.merge.eta = f.eta;
  StatusOr<double> scale = ParseMergeScale(f.merge_scale);
  if (!scale.ok()) return Usage(scale.status().message());
  o.merge_scale = *scale;
  if (f.vocab_capacity < 2) return Usage("--vocab-capacity must be at least 2");
  o.vocab_capacity = static_cast<size_t>(f.vocab_capacity);
  if (f.dim < 0 || f.dim > kMaxParamDim) {
    return Usage("--dim must be in [0, " + std::to_string(kMaxParamDim) + "] (0: the pushes')");
  }
  o.dim = static_cast<uint32_t>(f.dim);
  if (!ParseSeconds(f.snapshot_every, &o.snapshot_every_s)) {
    return Usage("--snapshot-every: expected seconds (e.g. 5s), got '" + f.snapshot_every + "'");
  }
  if (!(f.publish_every >= 0)) return Usage("--publish-every must not be negative");
  o.publish_every_s = f.publish_every;
  if (f.publish_max_bytes < 1024) return Usage("--publish-max-bytes must be at least 1024");
  o.publish_max_bytes = static_cast<size_t>(f.publish_max_bytes);
  if (!(f.republish_every >= 0)) return Usage("--republish-every must not be negative");
  o.republish_every_s = f.republish_every;
  if (StatusOr<ParamPrecision> p = ParseParamPrecision(f.publish_precision); p.ok()) {
    o.publish_precision = *p;
  } else {
    return Usage("--publish-precision: " + p.status().message());
  }
  if (!(f.max_idle >= 0)) return Usage("--max-idle must not be negative");
  o.max_idle_s = f.max_idle;
  std::string metrics_host;
  int metrics_port = 0;
  if (!f.metrics.empty() && !ParseHostPort(f.metrics, &metrics_host, &metrics_port)) {
    return Usage("--metrics: expected HOST:PORT (e.g. 127.0.0.1:9400), got '" + f.metrics + "'");
  }

  StatusOr<std::unique_ptr<ParamNode>> node = ParamNode::Create(o);
  if (!node.ok()) {
    const Status& s = node.status();
    std::fprintf(stderr, "streamvec param-node: %s\n", s.message().c_str());
    const bool usage =
        s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kFailedPrecondition;
    return usage ? 2 : 1;
  }
  ParamNode* raw = node->get();
  std::unique_ptr<api::MetricsEndpoint> metrics;
  if (!f.metrics.empty()) {
    const uint32_t shard = o.shard;
    StatusOr<std::unique_ptr<api::MetricsEndpoint>> m =
        api::MetricsEndpoint::Start(metrics_host, metrics_port, [raw, shard] {
          std::string out;
          AppendParamNodeMetrics(&out, {raw->stats()}, shard);
          return out;
        });
    if (!m.ok()) {
      std::fprintf(stderr, "streamvec param-node: --metrics: %s\n", m.status().message().c_str());
      return m.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    metrics = std::move(m).value();
    const std::string host =
        metrics_host.find(':') != std::string::npos ? "[" + metrics_host + "]" : metrics_host;
    std::printf("metrics http://%s:%d/metrics\n", host.c_str(), metrics->port());
    std::fflush(stdout);
  }
  const Status run = raw->Run(StopOnSignals());
  metrics.reset();
  const ParamNodeStats s = raw->stats();
  std::printf(
      "param-node shard %u of %u: %llu messages (%llu rejected), %llu merged, %llu lost to gaps, "
      "%llu rounds, %llu pushed rows dropped (words the shard's counts do not hold), "
      "%llu rows held (dim %u), %llu rows published (%llu of them by a republication sweep) in "
      "%llu messages (%.1f MB), clock %llu, "
      "offset %lld, snapshot %llu, %.1f s\n",
      o.shard, o.shards, static_cast<unsigned long long>(s.messages),
      static_cast<unsigned long long>(s.rejected), static_cast<unsigned long long>(s.merges),
      static_cast<unsigned long long>(s.lost_messages), static_cast<unsigned long long>(s.rounds),
      static_cast<unsigned long long>(s.rows_dropped), static_cast<unsigned long long>(s.rows),
      s.dim, static_cast<unsigned long long>(s.published_rows),
      static_cast<unsigned long long>(s.republished_rows),
      static_cast<unsigned long long>(s.published_messages), s.bytes_out / 1e6,
      static_cast<unsigned long long>(s.clock), static_cast<long long>(s.next_offset),
      static_cast<unsigned long long>(s.snapshot_version), s.seconds);
  std::fflush(stdout);
  if (!run.ok()) {
    std::fprintf(stderr, "streamvec param-node: %s\n", run.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterParamNodeCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<ParamNodeFlags>();
  CLI::App* cmd = root.add_subcommand(
      "param-node",
      "Run one parameter-node shard: merge the trainers' pushes from <prefix>.updates, publish "
      "rows on <prefix>.params, snapshot for `streamvec serve` (docs/distributed.md)");
  cmd->add_option("--shard", flags->shard, "This node's shard, 0..N-1 (its .updates partition)")
      ->required();
  cmd->add_option("--shards", flags->shards, "Shards in all (the trainers' --param-shards)")
      ->required();
  cmd->add_option("--state", flags->state, "State directory (RocksDB); an existing one is resumed")
      ->required();
  cmd->add_option("--brokers", flags->brokers, "Kafka bootstrap servers HOST:PORT[,...]");
  cmd->add_option("--bootstrap-file", flags->bootstrap_file,
                  "File whose first line is the bootstrap string (streamvec broker writes it)");
  cmd->add_option("--prefix", flags->prefix, "Topic prefix: <prefix>.updates, .params, .rejected")
      ->capture_default_str();
  cmd->add_option("--merge", flags->merge,
                  "Merge rule: downpour, average, sum, adasum or scaled (docs/distributed.md)")
      ->capture_default_str();
  cmd->add_option("--merge-scale", flags->merge_scale,
                  "Scaled: the factor of the sum, in (0, 1]; auto: 1/sqrt(T), T the trainers "
                  "that pushed to the shard in the last 30 s")
      ->capture_default_str();
  cmd->add_option("--eta", flags->eta, "Downpour: node-side Adagrad base rate")
      ->capture_default_str();
  cmd->add_option("--vocab-capacity", flags->vocab_capacity, "Words this shard holds at most")
      ->capture_default_str();
  cmd->add_option("--dim", flags->dim,
                  "Expected dim of the pushes (0: the state's or the first "
                  "valid push's)")
      ->capture_default_str();
  cmd->add_option("--snapshot-every", flags->snapshot_every,
                  "Seconds between snapshots while something changed (e.g. 5s)")
      ->capture_default_str();
  cmd->add_option("--publish-every", flags->publish_every,
                  "Seconds between publications on <prefix>.params (coalescing)")
      ->capture_default_str();
  cmd->add_option("--publish-max-bytes", flags->publish_max_bytes,
                  "Row bytes published per turn at most (the rest waits for the next turn)")
      ->capture_default_str();
  cmd->add_option("--republish-every", flags->republish_every,
                  "Seconds between sweeps that publish every held row again, so a trainer that "
                  "joins late or fell behind <prefix>.params gets rows that no longer change "
                  "(0: never)")
      ->capture_default_str();
  cmd->add_option("--publish-precision", flags->publish_precision,
                  "fp16 or fp32: the published rows' precision (fp16: half the bytes every "
                  "trainer reads; the node keeps fp32)")
      ->capture_default_str();
  cmd->add_option("--max-idle", flags->max_idle,
                  "Stop (after the final snapshot) once the partition was read to its end and "
                  "idle this many seconds (0: run until SIGINT/SIGTERM)")
      ->capture_default_str();
  cmd->add_option("--metrics", flags->metrics,
                  "Serve Prometheus metrics at http://HOST:PORT/metrics (port 0: a free one)");
  cmd->add_option("--kafka-config", flags->kafka_config,
                  "Extra librdkafka property name=value (repeatable)");
  cmd->callback([flags, exit_code] { *exit_code = RunParamNode(*flags); });
}

}  // namespace streamvec::app

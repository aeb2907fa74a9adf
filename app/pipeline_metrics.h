// Prometheus text of the pipeline's processes: what `run`'s /metrics appends and what the
// `--metrics HOST:PORT` endpoints of `train --brokers`, `ingest` and `crawl` serve.
#ifndef STREAMVEC_APP_PIPELINE_METRICS_H_
#define STREAMVEC_APP_PIPELINE_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "streamvec/api/metrics_endpoint.h"
#include "streamvec/ingest/crawler/crawler.h"
#include "streamvec/ingest/ingestor.h"
#include "streamvec/node/param_node.h"
#include "streamvec/trainer/kafka_trainer.h"

namespace streamvec::app {

// The file connector's counters (streamvec_ingest_*); `trainer_rejected` is added to the
// rejections (run counts the trainer's with the connector's).
void AppendIngestMetrics(std::string* out, const IngestStats& is, int64_t trainer_rejected = 0);
// The Kafka trainer's counters and gauges (streamvec_train_*, streamvec_snapshot_*,
// streamvec_vocab_*, streamvec_consumer_lag_messages); words_per_second over the caller's
// interval.
void AppendTrainerMetrics(std::string* out, const KafkaTrainerStats& ts, double words_per_second);
// A trainer's pushes to and pulls from the parameter node (streamvec_train_param_*).
void AppendParamMetrics(std::string* out, const ParamClientStats& ps);
// Parameter-node shards' counters and gauges (streamvec_param_node_*), one sample per shard
// labelled shard="I": shards[k] is shard first_shard + k (`param-node` serves its own shard,
// `run --param-shards S` all of them).
void AppendParamNodeMetrics(std::string* out, const std::vector<ParamNodeStats>& shards,
                            uint32_t first_shard = 0);
// Per trainer of `run --trainers N --param-shards S`, labelled trainer="J" (J from 0): documents
// and words trained (streamvec_run_trainer_*) and the pushes and pulls
// (streamvec_train_param_*), one family header each.
void AppendLabelledTrainerMetrics(std::string* out, const std::vector<KafkaTrainerStats>& trainers);
// The feed crawler's counters (streamvec_crawl_*).
void AppendCrawlMetrics(std::string* out, const crawler::CrawlStats& cs);
// streamvec_process_write_bytes_total (/proc/self/io).
void AppendProcessMetrics(std::string* out);

// All of them, as `run` serves them (crawl only when cs is not null).
std::string PipelineMetrics(const IngestStats& is, const KafkaTrainerStats& ts,
                            const crawler::CrawlStats* cs, double words_per_second);

// Starts a command's `--metrics HOST:PORT` endpoint serving `text()`: nullptr for an empty flag,
// else the endpoint, or InvalidArgument (not HOST:PORT) / IoError (cannot bind), naming
// --metrics. A started endpoint prints `metrics http://HOST:PORT/metrics` on stdout (the port
// bound: PORT 0 picks one).
StatusOr<std::unique_ptr<api::MetricsEndpoint>> StartMetrics(const std::string& flag,
                                                             std::function<std::string()> text);

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_PIPELINE_METRICS_H_

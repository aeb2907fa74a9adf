#include "streamvec/kafka/consumer_lag.h"

#include <algorithm>
#include <string>
#include <vector>

#include "streamvec/kafka/rdkafka_conf.h"

namespace streamvec {

struct ConsumerGroupLagProbe::Impl {
  rd_kafka_t* rk = nullptr;
  ~Impl() {
    if (rk != nullptr) rd_kafka_destroy(rk);
  }
};

ConsumerGroupLagProbe::ConsumerGroupLagProbe(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConsumerGroupLagProbe::~ConsumerGroupLagProbe() = default;

StatusOr<std::unique_ptr<ConsumerGroupLagProbe>> ConsumerGroupLagProbe::Create(
    const KafkaOptions& options, const std::string& group) {
  if (group.empty()) return Status::InvalidArgument("consumer group name is empty");
  StatusOr<rd_kafka_conf_t*> conf = MakeRdKafkaConf(
      options, {{"group.id", group}, {"enable.auto.commit", "false"}, {"log_level", "3"}});
  if (!conf.ok()) return conf.status();
  char err[512];
  auto impl = std::make_unique<Impl>();
  impl->rk = rd_kafka_new(RD_KAFKA_CONSUMER, *conf, err, sizeof err);
  if (impl->rk == nullptr) {
    rd_kafka_conf_destroy(*conf);
    return Status::InvalidArgument(std::string("cannot create a Kafka consumer handle: ") + err);
  }
  return std::unique_ptr<ConsumerGroupLagProbe>(new ConsumerGroupLagProbe(std::move(impl)));
}

namespace {

// Offsets of every partition of `topic` at a ListOffsets "timestamp": RD_KAFKA_OFFSET_BEGINNING
// (-2: the low watermarks) or RD_KAFKA_OFFSET_END (-1: the high watermarks), in one request per
// partition leader (librdkafka's offsets_for_times; query_watermark_offsets costs two requests
// per partition, and ingest asks every 20 ms while it is throttled).
Status ListOffsets(rd_kafka_t* rk, const std::string& topic, int partitions, int64_t at,
                   std::vector<int64_t>* out, int timeout_ms) {
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) {
    rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = at;
  }
  const rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(rk, list, timeout_ms);
  Status status;
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    status = Status::IoError("Kafka list-offsets request for " + topic + " failed: " +
                             rd_kafka_err2str(e));
  } else {
    out->assign(partitions, -1);
    for (int i = 0; i < list->cnt; ++i) {
      const rd_kafka_topic_partition_t& tp = list->elems[i];
      if (tp.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        status = Status::IoError("Kafka list-offsets for " + topic + "/" +
                                 std::to_string(tp.partition) + " failed: " +
                                 rd_kafka_err2str(tp.err));
        break;
      }
      if (tp.partition >= 0 && tp.partition < partitions) (*out)[tp.partition] = tp.offset;
    }
  }
  rd_kafka_topic_partition_list_destroy(list);
  return status;
}

}  // namespace

StatusOr<GroupLag> ConsumerGroupLagProbe::Query(const std::string& topic, int timeout_ms) {
  rd_kafka_t* rk = impl_->rk;
  // All topics, so that asking never auto-creates `topic` on brokers that allow it.
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, nullptr, &md, timeout_ms);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::IoError("Kafka metadata request failed: " + std::string(rd_kafka_err2str(e)));
  }
  int partitions = -1;
  for (int i = 0; i < md->topic_cnt; ++i) {
    if (topic == md->topics[i].topic && md->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      partitions = md->topics[i].partition_cnt;
    }
  }
  rd_kafka_metadata_destroy(md);
  if (partitions < 0) return Status::NotFound("Kafka topic " + topic + " does not exist");

  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
  e = rd_kafka_committed(rk, list, timeout_ms);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_topic_partition_list_destroy(list);
    return Status::IoError("Kafka committed-offsets request failed: " +
                           std::string(rd_kafka_err2str(e)));
  }
  GroupLag lag;
  lag.partitions.resize(partitions);
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = list->elems[i];
    if (tp.partition < 0 || tp.partition >= partitions) continue;
    lag.partitions[tp.partition].committed =
        (tp.err == RD_KAFKA_RESP_ERR_NO_ERROR && tp.offset >= 0) ? tp.offset : -1;
  }
  rd_kafka_topic_partition_list_destroy(list);

  std::vector<int64_t> low, high;
  SV_RETURN_IF_ERROR(ListOffsets(rk, topic, partitions, RD_KAFKA_OFFSET_BEGINNING, &low,
                                 timeout_ms));
  SV_RETURN_IF_ERROR(ListOffsets(rk, topic, partitions, RD_KAFKA_OFFSET_END, &high, timeout_ms));
  for (int p = 0; p < partitions; ++p) {
    PartitionLag& pl = lag.partitions[p];
    pl.partition = p;
    pl.low = low[p];
    pl.high = high[p];
    const int64_t from = pl.committed >= pl.low ? pl.committed : pl.low;
    pl.lag = std::max<int64_t>(0, pl.high - from);
    lag.total += pl.lag;
    lag.max_partition = std::max(lag.max_partition, pl.lag);
  }
  return lag;
}

StatusOr<GroupLag> ConsumerGroupLag(const KafkaOptions& options, const std::string& group,
                                    const std::string& topic, int timeout_ms) {
  StatusOr<std::unique_ptr<ConsumerGroupLagProbe>> probe =
      ConsumerGroupLagProbe::Create(options, group);
  if (!probe.ok()) return probe.status();
  return (*probe)->Query(topic, timeout_ms);
}

}  // namespace streamvec

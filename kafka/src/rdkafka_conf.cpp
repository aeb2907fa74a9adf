#include "streamvec/kafka/rdkafka_conf.h"

#include <string>

namespace streamvec {

StatusOr<rd_kafka_conf_t*> MakeRdKafkaConf(
    const KafkaOptions& options, const std::vector<std::pair<std::string, std::string>>& defaults) {
  if (options.brokers.empty()) {
    return Status::InvalidArgument("no Kafka brokers given (--brokers or --bootstrap-file)");
  }
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  auto set = [&](const std::string& name, const std::string& value) -> Status {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) !=
        RD_KAFKA_CONF_OK) {
      return Status::InvalidArgument("Kafka property " + name + "=" + value + ": " + err);
    }
    return Status::Ok();
  };
  Status s = set("bootstrap.servers", options.brokers);
  for (const auto& [name, value] : defaults) {
    if (s.ok()) s = set(name, value);
  }
  for (const auto& [name, value] : options.properties) {
    if (s.ok()) s = set(name, value);
  }
  if (!s.ok()) {
    rd_kafka_conf_destroy(conf);
    return s;
  }
  return conf;
}

std::string KafkaClusterId(const KafkaOptions& options, int timeout_ms) {
  StatusOr<rd_kafka_conf_t*> conf = MakeRdKafkaConf(options, {{"client.id", "streamvec-probe"}});
  if (!conf.ok()) return "";
  // Quiet: an unreachable broker is an answer here ("" below), not something to log.
  rd_kafka_conf_set_log_cb(*conf, [](const rd_kafka_t*, int, const char*, const char*) {});
  rd_kafka_conf_set_error_cb(*conf, [](rd_kafka_t*, int, const char*, void*) {});
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, *conf, err, sizeof err);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(*conf);
    return "";
  }
  char* id = rd_kafka_clusterid(rk, timeout_ms);
  std::string out = id != nullptr ? id : "";
  if (id != nullptr) rd_kafka_mem_free(rk, id);
  rd_kafka_destroy(rk);
  return out;
}

bool IsEmbeddedBrokerClusterId(const std::string& cluster_id) {
  return cluster_id.rfind("mockCluster", 0) == 0;
}

std::vector<std::pair<std::string, std::string>> IdempotentProducerDefaults(
    const std::string& cluster_id) {
  if (!cluster_id.empty() && !IsEmbeddedBrokerClusterId(cluster_id)) return {};
  return {{"max.in.flight.requests.per.connection", "1"}};
}

std::vector<std::pair<std::string, std::string>> IdempotentProducerDefaults(
    const KafkaOptions& options) {
  constexpr int kClusterIdTimeoutMs = 2000;
  return IdempotentProducerDefaults(KafkaClusterId(options, kClusterIdTimeoutMs));
}

}  // namespace streamvec

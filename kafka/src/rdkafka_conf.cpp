#include "streamvec/kafka/rdkafka_conf.h"

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

}  // namespace streamvec

// Settings shared by every streamvec Kafka client (producer, consumer, admin queries).
#ifndef STREAMVEC_KAFKA_CLIENT_CONFIG_H_
#define STREAMVEC_KAFKA_CLIENT_CONFIG_H_

#include <string>
#include <utility>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec {

struct KafkaOptions {
  std::string brokers;                  // bootstrap.servers: "host:port[,host:port...]"
  std::string topic_prefix = "streamvec";  // topics are <prefix>.docs, <prefix>.rejected, ...
  // Extra librdkafka properties (name, value), applied last: "--kafka-config name=value".
  std::vector<std::pair<std::string, std::string>> properties;
};

// Parses "name=value" (the --kafka-config flag). InvalidArgument without '=' or with an empty name.
StatusOr<std::pair<std::string, std::string>> ParseKafkaProperty(const std::string& text);

// Reads a bootstrap file written by `streamvec broker --bootstrap-file` (first line, trimmed).
StatusOr<std::string> ReadBootstrapFile(const std::string& path);

}  // namespace streamvec

#endif  // STREAMVEC_KAFKA_CLIENT_CONFIG_H_

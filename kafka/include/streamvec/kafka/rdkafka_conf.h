// Building librdkafka configurations from KafkaOptions, the one place where streamvec's client
// defaults meet the user's --kafka-config overrides.
//
// kafka/ is the librdkafka wrapper of the project, so this header names librdkafka's C types on
// purpose; other folders reach Kafka through kafka/ and librdkafka only.
#ifndef STREAMVEC_KAFKA_RDKAFKA_CONF_H_
#define STREAMVEC_KAFKA_RDKAFKA_CONF_H_

#include <librdkafka/rdkafka.h>

#include <string>
#include <utility>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/kafka/client_config.h"

namespace streamvec {

// Returns a new rd_kafka_conf_t (owned by the caller: pass it to rd_kafka_new, or free it with
// rd_kafka_conf_destroy) with, in this order: bootstrap.servers = options.brokers, `defaults`,
// then options.properties (so the user's overrides win). Errors: InvalidArgument naming the
// property librdkafka refused (unknown name or bad value), or an empty options.brokers.
StatusOr<rd_kafka_conf_t*> MakeRdKafkaConf(
    const KafkaOptions& options,
    const std::vector<std::pair<std::string, std::string>>& defaults = {});

}  // namespace streamvec

#endif  // STREAMVEC_KAFKA_RDKAFKA_CONF_H_

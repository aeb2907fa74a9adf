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

// The cluster id of `options.brokers` (librdkafka's rd_kafka_clusterid), asked through a
// short-lived client; blocks up to timeout_ms. "" when no broker answered in time (or the options
// are refused by librdkafka: MakeRdKafkaConf reports that to the caller's own client).
std::string KafkaClusterId(const KafkaOptions& options, int timeout_ms);

// True for the id of streamvec's embedded broker (librdkafka's mock cluster: "mockCluster...").
bool IsEmbeddedBrokerClusterId(const std::string& cluster_id);

// Defaults for an idempotent producer (enable.idempotence=true) on the cluster whose id is
// `cluster_id`. The embedded broker does not check an idempotent producer's sequence numbers,
// and librdkafka takes a later request's success as acknowledging the messages before it (a
// Kafka broker would have refused that request as out of order); so with several requests in
// flight, one refused with a retriable error is reported delivered and never written. On the
// embedded broker, and when the cluster is unknown (""), one request in flight at a time keeps
// that from happening: {max.in.flight.requests.per.connection=1}. A Kafka cluster: none (its
// broker enforces the order; librdkafka's 5 in flight stay). The user's --kafka-config wins.
std::vector<std::pair<std::string, std::string>> IdempotentProducerDefaults(
    const std::string& cluster_id);

// IdempotentProducerDefaults for the cluster at `options.brokers`, its id asked with
// KafkaClusterId (at most 2 s; unreachable counts as unknown). For a producer's Create.
std::vector<std::pair<std::string, std::string>> IdempotentProducerDefaults(
    const KafkaOptions& options);

}  // namespace streamvec

#endif  // STREAMVEC_KAFKA_RDKAFKA_CONF_H_

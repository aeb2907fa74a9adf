// The embedded Kafka broker: librdkafka's mock cluster (rdkafka_mock.h) on 127.0.0.1.
//
// It speaks the Kafka protocol on loopback, so any librdkafka client or `kcat` in this or another
// process can use it through bootstrap(). It is what `streamvec run` and the tests use; production
// points the clients at a real cluster instead.
//
// Limits of the mock (see docs/pipeline.md): each partition keeps a ring of about 5 MiB (or 100k
// message sets) and drops older data silently; nothing is persisted; no compaction. Producers must
// apply flow control (ingest/ waits while the trainers' consumer group lags more than a budget).
//
// Thread safety: the broker runs on librdkafka's own threads; the methods are safe to call from
// any thread. Destroying the broker closes its listeners (clients then see it as down).
#ifndef STREAMVEC_KAFKA_BROKER_H_
#define STREAMVEC_KAFKA_BROKER_H_

#include <memory>
#include <string>

#include "streamvec/base/status.h"

namespace streamvec {

struct EmbeddedBrokerOptions {
  int brokers = 1;      // mock brokers, each on its own 127.0.0.1 port (1..16)
  int partitions = 16;  // partitions of topics created by CreateTopic without a count
};

class EmbeddedBroker {
 public:
  // Starts the brokers. Errors: InvalidArgument for counts out of range, Internal if librdkafka
  // cannot start the mock cluster.
  static StatusOr<std::unique_ptr<EmbeddedBroker>> Start(const EmbeddedBrokerOptions& options);
  ~EmbeddedBroker();
  EmbeddedBroker(const EmbeddedBroker&) = delete;
  EmbeddedBroker& operator=(const EmbeddedBroker&) = delete;

  // The bootstrap string "127.0.0.1:PORT[,127.0.0.1:PORT...]" for bootstrap.servers.
  const std::string& bootstrap() const;

  // Creates `name` with `partitions` partitions (0: the options' default), replication 1.
  // Creating an existing topic is not an error. Errors: InvalidArgument (empty name, bad count).
  Status CreateTopic(const std::string& name, int partitions = 0);

  // For fault-injection tests: takes broker `id` (1-based) down or back up.
  Status SetBrokerUp(int id, bool up);

 private:
  struct Impl;
  explicit EmbeddedBroker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_KAFKA_BROKER_H_

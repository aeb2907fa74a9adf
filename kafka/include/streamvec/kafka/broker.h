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

// The topic a group's keeper subscribes to (EmbeddedBroker::HoldGroup): "<group>.keeper".
std::string GroupKeeperTopic(const std::string& group);
// The session timeout of a held group's keeper, in ms, and the one its members must join with;
// a join then waits 60 ms on the mock (EmbeddedBroker::HoldGroup).
inline constexpr int kHeldGroupSessionMs = 1060;
// The heartbeat interval members of a held group use, in ms (about four per session).
inline constexpr int kHeldGroupHeartbeatMs = 300;

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

  // Keeps consumer group `group` from ever being empty, so that a trainer joining it starts
  // consuming about 0.1 s after it asks instead of 3 s. The mock, like a real broker with its
  // group.initial.rebalance.delay.ms (3 s by default; a real cluster sets it per broker), holds
  // the first join of an empty group for 3 s waiting for more members, and librdkafka 2.0's mock
  // has no setting for it. A consumer of the broker's own (the group's keeper) joins `group`,
  // subscribed only to topic `<group>.keeper` (1 partition, created here, never written), so it
  // takes no partition of any other topic. It is the group's first member, hence its leader, and
  // runs the assignor (librdkafka's default, range: members must keep the default
  // partition.assignment.strategy, or the mock aborts). A trainer joining then waits for the
  // rebalance of a non-empty group: the group's session timeout (on the mock, the last
  // joiner's for the whole group) less 1 s; the keeper syncs 40 ms after the others (the mock
  // refuses a SyncGroup that comes after the leader's, broker.cpp says more). Members must
  // therefore join with the keeper's session, kHeldGroupSessionMs, and heartbeat every
  // kHeldGroupHeartbeatMs (a trainer that finds the keeper's topic on the mock sets both itself); a
  // killed member leaves the group after 1.06 s. Returns once the keeper holds its partition: about
  // 7 s (a ladder of keepers with shorter and shorter sessions, broker.cpp says why). Idempotent
  // per group. Errors: InvalidArgument (empty group), Internal (librdkafka refused the consumer),
  // IoError (no assignment within timeout_ms). Under heavy load a member that misses the short
  // session and rejoins has made librdkafka 2.0's mock abort (an assertion in its group code), so
  // `streamvec broker` holds a group only when asked (--hold-trainers, --hold-group).
  Status HoldGroup(const std::string& group, int timeout_ms = 15000);

  // For fault-injection tests: takes broker `id` (1-based) down or back up.
  Status SetBrokerUp(int id, bool up);
  // For fault-injection tests: the next `count` requests of Kafka API `api_key` (0 Produce,
  // 1 Fetch, 8 OffsetCommit, ...) to any broker are answered with `error`, an rd_kafka_resp_err_t
  // value such as RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT (rd_kafka_mock_push_request_errors).
  // Errors: InvalidArgument for a count < 1.
  Status PushRequestErrors(int api_key, int count, int error);
  // For fault-injection tests: broker `id` answers `rtt_ms` later than it would (0: no delay).
  // Errors: InvalidArgument for an unknown broker or a negative delay.
  Status SetRoundTripTime(int id, int rtt_ms);

 private:
  struct Impl;
  explicit EmbeddedBroker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_KAFKA_BROKER_H_

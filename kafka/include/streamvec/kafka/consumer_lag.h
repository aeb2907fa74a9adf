// How far a consumer group is behind a topic: the measurement behind ingest/'s flow control.
//
// The embedded broker keeps only about 5 MiB per partition and drops older data silently, and the
// trainers commit offsets only after a durable snapshot. A producer that keeps each partition's
// committed lag under budget therefore never loses data that was not yet snapshotted.
#ifndef STREAMVEC_KAFKA_CONSUMER_LAG_H_
#define STREAMVEC_KAFKA_CONSUMER_LAG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/kafka/client_config.h"

namespace streamvec {

struct PartitionLag {
  int32_t partition = 0;
  int64_t low = 0;         // low watermark: oldest offset the broker still holds
  int64_t high = 0;        // high watermark: offset of the next message to be written
  int64_t committed = -1;  // the group's committed offset, -1 when it has none
  // Messages not yet committed: high - committed, or high - low when nothing is committed (or
  // the committed offset fell below the low watermark). Never negative.
  int64_t lag = 0;
};

struct GroupLag {
  int64_t total = 0;          // sum of the partitions' lag, in messages
  int64_t max_partition = 0;  // the largest single partition lag, in messages
  std::vector<PartitionLag> partitions;  // one per partition of the topic, by partition id
};

// Queries one group's lag on one topic, repeatedly, over one librdkafka handle (a consumer that
// never subscribes, so it never joins or disturbs the group). Thread safety: Query may be called
// from one thread at a time.
class ConsumerGroupLagProbe {
 public:
  // Errors: InvalidArgument for an empty group or a property librdkafka refuses. Does not contact
  // the broker (an unreachable broker shows up in Query).
  static StatusOr<std::unique_ptr<ConsumerGroupLagProbe>> Create(const KafkaOptions& options,
                                                                 const std::string& group);
  ~ConsumerGroupLagProbe();
  ConsumerGroupLagProbe(const ConsumerGroupLagProbe&) = delete;
  ConsumerGroupLagProbe& operator=(const ConsumerGroupLagProbe&) = delete;

  // Lag of the group on `topic`: a metadata request, one committed-offsets request and two
  // list-offsets requests (low and high watermarks of all partitions), each bounded by
  // timeout_ms. Errors: NotFound when the topic
  // does not exist, IoError when the broker does not answer in time (retry later).
  StatusOr<GroupLag> Query(const std::string& topic, int timeout_ms = 5000);

 private:
  struct Impl;
  explicit ConsumerGroupLagProbe(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One-shot form of ConsumerGroupLagProbe::Query (creates and destroys a handle: about a
// millisecond of setup on loopback; keep a probe for repeated queries).
StatusOr<GroupLag> ConsumerGroupLag(const KafkaOptions& options, const std::string& group,
                                    const std::string& topic, int timeout_ms = 5000);

}  // namespace streamvec

#endif  // STREAMVEC_KAFKA_CONSUMER_LAG_H_

#include "streamvec/kafka/broker.h"

// rdkafka.h must come before rdkafka_mock.h.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <atomic>
#include <chrono>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace streamvec {

namespace {

// How long a keeper holds back after each JoinGroup response before it goes on to sync.
// The keeper is the group's first member, hence the leader of every rebalance, and its
// SyncGroup carries every member's assignment. librdkafka 2.0's mock completes the sync as soon
// as the leader's SyncGroup arrives, and answers a member whose own SyncGroup comes after that
// with INVALID_REQUEST; that member rejoins at librdkafka's next join interval, 1-2 s later.
// On 2 busy cores (a trainer starting beside `ingest`) a trainer lost that race in about one
// join in five and took 2.25 s instead of 0.25 s to its first message. Holding the keeper back
// lets every other member's SyncGroup arrive first; a join takes this much longer.
constexpr int kKeeperYieldMs = 40;

// The JoinGroup response a keeper last yielded after, by its round-trip time: librdkafka 2.0.2
// calls an on_response_received interceptor twice for one response (with the same arguments,
// not always on the same thread), and the second call is skipped.
struct KeeperYieldState {
  std::atomic<int64_t> last_join_rtt{-1};
};

// on_response_received interceptor of a keeper: sleeps kKeeperYieldMs after a JoinGroup
// response, on the keeper's own broker thread (nothing else of the keeper's client waits on it
// but its heartbeats, which its session allows for).
rd_kafka_resp_err_t KeeperYield(rd_kafka_t*, int, const char*, int32_t, int16_t api_key, int16_t,
                                int32_t, size_t, int64_t rtt, rd_kafka_resp_err_t err,
                                void* opaque) {
  constexpr int16_t kJoinGroup = 11;
  if (api_key != kJoinGroup || err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  }
  if (static_cast<KeeperYieldState*>(opaque)->last_join_rtt.exchange(rtt) != rtt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kKeeperYieldMs));
  }
  return RD_KAFKA_RESP_ERR_NO_ERROR;
}

rd_kafka_resp_err_t AddKeeperYield(rd_kafka_t* rk, const rd_kafka_conf_t*, void* state, char*,
                                   size_t) {
  return rd_kafka_interceptor_add_on_response_received(rk, "streamvec-keeper-yield", KeeperYield,
                                                       state);
}

// A consumer that keeps one group non-empty (EmbeddedBroker::HoldGroup): it polls on a thread
// of its own so that it heartbeats and takes part in every rebalance.
class GroupKeeper {
 public:
  struct Config {
    std::string bootstrap;
    std::string group;
    std::string topic;  // the keeper's own topic (GroupKeeperTopic)
    int session_ms = 0;
    int heartbeat_ms = 0;
  };

  static StatusOr<std::unique_ptr<GroupKeeper>> Start(const Config& config) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    for (const auto& [name, value] : std::initializer_list<std::pair<const char*, std::string>>{
             {"bootstrap.servers", config.bootstrap},
             {"group.id", config.group},
             {"client.id", "streamvec-group-keeper"},
             {"enable.auto.commit", "false"},
             {"session.timeout.ms", std::to_string(config.session_ms)},
             {"heartbeat.interval.ms", std::to_string(config.heartbeat_ms)},
             {"log_level", "3"}}) {
      if (rd_kafka_conf_set(conf, name, value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return Status::Internal(std::string("group keeper: ") + err);
      }
    }
    auto yield = std::make_unique<KeeperYieldState>();
    if (rd_kafka_conf_interceptor_add_on_new(conf, "streamvec-keeper-yield", AddKeeperYield,
                                             yield.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_conf_destroy(conf);
      return Status::Internal("group keeper: cannot add its interceptor");
    }
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk == nullptr) {
      rd_kafka_conf_destroy(conf);
      return Status::Internal(std::string("group keeper: cannot create a consumer: ") + err);
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, config.topic.c_str(), RD_KAFKA_PARTITION_UA);
    const rd_kafka_resp_err_t se = rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (se != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_destroy(rk);
      return Status::Internal("group keeper: cannot subscribe to " + config.topic + ": " +
                              rd_kafka_err2str(se));
    }
    return std::unique_ptr<GroupKeeper>(new GroupKeeper(rk, std::move(yield)));
  }
  ~GroupKeeper() {
    stop_.store(true);
    thread_.join();
    rd_kafka_consumer_close(rk_);  // leaves the group (LeaveGroup)
    rd_kafka_destroy(rk_);
  }
  GroupKeeper(const GroupKeeper&) = delete;
  GroupKeeper& operator=(const GroupKeeper&) = delete;

  // Whether the keeper holds its partition (the group has completed a join with it).
  bool Assigned() const { return assigned_.load(); }

 private:
  GroupKeeper(rd_kafka_t* rk, std::unique_ptr<KeeperYieldState> yield)
      : yield_(std::move(yield)), rk_(rk), thread_([this] { Loop(); }) {}

  void Loop() {
    while (!stop_.load()) {
      // Nothing is ever written to the keeper's topic; polling serves heartbeats and rebalances.
      if (rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 20)) rd_kafka_message_destroy(m);
      rd_kafka_topic_partition_list_t* parts = nullptr;
      if (rd_kafka_assignment(rk_, &parts) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        assigned_.store(parts->cnt > 0);
        rd_kafka_topic_partition_list_destroy(parts);
      }
    }
  }

  std::unique_ptr<KeeperYieldState> yield_;  // outlives rk_, destroyed in ~GroupKeeper()
  rd_kafka_t* rk_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> assigned_{false};
  std::thread thread_;
};

}  // namespace

struct EmbeddedBroker::Impl {
  rd_kafka_t* rk = nullptr;  // the handle that owns the mock cluster
  rd_kafka_mock_cluster_t* cluster = nullptr;
  std::string bootstrap;
  int default_partitions = 16;
  std::mutex mu;  // serialises topic creation and fault injection
  std::mutex keepers_mu;  // serialises HoldGroup
  std::map<std::string, std::unique_ptr<GroupKeeper>> keepers;  // by group

  ~Impl() {
    keepers.clear();  // before the cluster: they leave their groups
    if (cluster != nullptr) rd_kafka_mock_cluster_destroy(cluster);
    if (rk != nullptr) rd_kafka_destroy(rk);
  }
};

std::string GroupKeeperTopic(const std::string& group) { return group + ".keeper"; }

EmbeddedBroker::EmbeddedBroker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EmbeddedBroker::~EmbeddedBroker() = default;

StatusOr<std::unique_ptr<EmbeddedBroker>> EmbeddedBroker::Start(
    const EmbeddedBrokerOptions& options) {
  if (options.brokers < 1 || options.brokers > 16) {
    return Status::InvalidArgument("--brokers must be in [1, 16] for the embedded broker, not " +
                                   std::to_string(options.brokers));
  }
  if (options.partitions < 1 || options.partitions > 1024) {
    return Status::InvalidArgument("--partitions must be in [1, 1024], not " +
                                   std::to_string(options.partitions));
  }
  auto impl = std::make_unique<Impl>();
  impl->default_partitions = options.partitions;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  // The owning handle never connects anywhere: it only hosts the mock cluster's thread.
  rd_kafka_conf_set(conf, "bootstrap.servers", "", err, sizeof err);
  rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);
  impl->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (impl->rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return Status::Internal(std::string("embedded broker: cannot create a librdkafka handle: ") +
                            err);
  }
  impl->cluster = rd_kafka_mock_cluster_new(impl->rk, options.brokers);
  if (impl->cluster == nullptr) {
    return Status::Internal("embedded broker: librdkafka could not start the mock cluster");
  }
  impl->bootstrap = rd_kafka_mock_cluster_bootstraps(impl->cluster);
  return std::unique_ptr<EmbeddedBroker>(new EmbeddedBroker(std::move(impl)));
}

const std::string& EmbeddedBroker::bootstrap() const { return impl_->bootstrap; }

Status EmbeddedBroker::CreateTopic(const std::string& name, int partitions) {
  if (name.empty()) return Status::InvalidArgument("topic name is empty");
  if (partitions == 0) partitions = impl_->default_partitions;
  if (partitions < 1 || partitions > 1024) {
    return Status::InvalidArgument("partitions must be in [1, 1024], not " +
                                   std::to_string(partitions));
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  const rd_kafka_resp_err_t e =
      rd_kafka_mock_topic_create(impl_->cluster, name.c_str(), partitions, 1);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
    return Status::Internal("embedded broker: cannot create topic " + name + ": " +
                            rd_kafka_err2str(e));
  }
  return Status::Ok();
}

namespace {

// The keepers' session timeouts, in ms, one keeper after the other. On librdkafka 2.0's mock a
// join waits 3 s when the group is empty, else the group's session timeout less 1 s, and the
// mock expires a member still waiting after the group's session timeout, which is the last
// joiner's. So the first keeper needs a session over 3 s, and each next keeper, joining as the
// previous one leaves, a session over the previous one's less 1 s (its own wait). The last one
// leaves a group whose joins wait 0.06 s. A ladder of four takes about 7 s.
constexpr int kKeeperSessionsMs[] = {3300, 2500, 1700, kHeldGroupSessionMs};
// The last keeper heartbeats every 15 ms, so that it learns of a rebalance and rejoins well
// within a trainer's 0.06 s join wait (a keeper that rejoins after the wait makes the mock start
// the rebalance over); the others every quarter of their session.
constexpr int kLastKeeperHeartbeatMs = 15;

}  // namespace

Status EmbeddedBroker::HoldGroup(const std::string& group, int timeout_ms) {
  if (group.empty()) return Status::InvalidArgument("HoldGroup: the group name is empty");
  std::lock_guard<std::mutex> hold(impl_->keepers_mu);
  if (impl_->keepers.count(group) != 0) return Status::Ok();
  const std::string topic = GroupKeeperTopic(group);
  if (Status s = CreateTopic(topic, 1); !s.ok()) return s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const size_t steps = std::size(kKeeperSessionsMs);
  std::unique_ptr<GroupKeeper> keeper;
  for (size_t i = 0; i < steps;) {
    // The previous keeper leaves first, so it cannot rejoin after the next one (and set the
    // group's session back to its own); the next one joins within the rebalance its leaving
    // starts (at least 0.5 s long) and is elected alone.
    keeper.reset();
    const int session = kKeeperSessionsMs[i];
    const int heartbeat = i + 1 == steps ? kLastKeeperHeartbeatMs : session / 4;
    StatusOr<std::unique_ptr<GroupKeeper>> next = GroupKeeper::Start(
        {.bootstrap = impl_->bootstrap, .group = group, .topic = topic, .session_ms = session,
         .heartbeat_ms = heartbeat});
    if (!next.ok()) return next.status();
    keeper = std::move(next).value();
    // A keeper that missed the rebalance finds the group empty: the mock's 3 s first join
    // outlasts its session and it is never answered. Then the ladder starts again.
    const auto step_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool assigned = false;
    while (!(assigned = keeper->Assigned()) &&
           std::chrono::steady_clock::now() < std::min(deadline, step_deadline)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (std::chrono::steady_clock::now() >= deadline && !assigned) {
      return Status::IoError("embedded broker: the keeper of group " + group +
                             " got no assignment within " + std::to_string(timeout_ms) + " ms");
    }
    i = assigned ? i + 1 : 0;
  }
  impl_->keepers[group] = std::move(keeper);
  return Status::Ok();
}

Status EmbeddedBroker::SetBrokerUp(int id, bool up) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const rd_kafka_resp_err_t e = up ? rd_kafka_mock_broker_set_up(impl_->cluster, id)
                                   : rd_kafka_mock_broker_set_down(impl_->cluster, id);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::InvalidArgument("embedded broker: broker " + std::to_string(id) + ": " +
                                   rd_kafka_err2str(e));
  }
  return Status::Ok();
}

Status EmbeddedBroker::PushRequestErrors(int api_key, int count, int error) {
  if (count < 1) return Status::InvalidArgument("embedded broker: request error count < 1");
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<rd_kafka_resp_err_t> errors(static_cast<size_t>(count),
                                          static_cast<rd_kafka_resp_err_t>(error));
  rd_kafka_mock_push_request_errors_array(impl_->cluster, static_cast<int16_t>(api_key),
                                          errors.size(), errors.data());
  return Status::Ok();
}

Status EmbeddedBroker::SetRoundTripTime(int id, int rtt_ms) {
  if (rtt_ms < 0) return Status::InvalidArgument("embedded broker: negative round-trip time");
  std::lock_guard<std::mutex> lock(impl_->mu);
  const rd_kafka_resp_err_t e = rd_kafka_mock_broker_set_rtt(impl_->cluster, id, rtt_ms);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::InvalidArgument("embedded broker: broker " + std::to_string(id) + ": " +
                                   rd_kafka_err2str(e));
  }
  return Status::Ok();
}

}  // namespace streamvec

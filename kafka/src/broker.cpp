#include "streamvec/kafka/broker.h"

// rdkafka.h must come before rdkafka_mock.h.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <mutex>

namespace streamvec {

struct EmbeddedBroker::Impl {
  rd_kafka_t* rk = nullptr;  // the handle that owns the mock cluster
  rd_kafka_mock_cluster_t* cluster = nullptr;
  std::string bootstrap;
  int default_partitions = 16;
  std::mutex mu;  // serialises topic creation and fault injection

  ~Impl() {
    if (cluster != nullptr) rd_kafka_mock_cluster_destroy(cluster);
    if (rk != nullptr) rd_kafka_destroy(rk);
  }
};

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

}  // namespace streamvec

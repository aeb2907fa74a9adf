// Test helpers: a plain librdkafka producer and consumer against the embedded broker.
// Shared by tests/kafka and tests/ingest (included by relative path).
#ifndef STREAMVEC_TESTS_KAFKA_KAFKA_TEST_UTIL_H_
#define STREAMVEC_TESTS_KAFKA_KAFKA_TEST_UTIL_H_

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace streamvec::testing {

struct Record {
  std::string key;
  std::string value;
  int32_t partition = -1;
  int64_t offset = -1;
};

inline rd_kafka_conf_t* TestConf(const std::string& bootstrap,
                                 const std::vector<std::pair<std::string, std::string>>& props) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      std::fprintf(stderr, "test conf %s: %s\n", k.c_str(), err);
      std::abort();
    }
  }
  return conf;
}

// Produces `records` (key, value; partition -1 = by key) and waits until all are acknowledged.
// Returns the number of messages whose delivery failed.
inline int ProduceAll(const std::string& bootstrap, const std::string& topic,
                      const std::vector<Record>& records) {
  static std::atomic<int> failures;
  failures = 0;
  rd_kafka_conf_t* conf = TestConf(bootstrap, {{"linger.ms", "5"}});
  rd_kafka_conf_set_dr_msg_cb(conf, [](rd_kafka_t*, const rd_kafka_message_t* m, void*) {
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) ++failures;
  });
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr) return static_cast<int>(records.size());
  for (const Record& r : records) {
    while (true) {
      const rd_kafka_resp_err_t e = rd_kafka_producev(
          rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(r.partition),
          RD_KAFKA_V_KEY(r.key.data(), r.key.size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(r.value.data()), r.value.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(rk, 10);
        continue;
      }
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR) ++failures;
      break;
    }
    rd_kafka_poll(rk, 0);
  }
  rd_kafka_flush(rk, 30000);
  const int failed = failures + rd_kafka_outq_len(rk);
  rd_kafka_destroy(rk);
  return failed;
}

// A consumer that reads every partition of `topic` from the beginning by assignment (no group
// join, so it starts at once). With a non-empty `group`, Commit() stores offsets for that group.
class TestConsumer {
 public:
  TestConsumer(const std::string& bootstrap, const std::string& topic, std::string group = "")
      : topic_(topic) {
    const std::string gid = group.empty() ? "streamvec-test-reader" : group;
    rd_kafka_conf_t* conf = TestConf(bootstrap, {{"group.id", gid},
                                                 {"enable.auto.commit", "false"},
                                                 {"enable.auto.offset.store", "false"},
                                                 {"auto.offset.reset", "earliest"},
                                                 {"fetch.wait.max.ms", "10"}});
    char err[512];
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    const rd_kafka_metadata_t* md = nullptr;
    int partitions = 0;
    if (rd_kafka_metadata(rk_, 1, nullptr, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      for (int i = 0; i < md->topic_cnt; ++i) {
        if (topic == md->topics[i].topic) partitions = md->topics[i].partition_cnt;
      }
      rd_kafka_metadata_destroy(md);
    }
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; ++p) {
      rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_assign(rk_, list);
    rd_kafka_topic_partition_list_destroy(list);
    partitions_ = partitions;
  }
  ~TestConsumer() {
    rd_kafka_consumer_close(rk_);
    rd_kafka_destroy(rk_);
  }

  int partitions() const { return partitions_; }

  // Polls until `count` records arrived or nothing came for `idle_ms`. Returns the new records.
  std::vector<Record> Read(size_t count, int idle_ms = 3000) {
    std::vector<Record> out;
    auto last = std::chrono::steady_clock::now();
    while (out.size() < count) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 100);
      if (m == nullptr) {
        if (std::chrono::steady_clock::now() - last > std::chrono::milliseconds(idle_ms)) break;
        continue;
      }
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        Record r;
        if (m->key != nullptr) r.key.assign(static_cast<const char*>(m->key), m->key_len);
        r.value.assign(static_cast<const char*>(m->payload), m->len);
        r.partition = m->partition;
        r.offset = m->offset;
        next_[m->partition] = m->offset + 1;
        out.push_back(std::move(r));
        last = std::chrono::steady_clock::now();
      }
      rd_kafka_message_destroy(m);
    }
    return out;
  }

  // Commits the position after every record read so far (synchronously). Returns false on error.
  bool Commit() {
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(next_.size());
    for (const auto& [p, off] : next_) {
      rd_kafka_topic_partition_list_add(list, topic_.c_str(), p)->offset = off;
    }
    const rd_kafka_resp_err_t e =
        next_.empty() ? RD_KAFKA_RESP_ERR_NO_ERROR : rd_kafka_commit(rk_, list, 0);
    rd_kafka_topic_partition_list_destroy(list);
    return e == RD_KAFKA_RESP_ERR_NO_ERROR;
  }

 private:
  std::string topic_;
  rd_kafka_t* rk_ = nullptr;
  int partitions_ = 0;
  std::map<int32_t, int64_t> next_;
};

}  // namespace streamvec::testing

#endif  // STREAMVEC_TESTS_KAFKA_KAFKA_TEST_UTIL_H_

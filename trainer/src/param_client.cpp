#include "streamvec/trainer/param_client.h"

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "streamvec/kafka/consumer_lag.h"
#include "streamvec/kafka/rdkafka_conf.h"
#include "streamvec/param/row_deltas.h"

namespace streamvec {
namespace {

using Clock = std::chrono::steady_clock;

bool AllZero(const float* v, int dim) {
  for (int j = 0; j < dim; ++j) {
    if (v[j] != 0.0f) return false;
  }
  return true;
}

}  // namespace

struct ParamClient::Impl {
  ParamClientOptions options;
  StreamingLearner* learner = nullptr;
  int dim = 0;
  std::string updates_topic;
  std::string params_topic;
  rd_kafka_t* producer = nullptr;
  rd_kafka_t* consumer = nullptr;  // assigned every partition of .params, no group membership
  std::unique_ptr<ConsumerGroupLagProbe> lag_probe;  // the shards' committed lag on .updates
  Clock::time_point last_wait_log{};
  bool params_assigned = false;
  Clock::time_point last_assign_try{};

  // Over the learner's tables (created at the first push: the tables' address is stable).
  std::optional<RowDeltaTracker> input_deltas, output_deltas;
  std::vector<std::string> slot_word;   // slot -> the word its tracked rows belong to
  std::vector<double> pushed_count;     // slot -> the word's count at its last push
  std::vector<bool> initial;            // slot -> its rows were not pushed since MarkFresh
  uint64_t last_push_words = 0;
  uint64_t sequence = 0;
  ParamClientStats stats;
  Clock::time_point last_reject_log{};

  ~Impl() {
    if (consumer != nullptr) {
      rd_kafka_consumer_close(consumer);
      rd_kafka_destroy(consumer);
    }
    if (producer != nullptr) {
      rd_kafka_flush(producer, 2000);
      rd_kafka_destroy(producer);
    }
  }

  void EnsureTrackers() {
    if (input_deltas) return;
    const StreamingLearner::RowTables t = learner->MutableRowTables();
    input_deltas.emplace(t.input, t.slots, t.stride, dim);
    output_deltas.emplace(t.output, t.slots, t.stride, dim);
    slot_word.assign(t.slots, std::string());
    pushed_count.assign(t.slots, 0.0);
    initial.assign(t.slots, false);
  }

  // Waits while partition `shard` of .updates holds more than max_lag_bytes (with `next` more)
  // that the shard has not committed: messages past its committed offset (past the low
  // watermark when it has none) times the mean size of this trainer's pushes.
  void WaitForShard(uint32_t shard, size_t next) {
    if (options.max_lag_bytes <= 0 || !lag_probe) return;
    const auto start = Clock::now();
    while (options.stop == nullptr || !options.stop->load()) {
      rd_kafka_flush(producer, 10000);  // what was produced is in the log (and in the lag)
      const double mean = stats.push_messages > 0
                              ? static_cast<double>(stats.push_bytes) / stats.push_messages
                              : static_cast<double>(next);
      StatusOr<GroupLag> lag = lag_probe->Query(updates_topic, 2000);
      if (lag.ok() && shard < lag->partitions.size() &&
          static_cast<double>(lag->partitions[shard].lag) * mean + static_cast<double>(next) <=
              static_cast<double>(options.max_lag_bytes)) {
        break;
      }
      if (lag.ok() && shard >= lag->partitions.size()) break;  // not this topic's partition
      if (Clock::now() - last_wait_log > std::chrono::seconds(10)) {
        spdlog::warn("trainer: waiting for parameter-node shard {} ({} partition {}: {})", shard,
                     updates_topic, shard,
                     lag.ok() ? std::to_string(lag->partitions[shard].lag) +
                                    " messages not yet in its snapshot"
                              : lag.status().message());
        last_wait_log = Clock::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stats.throttled_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }

  Status Produce(uint32_t shard, std::string& message) {
    WaitForShard(shard, message.size());
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (true) {
      const rd_kafka_resp_err_t e = rd_kafka_producev(
          producer, RD_KAFKA_V_TOPIC(updates_topic.c_str()),
          RD_KAFKA_V_PARTITION(static_cast<int32_t>(shard)),
          RD_KAFKA_V_VALUE(message.data(), message.size()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR) break;
      if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL || Clock::now() > deadline) {
        return Status::IoError("cannot push to " + updates_topic + " partition " +
                               std::to_string(shard) + ": " + rd_kafka_err2str(e));
      }
      rd_kafka_poll(producer, 10);
    }
    stats.push_messages += 1;
    stats.push_bytes += message.size();
    return Status::Ok();
  }

  Status Push(uint64_t words_trained) {
    EnsureTrackers();
    std::vector<std::string> words;
    std::vector<uint32_t> slots;
    std::vector<double> counts;
    learner->AdmittedSlots(&words, &slots, &counts);  // drains: nothing trains meanwhile
    for (size_t i = 0; i < slots.size(); ++i) {
      const uint32_t s = slots[i];
      if (slot_word[s] != words[i]) {  // a word new to this trainer, or a slot given to another
        input_deltas->MarkFresh(s);
        output_deltas->MarkFresh(s);
        slot_word[s] = words[i];
        pushed_count[s] = 0.0;
        initial[s] = true;
      }
    }
    std::vector<float> in(slots.size() * static_cast<size_t>(dim));
    std::vector<float> out(in.size());
    input_deltas->Export(slots, in.data(), options.precision);
    output_deltas->Export(slots, out.data(), options.precision);
    std::vector<std::vector<ParamRecord>> by_shard(options.shards);
    for (size_t i = 0; i < slots.size(); ++i) {
      const float* di = in.data() + i * dim;
      const float* dout = out.data() + i * dim;
      const double count = std::max(0.0, counts[i] - pushed_count[slots[i]]);
      const bool moved = !AllZero(di, dim) || !AllZero(dout, dim);
      if (!moved && count < 1.0) continue;
      ParamRecord r;
      r.word = words[i];
      if (count >= 1.0) {
        r.has_count = true;
        r.count = count;
        pushed_count[slots[i]] = counts[i];
      }
      if (moved) {
        r.input.assign(di, di + dim);
        r.output.assign(dout, dout + dim);
        r.initial = initial[slots[i]];  // a shard that knows the word keeps its own rows
        initial[slots[i]] = false;
      }
      by_shard[ShardOf(r.word, options.shards)].push_back(std::move(r));
    }
    for (uint32_t shard = 0; shard < options.shards; ++shard) {
      if (by_shard[shard].empty()) continue;
      ParamMessageHeader h;
      h.kind = ParamMessageKind::kPush;
      h.precision = options.precision;
      h.dim = static_cast<uint32_t>(dim);
      h.sender = options.sender;
      h.sequence = sequence;
      h.sender_clock = words_trained;
      h.base_clock = stats.node_clock;
      // 512 KiB: under librdkafka's default message.max.bytes (1,000,000) with room to spare.
      StatusOr<std::vector<std::string>> messages =
          EncodeParamMessages(h, by_shard[shard], size_t{512} << 10);
      if (!messages.ok()) return messages.status();
      sequence += messages->size();
      stats.rows_pushed += by_shard[shard].size();
      for (std::string& m : *messages) SV_RETURN_IF_ERROR(Produce(shard, m));
    }
    rd_kafka_poll(producer, 0);
    stats.pushes += 1;
    last_push_words = words_trained;
    return Status::Ok();
  }

  // Assigns every partition of .params from the beginning once the topic exists (asked at most
  // once a second until then).
  void AssignParams() {
    if (params_assigned || Clock::now() - last_assign_try < std::chrono::seconds(1)) return;
    last_assign_try = Clock::now();
    rd_kafka_topic_t* t = rd_kafka_topic_new(consumer, params_topic.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    const rd_kafka_resp_err_t e = rd_kafka_metadata(consumer, 0, t, &md, 2000);
    rd_kafka_topic_destroy(t);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    int partitions = 0;
    if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      partitions = md->topics[0].partition_cnt;
    }
    rd_kafka_metadata_destroy(md);
    if (partitions <= 0) return;
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; ++p) {
      rd_kafka_topic_partition_list_add(list, params_topic.c_str(), p)->offset =
          RD_KAFKA_OFFSET_BEGINNING;
    }
    params_assigned = rd_kafka_assign(consumer, list) == RD_KAFKA_RESP_ERR_NO_ERROR;
    rd_kafka_topic_partition_list_destroy(list);
  }

  void Pull() {
    AssignParams();
    if (!params_assigned) return;
    std::vector<uint32_t> slots;
    std::vector<float> in_rows, out_rows;
    std::vector<uint32_t> in_slots, out_slots;
    for (int n = 0; n < 10000; ++n) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 0);
      if (m == nullptr) break;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        stats.pull_messages += 1;
        stats.pull_bytes += m->len;
        StatusOr<ParamMessage> msg = DecodeParamMessage(
            std::string_view(static_cast<const char*>(m->payload), m->len),
            {.model = ParamModelKind::kSgns, .dim = static_cast<uint32_t>(dim)});
        if (!msg.ok() || msg->header.kind == ParamMessageKind::kPush) {
          stats.rejected += 1;
          if (Clock::now() - last_reject_log > std::chrono::seconds(10)) {
            spdlog::warn("trainer: skipped a publication on {} partition {} offset {}: {}",
                         params_topic, m->partition, static_cast<long long>(m->offset),
                         msg.ok() ? "a push, not a publication" : msg.status().message());
            last_reject_log = Clock::now();
          }
        } else if (msg->header.kind == ParamMessageKind::kVocabulary) {
          // A word the node evicted starts from zero there: its next push must carry the whole
          // row again (MarkFresh at the next push, as for a word new to this trainer).
          for (const ParamRecord& r : msg->records) {
            if (!r.removed) continue;
            const int64_t slot = learner->SlotOf(r.word);
            if (slot >= 0 && slot_word[static_cast<uint32_t>(slot)] == r.word) {
              slot_word[static_cast<uint32_t>(slot)].clear();
            }
          }
        } else if (msg->header.kind == ParamMessageKind::kRows) {
          stats.node_clock = std::max(stats.node_clock, msg->header.sender_clock);
          for (const ParamRecord& r : msg->records) {
            const int64_t slot = learner->SlotOf(r.word);
            if (slot < 0) continue;  // a word this trainer does not hold
            const uint32_t s = static_cast<uint32_t>(slot);
            if (slot_word[s] != r.word) continue;  // not pushed yet: its rows are all local
            if (!r.input.empty()) {
              in_slots.push_back(s);
              in_rows.insert(in_rows.end(), r.input.begin(), r.input.end());
            }
            if (!r.output.empty()) {
              out_slots.push_back(s);
              out_rows.insert(out_rows.end(), r.output.begin(), r.output.end());
            }
            stats.rows_applied += 1;
          }
        }
      }
      rd_kafka_message_destroy(m);
    }
    if (in_slots.empty() && out_slots.empty()) return;
    learner->MutableRowTables();  // quiesce: the rows are written below
    input_deltas->ApplyRows(in_slots, in_rows.data());
    output_deltas->ApplyRows(out_slots, out_rows.data());
  }
};

ParamClient::ParamClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ParamClient::~ParamClient() = default;

StatusOr<std::unique_ptr<ParamClient>> ParamClient::Create(const ParamClientOptions& options,
                                                           StreamingLearner* learner) {
  if (options.shards < 1) return Status::InvalidArgument("--param-shards must be at least 1");
  if (options.push_every_words < 1) {
    return Status::InvalidArgument("--push-every must be at least 1 word");
  }
  if (learner->options().cuda_device >= 0) {
    return Status::InvalidArgument(
        "--param-shards: the rows of a --device cuda learner live on the device; the parameter "
        "node's pushes and pulls need them on the host (use --device cpu)");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->learner = learner;
  impl->dim = learner->options().dim;
  impl->updates_topic = UpdatesTopic(options.kafka.topic_prefix);
  impl->params_topic = ParamsTopic(options.kafka.topic_prefix);
  char err[512];
  StatusOr<rd_kafka_conf_t*> pconf =
      MakeRdKafkaConf(options.kafka, {{"client.id", "streamvec-trainer-pushes"},
                                      {"linger.ms", "5"},
                                      {"message.max.bytes", std::to_string(2 << 20)}});
  if (!pconf.ok()) return pconf.status();
  impl->producer = rd_kafka_new(RD_KAFKA_PRODUCER, *pconf, err, sizeof err);
  if (impl->producer == nullptr) {
    rd_kafka_conf_destroy(*pconf);
    return Status::InvalidArgument(std::string("Kafka producer: ") + err);
  }
  StatusOr<rd_kafka_conf_t*> cconf = MakeRdKafkaConf(
      options.kafka, {{"client.id", "streamvec-trainer-pulls"},
                      {"group.id", options.kafka.topic_prefix + ".param-readers"},
                      {"enable.auto.commit", "false"},
                      {"enable.auto.offset.store", "false"},
                      {"fetch.wait.max.ms", "10"}});
  if (!cconf.ok()) return cconf.status();
  impl->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, *cconf, err, sizeof err);
  if (impl->consumer == nullptr) {
    rd_kafka_conf_destroy(*cconf);
    return Status::InvalidArgument(std::string("Kafka consumer: ") + err);
  }
  rd_kafka_poll_set_consumer(impl->consumer);
  if (options.max_lag_bytes > 0) {
    StatusOr<std::unique_ptr<ConsumerGroupLagProbe>> probe =
        ConsumerGroupLagProbe::Create(options.kafka, ParamNodesGroup(options.kafka.topic_prefix));
    if (!probe.ok()) return probe.status();
    impl->lag_probe = std::move(probe).value();
  }
  return std::unique_ptr<ParamClient>(new ParamClient(std::move(impl)));
}

Status ParamClient::Sync(bool force) {
  Impl& m = *impl_;
  const uint64_t trained = m.learner->stats().words_trained;
  if (force || trained - m.last_push_words >= m.options.push_every_words) {
    SV_RETURN_IF_ERROR(m.Push(trained));
  }
  if (m.input_deltas) m.Pull();
  rd_kafka_poll(m.producer, 0);
  return Status::Ok();
}

Status ParamClient::Flush(int timeout_ms) {
  const rd_kafka_resp_err_t e = rd_kafka_flush(impl_->producer, timeout_ms);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::IoError(std::string("pushes not delivered: ") + rd_kafka_err2str(e));
  }
  return Status::Ok();
}

ParamClientStats ParamClient::stats() const { return impl_->stats; }

void ParamClient::set_stop(const std::atomic<bool>* stop) { impl_->options.stop = stop; }

}  // namespace streamvec

#include "run_shards.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "streamvec/kafka/consumer_lag.h"
#include "streamvec/param/protocol.h"

namespace streamvec::app {

std::string ShardState(const std::string& state, int shard) {
  return (std::filesystem::path(state) / ("shard-" + std::to_string(shard))).string();
}
std::string TrainerState(const std::string& state, int trainer) {
  return (std::filesystem::path(state) / ("trainer-" + std::to_string(trainer))).string();
}

StatusOr<std::map<std::string, int64_t>> ReadSharedSourcePositions(const std::string& state,
                                                                   int trainers) {
  std::map<std::string, int64_t> out;
  for (int j = 0; j < trainers; ++j) {
    StatusOr<std::map<std::string, int64_t>> p =
        KafkaTrainer::ReadSourcePositions(TrainerState(state, j));
    if (!p.ok()) {
      return Status(p.status().code(), TrainerState(state, j) + ": " + p.status().message());
    }
    if (j == 0) {
      out = std::move(p).value();
      continue;
    }
    for (auto it = out.begin(); it != out.end();) {
      const auto found = p->find(it->first);
      if (found == p->end()) {
        it = out.erase(it);
      } else {
        it->second = std::min(it->second, found->second);
        ++it;
      }
    }
  }
  return out;
}

KafkaTrainerStats TotalStats(const std::vector<std::unique_ptr<KafkaTrainer>>& trainers) {
  KafkaTrainerStats total = trainers.front()->stats();
  for (size_t j = 1; j < trainers.size(); ++j) {
    const KafkaTrainerStats s = trainers[j]->stats();
    total.documents += s.documents;
    total.bytes += s.bytes;
    total.words += s.words;
    total.state_documents += s.state_documents;
    total.state_words += s.state_words;
    total.words_trained += s.words_trained;
    total.rejected += s.rejected;
    total.skipped_language += s.skipped_language;
    for (const auto& [lang, n] : s.documents_by_language) total.documents_by_language[lang] += n;
    total.micro_batches += s.micro_batches;
    total.snapshots += s.snapshots;
    total.checkpoints += s.checkpoints;
    total.lag = total.lag < 0 || s.lag < 0 ? -1 : total.lag + s.lag;
    total.seconds = std::max(total.seconds, s.seconds);
    total.active_seconds = std::max(total.active_seconds, s.active_seconds);
    total.trained_until_seconds = std::max(total.trained_until_seconds, s.trained_until_seconds);
    total.vocab_size = std::max(total.vocab_size, s.vocab_size);
    total.evictions += s.evictions;
    total.snapshot_bytes += s.snapshot_bytes;
    total.snapshot_bytes_total += s.snapshot_bytes_total;
    total.snapshot_written_bytes += s.snapshot_written_bytes;
    total.snapshot_written_bytes_total += s.snapshot_written_bytes_total;
    total.state_disk_bytes += s.state_disk_bytes;
    total.consume_seconds += s.consume_seconds;
    total.parse_seconds += s.parse_seconds;
    total.feed_seconds += s.feed_seconds;
    total.snapshot_seconds += s.snapshot_seconds;
    total.commit_seconds += s.commit_seconds;
  }
  return total;
}

bool DrainShards(const KafkaOptions& kafka, const std::vector<std::unique_ptr<ParamNode>>& nodes,
                 double limit_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(limit_s);
  StatusOr<GroupLag> lag = Status::NotFound("not asked");
  while (!lag.ok() && Clock::now() < deadline) {
    lag = ConsumerGroupLag(kafka, ParamNodesGroup(kafka.topic_prefix),
                           UpdatesTopic(kafka.topic_prefix), 2000);
  }
  if (!lag.ok()) {
    spdlog::warn("run: the shards' partitions are unknown ({}); stopping them without waiting",
                 lag.status().message());
    return false;
  }
  for (const PartitionLag& p : lag->partitions) {
    if (p.partition < 0 || static_cast<size_t>(p.partition) >= nodes.size()) continue;
    const ParamNode& node = *nodes[p.partition];
    const uint64_t size = static_cast<uint64_t>(std::max<int64_t>(0, p.high - p.low));
    while (node.stats().messages < size) {
      if (Clock::now() >= deadline) {
        spdlog::warn(
            "run: shard {} merged {} of the {} messages of its partition in {:.0f} s; "
            "stopping it anyway",
            p.partition, node.stats().messages, size, limit_s);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return true;
}

}  // namespace streamvec::app

// streamvec broker: the embedded Kafka broker (librdkafka's mock cluster) as a process of its own.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "stop_signal.h"
#include "streamvec/base/heap.h"
#include "streamvec/kafka/broker.h"
#include "streamvec/kafka/document.h"
#include "streamvec/param/protocol.h"

namespace streamvec::app {
namespace {


struct BrokerFlags {
  int brokers = 1;
  // 32 rings of about 5 MiB: 160 MiB of backlog before the trainers must have committed, so a
  // trainer writes a flow-control checkpoint at most every ~112 MB of text (docs/pipeline.md,
  // "Flow control").
  int partitions = 32;
  std::string bootstrap_file;
  std::string prefix = "streamvec";
  std::vector<std::string> hold_groups;  // --hold-group
  bool hold_trainers = false;            // --hold-trainers: <prefix>.trainers too
  int param_shards = 0;  // > 0: also <prefix>.updates and <prefix>.params with this many partitions
  bool preallocate = true;  // --no-preallocate: fault the rings' memory in as it fills
};

// The mock keeps up to 5 MiB of messages a partition (librdkafka's rd_kafka_mock_partition_t
// max_size): the documents' partitions and the parameter topics' (the rejected documents' topic
// is left out: it stays small), and 32 MiB for the requests and responses in flight; at most
// 1 GiB.
size_t RingBytes(const BrokerFlags& flags) {
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t partitions = static_cast<size_t>(flags.partitions) +
                            2 * static_cast<size_t>(std::max(flags.param_shards, 0));
  return std::min(partitions * 5 * kMiB + 32 * kMiB, size_t{1} << 30);
}

int RunBroker(const BrokerFlags& flags) {
  // Every message passes through the mock twice: copied from the produce request into the
  // partition's log and from the log into a fetch response. With glibc's defaults both land in
  // memory just handed back by a free(), faulted in again page by page: at 32 partitions, 100 MB
  // of documents cost the broker 30-36k page faults and 0.56-0.74 CPU-s, against 0.12-0.21 with
  // the heap reserved up front (docs/pipeline.md, "Where the time goes").
  const HeapReserve reserve = flags.preallocate ? ReserveHeap(RingBytes(flags)) : HeapReserve{};
  StatusOr<std::unique_ptr<EmbeddedBroker>> broker =
      EmbeddedBroker::Start({.brokers = flags.brokers, .partitions = flags.partitions});
  if (!broker.ok()) {
    std::fprintf(stderr, "streamvec broker: %s\n", broker.status().message().c_str());
    return broker.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  for (const std::string& topic : {DocsTopic(flags.prefix), RejectedTopic(flags.prefix)}) {
    if (Status s = (*broker)->CreateTopic(topic); !s.ok()) {
      std::fprintf(stderr, "streamvec broker: %s\n", s.message().c_str());
      return 1;
    }
  }
  if (flags.param_shards > 0) {
    for (const std::string& topic : {UpdatesTopic(flags.prefix), ParamsTopic(flags.prefix)}) {
      if (Status s = (*broker)->CreateTopic(topic, flags.param_shards); !s.ok()) {
        std::fprintf(stderr, "streamvec broker: --param-shards: %s\n", s.message().c_str());
        return 2;
      }
    }
  }
  // The groups are held before the broker says where it is, so that a trainer started on its
  // bootstrap string finds its group non-empty (EmbeddedBroker::HoldGroup: a 0.06 s join wait,
  // not 3 s).
  std::vector<std::string> groups = flags.hold_groups;
  if (flags.hold_trainers) groups.push_back(TrainersGroup(flags.prefix));
  for (const std::string& group : groups) {
    if (Status s = (*broker)->HoldGroup(group); !s.ok()) {
      std::fprintf(stderr, "streamvec broker: %s\n", s.message().c_str());
      return 1;
    }
  }
  const std::string& bootstrap = (*broker)->bootstrap();
  if (!flags.bootstrap_file.empty()) {
    // Written to a temporary name and renamed, so a reader never sees half a line.
    const std::string tmp = flags.bootstrap_file + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << bootstrap << "\n";
      if (!out) {
        std::fprintf(stderr, "streamvec broker: --bootstrap-file: cannot write %s\n", tmp.c_str());
        return 2;
      }
    }
    if (std::rename(tmp.c_str(), flags.bootstrap_file.c_str()) != 0) {
      std::fprintf(stderr, "streamvec broker: --bootstrap-file: cannot write %s\n",
                   flags.bootstrap_file.c_str());
      return 2;
    }
  }
  std::string joined;
  for (const std::string& g : groups) joined += (joined.empty() ? "" : ",") + g;
  std::printf("%s\n", bootstrap.c_str());
  std::fflush(stdout);
  std::fprintf(stderr,
               "streamvec broker: %d broker(s) at %s, topics %s and %s (%d partitions)%s%s; "
               "%zu MiB of memory reserved in %.2f s; Ctrl-C stops\n",
               flags.brokers, bootstrap.c_str(), DocsTopic(flags.prefix).c_str(),
               RejectedTopic(flags.prefix).c_str(), flags.partitions,
               groups.empty() ? "" : ", holding group ",
               joined.c_str(), reserve.bytes >> 20, reserve.seconds);
  const std::atomic<bool>& stop = StopOnSignals();
  while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fprintf(stderr, "streamvec broker: stopping\n");
  return 0;
}

}  // namespace

void RegisterBrokerCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<BrokerFlags>();
  CLI::App* cmd = root.add_subcommand(
      "broker",
      "Run the embedded Kafka broker (librdkafka's mock cluster on 127.0.0.1) until SIGINT or "
      "SIGTERM. It keeps about 5 MiB per partition, in memory only (160 MiB at the default 32 "
      "partitions).");
  cmd->add_option("--brokers", flags->brokers, "number of brokers (1..16)")->capture_default_str();
  cmd->add_option("--partitions", flags->partitions, "partitions of <prefix>.docs and .rejected")
      ->capture_default_str();
  cmd->add_option("--bootstrap-file", flags->bootstrap_file,
                  "also write the bootstrap string to this file");
  cmd->add_option("--prefix", flags->prefix, "topic prefix")->capture_default_str();
  cmd->add_option("--param-shards", flags->param_shards,
                  "also create <prefix>.updates and <prefix>.params with this many partitions "
                  "(one per parameter-node shard; 0: neither)")
      ->capture_default_str();
  cmd->add_option("--hold-group", flags->hold_groups,
                  "keep this consumer group non-empty with a member of the broker's own, so a "
                  "trainer joining it consumes after ~0.15 s instead of the mock's 3 s first join "
                  "(repeatable; ~7 s more at start). Its members join with session.timeout.ms "
                  "1060 (a trainer does so itself) and keep the default "
                  "partition.assignment.strategy; for one trainer or a few: under heavy load a "
                  "member that misses its session can make the mock abort (docs/pipeline.md)");
  cmd->add_flag("--hold-trainers", flags->hold_trainers, "--hold-group <prefix>.trainers");
  cmd->add_flag("--preallocate,!--no-preallocate", flags->preallocate,
                "take the memory of every partition's 5 MiB ring (and 32 MiB for requests in "
                "flight; at most 1 GiB) at start, so that moving messages takes no page faults "
                "(about 3x less CPU on a VM); resident from the start: 192 MiB at 32 partitions")
      ->capture_default_str();
  cmd->callback([flags, exit_code]() { *exit_code = RunBroker(*flags); });
}

}  // namespace streamvec::app

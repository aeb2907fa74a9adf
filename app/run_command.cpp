// streamvec run: the whole pipeline in one process (docs/pipeline.md): an embedded Kafka broker
// (librdkafka's mock cluster on 127.0.0.1), the file connector following --data, one Kafka
// trainer writing snapshots to --state, and the REST API on --http. Ctrl-C (SIGINT) or SIGTERM
// writes a final snapshot. Restarted on the same --state, it resumes from the last snapshot: the
// learner's state, and the connector's positions of the documents that snapshot covers (the
// embedded broker keeps nothing across restarts, so the trainer starts the new broker's topic from
// the beginning and the connector re-sends what the snapshot did not cover: at least once).
//
// With --param-shards S (and --trainers N), the same on the topology of a cluster
// (docs/distributed.md): S parameter-node shards on threads of the process (states
// <state>/shard-<i>), N trainers pushing to them (states <state>/trainer-<j>, each assigned every
// N-th partition of <prefix>.docs), and the REST API over the union of the shards' snapshots.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "char_flags.h"
#include "commands.h"
#include "host_port.h"
#include "param_flags.h"
#include "pipeline_metrics.h"
#include "run_shards.h"
#include "server_flags.h"
#include "streamvec/api/prometheus.h"
#include "streamvec/api/server.h"
#include "streamvec/base/cpu_features.h"
#include "streamvec/base/thread_priority.h"
#include "streamvec/ingest/crawler/crawler.h"
#include "streamvec/ingest/ingestor.h"
#include "streamvec/kafka/broker.h"
#include "streamvec/kafka/document.h"
#include "streamvec/kernels/cuda.h"
#include "streamvec/node/param_node.h"
#include "streamvec/param/protocol.h"
#include "streamvec/store/state_store.h"
#include "streamvec/trainer/kafka_trainer.h"

namespace streamvec::app {
namespace {

struct RunFlags {
  // cpprestsdk's thread pool: one thread a core measured best on 2 cores (lookups 5.8k -> 16k
  // req/s, most_similar p99 14 -> 4.5 ms with wrk -c16 against 40 threads); 0: its default, 40.
  size_t http_threads = std::max(2u, std::thread::hardware_concurrency());
  std::string data;  // "" = the bundled data/run
  std::string device = "cpu";  // --device: cpu or cuda[:N]
  std::vector<std::string> languages;  // --lang: documents' languages to train (empty: all)
  bool no_detect_lang = false;
  std::string state = "streamvec-state";
  std::string http = "127.0.0.1:8080";
  std::string prefix = "streamvec";
  int partitions = 16;
  double snapshot_every_s = 2;
  double checkpoint_every_s = 60;
  double snapshot_write_rate_mb = 4;
  bool no_follow = false;
  bool doc_per_file = false;
  double max_idle_s = 0;
  std::string feeds;  // "" = the bundled data/feeds/feeds.txt
  bool no_crawl = false;
  double crawl_interval_s = 900;
  std::string admin_token;
  std::string admin_token_file;
  std::vector<std::string> similarity;
  std::string analogy;
  int threads = 1;       // per trainer
  int trainers = 1;      // --trainers: Kafka trainers (more than one needs param_shards)
  int param_shards = 0;  // --param-shards: parameter-node shards in the process (0: none)
  std::string merge = std::string(MergeRuleName(MergeOptions{}.rule));  // --merge (the shards')
  std::string merge_scale = "auto";                           // --merge-scale (the shards')
  double publish_every = ParamNodeOptions{}.publish_every_s;  // --publish-every (the shards')
  ParamClientFlags param;  // --push-every ... --delta-precision (the trainers', with shards)
  bool param_flags_given = false;  // any of the above given (they need --param-shards)
  // Priority of the pipeline's threads (broker, connector, crawler, trainer) and of the REST
  // server's index and polling threads: on shared cores requests come first, and the pipeline
  // takes every cycle they leave (sched(7)). Under BackgroundPolicy::kNice (the default) the nice
  // value sets the pipeline's share of busy cores (0: the same priority as requests), so training
  // and index builds go on under any request load; under kIdle requests always come first and a
  // load that keeps every core busy stops them.
  int trainer_nice = 10;
  BackgroundPolicy trainer_policy = BackgroundPolicy::kNice;
  // The HNSW index of the served snapshots (as `serve`'s flags of the same names).
  int hnsw_ef = 120;
  double index_rebuild_s = 30;
  double min_carried_recall = 0.95;
  std::string index_dir;        // --index-dir
  size_t pinned_snapshots = 2;  // as `serve`'s flag
  StreamingOptions learner;
  bool char_distill = false;  // --char-distill (docs/char-model.md)
  CharDistillOptions char_distill_options;
  std::string model = "sgns";                                 // --model sgns|char-lstm
  std::string char_mode = "sum";                              // --char-mode (--model char-lstm)
  uint64_t char_batch_words = CharSgnsOptions().batch_words;  // --char-batch-words
  bool char_mode_given = false;
};

// The pipeline's priority: --trainer-nice and --trainer-policy.
struct Background {
  int nice;
  BackgroundPolicy policy;
};

// Makes the calling thread background work (LowerThreadPriority, base/thread_priority.h: at
// least nice value b.nice, the short time slice, SCHED_IDLE under kIdle); a refusal is logged
// (once per process), not fatal.
void LowerPriority(Background b) {
  if (Status s = LowerThreadPriority(b.nice, b.policy); !s.ok()) {
    static std::once_flag logged;
    std::call_once(logged, [&] {
      spdlog::warn("run: the pipeline keeps part of its priority: {}", s.ToString());
    });
  }
}

// Runs `f` on a new thread lowered by LowerPriority(b), joins it, and returns what f returned:
// threads that f starts (librdkafka's, the learner's workers) inherit the policy, nice value and
// slice, while the caller keeps its own.
template <typename F>
auto OnBackgroundThread(Background b, F f) -> decltype(f()) {
  std::optional<decltype(f())> out;
  std::thread([&] {
    LowerPriority(b);
    out.emplace(f());
  }).join();
  return std::move(*out);
}

// A bundled path: ./<relative>, else <repo>/<relative> above build/app/streamvec; "" if neither.
std::string BundledPath(const std::string& relative) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(relative, ec)) return fs::absolute(relative).string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // Installed: PREFIX/bin/streamvec with the data in PREFIX/share/streamvec/data/...
    const fs::path installed = exe.parent_path().parent_path() / "share" / "streamvec" / relative;
    if (fs::exists(installed, ec)) return installed.string();
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
      if (fs::exists(p / relative, ec)) return (p / relative).string();
    }
  }
  return "";
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "streamvec run: error: %s\n", message.c_str());
  return 2;
}

int RunPipeline(RunFlags f) {
  using Clock = std::chrono::steady_clock;
  std::string host;
  int port = 0;
  if (!ParseHostPort(f.http, &host, &port)) {
    return Usage("--http: expected HOST:PORT (e.g. 127.0.0.1:8080), got '" + f.http + "'");
  }
  if (f.data.empty()) f.data = BundledPath("data/run");
  if (f.data.empty()) return Usage("--data: the bundled data/run was not found; give --data DIR");
  std::string admin_token;
  if (std::string error;
      !ResolveAdminToken(f.admin_token_file, f.admin_token, &admin_token, &error)) {
    return Usage(error);
  }
  {
    std::error_code ec;
    if (!std::filesystem::exists(f.data, ec)) return Usage("--data: " + f.data + " does not exist");
    f.data = std::filesystem::absolute(f.data, ec).string();
  }
  if (!(f.snapshot_every_s > 0)) return Usage("--snapshot-every must be > 0 seconds");
  if (!(f.checkpoint_every_s >= 0)) return Usage("--checkpoint-every must be >= 0 seconds");
  if (!(f.snapshot_write_rate_mb >= 0)) return Usage("--snapshot-write-rate must be >= 0 MB/s");
  if (f.trainers < 1) return Usage("--trainers must be at least 1");
  if (f.param_shards < 0 || f.param_shards > 4096) {
    return Usage("--param-shards must be in [0, 4096]");
  }
  if (f.trainers > 1 && f.param_shards == 0) {
    return Usage("--trainers " + std::to_string(f.trainers) +
                 " needs --param-shards S >= 1: trainers without a parameter node learn "
                 "unrelated embeddings");
  }
  if (f.trainers > f.partitions) {
    return Usage("--trainers " + std::to_string(f.trainers) + " is more than --partitions " +
                 std::to_string(f.partitions) + ": each trainer takes some of the partitions");
  }
  const bool distributed = f.param_shards > 0;
  if (f.param_flags_given && !distributed) {
    return Usage(
        "--merge, --merge-scale, --publish-every, --push-every, --push-hot-rows, "
        "--push-max-period, --pull-every, --max-staleness, --delta-precision and "
        "--group-counts need --param-shards");
  }
  if (!(f.publish_every >= 0)) return Usage("--publish-every must not be negative");
  StatusOr<MergeRule> merge_rule = ParseMergeRule(f.merge);
  if (!merge_rule.ok()) return Usage(merge_rule.status().message());
  StatusOr<double> merge_scale = ParseMergeScale(f.merge_scale);
  if (!merge_scale.ok()) return Usage(merge_scale.status().message());
  // The trainers' flags are checked before any state is made.
  if (KafkaTrainerOptions probe; distributed) {
    if (Status s = ApplyParamClientFlags(f.param, &probe); !s.ok()) return Usage(s.message());
  }
  bool char_lstm = false;
  CharSgnsOptions char_lstm_options;
  if (Status s = CharLstmFromFlags(f.model, f.char_distill, f.char_mode, f.char_batch_words,
                                   f.char_mode_given, &char_lstm, &char_lstm_options);
      !s.ok()) {
    return Usage(s.message());
  }
  if (char_lstm) {
    if (distributed) return Usage("--model char-lstm does not train with --param-shards");
    if (Status s = ValidateCharModelOptions(f.char_distill_options.model); !s.ok()) {
      return Usage(s.message());
    }
  }
  if (f.char_distill) {
    CharDistillOptions co = f.char_distill_options;
    co.model.dim = f.learner.dim;
    if (Status s = ValidateCharDistillOptions(co); !s.ok()) return Usage(s.message());
  }
  {
    // A state of one layout is never resumed as the other.
    std::error_code ec;
    if (!distributed && std::filesystem::exists(ShardState(f.state, 0), ec)) {
      return Usage("--state " + f.state +
                   " holds the shards and trainers of a run with --param-shards: give "
                   "--param-shards and --trainers as then, or another --state");
    }
    if (distributed) {
      if (StateStore::Open(f.state, StateStore::Mode::kReadOnly).ok()) {
        return Usage("--param-shards: --state " + f.state +
                     " holds one trainer's state (a run without --param-shards): give another "
                     "--state");
      }
      std::filesystem::create_directories(f.state, ec);
      if (ec) return Usage("--state " + f.state + ": cannot create it: " + ec.message());
    }
  }
  f.learner.threads = f.threads;
  f.learner.isa = DetectBestIsa();
  {
    DeviceSpec device;
    if (Status s = ParseDeviceSpec(f.device, &device); !s.ok()) return Usage(s.message());
    f.learner.cuda_device = device.cuda ? device.ordinal : -1;
    if (device.cuda) {
      if (Status s = CudaCheckDevice(device.ordinal, nullptr); !s.ok()) {
        return Usage("--device " + f.device + ": " + s.message());
      }
    }
  }
  if (Status s = ValidateStreamingOptions(f.learner); !s.ok()) return Usage(s.message());

  // Block the stop signals before any thread starts: every thread (ours, librdkafka's,
  // cpprestsdk's) inherits the mask, and this thread takes them with sigtimedwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Where the last snapshot left the connector (read before the trainers lock their states).
  StatusOr<std::map<std::string, int64_t>> positions =
      distributed ? ReadSharedSourcePositions(f.state, f.trainers)
                  : KafkaTrainer::ReadSourcePositions(f.state);
  if (!positions.ok()) return Usage("--state " + f.state + ": " + positions.status().message());

  EmbeddedBrokerOptions broker_options;
  broker_options.partitions = f.partitions;
  // The pipeline (broker, connector, crawler, trainer) runs under --trainer-policy at
  // --trainer-nice with a short time slice, the REST server's request threads at
  // the caller's priority (its index and polling threads lower themselves the same way,
  // ServeOptions::index_nice and index_policy): on shared cores requests come first.
  const Background background{f.trainer_nice, f.trainer_policy};
  StatusOr<std::unique_ptr<EmbeddedBroker>> broker =
      OnBackgroundThread(background, [&] { return EmbeddedBroker::Start(broker_options); });
  if (!broker.ok()) return Usage(broker.status().message());
  for (const std::string& topic : {DocsTopic(f.prefix), RejectedTopic(f.prefix)}) {
    if (Status s = (*broker)->CreateTopic(topic); !s.ok()) return Usage(s.message());
  }
  if (distributed) {
    for (const std::string& topic : {UpdatesTopic(f.prefix), ParamsTopic(f.prefix)}) {
      if (Status s = (*broker)->CreateTopic(topic, f.param_shards); !s.ok()) {
        return Usage("--param-shards: " + s.message());
      }
    }
  }
  KafkaOptions kafka;
  kafka.brokers = (*broker)->bootstrap();
  kafka.topic_prefix = f.prefix;

  // The parameter-node shards, each resumed from its state.
  std::vector<std::unique_ptr<ParamNode>> nodes;
  for (int i = 0; i < f.param_shards; ++i) {
    ParamNodeOptions no;
    no.kafka = kafka;
    no.shard = static_cast<uint32_t>(i);
    no.shards = static_cast<uint32_t>(f.param_shards);
    no.state_dir = ShardState(f.state, i);
    no.vocab_capacity = static_cast<size_t>(f.learner.vocab_capacity);
    no.dim = static_cast<uint32_t>(f.learner.dim);
    no.snapshot_every_s = f.snapshot_every_s;
    no.merge.rule = *merge_rule;
    no.merge_scale = *merge_scale;
    no.publish_every_s = f.publish_every;
    StatusOr<std::unique_ptr<ParamNode>> node =
        OnBackgroundThread(background, [&] { return ParamNode::Create(no); });
    if (!node.ok()) {
      std::fprintf(stderr, "streamvec run: --param-shards: --state %s: %s\n", no.state_dir.c_str(),
                   node.status().message().c_str());
      const StatusCode code = node.status().code();
      return code == StatusCode::kInvalidArgument || code == StatusCode::kFailedPrecondition ? 2
                                                                                             : 1;
    }
    nodes.push_back(std::move(node).value());
  }

  KafkaTrainerOptions to;
  to.kafka = kafka;
  // The trainers of this process take the partitions of their own broker (not reachable by other
  // processes) by manual assignment: they consume at once, without the 3 s first join of a group
  // on the embedded broker. One trainer takes them all; N take every N-th each.
  to.assign = true;
  // Its broker dies with this process, so its offsets are never read back after a crash (the
  // connectors resend from the snapshot's source positions): commit them as soon as trained, and
  // the connectors never wait for a snapshot.
  to.commit_before_durable = true;
  to.snapshot_partition_bytes = 0;
  to.state_dir = f.state;
  to.learner = f.learner;
  to.snapshot_every_s = f.snapshot_every_s;
  to.checkpoint_every_s = f.checkpoint_every_s;
  to.snapshot_write_rate = f.snapshot_write_rate_mb * 1e6;
  to.normalize_text = true;
  to.languages = f.languages;
  to.max_idle_s = f.max_idle_s;
  to.char_distill = f.char_distill;
  to.char_distill_options = f.char_distill_options;
  to.char_distill_options.model.dim = f.learner.dim;
  to.char_lstm = char_lstm;
  to.char_lstm_options = char_lstm_options;
  std::shared_ptr<SharedSourcePositions> shared_positions;
  if (distributed) {
    shared_positions = std::make_shared<SharedSourcePositions>(*positions);
    to.param_shards = static_cast<uint32_t>(f.param_shards);
    if (Status s = ApplyParamClientFlags(f.param, &to); !s.ok()) return Usage(s.message());
    to.shared_positions = shared_positions;
  }
  std::vector<std::unique_ptr<KafkaTrainer>> trainers;
  for (int j = 0; j < f.trainers; ++j) {
    KafkaTrainerOptions tj = to;
    if (distributed) {
      tj.state_dir = TrainerState(f.state, j);
      tj.trainer_id = static_cast<uint32_t>(j + 1);
      if (f.trainers > 1) {
        for (int p = j; p < f.partitions; p += f.trainers) tj.assign_partitions.push_back(p);
      }
    }
    StatusOr<std::unique_ptr<KafkaTrainer>> trainer =
        OnBackgroundThread(background, [&] { return KafkaTrainer::Create(tj); });
    if (!trainer.ok()) {
      std::fprintf(stderr, "streamvec run: --state %s: %s\n", tj.state_dir.c_str(),
                   trainer.status().message().c_str());
      return trainer.status().code() == StatusCode::kInternal ? 1 : 2;
    }
    trainers.push_back(std::move(trainer).value());
  }

  IngestOptions io;
  io.kafka = kafka;
  io.from = f.data;
  io.follow = !f.no_follow;
  io.doc_per_file = f.doc_per_file;
  io.detect_language = !f.no_detect_lang;
  io.group = trainers.front()->group();
  io.start_positions = *positions;
  StatusOr<std::unique_ptr<Ingestor>> ingestor =
      OnBackgroundThread(background, [&] { return Ingestor::Create(io); });
  if (!ingestor.ok()) return Usage("--data " + f.data + ": " + ingestor.status().message());

  // The feed crawler, on the bundled feeds by default. Its dedup state is started afresh on each
  // start: the embedded broker keeps nothing across restarts, so an item acknowledged before a
  // crash may never have been trained; re-emitting it keeps "nothing accepted is lost" (at least
  // once). `streamvec crawl --state` against a real cluster keeps its dedup state.
  std::unique_ptr<crawler::Crawler> crawl;
  if (!f.no_crawl) {
    if (f.feeds.empty()) f.feeds = BundledPath("data/feeds/feeds.txt");
    if (!f.feeds.empty()) {
      StatusOr<std::vector<std::string>> feeds = crawler::ReadFeedsFile(f.feeds);
      if (!feeds.ok()) return Usage("--feeds " + f.feeds + ": " + feeds.status().message());
      crawler::CrawlerOptions co;
      co.feeds = *feeds;
      co.kafka = kafka;
      co.interval_seconds = f.crawl_interval_s;
      co.fetch.allow_file_dir = std::filesystem::path(f.feeds).parent_path().string();
      const std::string crawl_state = (std::filesystem::path(f.state) / "crawler").string();
      std::error_code ec;
      std::filesystem::remove_all(crawl_state, ec);
      co.state_dir = crawl_state;
      StatusOr<std::unique_ptr<crawler::Crawler>> c =
          OnBackgroundThread(background, [&] { return crawler::Crawler::Create(co); });
      if (!c.ok()) return Usage("--feeds " + f.feeds + ": " + c.status().message());
      crawl = std::move(c).value();
    }
  }

  // Figures for GET /metrics, refreshed by the report loop below (words/s over its interval).
  std::atomic<double> words_per_second{0};
  const std::vector<std::unique_ptr<KafkaTrainer>>* trainers_ptr = &trainers;
  Ingestor* ingestor_ptr = ingestor->get();
  crawler::Crawler* crawl_ptr = crawl.get();

  api::ServeOptions so;
  so.state_dir = f.state;
  so.host = host;
  so.port = port;
  so.poll_interval_s = 0.25;
  so.admin_token = admin_token;
  so.similarity_files = f.similarity;
  so.analogy_file = f.analogy;
  so.hnsw_ef_search = f.hnsw_ef;
  so.index_nice = std::max(so.index_nice, f.trainer_nice);
  so.index_policy = f.trainer_policy;
  so.index_rebuild_interval_s = f.index_rebuild_s;
  so.min_carried_recall = f.min_carried_recall;
  so.index_dir = f.index_dir;
  so.pinned_snapshots = f.pinned_snapshots;
  // Index builds wait (a minute at most) while the trainer is saturated: on two cores a build
  // took a core from training; queries scan unindexed words exactly meanwhile. Saturated: over
  // the last half second or more, the trainer waited for messages less than a fifth of the time
  // (its consumer's lag is no guide: librdkafka fetches ahead into its own queue), or the broker
  // still holds messages for it. The first call only takes a baseline, and defers.
  struct Saturation {
    std::mutex mu;
    bool started = false;
    bool saturated = true;
    double consume_s = 0;
    Clock::time_point at;
  };
  auto saturation = std::make_shared<Saturation>();
  so.defer_index_builds = [trainers_ptr, saturation] {
    const KafkaTrainerStats st = TotalStats(*trainers_ptr);
    const double n = static_cast<double>(trainers_ptr->size());
    Saturation& s = *saturation;
    std::lock_guard<std::mutex> lock(s.mu);
    const auto now = Clock::now();
    if (!s.started) {
      s.started = true;
      s.consume_s = st.consume_seconds;
      s.at = now;
      return true;
    }
    const double wall = std::chrono::duration<double>(now - s.at).count();
    if (wall >= 0.5) {
      s.saturated = st.consume_seconds - s.consume_s < 0.2 * wall * n;
      s.consume_s = st.consume_seconds;
      s.at = now;
    }
    return s.saturated || st.lag > 0;
  };
  so.on_snapshot = [trainers_ptr]() {
    for (const auto& t : *trainers_ptr) t->RequestSnapshot();
    return Status::Ok();
  };
  so.on_pause_ingest = [ingestor_ptr]() {
    ingestor_ptr->Pause(true);
    return Status::Ok();
  };
  so.on_resume_ingest = [ingestor_ptr]() {
    ingestor_ptr->Pause(false);
    return Status::Ok();
  };
  const std::vector<std::unique_ptr<ParamNode>>* nodes_ptr = &nodes;
  so.extra_metrics = [trainers_ptr, nodes_ptr, ingestor_ptr, crawl_ptr, &words_per_second]() {
    std::optional<crawler::CrawlStats> cs;
    if (crawl_ptr != nullptr) cs = crawl_ptr->stats();
    std::string out = PipelineMetrics(ingestor_ptr->stats(), TotalStats(*trainers_ptr),
                                      cs ? &*cs : nullptr, words_per_second.load());
    if (!nodes_ptr->empty()) {
      std::vector<KafkaTrainerStats> ts;
      for (const auto& t : *trainers_ptr) ts.push_back(t->stats());
      std::vector<ParamNodeStats> ns;
      for (const auto& n : *nodes_ptr) ns.push_back(n->stats());
      AppendLabelledTrainerMetrics(&out, ts);
      AppendParamNodeMetrics(&out, ns);
    }
    return out;
  };
  if (f.http_threads > 0) {
    if (Status s = api::InitializeHttpThreads(f.http_threads); !s.ok()) {
      std::fprintf(stderr, "streamvec: %s\n", s.message().c_str());
      return 2;
    }
  }
  std::vector<std::string> shard_states;
  for (int i = 0; i < f.param_shards; ++i) shard_states.push_back(ShardState(f.state, i));
  StatusOr<std::unique_ptr<api::Server>> server =
      distributed ? api::Server::Start(so, api::NewShardedStateDirSnapshotSource(shard_states))
                  : api::Server::Start(so);
  if (!server.ok()) {
    std::fprintf(stderr, "streamvec run: --http %s: %s\n", f.http.c_str(),
                 server.status().message().c_str());
    return server.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }

  const std::string shown_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const std::string url = "http://" + shown_host + ":" + std::to_string((*server)->port());
  std::printf(
      "streamvec run: broker %s, data %s%s, feeds %s, state %s\n"
      "serving %s  (dashboard: %s/ ; Ctrl-C writes a final snapshot and stops)\n"
      "  curl '%s/healthz'\n"
      "  curl '%s/v1/neighbors?word=music&k=10'\n"
      "  curl '%s/v1/similarity?w1=king&w2=queen'\n"
      "  curl '%s/v1/vectors/france'\n"
      "  curl '%s/v1/most_similar?positive=king,woman&negative=man&topn=5'\n"
      "  curl '%s/v1/snapshots'\n"
      "  curl '%s/metrics'\n",
      kafka.brokers.c_str(), f.data.c_str(), io.follow ? " (followed)" : "",
      crawl ? f.feeds.c_str() : "none", f.state.c_str(),
      url.c_str(), url.c_str(), url.c_str(), url.c_str(), url.c_str(), url.c_str(), url.c_str(),
      url.c_str(), url.c_str());
  if (distributed) {
    std::printf("%d trainer(s) and %d parameter-node shard(s): states %s/trainer-*, %s/shard-*\n",
                f.trainers, f.param_shards, f.state.c_str(), f.state.c_str());
  }
  if (!positions->empty()) {
    std::printf("resuming: %zu source position(s) from the last snapshot\n", positions->size());
  }
  std::fflush(stdout);

  std::atomic<bool> stop_ingest{false};
  Status crawl_status;
  std::thread crawl_thread;
  if (crawl) {
    crawl_thread = std::thread([&] {
      LowerPriority(background);
      crawl_status = crawl->Run(stop_ingest);
    });
  }
  std::atomic<bool> stop_nodes{false};
  std::vector<Status> node_status(nodes.size());
  std::vector<std::thread> node_threads;
  for (size_t i = 0; i < nodes.size(); ++i) {
    node_threads.emplace_back([&, i] {
      LowerPriority(background);
      node_status[i] = nodes[i]->Run(stop_nodes);
    });
  }
  std::atomic<bool> stop_trainer{false};
  std::atomic<size_t> trainers_done{0};
  Status ingest_status;
  std::vector<Status> trainer_status(trainers.size());
  std::thread ingest_thread([&] {
    LowerPriority(background);
    ingest_status = (*ingestor)->Run(stop_ingest);
  });
  std::vector<std::thread> trainer_threads;
  for (size_t j = 0; j < trainers.size(); ++j) {
    trainer_threads.emplace_back([&, j] {
      LowerPriority(background);
      trainer_status[j] = trainers[j]->Run(stop_trainer);
      ++trainers_done;
    });
  }

  const auto t0 = Clock::now();
  auto last_report = t0;
  uint64_t last_words = 0;
  uint64_t reports = 0;
  bool by_signal = false;
  while (trainers_done < trainers.size()) {
    timespec wait{0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      by_signal = true;
      break;
    }
    if (Clock::now() - last_report >= std::chrono::seconds(2)) {
      const double dt = std::chrono::duration<double>(Clock::now() - last_report).count();
      last_report = Clock::now();
      const KafkaTrainerStats ts = TotalStats(trainers);
      const IngestStats is = (*ingestor)->stats();
      words_per_second = (ts.words - last_words) / dt;
      if (++reports % 5 == 0) spdlog::info("ingested {} docs ({} rejected), trained {} docs, {} words ({:.0f} words/s), "
                   "snapshot {}, lag {}",
                   is.documents_delivered, is.rejected + ts.rejected, ts.documents, ts.words,
                   (ts.words - last_words) / dt, (*server)->snapshot_version(), ts.lag);
      last_words = ts.words;
    }
  }
  if (by_signal) spdlog::info("stopping: final snapshot of {}", f.state);
  stop_ingest = true;
  ingest_thread.join();
  if (crawl_thread.joinable()) crawl_thread.join();
  stop_trainer = true;
  for (std::thread& t : trainer_threads) t.join();
  if (!nodes.empty()) {
    // The trainers' final pushes are on .updates: the shards merge them before their final
    // snapshots.
    DrainShards(kafka, nodes, 60);
    stop_nodes = true;
    for (std::thread& t : node_threads) t.join();
  }
  (*server)->Stop();
  const KafkaTrainerStats ts = TotalStats(trainers);
  const IngestStats is = (*ingestor)->stats();
  std::fprintf(stderr,
               "streamvec run: %llu documents ingested (%llu rejected), %llu trained, %llu words "
               "trained in %.2f s from the trainer's start (%.0f words/s), snapshot %llu in %s, %.1f s; "
               "since the state began: %llu documents, %llu words\n",
               static_cast<unsigned long long>(is.documents_delivered),
               static_cast<unsigned long long>(is.rejected + ts.rejected),
               static_cast<unsigned long long>(ts.documents),
               static_cast<unsigned long long>(ts.words), ts.trained_until_seconds,
               ts.trained_until_seconds > 0 ? ts.words / ts.trained_until_seconds : 0.0,
               static_cast<unsigned long long>(ts.snapshot_version), f.state.c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count(),
               static_cast<unsigned long long>(ts.state_documents),
               static_cast<unsigned long long>(ts.state_words));
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ParamNodeStats s = nodes[i]->stats();
    std::fprintf(stderr,
                 "streamvec run: shard %zu: %llu push messages merged (%llu rejected), %llu rows "
                 "held, clock %llu, snapshot %llu in %s\n",
                 i, static_cast<unsigned long long>(s.merges),
                 static_cast<unsigned long long>(s.rejected),
                 static_cast<unsigned long long>(s.rows), static_cast<unsigned long long>(s.clock),
                 static_cast<unsigned long long>(s.snapshot_version),
                 ShardState(f.state, static_cast<int>(i)).c_str());
  }
  int exit_code = 0;
  for (size_t j = 0; j < trainer_status.size(); ++j) {
    if (trainer_status[j].ok()) continue;
    std::fprintf(stderr, "streamvec run: trainer%s: %s\n",
                 distributed ? (" " + std::to_string(j)).c_str() : "",
                 trainer_status[j].message().c_str());
    exit_code = 1;
  }
  for (size_t i = 0; i < node_status.size(); ++i) {
    if (node_status[i].ok()) continue;
    std::fprintf(stderr, "streamvec run: shard %zu: %s\n", i, node_status[i].message().c_str());
    exit_code = 1;
  }
  return exit_code;
}

}  // namespace

void RegisterRunCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = root.add_subcommand(
      "run", "The whole pipeline in one process: embedded Kafka broker, file connector, trainer "
             "and REST API (Ctrl-C writes a final snapshot)");
  cmd->add_option("--data", flags->data,
                  "File or directory to ingest, one document per line (gzip, xz and zstd files "
                  "decoded), followed like tail -F (default: the bundled data/run)");
  cmd->add_option("--state", flags->state, "State directory (RocksDB snapshots); resumed if it exists")
      ->capture_default_str();
  AddHttpThreadsFlag(cmd, &flags->http_threads);
  cmd->add_option("--http", flags->http, "REST address HOST:PORT (port 0: pick a free one)")
      ->capture_default_str();
  cmd->add_option("--prefix", flags->prefix, "Kafka topic prefix")->capture_default_str();
  cmd->add_option("--partitions", flags->partitions, "Partitions of <prefix>.docs")
      ->capture_default_str();
  cmd->add_option("--snapshot-every", flags->snapshot_every_s,
                  "Seconds between serving publications (the vectors `serve` reads)")
      ->capture_default_str();
  cmd->add_option("--checkpoint-every", flags->checkpoint_every_s,
                  "Seconds between recovery checkpoints (the whole learner and the source "
                  "positions; a crash replays at most this much of the stream; 0: every "
                  "snapshot)")
      ->capture_default_str();
  cmd->add_option("--snapshot-write-rate", flags->snapshot_write_rate_mb,
                  "MB/s that snapshots may write on average (0: no limit): a publication that "
                  "rewrote many rows is followed by a longer pause")
      ->capture_default_str();
  cmd->add_flag("--no-follow", flags->no_follow, "Read --data once instead of following it");
  cmd->add_option("--feeds", flags->feeds,
                  "Feeds file to crawl (one URL or local path a line; default: the bundled "
                  "data/feeds/feeds.txt)");
  cmd->add_flag("--no-crawl", flags->no_crawl, "Do not crawl feeds");
  cmd->add_option("--crawl-interval", flags->crawl_interval_s, "Seconds between passes over a feed")
      ->capture_default_str();
  AddAdminTokenFileFlag(cmd, &flags->admin_token_file);
  cmd->add_option("--admin-token", flags->admin_token,
                  "Bearer token for POST /v1/admin/... (snapshot, ingest pause/resume), on the "
                  "command line: visible to every user in `ps`; prefer --admin-token-file or $" +
                      std::string(kAdminTokenEnv));
  cmd->add_option("--similarity", flags->similarity,
                  "Word-pair file scored on every snapshot (repeatable; WS-353, MEN)");
  cmd->add_option("--analogy", flags->analogy, "Analogy file scored on every snapshot");
  cmd->add_flag("--doc-per-file", flags->doc_per_file, "One document per file, not per line");
  cmd->add_option("--lang", flags->languages,
                  "Train only documents in these languages (e.g. en,de; detected per document "
                  "with CLD2 unless the feed page names it); others are skipped and counted")
      ->delimiter(',');
  cmd->add_flag("--no-detect-lang", flags->no_detect_lang,
                "Do not detect the language of the files' documents (their 'lang' stays empty)");
  cmd->add_option("--max-idle", flags->max_idle_s,
                  "Stop (after a final snapshot) once the topic is read to its end and no "
                  "document arrived for this many seconds (0: run until Ctrl-C)")
      ->capture_default_str();
  StreamingOptions& o = flags->learner;
  o.vocab_capacity = 200000;
  cmd->add_option("--model", flags->model,
                  "sgns, or char-lstm: SGNS with a character LSTM as the input side, so every "
                  "string gets a vector (docs/char-model.md)")
      ->check(CLI::IsMember({"sgns", "char-lstm"}))
      ->capture_default_str();
  cmd->add_option("--dim", o.dim, "Vector size")->capture_default_str();
  cmd->add_option("--window", o.window, "Maximum context radius")->capture_default_str();
  cmd->add_option("--negative", o.negative, "Negative samples per centre word")
      ->capture_default_str();
  cmd->add_option("--sample", o.sample, "Subsampling threshold on running counts")
      ->capture_default_str();
  cmd->add_option("--min-count", o.min_count, "Count at which a word is admitted")
      ->capture_default_str();
  cmd->add_option("--vocab-capacity", o.vocab_capacity, "Words held at most (space-saving)")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "Training threads of each trainer (Hogwild)")
      ->capture_default_str();
  cmd->add_option("--trainers", flags->trainers,
                  "Kafka trainers, each taking every N-th partition of <prefix>.docs (more than "
                  "one needs --param-shards; states <state>/trainer-<j>)")
      ->capture_default_str();
  cmd->add_option("--param-shards", flags->param_shards,
                  "Parameter-node shards run in the process, merging the trainers' pushes "
                  "(states <state>/shard-<i>, served as their union; docs/distributed.md); 0: "
                  "one trainer alone")
      ->capture_default_str();
  cmd->add_option("--merge", flags->merge,
                  "With --param-shards: the shards' merge rule, downpour, average, sum, adasum or "
                  "scaled (docs/distributed.md)")
      ->capture_default_str();
  cmd->add_option("--merge-scale", flags->merge_scale,
                  "With --param-shards and the scaled merge: the factor of the sum, in (0, 1]; "
                  "auto: 1/sqrt(T), T the trainers that pushed to a shard in the last 30 s")
      ->capture_default_str();
  cmd->add_option("--publish-every", flags->publish_every,
                  "With --param-shards: seconds between the shards' publications on "
                  "<prefix>.params (coalescing; shorter: fresher rows for the trainers, more "
                  "bytes)")
      ->capture_default_str();
  AddParamClientFlags(cmd, &flags->param, "With --param-shards, each trainer: ");
  cmd->add_option("--device", flags->device,
                  "Where the learner's rows live and train: cpu, or cuda[:N]; with --model "
                  "char-lstm, where the character model's passes run (docs/gpu.md)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Random seed")->capture_default_str();
  cmd->add_option("--trainer-nice", flags->trainer_nice,
                  "Nice value of the pipeline's threads (broker, connector, crawler, trainer; "
                  "0-19): requests first on shared cores; 0: equal priority")
      ->check(CLI::Range(0, 19))
      ->capture_default_str();
  cmd->add_option("--trainer-policy", flags->trainer_policy,
                  "How the pipeline's threads and the index builds yield to requests: nice "
                  "(at --trainer-nice: training and index builds keep a share of busy cores) or "
                  "idle (SCHED_IDLE: requests always first; a load that keeps every core busy "
                  "stops training and index builds until it eases)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, BackgroundPolicy>{{"idle", BackgroundPolicy::kIdle},
                                                  {"nice", BackgroundPolicy::kNice}}))
      ->default_str("nice");
  AddIndexFlags(cmd, &flags->hnsw_ef, &flags->index_rebuild_s, &flags->index_dir,
                &flags->min_carried_recall);
  AddPinnedSnapshotsFlag(cmd, &flags->pinned_snapshots);
  AddCharModelFlags(cmd, &flags->char_distill, &flags->char_distill_options, &flags->char_mode,
                    &flags->char_batch_words);
  cmd->callback([flags, exit_code, cmd]() {
    flags->char_mode_given = cmd->count("--char-mode") > 0 || cmd->count("--char-batch-words") > 0;
    ApplyCharModelDefaults(*cmd, flags->model, &flags->char_distill_options);
    for (const char* flag : {"--merge", "--merge-scale", "--publish-every", "--push-every",
                             "--push-hot-rows", "--push-max-period", "--pull-every",
                             "--max-staleness", "--delta-precision", "--group-counts"}) {
      if (cmd->count(flag) > 0) flags->param_flags_given = true;
    }
    *exit_code = RunPipeline(*flags);
  });
}

}  // namespace streamvec::app

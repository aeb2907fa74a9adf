// streamvec run: the whole pipeline in one process (docs/pipeline.md): an embedded Kafka broker
// (librdkafka's mock cluster on 127.0.0.1), the file connector following --data, one Kafka
// trainer writing snapshots to --state, and the REST API on --http. Ctrl-C (SIGINT) or SIGTERM
// writes a final snapshot. Restarted on the same --state, it resumes from the last snapshot: the
// learner's state, and the connector's positions of the documents that snapshot covers (the
// embedded broker keeps nothing across restarts, so the trainer starts the new broker's topic from
// the beginning and the connector re-sends what the snapshot did not cover: at least once).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "commands.h"
#include "host_port.h"
#include "streamvec/api/server.h"
#include "streamvec/base/cpu_features.h"
#include "streamvec/ingest/ingestor.h"
#include "streamvec/kafka/broker.h"
#include "streamvec/kafka/document.h"
#include "streamvec/trainer/kafka_trainer.h"

namespace streamvec::app {
namespace {

struct RunFlags {
  std::string data;  // "" = the bundled data/run
  std::string state = "streamvec-state";
  std::string http = "127.0.0.1:8080";
  std::string prefix = "streamvec";
  int partitions = 16;
  double snapshot_every_s = 2;
  bool no_follow = false;
  bool doc_per_file = false;
  double max_idle_s = 0;
  int threads = 1;
  StreamingOptions learner;
};

// The bundled data: ./data/run, else <repo>/data/run next to build/app/streamvec.
std::string DefaultDataDir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory("data/run", ec)) return fs::absolute("data/run").string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
      if (fs::is_directory(p / "data" / "run", ec)) return (p / "data" / "run").string();
    }
  }
  return "data/run";
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
  if (f.data.empty()) f.data = DefaultDataDir();
  {
    std::error_code ec;
    if (!std::filesystem::exists(f.data, ec)) return Usage("--data: " + f.data + " does not exist");
    f.data = std::filesystem::absolute(f.data, ec).string();
  }
  if (!(f.snapshot_every_s > 0)) return Usage("--snapshot-every must be > 0 seconds");
  f.learner.threads = f.threads;
  f.learner.isa = DetectBestIsa();
  if (Status s = ValidateStreamingOptions(f.learner); !s.ok()) return Usage(s.message());

  // Block the stop signals before any thread starts: every thread (ours, librdkafka's,
  // cpprestsdk's) inherits the mask, and this thread takes them with sigtimedwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Where the last snapshot left the connector (read before the trainer locks the state).
  StatusOr<std::map<std::string, int64_t>> positions =
      KafkaTrainer::ReadSourcePositions(f.state);
  if (!positions.ok()) return Usage("--state " + f.state + ": " + positions.status().message());

  EmbeddedBrokerOptions broker_options;
  broker_options.partitions = f.partitions;
  StatusOr<std::unique_ptr<EmbeddedBroker>> broker = EmbeddedBroker::Start(broker_options);
  if (!broker.ok()) return Usage(broker.status().message());
  for (const std::string& topic : {DocsTopic(f.prefix), RejectedTopic(f.prefix)}) {
    if (Status s = (*broker)->CreateTopic(topic); !s.ok()) return Usage(s.message());
  }
  KafkaOptions kafka;
  kafka.brokers = (*broker)->bootstrap();
  kafka.topic_prefix = f.prefix;

  KafkaTrainerOptions to;
  to.kafka = kafka;
  // The embedded broker is fresh on every start: a short session lets a restarted member join
  // fast (STACK.md: the 45 s default delays a rejoin).
  to.kafka.properties = {{"session.timeout.ms", "6000"}, {"heartbeat.interval.ms", "500"}};
  to.state_dir = f.state;
  to.learner = f.learner;
  to.snapshot_every_s = f.snapshot_every_s;
  to.normalize_text = true;
  to.max_idle_s = f.max_idle_s;
  StatusOr<std::unique_ptr<KafkaTrainer>> trainer = KafkaTrainer::Create(to);
  if (!trainer.ok()) {
    std::fprintf(stderr, "streamvec run: --state %s: %s\n", f.state.c_str(),
                 trainer.status().message().c_str());
    return trainer.status().code() == StatusCode::kInternal ? 1 : 2;
  }

  api::ServeOptions so;
  so.state_dir = f.state;
  so.host = host;
  so.port = port;
  so.poll_interval_s = 0.25;
  StatusOr<std::unique_ptr<api::Server>> server = api::Server::Start(so);
  if (!server.ok()) {
    std::fprintf(stderr, "streamvec run: --http %s: %s\n", f.http.c_str(),
                 server.status().message().c_str());
    return server.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }

  IngestOptions io;
  io.kafka = kafka;
  io.from = f.data;
  io.follow = !f.no_follow;
  io.doc_per_file = f.doc_per_file;
  io.group = (*trainer)->group();
  io.start_positions = *positions;
  StatusOr<std::unique_ptr<Ingestor>> ingestor = Ingestor::Create(io);
  if (!ingestor.ok()) return Usage("--data " + f.data + ": " + ingestor.status().message());

  const std::string shown_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const std::string url = "http://" + shown_host + ":" + std::to_string((*server)->port());
  std::printf(
      "streamvec run: broker %s, data %s%s, state %s\n"
      "serving %s  (Ctrl-C writes a final snapshot and stops)\n"
      "  curl '%s/healthz'\n"
      "  curl '%s/v1/neighbors?word=music&k=10'\n"
      "  curl '%s/v1/similarity?w1=king&w2=queen'\n"
      "  curl '%s/v1/vectors/france'\n"
      "  curl '%s/v1/snapshots'\n",
      kafka.brokers.c_str(), f.data.c_str(), io.follow ? " (followed)" : "", f.state.c_str(),
      url.c_str(), url.c_str(), url.c_str(), url.c_str(), url.c_str(), url.c_str());
  if (!positions->empty()) {
    std::printf("resuming: %zu source position(s) from the last snapshot\n", positions->size());
  }
  std::fflush(stdout);

  std::atomic<bool> stop_ingest{false};
  std::atomic<bool> stop_trainer{false};
  std::atomic<bool> trainer_done{false};
  Status ingest_status;
  Status trainer_status;
  std::thread ingest_thread([&] { ingest_status = (*ingestor)->Run(stop_ingest); });
  std::thread trainer_thread([&] {
    trainer_status = (*trainer)->Run(stop_trainer);
    trainer_done = true;
  });

  const auto t0 = Clock::now();
  auto last_report = t0;
  uint64_t last_words = 0;
  bool by_signal = false;
  while (!trainer_done) {
    timespec wait{0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      by_signal = true;
      break;
    }
    if (Clock::now() - last_report >= std::chrono::seconds(10)) {
      const double dt = std::chrono::duration<double>(Clock::now() - last_report).count();
      last_report = Clock::now();
      const KafkaTrainerStats ts = (*trainer)->stats();
      const IngestStats is = (*ingestor)->stats();
      spdlog::info("ingested {} docs ({} rejected), trained {} docs, {} words ({:.0f} words/s), "
                   "snapshot {}, lag {}",
                   is.documents_delivered, is.rejected + ts.rejected, ts.documents, ts.words,
                   (ts.words - last_words) / dt, (*server)->snapshot_version(), ts.lag);
      last_words = ts.words;
    }
  }
  if (by_signal) spdlog::info("stopping: final snapshot of {}", f.state);
  stop_ingest = true;
  ingest_thread.join();
  stop_trainer = true;
  trainer_thread.join();
  (*server)->Stop();
  const KafkaTrainerStats ts = (*trainer)->stats();
  const IngestStats is = (*ingestor)->stats();
  std::fprintf(stderr,
               "streamvec run: %llu documents ingested (%llu rejected), %llu trained, %llu words, "
               "snapshot %llu in %s, %.1f s\n",
               static_cast<unsigned long long>(is.documents_delivered),
               static_cast<unsigned long long>(is.rejected + ts.rejected),
               static_cast<unsigned long long>(ts.documents),
               static_cast<unsigned long long>(ts.words),
               static_cast<unsigned long long>(ts.snapshot_version), f.state.c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count());
  if (!trainer_status.ok()) {
    std::fprintf(stderr, "streamvec run: trainer: %s\n", trainer_status.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterRunCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = root.add_subcommand(
      "run", "The whole pipeline in one process: embedded Kafka broker, file connector, trainer "
             "and REST API (Ctrl-C writes a final snapshot)");
  cmd->add_option("--data", flags->data,
                  "File or directory to ingest, one document per line, followed like tail -F "
                  "(default: the bundled data/run)");
  cmd->add_option("--state", flags->state, "State directory (RocksDB snapshots); resumed if it exists")
      ->capture_default_str();
  cmd->add_option("--http", flags->http, "REST address HOST:PORT (port 0: pick a free one)")
      ->capture_default_str();
  cmd->add_option("--prefix", flags->prefix, "Kafka topic prefix")->capture_default_str();
  cmd->add_option("--partitions", flags->partitions, "Partitions of <prefix>.docs")
      ->capture_default_str();
  cmd->add_option("--snapshot-every", flags->snapshot_every_s, "Seconds between snapshots")
      ->capture_default_str();
  cmd->add_flag("--no-follow", flags->no_follow, "Read --data once instead of following it");
  cmd->add_flag("--doc-per-file", flags->doc_per_file, "One document per file, not per line");
  cmd->add_option("--max-idle", flags->max_idle_s,
                  "Stop (after a final snapshot) once no document arrived for this many seconds "
                  "(0: run until Ctrl-C)")
      ->capture_default_str();
  StreamingOptions& o = flags->learner;
  o.vocab_capacity = 200000;
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
  cmd->add_option("--threads", flags->threads, "Training threads (Hogwild)")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Random seed")->capture_default_str();
  cmd->callback([flags, exit_code]() { *exit_code = RunPipeline(*flags); });
}

}  // namespace streamvec::app

// `streamvec train`: batch SGNS / CBOW training of a text file into word2vec-format vectors.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "char_flags.h"
#include "commands.h"
#include "stream_train.h"
#include "streamvec/base/cpu_features.h"
#include "streamvec/kafka/client_config.h"
#include "streamvec/kernels/cuda.h"
#include "streamvec/store/word2vec_format.h"
#include "streamvec/trainer/batch_trainer.h"
#include "streamvec/trainer/corpus.h"
#include "streamvec/trainer/cuda_batch_trainer.h"

namespace streamvec::app {
namespace {

struct TrainFlags {
  std::string input;
  std::string output;
  std::string model = "sgns";
  std::string format = "text";
  std::string kernel = "auto";
  std::string device = "cpu";
  std::string progress = "auto";
  std::optional<float> alpha;
  std::optional<float> min_alpha;
  uint64_t min_count = 5;
  TrainOptions options;
  // --stream only (docs/streaming.md).
  bool stream = false;
  std::string state;
  std::string snapshot_every = "300s";
  std::string optimizer = "adagrad";
  StreamingOptions stream_options;
  bool char_distill = false;  // --char-distill (streaming only)
  CharDistillOptions char_distill_options;
  std::string char_mode = "sum";                              // --char-mode (--model char-lstm)
  uint64_t char_batch_words = CharSgnsOptions().batch_words;  // --char-batch-words
  bool char_mode_given = false;
  std::vector<std::string> explicit_flags;
  // Flags of the batch trainer alone that were given (refused with --stream or --brokers).
  std::vector<std::string> batch_only_flags;
  // Passes over --input for the streaming learner: 1, or --epochs for batch --model char-lstm.
  int epochs_for_stream = 1;
  bool epochs_given = false;  // --epochs on the command line (refused with --stream and Kafka)
  // Kafka (docs/pipeline.md): consume <prefix>.docs instead of --input.
  std::string brokers;
  std::string bootstrap_file;
  std::string group;
  std::string prefix = "streamvec";
  std::vector<std::string> kafka_config;
  double max_idle = 0;
  bool normalize = false;
  std::vector<std::string> languages;
  bool snapshot_every_given = false;
  std::string assign;
  int64_t snapshot_partition_bytes = -1;
  double checkpoint_every = -1;  // -1: not given
  double snapshot_write_rate = -1;  // MB/s; -1: not given
  std::string metrics;              // --metrics HOST:PORT (Kafka only)
  uint32_t param_shards = 0;        // parameter node (Kafka only)
  ParamClientFlags param;           // --push-every ... --delta-precision
  uint32_t trainer_id = 0;
};

void DrawProgressBar(const TrainProgress& p) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(p.fraction * kWidth);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  const double eta = p.words_per_second > 0 && p.fraction < 1.0
                         ? p.seconds * (1.0 - p.fraction) / std::max(p.fraction, 1e-9)
                         : 0.0;
  std::fprintf(stderr, "\r[%s] %5.1f%%  %s words/s  loss %.4f  alpha %.5f  ETA %dm%02ds ",
               bar.c_str(), 100.0 * p.fraction, HumanNumber(p.words_per_second).c_str(), p.loss,
               p.alpha, static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
  std::fflush(stderr);
}

// The streaming learner's options from the flags (--stream and --brokers). Returns 0, or the
// exit status of a usage error (message printed).
int StreamOptionsFromFlags(const TrainFlags& f, const char* mode, StreamingOptions* out) {
  if (f.model == "cbow") {
    return TrainFail(Status::InvalidArgument(std::string("--model cbow is not supported with ") +
                                             mode + " (skip-gram only)"),
                     2);
  }
  StreamingOptions& so = *out;
  so = f.stream_options;
  const TrainOptions& o = f.options;
  so.dim = o.dim;
  so.window = o.window;
  so.negative = o.negative;
  so.negative_share = o.negative_share;
  so.negative_pool = o.negative_pool;
  so.sample = o.sample;
  so.min_count = f.min_count;
  so.seed = o.seed;
  so.threads = o.threads;
  so.optimizer = f.optimizer == "constant" ? StreamOptimizer::kConstant : StreamOptimizer::kAdagrad;
  so.alpha = f.alpha.value_or(0.025f);
  so.isa = DetectBestIsa();
  DeviceSpec device;
  if (Status s = ParseDeviceSpec(f.device, &device); !s.ok()) return TrainFail(s, 2);
  so.cuda_device = device.cuda ? device.ordinal : -1;
  if (f.kernel != "auto" && f.kernel != "reference") {
    Isa isa;
    if (!ParseIsa(f.kernel, &isa) || !IsaSupported(isa)) {
      return TrainFail(Status::InvalidArgument("--kernel '" + f.kernel + "' is not usable here"),
                       2);
    }
    so.isa = isa;
  }
  return 0;
}

int RunStream(TrainFlags& f) {
  StreamTrainFlags s;
  s.input = f.input;
  s.state = f.state;
  s.output = f.output;
  s.format = f.format;
  s.snapshot_every = f.snapshot_every;
  s.explicit_flags = f.explicit_flags;
  s.progress_bar = f.progress == "always" || (f.progress == "auto" && isatty(fileno(stderr)));
  s.normalize = f.normalize;
  s.epochs = f.epochs_for_stream;
  if (int code = StreamOptionsFromFlags(f, "--stream", &s.options); code != 0) return code;
  s.char_distill = f.char_distill;
  s.char_distill_options = f.char_distill_options;
  if (Status st = CharLstmFromFlags(f.model, f.char_distill, f.char_mode, f.char_batch_words,
                                    f.char_mode_given, &s.char_lstm, &s.char_lstm_options);
      !st.ok()) {
    return TrainFail(st, 2);
  }
  return RunStreamTrain(s);
}

// Batch `train --model char-lstm --input FILE --output V [--epochs N] [--state DIR]`: the
// streaming learner with the character model as its input side (CharSgns), --epochs passes over
// the file, the vectors of its vocabulary written to --output. The model is kept in --state
// (for serve, vectors and eval --oov); without it, in a temporary state removed at the end.
int RunCharLstmBatch(TrainFlags& f) {
  if (!f.batch_only_flags.empty()) {
    return TrainFail(Status::InvalidArgument(f.batch_only_flags.front() +
                                             " applies to the sgns and cbow batch trainer only"),
                     2);
  }
  if (f.output.empty()) return TrainFail(Status::InvalidArgument("--output is required"), 2);
  if (f.options.epochs > 1 && f.input == "-") {
    return TrainFail(
        Status::InvalidArgument("--epochs " + std::to_string(f.options.epochs) +
                                ": more than one pass needs --input FILE (stdin is read "
                                "once)"),
        2);
  }
  std::string temporary;
  if (f.state.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "streamvec-char-lstm-XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) {
      return TrainFail(Status::IoError("cannot make a temporary state directory: " +
                                       std::string(std::strerror(errno))),
                       1);
    }
    temporary = pattern;
    f.state = temporary;
    spdlog::info(
        "no --state: the character model is trained in {} and removed at the end "
        "(give --state DIR to keep it for serve, vectors and eval --oov)",
        temporary);
  }
  f.epochs_for_stream = f.options.epochs;
  const int code = RunStream(f);
  if (!temporary.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temporary, ec);
  }
  return code;
}

int RunKafka(TrainFlags& f) {
  if (!f.brokers.empty() && !f.bootstrap_file.empty()) {
    return TrainFail(Status::InvalidArgument("give --brokers or --bootstrap-file, not both"), 2);
  }
  if (f.stream || !f.input.empty()) {
    return TrainFail(Status::InvalidArgument("--brokers/--bootstrap-file read Kafka: drop --stream "
                                             "and --input"),
                     2);
  }
  if (!f.output.empty()) {
    return TrainFail(Status::InvalidArgument("--output is not supported with --brokers (use "
                                             "streamvec export --state DIR)"),
                     2);
  }
  KafkaTrainFlags k;
  k.kafka.brokers = f.brokers;
  if (!f.bootstrap_file.empty()) {
    StatusOr<std::string> b = ReadBootstrapFile(f.bootstrap_file);
    if (!b.ok())
      return TrainFail(Status::InvalidArgument("--bootstrap-file: " + b.status().message()), 2);
    k.kafka.brokers = *b;
  }
  k.kafka.topic_prefix = f.prefix;
  for (const std::string& text : f.kafka_config) {
    StatusOr<std::pair<std::string, std::string>> p = ParseKafkaProperty(text);
    if (!p.ok()) return TrainFail(p.status(), 2);
    k.kafka.properties.push_back(*p);
  }
  k.group = f.group;
  k.state = f.state;
  if (f.snapshot_every_given) k.snapshot_every = f.snapshot_every;
  k.max_idle_s = f.max_idle;
  k.normalize = f.normalize;
  k.languages = f.languages;
  k.assign = f.assign;
  k.snapshot_partition_bytes = f.snapshot_partition_bytes;
  k.checkpoint_every_s = std::max(0.0, f.checkpoint_every);
  k.snapshot_write_rate_mb = std::max(0.0, f.snapshot_write_rate);
  k.metrics = f.metrics;
  k.param_shards = f.param_shards;
  k.param = f.param;
  k.trainer_id = f.trainer_id;
  k.explicit_flags = f.explicit_flags;
  if (int code = StreamOptionsFromFlags(f, "--brokers", &k.options); code != 0) return code;
  k.char_distill = f.char_distill;
  k.char_distill_options = f.char_distill_options;
  if (Status st = CharLstmFromFlags(f.model, f.char_distill, f.char_mode, f.char_batch_words,
                                    f.char_mode_given, &k.char_lstm, &k.char_lstm_options);
      !st.ok()) {
    return TrainFail(st, 2);
  }
  if (k.char_lstm && k.param_shards > 0) {
    return TrainFail(Status::InvalidArgument("--model char-lstm does not train with --param-shards "
                                             "(the parameter node merges table rows only)"),
                     2);
  }
  return RunKafkaTrain(k);
}

int RunTrain(TrainFlags& f) {
  const bool streaming = f.stream || !f.brokers.empty() || !f.bootstrap_file.empty();
  DeviceSpec device;
  if (Status s = ParseDeviceSpec(f.device, &device); !s.ok()) return TrainFail(s, 2);
  if (device.cuda) {
    // Before the corpus is read: a missing device or driver fails at once.
    if (Status s = CudaCheckDevice(device.ordinal, nullptr); !s.ok()) {
      return TrainFail(Status::FailedPrecondition("--device " + f.device + ": " + s.message()), 2);
    }
  }
  if (streaming && !f.batch_only_flags.empty()) {
    return TrainFail(Status::InvalidArgument(f.batch_only_flags.front() +
                                             " applies to batch training only (not with --stream, "
                                             "--brokers or --bootstrap-file)"),
                     2);
  }
  if (streaming && f.epochs_given) {
    return TrainFail(
        Status::InvalidArgument("--epochs applies to batch training: --stream, --brokers "
                                "and --bootstrap-file make one pass over the stream"),
        2);
  }
  if (!f.brokers.empty() || !f.bootstrap_file.empty()) return RunKafka(f);
  if (!f.metrics.empty() || f.param_shards > 0) {
    const std::string flag = f.param_shards > 0 ? "--param-shards" : "--metrics";
    return TrainFail(
        Status::InvalidArgument(flag + " is for a Kafka trainer: it needs --brokers or "
                                       "--bootstrap-file"),
        2);
  }
  if (f.normalize && !f.stream) {
    return TrainFail(
        Status::InvalidArgument("--normalize needs --stream or --brokers (batch training "
                                "reads its corpus as it is)"),
        2);
  }
  if (!f.group.empty() || !f.kafka_config.empty() || f.max_idle != 0 || !f.languages.empty() ||
      !f.assign.empty() || f.snapshot_partition_bytes >= 0 || f.checkpoint_every >= 0 ||
      f.snapshot_write_rate >= 0) {
    return TrainFail(Status::InvalidArgument("--group, --kafka-config, --max-idle, --lang, "
                                             "--assign, --snapshot-partition-bytes, "
                                             "--checkpoint-every and --snapshot-write-rate need "
                                             "--brokers or --bootstrap-file"),
                     2);
  }
  if (f.input.empty()) {
    return TrainFail(Status::InvalidArgument("--input is required (or --brokers to train from "
                                             "Kafka)"),
                     2);
  }
  if (f.stream) return RunStream(f);
  if (f.model == "char-lstm" || f.char_mode_given) return RunCharLstmBatch(f);
  if (!f.state.empty()) {
    return TrainFail(
        Status::InvalidArgument("--state needs --stream (batch training keeps no state)"), 2);
  }
  if (f.output.empty()) return TrainFail(Status::InvalidArgument("--output is required"), 2);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  TrainOptions& o = f.options;
  o.model = f.model == "cbow" ? TrainModel::kCbow : TrainModel::kSkipGram;
  // word2vec.c's defaults: alpha 0.025 for skip-gram, 0.05 for CBOW.
  o.alpha = f.alpha.value_or(o.model == TrainModel::kCbow ? 0.05f : 0.025f);
  // Linear decay to alpha/4 (skip-gram) or alpha/2 (CBOW) by default (docs/training.md): with one
  // or few passes, decaying to ~0 as word2vec.c does wastes the last part of the data (1 epoch on
  // the 100M benchmark corpus, skip-gram: WS-353 0.48 / analogy 11.6% decaying to 1e-4, 0.50 /
  // 13.7% decaying to alpha/4; CBOW at alpha 0.05: 0.49 at alpha/4, 0.51 at alpha/2).
  o.min_alpha = f.min_alpha.value_or(o.model == TrainModel::kCbow ? o.alpha / 2 : o.alpha / 4);
  if (f.kernel == "reference") {
    o.reference_kernel = true;
  } else {
    Isa isa;
    if (!ParseIsa(f.kernel, &isa)) {
      return TrainFail(
          Status::InvalidArgument("--kernel must be auto, reference, portable, avx2 or "
                                  "avx512, not '" +
                                  f.kernel + "'"),
          2);
    }
    if (!IsaSupported(isa)) {
      return TrainFail(Status::InvalidArgument(std::string("--kernel ") + IsaName(isa) +
                                               " is not supported by this CPU"),
                       2);
    }
    o.isa = isa;
  }
  if (Status s = ValidateTrainOptions(o); !s.ok()) return TrainFail(s, 2);
  if (f.min_count < 1) return TrainFail(Status::InvalidArgument("--min-count must be >= 1"), 2);
  VectorFormat format;
  if (!ParseVectorFormat(f.format, &format)) {
    return TrainFail(
        Status::InvalidArgument("--format must be text or binary, not '" + f.format + "'"), 2);
  }
  if (Status s = CheckWritable(f.output); !s.ok()) {
    return TrainFail(Status::InvalidArgument("--output: " + s.message()), 2);
  }

  CorpusOptions corpus_options;
  corpus_options.min_count = f.min_count;
  corpus_options.threads = o.threads;
  StatusOr<Corpus> corpus_or = LoadCorpus(f.input, corpus_options);
  if (!corpus_or.ok())
    return TrainFail(Status::InvalidArgument("--input: " + corpus_or.status().message()), 2);
  const Corpus& corpus = corpus_or.value();
  const TokenizerStats& ts = corpus.tokenizer_stats;
  if (ts.invalid_utf8_tokens + ts.overlong_tokens > 0) {
    spdlog::warn("--input: skipped {} token(s) with invalid UTF-8 and {} longer than {} bytes; "
                 "first at byte offset {}",
                 ts.invalid_utf8_tokens, ts.overlong_tokens,
                 corpus_options.tokenizer.max_token_bytes, ts.first_skipped_offset);
  }
  const auto t1 = Clock::now();

  const bool tty = f.progress == "always" || (f.progress == "auto" && isatty(fileno(stderr)));
  BatchTrainer trainer(corpus, o);
  TrainSummary summary;
  if (device.cuda) {
    StatusOr<TrainSummary> on_device =
        TrainBatchOnCuda(corpus, o, device.ordinal, trainer.rows(),
                         tty ? std::function<void(const TrainProgress&)>(DrawProgressBar)
                             : std::function<void(const TrainProgress&)>(),
                         0.2);
    if (tty) std::fputc('\n', stderr);
    if (!on_device.ok()) {
      const Status& s = on_device.status();
      return TrainFail(Status(s.code(), "--device " + f.device + ": " + s.message()),
                       s.code() == StatusCode::kFailedPrecondition ? 2 : 1);
    }
    summary = on_device.value();
  } else if (tty) {
    summary = trainer.Train(DrawProgressBar, 0.2);
    std::fputc('\n', stderr);
  } else {
    summary = trainer.Train();
  }
  const auto t2 = Clock::now();

  if (Status s = WriteWord2Vec(f.output, corpus.vocab.words(), trainer.input(), trainer.stride(),
                               o.dim, format, o.threads);
      !s.ok()) {
    return TrainFail(s, 1);
  }
  const auto t3 = Clock::now();
  auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const double total = secs(t3 - t0);
  const double raw_trained = static_cast<double>(corpus.raw_words) * o.epochs;
  std::fprintf(stderr,
               "streamvec train: %s, dim %d, %llu words (%zu in vocabulary), %d epoch(s), "
               "%d thread(s), kernel %s: read %.2f s, train %.3f s (%s words/s), write %.2f s, "
               "total %.2f s (%s words/s), loss %.4f\n",
               o.model == TrainModel::kCbow ? "cbow" : "sgns", o.dim,
               static_cast<unsigned long long>(corpus.raw_words), corpus.vocab.size(), o.epochs,
               o.threads, summary.kernel.c_str(), secs(t1 - t0), secs(t2 - t1),
               HumanNumber(raw_trained / std::max(secs(t2 - t1), 1e-9)).c_str(), secs(t3 - t2),
               total, HumanNumber(raw_trained / std::max(total, 1e-9)).c_str(), summary.loss);
  return 0;
}

}  // namespace

void RegisterTrainCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* cmd = root.add_subcommand(
      "train", "Train word vectors (word2vec SGNS or CBOW) on a text file or stdin");
  TrainOptions& o = flags->options;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cmd->add_option("--input", flags->input,
                  "Text to train on, words separated by whitespace; - for stdin (required unless "
                  "--brokers or --bootstrap-file)");
  cmd->add_option("--output", flags->output,
                  "Vectors file to write (word2vec format); required unless --stream");
  cmd->add_option("--model", flags->model,
                  "sgns (skip-gram), cbow, or char-lstm (SGNS with a character LSTM as the "
                  "input side; batch: --epochs passes of the streaming learner over --input, "
                  "the model kept in --state if given; docs/char-model.md)")
      ->check(CLI::IsMember({"sgns", "cbow", "char-lstm"}))
      ->capture_default_str();
  cmd->add_option("--dim", o.dim, "Vector size")->capture_default_str();
  cmd->add_option("--window", o.window,
                  "Maximum context radius; each position draws a radius in [1, window]")
      ->capture_default_str();
  cmd->add_option("--negative", o.negative, "Negative samples per centre word")
      ->capture_default_str();
  cmd->add_option("--sample", o.sample,
                  "Subsampling threshold t: keep a word with probability sqrt(t/f)+t/f")
      ->capture_default_str();
  cmd->add_option("--negative-share", o.negative_share,
                  "Consecutive positions sharing one draw of negatives (0: 2, or 1 for sgns with "
                  "--window > 5; 1: word2vec's draw per position; sgns trains two positions with "
                  "one draw as one window; --stream: 0, 1 or 2; docs/training.md)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_option("--negative-pool", o.negative_pool,
                  "Noise words drawn per micro-batch (--stream: per 2048 kept words); each "
                  "position's negatives are drawn from them uniformly, so their output rows stay "
                  "in cache (0: every negative from the whole noise distribution, as word2vec; "
                  "docs/training.md)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--replica-sync", o.replica_sync,
                  "Threads > 1: each thread trains its own replica of the frequent output rows "
                  "and merges it into the shared table every N micro-batches (its 8192 most "
                  "frequent rows; the others every 4N, a quarter at a time; Downpour-style push "
                  "and fetch); 0: one shared output table (Hogwild, as word2vec). Default 32 with "
                  "2 threads, 0 with more (their summed deltas diverge); "
                  "docs/training.md")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--min-count", flags->min_count, "Drop words seen fewer times")
      ->capture_default_str();
  cmd->add_option("--epochs", o.epochs,
                  "Batch: passes over the corpus (--stream and Kafka make one pass)")
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "Training threads (default: one a core)");
  cmd->add_option("--alpha", flags->alpha,
                  "Initial learning rate (default 0.025 for sgns, 0.05 for cbow)");
  cmd->add_option("--min-alpha", flags->min_alpha,
                  "Batch sgns/cbow: final learning rate; decays linearly from --alpha (default "
                  "alpha/4 for sgns, alpha/2 for cbow)");
  cmd->add_option("--seed", o.seed, "Random seed (thread t uses seed + t)")->capture_default_str();
  cmd->add_option("--format", flags->format, "Output format: text or binary")
      ->capture_default_str();
  cmd->add_option("--device", flags->device,
                  "Where training runs: cpu, or cuda[:N] (a CUDA GPU; batch, --stream and "
                  "--brokers with Adagrad; with --model char-lstm the character model's passes, "
                  "the learner staying on the CPU; docs/gpu.md)")
      ->capture_default_str();
  cmd->add_option("--kernel", flags->kernel,
                  "auto, avx512, avx2, portable, or reference (scalar, for checks)")
      ->capture_default_str();
  cmd->add_option("--progress", flags->progress,
                  "auto (a bar on a terminal, else one summary line), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  // The streaming learner (docs/streaming.md).
  StreamingOptions& so = flags->stream_options;
  cmd->add_flag("--stream", flags->stream,
                "One pass over an unbounded stream (stdin until EOF, SIGINT or SIGTERM) with a "
                "bounded vocabulary; needs --state");
  cmd->add_option("--state", flags->state,
                  "--stream, --brokers and batch --model char-lstm: state directory (RocksDB); an "
                  "existing state is resumed");
  cmd->add_option("--snapshot-every", flags->snapshot_every,
                  "--stream: write the state every N words (1000000) or S seconds (300s), and "
                  "at the end; with --brokers: every S seconds (default 5s) or N message bytes")
      ->capture_default_str();
  cmd->add_option("--vocab-capacity", so.vocab_capacity,
                  "--stream: words held at most (space-saving eviction)")
      ->capture_default_str();
  cmd->add_option("--count-half-life", so.count_half_life,
                  "--stream: counts halve every N words (0: no decay)")
      ->capture_default_str();
  cmd->add_option("--optimizer", flags->optimizer,
                  "--stream: adagrad (per-row, --eta) or constant (--alpha, default 0.025)")
      ->check(CLI::IsMember({"adagrad", "constant"}))
      ->capture_default_str();
  cmd->add_option("--eta", so.eta, "--stream: Adagrad base learning rate")->capture_default_str();
  cmd->add_option("--epsilon", so.epsilon, "--stream: Adagrad epsilon")->capture_default_str();
  cmd->add_option("--noise-table-size", so.noise_table_size,
                  "--stream: entries of the adaptive unigram noise table")
      ->capture_default_str();
  // Training from Kafka (docs/pipeline.md, "Trainer").
  cmd->add_option("--brokers", flags->brokers,
                  "Train from Kafka: bootstrap servers HOST:PORT[,HOST:PORT...]; consumes "
                  "<prefix>.docs until SIGINT/SIGTERM; needs --state");
  cmd->add_option("--bootstrap-file", flags->bootstrap_file,
                  "Train from Kafka: read the bootstrap servers from this file (written by "
                  "streamvec broker)");
  cmd->add_option("--group", flags->group,
                  "Kafka: consumer group (default <prefix>.trainers)");
  cmd->add_option("--prefix", flags->prefix, "Kafka: topic prefix (<prefix>.docs, "
                  "<prefix>.rejected)")
      ->capture_default_str();
  cmd->add_option("--assign", flags->assign,
                  "Kafka: take partitions by manual assignment instead of joining the group "
                  "('all' or P,P,...): consuming starts at once (the embedded broker's first "
                  "join of a group takes 3 s); offsets still go to --group; for a trainer alone "
                  "in its group, nothing rebalances");
  cmd->add_option("--snapshot-partition-bytes", flags->snapshot_partition_bytes,
                  "Kafka: also snapshot and commit once one partition has this many message "
                  "bytes consumed since the last snapshot (default 3670016, below ingest's 4 MiB "
                  "per-partition lag budget; 0: off)");
  cmd->add_option("--checkpoint-every", flags->checkpoint_every,
                  "Kafka: seconds between recovery checkpoints; the --snapshot-every triggers "
                  "between them publish only the serving vectors, and offsets are committed at "
                  "checkpoints (default: every snapshot is a checkpoint)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--snapshot-write-rate", flags->snapshot_write_rate,
                  "Kafka: MB/s that snapshots may write on average; a triggered snapshot waits "
                  "while the earlier ones wrote more (default: no limit)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kafka-config", flags->kafka_config,
                  "Kafka: librdkafka property name=value (repeatable), applied last");
  cmd->add_option("--param-shards", flags->param_shards,
                  "Kafka: push row deltas and counts to the parameter node's N shards "
                  "(<prefix>.updates) and apply the rows they publish (<prefix>.params); "
                  "docs/distributed.md (default 0: train alone)");
  AddParamClientFlags(cmd, &flags->param, "Kafka, with --param-shards: ");
  cmd->add_option("--trainer-id", flags->trainer_id,
                  "Kafka, with --param-shards: this trainer's id in its pushes (default: random)");
  cmd->add_option("--metrics", flags->metrics,
                  "Kafka: serve Prometheus metrics at http://HOST:PORT/metrics (words/s, "
                  "documents, lag, snapshots; port 0 picks one)");
  cmd->add_option("--max-idle", flags->max_idle,
                  "Kafka: stop (after a final snapshot) once every assigned partition is read "
                  "to its end and no message arrived for this many seconds (0: run until a "
                  "signal)")
      ->capture_default_str();
  cmd->add_option("--lang", flags->languages,
                  "Kafka: train only documents in these languages (their 'lang', e.g. en,de; "
                  "ingest and crawl detect it); others are skipped and counted")
      ->delimiter(',');
  cmd->add_flag("--normalize", flags->normalize,
                "--stream and Kafka: normalise natural text before training (NFKC, lowercase, "
                "punctuation and symbols to spaces; tokenizer/normalize.h)");
  AddCharModelFlags(cmd, &flags->char_distill, &flags->char_distill_options, &flags->char_mode,
                    &flags->char_batch_words);
  cmd->callback([flags, exit_code, cmd] {
    flags->snapshot_every_given = cmd->count("--snapshot-every") > 0;
    flags->char_mode_given = cmd->count("--char-mode") > 0 || cmd->count("--char-batch-words") > 0;
    ApplyCharModelDefaults(*cmd, flags->model, &flags->char_distill_options);
    for (const char* flag :
         {"--dim", "--window", "--negative", "--sample", "--min-count", "--seed", "--alpha",
          "--vocab-capacity", "--count-half-life", "--optimizer", "--eta", "--epsilon",
          "--noise-table-size", "--negative-share", "--negative-pool"}) {
      if (cmd->count(flag) > 0) flags->explicit_flags.push_back(flag);
    }
    for (const char* flag : kCharModelFlags) {
      if (cmd->count(flag) > 0) flags->explicit_flags.push_back(flag);
    }
    flags->epochs_given = cmd->count("--epochs") > 0;
    for (const char* flag : {"--replica-sync", "--min-alpha"}) {
      if (cmd->count(flag) > 0) flags->batch_only_flags.push_back(flag);
    }
    *exit_code = RunTrain(*flags);
  });
}

}  // namespace streamvec::app

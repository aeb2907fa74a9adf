#include "stream_train.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "pipeline_metrics.h"
#include "stop_signal.h"
#include "streamvec/base/heap.h"
#include "streamvec/kafka/document.h"
#include "streamvec/kernels/cuda.h"
#include "streamvec/store/state_store.h"
#include "streamvec/store/word2vec_format.h"
#include "streamvec/tokenizer/normalize.h"
#include "streamvec/trainer/kafka_trainer.h"

namespace streamvec::app {
namespace {

// Reads into buf: one read(2), then more while the input has bytes ready at once (poll without
// waiting) and buf has room. A pipe with a backlog then gives chunks of buf's size as a file does
// (a pipe hands over at most 64 KiB a read), so --model char-lstm's pieces reach
// --char-batch-words; a live stream is still trained as its bytes come. Returns the bytes read,
// 0 at the end of the input, -1 with errno when the first read fails (a later failure returns
// what was read; the next call reports it).
ssize_t ReadAvailable(int fd, char* buf, size_t size) {
  size_t have = 0;
  while (have < size) {
    const ssize_t got = ::read(fd, buf + have, size - have);
    if (got < 0) return have > 0 ? static_cast<ssize_t>(have) : -1;
    if (got == 0) break;
    have += static_cast<size_t>(got);
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, 0) != 1 || (ready.revents & POLLIN) == 0) break;
  }
  return static_cast<ssize_t>(have);
}

// "<N>" words or "<S>s" seconds.
bool ParseSnapshotEvery(const std::string& s, uint64_t* words, double* seconds) {
  if (s.empty()) return false;
  try {
    size_t used = 0;
    if (s.back() == 's') {
      *seconds = std::stod(s.substr(0, s.size() - 1), &used);
      return used == s.size() - 1 && *seconds > 0;
    }
    *words = std::stoull(s, &used);
    return used == s.size() && *words > 0;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string HumanNumber(double x) {
  char buf[32];
  if (x >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", x / 1e6);
  } else if (x >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1fk", x / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", x);
  }
  return buf;
}

// The character model's summary line (docs/char-model.md, "Operating it").
void PrintDistillSummary(const CharDistillStats& ds) {
  std::fprintf(stderr,
               "streamvec train: character model: %llu distillation steps (%llu word types), "
               "last loss %.4f, %.2f s",
               static_cast<unsigned long long>(ds.steps), static_cast<unsigned long long>(ds.types),
               ds.loss, ds.seconds);
  if (ds.skipped > 0) {
    std::fprintf(stderr, ", %llu skipped (far behind)",
                 static_cast<unsigned long long>(ds.skipped));
  }
  std::fprintf(stderr, "\n");
}

int TrainFail(const Status& status, int code) {
  std::fprintf(stderr, "streamvec train: error: %s\n", status.message().c_str());
  return code;
}

int RunStreamTrain(const StreamTrainFlags& f) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  if (f.state.empty()) return TrainFail(Status::InvalidArgument("--stream needs --state DIR"), 2);
  if (Status s = ValidateStreamingOptions(f.options); !s.ok()) return TrainFail(s, 2);
  uint64_t every_words = 0;
  double every_seconds = 0;
  if (!ParseSnapshotEvery(f.snapshot_every, &every_words, &every_seconds)) {
    return TrainFail(Status::InvalidArgument("--snapshot-every must be a word count (1000000) or "
                                             "seconds (300s), not '" +
                                             f.snapshot_every + "'"),
                     2);
  }
  VectorFormat format;
  if (!ParseVectorFormat(f.format, &format)) {
    return TrainFail(
        Status::InvalidArgument("--format must be text or binary, not '" + f.format + "'"), 2);
  }
  if (!f.output.empty()) {
    if (Status s = CheckWritable(f.output); !s.ok()) {
      return TrainFail(Status::InvalidArgument("--output: " + s.message()), 2);
    }
  }
  if (f.epochs < 1 || (f.epochs > 1 && f.input == "-")) {
    return TrainFail(
        Status::InvalidArgument("--epochs " + std::to_string(f.epochs) +
                                (f.epochs < 1 ? ": at least one pass"
                                              : ": more than one pass needs --input FILE "
                                                "(stdin is read once)")),
        2);
  }
  int fd = 0;
  if (f.input != "-") {
    fd = ::open(f.input.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return TrainFail(
          Status::InvalidArgument("--input: cannot open " + f.input + ": " + std::strerror(errno)),
          2);
    }
  }

  StateStoreOptions store_options;
  store_options.restore_damaged = true;  // from the newest intact checkpoint
  StatusOr<std::unique_ptr<StateStore>> store_or =
      StateStore::Open(f.state, StateStore::Mode::kCreateOrOpen, store_options);
  if (!store_or.ok())
    return TrainFail(Status::InvalidArgument("--state: " + store_or.status().message()), 2);
  StateStore& store = **store_or;
  if (store.restore().restored) spdlog::warn("state {}: {}", f.state, store.restore().Describe());
  std::unique_ptr<StreamingLearner> learner;
  std::unique_ptr<CharDistiller> distiller;
  std::unique_ptr<CharSgns> char_sgns;  // --model char-lstm
  // With --model char-lstm, --device puts the character model's passes on the device and keeps
  // the learner on the CPU (CharSgns reads and writes its rows every piece).
  const bool char_state = store.version() > 0 && store.Get(kCharSgnsEntry).ok();
  const int learner_device = (f.char_lstm || char_state) ? -1 : f.options.cuda_device;
  auto char_model_to_device = [&]() -> Status {
    if (!char_sgns || f.options.cuda_device < 0) return Status::Ok();
    SV_RETURN_IF_ERROR(CudaCheckDevice(f.options.cuda_device, nullptr));
    return char_sgns->UseCudaDevice(f.options.cuda_device);
  };
  if (store.version() > 0) {
    auto loaded =
        StreamingLearner::LoadState([&store](const std::string& key) { return store.Get(key); },
                                    f.options.isa, f.options.threads, learner_device);
    if (!loaded.ok()) {
      return TrainFail(
          Status::InvalidArgument("--state " + f.state + ": " + loaded.status().message()), 2);
    }
    learner = std::move(loaded).value();
    auto loaded_sgns = CharSgns::Load([&store](const std::string& key) { return store.Get(key); },
                                      f.options.threads);
    if (loaded_sgns.ok()) {
      char_sgns = std::move(loaded_sgns).value();
    } else if (loaded_sgns.status().code() != StatusCode::kNotFound) {
      return TrainFail(
          Status::InvalidArgument("--state " + f.state + ": " + loaded_sgns.status().message()), 2);
    }
    auto loaded_distiller =
        CharDistiller::Load([&store](const std::string& key) { return store.Get(key); });
    if (char_sgns) {
      // The character model is the input side: no distiller.
    } else if (loaded_distiller.ok()) {
      distiller = std::move(loaded_distiller).value();
    } else if (loaded_distiller.status().code() != StatusCode::kNotFound) {
      return TrainFail(Status::InvalidArgument("--state " + f.state + ": " +
                                               loaded_distiller.status().message()),
                       2);
    }
    if (!f.explicit_flags.empty()) {
      std::string given;
      for (const std::string& flag : f.explicit_flags) given += " " + flag;
      spdlog::warn("ignored on resume:{} (a state keeps the options it was created with)", given);
    }
    spdlog::info("resuming from {} (snapshot {}, {} words seen); the state's training options "
                 "are used",
                 f.state, store.version(), learner->stats().words_seen);
  } else {
    StreamingOptions learner_options = f.options;
    learner_options.cuda_device = learner_device;
    learner = std::make_unique<StreamingLearner>(learner_options);
    if (Status s = learner->device_status(); !s.ok()) {
      return TrainFail(Status::FailedPrecondition("--device: " + s.message()), 2);
    }
    if (f.char_distill) {
      CharDistillOptions co = f.char_distill_options;
      co.model.dim = f.options.dim;
      if (Status s = ValidateCharDistillOptions(co); !s.ok()) return TrainFail(s, 2);
      distiller = std::make_unique<CharDistiller>(co);
    }
    if (f.char_lstm) {
      CharSgnsOptions co = f.char_lstm_options;
      co.model = f.char_distill_options.model;
      co.model.dim = f.options.dim;
      if (Status s = ValidateCharModelOptions(co.model); !s.ok()) return TrainFail(s, 2);
      char_sgns = std::make_unique<CharSgns>(co, f.options.threads);
    }
  }

  if (Status s = char_model_to_device(); !s.ok()) {
    return TrainFail(Status::FailedPrecondition("--device: " + s.message()), 2);
  }

  // The learner's state, plus the serving embedding and metadata that `streamvec serve` reads,
  // and the character model (--char-distill).
  auto snapshot = [&]() -> Status {
    std::string meta = LearnerMetadataJson(*learner, char_sgns.get());
    if (distiller) {
      meta.pop_back();  // the closing brace of the object
      meta += ",\"char_model\":" + distiller->MetadataJson() + "}";
    }
    return store.WriteSnapshot(
        [&](const SnapshotSink& sink) -> Status {
          if (char_sgns) {
            SV_RETURN_IF_ERROR(learner->SaveState(sink));
            SV_RETURN_IF_ERROR(char_sgns->WriteServingEntries(*learner, sink));
            return char_sgns->Save(sink, /*checkpoint=*/true);
          }
          SV_RETURN_IF_ERROR(WriteLearnerSnapshot(*learner, sink));
          if (distiller) return distiller->Save(sink, /*checkpoint=*/true);
          return Status::Ok();
        },
        meta);
  };

  const std::atomic<bool>& stop = StopOnSignals();
  spdlog::info("streaming from {} into {}; SIGINT or SIGTERM stops after a final snapshot",
               f.input == "-" ? "stdin" : f.input, f.state);
  std::vector<char> buffer(size_t{1} << 20);
  auto last_snapshot_time = Clock::now();
  uint64_t last_snapshot_words = learner->stats().words_seen;
  const uint64_t start_words = last_snapshot_words;
  auto last_report = Clock::now();
  double last_loss = 0.0;
  Status read_error;
  // --normalize: whole lines go through NormalizeText (a chunk's unfinished line waits for the
  // next; a line over 1 MiB is cut at its last space, or as it is).
  std::string carry;
  int epoch = 0;  // passes over the file finished
  auto train_chunk = [&](std::string_view chunk) -> Status {
    return char_sgns ? char_sgns->TrainChunk(learner.get(), chunk) : learner->TrainChunk(chunk);
  };
  auto train = [&](std::string_view chunk, bool last) -> Status {
    if (!f.normalize) return train_chunk(chunk);
    carry.append(chunk);
    size_t cut = last ? carry.size() : carry.rfind('\n');
    if (cut == std::string::npos) {
      if (carry.size() < (size_t{1} << 20)) return Status::Ok();
      cut = carry.find_last_of(" \t");
      if (cut == std::string::npos) cut = carry.size() - 1;
    }
    const Status s = train_chunk(NormalizeText(std::string_view(carry).substr(0, cut + 1)));
    carry.erase(0, std::min(carry.size(), cut + 1));
    return s;
  };
  while (!stop) {
    const ssize_t got = ReadAvailable(fd, buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      read_error = Status::IoError(std::string("--input: read failed: ") + std::strerror(errno));
      break;
    }
    if (got == 0) {
      Status s = train({}, /*last=*/true);
      // Another pass follows: the file's last word and sentence end here, not in its first.
      if (s.ok() && epoch + 1 < f.epochs) s = train_chunk("\n");
      if (!s.ok()) {
        read_error = s;
        break;
      }
      if (++epoch >= f.epochs) break;
      if (::lseek(fd, 0, SEEK_SET) < 0) {
        read_error = Status::IoError(std::string("--input: rewind for the next epoch failed: ") +
                                     std::strerror(errno));
        break;
      }
      spdlog::info("epoch {} of {}: {} words so far", epoch + 1, f.epochs,
                   learner->stats().words_seen - start_words);
      continue;
    }
    if (Status s = train(std::string_view(buffer.data(), got), false); !s.ok()) {
      read_error = s;
      break;
    }
    if (distiller) {
      if (Status s = distiller->MaybeStep(*learner); !s.ok()) {
        spdlog::warn("character model distillation: {}", s.message());
      }
    }
    const uint64_t words = learner->stats().words_seen;
    const bool due = every_words > 0 ? words - last_snapshot_words >= every_words
                                     : since(last_snapshot_time) >= every_seconds;
    if (due) {
      const auto snapshot_t0 = Clock::now();
      if (Status s = snapshot(); !s.ok()) {
        spdlog::warn("snapshot failed, the previous one is kept: {}", s.message());
      } else if (!f.progress_bar) {
        spdlog::info("snapshot {} at {} words ({:.2f} s)", store.version(), words,
                     since(snapshot_t0));
      }
      last_snapshot_time = Clock::now();
      last_snapshot_words = words;
    }
    if (f.progress_bar && since(last_report) >= 0.2) {
      last_report = Clock::now();
      const StreamingStats st = learner->stats();
      const double loss = learner->TakeLoss();
      if (loss > 0) last_loss = loss;
      std::fprintf(stderr,
                   "\r%s words  %s words/s  vocab %llu (%llu admitted)  evictions %llu  "
                   "loss %.4f ",
                   HumanNumber(static_cast<double>(st.words_seen)).c_str(),
                   HumanNumber((st.words_seen - start_words) / std::max(since(t0), 1e-9)).c_str(),
                   static_cast<unsigned long long>(st.vocab_size),
                   static_cast<unsigned long long>(st.admitted),
                   static_cast<unsigned long long>(st.evictions), last_loss);
      std::fflush(stderr);
    }
  }
  if (fd != 0) ::close(fd);
  if (f.progress_bar) std::fputc('\n', stderr);
  if (char_sgns) {
    if (Status s = char_sgns->FinishStream(learner.get()); !s.ok() && read_error.ok()) {
      read_error = s;
    }
  } else {
    (void)learner->FinishStream();
  }
  // The distillation steps the stream started belong to its training time (words/s).
  const Status distill_status = distiller ? distiller->Wait() : Status::Ok();
  const double train_s = since(t0);
  if (Status s = snapshot(); !s.ok()) {
    return TrainFail(
        Status(s.code(), "final snapshot failed (the previous one is kept): " + s.message()), 1);
  }
  const StreamingStats st = learner->stats();
  if (st.invalid_tokens > 0) {
    spdlog::warn("--input: skipped {} token(s) with invalid UTF-8, a NUL byte or over {} bytes",
                 st.invalid_tokens, learner->options().tokenizer.max_token_bytes);
  }
  if (!f.output.empty()) {
    std::vector<std::string> words;
    std::vector<float> vectors;
    if (char_sgns) {
      if (Status s = char_sgns->ExportVectors(*learner, &words, &vectors); !s.ok()) {
        return TrainFail(s, 1);
      }
    } else {
      learner->ExportVectors(&words, &vectors);
    }
    // Text rows formatted by as many threads as trained (the workers are done by now).
    if (Status s = WriteWord2Vec(f.output, words, vectors.data(), learner->options().dim,
                                 learner->options().dim, format, learner->options().threads);
        !s.ok()) {
      return TrainFail(s, 1);
    }
  }
  const uint64_t trained_now = st.words_seen - start_words;
  std::fprintf(
      stderr,
      "streamvec train: stream%s, dim %d, %llu words (%llu in total), vocabulary %llu "
      "(%llu admitted, %llu evictions), %s words/s, snapshot %llu in %s, loss %.4f, "
      "total %.2f s\n",
      stop ? " (stopped by signal)" : "", learner->options().dim,
      static_cast<unsigned long long>(trained_now), static_cast<unsigned long long>(st.words_seen),
      static_cast<unsigned long long>(st.vocab_size), static_cast<unsigned long long>(st.admitted),
      static_cast<unsigned long long>(st.evictions),
      HumanNumber(trained_now / std::max(train_s, 1e-9)).c_str(),
      static_cast<unsigned long long>(store.version()), f.state.c_str(), st.loss, since(t0));
  if (char_sgns) {
    const CharSgnsStats cs = char_sgns->stats();
    std::fprintf(stderr,
                 "streamvec train: character model (--model char-lstm, --char-mode %s): %llu "
                 "steps (%llu word types encoded), %.2f s (finding words %.2f, encoding %.2f, "
                 "back-propagation %.2f); LSTM %s, %d hidden, on %s\n",
                 CharModeName(char_sgns->options().mode), static_cast<unsigned long long>(cs.steps),
                 static_cast<unsigned long long>(cs.types), cs.seconds, cs.scan_seconds,
                 cs.encode_seconds, cs.backward_seconds,
                 char_sgns->options().model.bidirectional ? "bidirectional" : "forward only",
                 char_sgns->options().model.hidden,
                 char_sgns->model().cuda_device() >= 0
                     ? ("cuda:" + std::to_string(char_sgns->model().cuda_device())).c_str()
                     : "the CPU");
  }
  if (distiller) {
    if (!distill_status.ok()) {
      spdlog::warn("character model distillation: {}", distill_status.message());
    }
    PrintDistillSummary(distiller->stats());
  }
  if (!read_error.ok()) return TrainFail(read_error, 1);
  return 0;
}

int RunKafkaTrain(const KafkaTrainFlags& f) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  if (f.state.empty()) return TrainFail(Status::InvalidArgument("--brokers needs --state DIR"), 2);
  if (f.kafka.topic_prefix.empty())
    return TrainFail(Status::InvalidArgument("--prefix is empty"), 2);
  if (!(f.max_idle_s >= 0)) return TrainFail(Status::InvalidArgument("--max-idle must be >= 0"), 2);
  if (Status s = ValidateStreamingOptions(f.options); !s.ok()) return TrainFail(s, 2);
  // The consumer's fetch buffers (up to its queue of prefetched messages) and each document's
  // copy are freed at a high rate; kept for reuse instead of faulted in again (docs/pipeline.md,
  // "Where the time goes").
  KeepFreedMemoryForReuse(size_t{256} << 20);
  KafkaTrainerOptions o;
  o.kafka = f.kafka;
  o.group = f.group;
  o.state_dir = f.state;
  o.learner = f.options;
  o.max_idle_s = f.max_idle_s;
  o.normalize_text = f.normalize;
  o.languages = f.languages;
  if (!f.assign.empty()) {
    o.assign = true;
    if (f.assign != "all") {
      std::string item;
      std::stringstream list(f.assign);
      while (std::getline(list, item, ',')) {
        char* end = nullptr;
        const long p = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || p < 0 || p > 1000000) {
          return TrainFail(Status::InvalidArgument("--assign must be 'all' or partition numbers "
                                                   "separated by commas, not '" +
                                                   f.assign + "'"),
                           2);
        }
        o.assign_partitions.push_back(static_cast<int32_t>(p));
      }
    }
  }
  o.checkpoint_every_s = f.checkpoint_every_s;
  o.snapshot_write_rate = f.snapshot_write_rate_mb * 1e6;
  if (f.snapshot_partition_bytes >= 0) {
    o.snapshot_partition_bytes = static_cast<uint64_t>(f.snapshot_partition_bytes);
  }
  uint64_t every_bytes = 0;
  double every_seconds = 0;
  if (!ParseSnapshotEvery(f.snapshot_every, &every_bytes, &every_seconds)) {
    return TrainFail(
        Status::InvalidArgument("--snapshot-every must be seconds (5s) or message bytes "
                                "(100000000), not '" +
                                f.snapshot_every + "'"),
        2);
  }
  if (every_seconds > 0) {
    o.snapshot_every_s = every_seconds;
  } else {
    o.snapshot_every_s = 0;
    o.snapshot_every_bytes = every_bytes;
  }
  o.param_shards = f.param_shards;
  o.char_distill = f.char_distill;
  o.char_distill_options = f.char_distill_options;
  o.char_distill_options.model.dim = f.options.dim;
  o.char_lstm = f.char_lstm;
  o.char_lstm_options = f.char_lstm_options;
  if (f.char_lstm) {
    if (Status s = ValidateCharModelOptions(o.char_distill_options.model); !s.ok()) {
      return TrainFail(s, 2);
    }
  }
  if (f.char_distill) {
    if (Status s = ValidateCharDistillOptions(o.char_distill_options); !s.ok())
      return TrainFail(s, 2);
  }
  o.trainer_id = f.trainer_id;
  if (Status s = ApplyParamClientFlags(f.param, &o); !s.ok()) return TrainFail(s, 2);
  StatusOr<std::unique_ptr<KafkaTrainer>> trainer_or = KafkaTrainer::Create(o);
  if (!trainer_or.ok()) {
    const Status& s = trainer_or.status();
    const bool state_error = s.code() == StatusCode::kFailedPrecondition ||
                             s.code() == StatusCode::kCorruption ||
                             s.code() == StatusCode::kIoError;
    return TrainFail(Status(s.code(), (state_error ? "--state: " : "") + s.message()), 2);
  }
  KafkaTrainer& trainer = **trainer_or;
  const bool resumed = trainer.stats().snapshot_version > 0;
  if (resumed && !f.explicit_flags.empty()) {
    std::string given;
    for (const std::string& flag : f.explicit_flags) given += " " + flag;
    spdlog::warn("ignored on resume:{} (a state keeps the options it was created with)", given);
  }
  // GET /metrics: the trainer's counters, words/s since the previous scrape.
  struct Rate {
    std::mutex mu;
    Clock::time_point at = Clock::now();
    uint64_t words = 0;
  };
  auto rate = std::make_shared<Rate>();
  StatusOr<std::unique_ptr<api::MetricsEndpoint>> metrics =
      StartMetrics(f.metrics, [&trainer, rate]() {
        const KafkaTrainerStats ts = trainer.stats();
        double per_second = 0;
        {
          std::lock_guard<std::mutex> lock(rate->mu);
          const auto now = Clock::now();
          const double dt = std::chrono::duration<double>(now - rate->at).count();
          if (dt > 0 && ts.words_trained >= rate->words) {
            per_second = static_cast<double>(ts.words_trained - rate->words) / dt;
          }
          rate->at = now;
          rate->words = ts.words_trained;
        }
        std::string out;
        AppendTrainerMetrics(&out, ts, per_second);
        if (ts.param.pushes > 0 || ts.param.pull_messages > 0) AppendParamMetrics(&out, ts.param);
        AppendProcessMetrics(&out);
        return out;
      });
  if (!metrics.ok()) return TrainFail(metrics.status(), 2);
  const std::atomic<bool>& stop = StopOnSignals();
  spdlog::info("training from Kafka {} (group {}) into {}; SIGINT or SIGTERM stops after a final "
               "snapshot",
               DocsTopic(f.kafka.topic_prefix), trainer.group(), f.state);
  const Status run = trainer.Run(stop);
  const KafkaTrainerStats st = trainer.stats();
  const double total = std::chrono::duration<double>(Clock::now() - t0).count();
  std::fprintf(
      stderr,
      "streamvec train: kafka %s%s, group %s, %llu documents (%llu rejected), %llu words "
      "(%llu trained), %llu micro-batches, %s words/s (from the first message), snapshot %llu in "
      "%s, lag %lld, "
      "total %.2f s (consume %.2f, parse %.2f, feed %.2f, snapshots %.2f in %llu, commit %.2f)\n",
      DocsTopic(f.kafka.topic_prefix).c_str(), stop ? " (stopped by signal)" : "",
      trainer.group().c_str(), static_cast<unsigned long long>(st.documents),
      static_cast<unsigned long long>(st.rejected), static_cast<unsigned long long>(st.words),
      static_cast<unsigned long long>(st.words_trained),
      static_cast<unsigned long long>(st.micro_batches),
      HumanNumber(st.words / std::max(st.active_seconds, 1e-9)).c_str(),
      static_cast<unsigned long long>(st.snapshot_version), f.state.c_str(),
      static_cast<long long>(st.lag), total, st.consume_seconds, st.parse_seconds, st.feed_seconds,
      st.snapshot_seconds, static_cast<unsigned long long>(st.snapshots), st.commit_seconds);
  if (st.param.pushes > 0 || st.param.pull_messages > 0) {
    const ParamClientStats& ps = st.param;
    std::fprintf(stderr,
                 "streamvec train: parameter shards: %llu pushes (%llu rows, %.1f MB; %llu rows "
                 "deferred by the schedule), %llu publications read (%.1f MB; %llu lost), "
                 "%llu rows applied "
                 "(%llu with our unmerged deltas), "
                 "%llu stale rows skipped, %llu words started from the node's row, "
                 "%llu group counts raised, "
                 "%llu push messages sent again (gaps), "
                 "%.2f s waiting for the shards (%.2f s for --max-staleness)\n",
                 static_cast<unsigned long long>(ps.pushes),
                 static_cast<unsigned long long>(ps.rows_pushed), ps.push_bytes / 1e6,
                 static_cast<unsigned long long>(ps.rows_deferred),
                 static_cast<unsigned long long>(ps.pull_messages), ps.pull_bytes / 1e6,
                 static_cast<unsigned long long>(ps.pulls_lost),
                 static_cast<unsigned long long>(ps.rows_applied),
                 static_cast<unsigned long long>(ps.rows_corrected),
                 static_cast<unsigned long long>(ps.rows_stale),
                 static_cast<unsigned long long>(ps.rows_from_node),
                 static_cast<unsigned long long>(ps.group_counts_raised),
                 static_cast<unsigned long long>(ps.repushed_messages), ps.throttled_seconds,
                 ps.staleness_wait_seconds);
  }
  if (st.char_distill) PrintDistillSummary(st.char_distill_stats);
  if (!run.ok()) return TrainFail(run, 1);
  return 0;
}

}  // namespace streamvec::app

// `streamvec export`: the admitted words of a streaming state, most frequent first, as a
// word2vec text or binary file; or the words of one or several parameter-node shards' states
// (their serving embeddings, joined).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "streamvec/base/cpu_features.h"
#include "streamvec/node/param_node.h"
#include "streamvec/store/embedding_entries.h"
#include "streamvec/store/state_store.h"
#include "streamvec/store/word2vec_format.h"
#include "streamvec/trainer/streaming_learner.h"

namespace streamvec::app {
namespace {

struct ExportFlags {
  std::vector<std::string> state;  // one, or one per parameter-node shard (their union)
  std::string output;
  std::string format = "text";
};

int Fail(const Status& status, int code) {
  std::fprintf(stderr, "streamvec export: error: %s\n", status.message().c_str());
  return code;
}

// The serving embedding of one state's current snapshot (what `serve` reads): a parameter
// node's state, or any state when several are joined.
StatusOr<Embeddings> ReadServingEmbedding(const StateStore& store) {
  return ReadEmbeddingEntries([&store](const std::string& key) { return store.Get(key); });
}

int RunExport(const ExportFlags& f) {
  VectorFormat format;
  if (!ParseVectorFormat(f.format, &format)) {
    return Fail(Status::InvalidArgument("--format must be text or binary, not '" + f.format + "'"),
                2);
  }
  if (Status s = CheckWritable(f.output); !s.ok()) {
    return Fail(Status::InvalidArgument("--output: " + s.message()), 2);
  }
  std::vector<Embeddings> parts;
  std::vector<std::vector<double>> counts;  // per shard; empty where a snapshot has none
  std::string versions;
  for (const std::string& state : f.state) {
    auto store = StateStore::Open(state, StateStore::Mode::kReadOnly);
    if (!store.ok()) {
      return Fail(Status::InvalidArgument("--state: " + store.status().message()), 2);
    }
    if ((*store)->version() == 0) {
      return Fail(Status::InvalidArgument("--state: " + state + " holds no snapshot yet"), 2);
    }
    versions += (versions.empty() ? "" : ", ") + std::to_string((*store)->version());
    const bool node = (*store)->Get(kNodeMetaEntry).ok();
    if (f.state.size() == 1 && !node) {
      // A trainer's state: its learner's admitted words (the state as trained, not a
      // publication's copy).
      auto learner = StreamingLearner::LoadState(
          [&store](const std::string& key) { return (*store)->Get(key); }, DetectBestIsa());
      if (!learner.ok()) {
        return Fail(
            Status::InvalidArgument("--state " + state + ": " + learner.status().message()), 2);
      }
      std::vector<std::string> words;
      std::vector<float> vectors;
      (*learner)->ExportVectors(&words, &vectors);
      const int dim = (*learner)->options().dim;
      if (Status s = WriteWord2Vec(f.output, words, vectors.data(), dim, dim, format); !s.ok()) {
        return Fail(s, 1);
      }
      std::fprintf(stderr, "streamvec export: %zu words x %d from %s (snapshot %s) to %s\n",
                   words.size(), dim, state.c_str(), versions.c_str(), f.output.c_str());
      return 0;
    }
    StatusOr<Embeddings> e = ReadServingEmbedding(**store);
    if (!e.ok()) {
      return Fail(Status::InvalidArgument("--state " + state + ": " + e.status().message()), 2);
    }
    StatusOr<std::vector<double>> c = ReadEmbeddingCountsIfAny(
        [&store](const std::string& key) { return (*store)->Get(key); }, e->rows());
    if (!c.ok()) {
      return Fail(Status::InvalidArgument("--state " + state + ": " + c.status().message()), 2);
    }
    counts.push_back(std::move(c).value());
    parts.push_back(std::move(e).value());
  }
  // In count order when every snapshot has its counts (a node's does), else by rank.
  StatusOr<Embeddings> joined = InterleaveEmbeddings(std::move(parts), &counts);
  if (!joined.ok()) {
    return Fail(Status::InvalidArgument("--state: " + joined.status().message()), 2);
  }
  if (Status s = WriteWord2Vec(f.output, *joined, format); !s.ok()) return Fail(s, 1);
  std::string states;
  for (const std::string& state : f.state) states += (states.empty() ? "" : ", ") + state;
  std::fprintf(stderr, "streamvec export: %zu words x %d from %s (snapshot %s) to %s\n",
               joined->rows(), joined->dim, states.c_str(), versions.c_str(), f.output.c_str());
  return 0;
}

}  // namespace

void RegisterExportCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* cmd = root.add_subcommand(
      "export", "Write the vectors of a streaming state (train --stream) in word2vec format");
  cmd->add_option("--state", flags->state,
                  "State directory written by train --stream, train --brokers or param-node; "
                  "repeat it once per parameter-node shard to write their union")
      ->required();
  cmd->add_option("--output", flags->output, "Vectors file to write")->required();
  cmd->add_option("--format", flags->format, "text or binary")->capture_default_str();
  cmd->callback([flags, exit_code] { *exit_code = RunExport(*flags); });
}

}  // namespace streamvec::app

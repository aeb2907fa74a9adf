// `streamvec export`: the admitted words of a streaming state, most frequent first, as a
// word2vec text or binary file.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "streamvec/base/cpu_features.h"
#include "streamvec/store/state_store.h"
#include "streamvec/store/word2vec_format.h"
#include "streamvec/trainer/streaming_learner.h"

namespace streamvec::app {
namespace {

struct ExportFlags {
  std::string state;
  std::string output;
  std::string format = "text";
};

int Fail(const Status& status, int code) {
  std::fprintf(stderr, "streamvec export: error: %s\n", status.message().c_str());
  return code;
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
  auto store = StateStore::Open(f.state, StateStore::Mode::kReadOnly);
  if (!store.ok()) return Fail(Status::InvalidArgument("--state: " + store.status().message()), 2);
  if ((*store)->version() == 0) {
    return Fail(Status::InvalidArgument("--state: " + f.state + " holds no snapshot yet"), 2);
  }
  auto learner = StreamingLearner::LoadState(
      [&store](const std::string& key) { return (*store)->Get(key); }, DetectBestIsa());
  if (!learner.ok()) {
    return Fail(Status::InvalidArgument("--state " + f.state + ": " + learner.status().message()),
                2);
  }
  std::vector<std::string> words;
  std::vector<float> vectors;
  (*learner)->ExportVectors(&words, &vectors);
  const int dim = (*learner)->options().dim;
  if (Status s = WriteWord2Vec(f.output, words, vectors.data(), dim, dim, format); !s.ok()) {
    return Fail(s, 1);
  }
  std::fprintf(stderr, "streamvec export: %zu words x %d from %s (snapshot %llu) to %s\n",
               words.size(), dim, f.state.c_str(),
               static_cast<unsigned long long>((*store)->version()), f.output.c_str());
  return 0;
}

}  // namespace

void RegisterExportCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* cmd = root.add_subcommand(
      "export", "Write the vectors of a streaming state (train --stream) in word2vec format");
  cmd->add_option("--state", flags->state, "State directory written by train --stream")
      ->required();
  cmd->add_option("--output", flags->output, "Vectors file to write")->required();
  cmd->add_option("--format", flags->format, "text or binary")->capture_default_str();
  cmd->callback([flags, exit_code] { *exit_code = RunExport(*flags); });
}

}  // namespace streamvec::app

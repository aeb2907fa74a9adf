// `streamvec neighbors`: exact cosine nearest neighbours of one word, "word<TAB>similarity" lines.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "streamvec/eval/neighbors.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec::app {
namespace {

struct NeighborsFlags {
  std::string vectors;
  std::string word;
  size_t k = 10;
};

int Fail(const Status& status) {
  std::fprintf(stderr, "streamvec neighbors: error: %s\n", status.message().c_str());
  const StatusCode c = status.code();
  return c == StatusCode::kNotFound || c == StatusCode::kInvalidArgument ||
                 c == StatusCode::kCorruption
             ? 2
             : 1;
}

int RunNeighbors(const NeighborsFlags& f) {
  StatusOr<Embeddings> loaded = ReadWord2Vec(f.vectors);
  if (!loaded.ok()) return Fail(loaded.status());
  const eval::NeighborIndex index(*loaded);
  StatusOr<std::vector<eval::Neighbor>> found = index.Nearest(f.word, f.k);
  if (!found.ok()) {
    return Fail(Status::NotFound(found.status().message() + " in " + f.vectors));
  }
  for (const eval::Neighbor& n : *found) {
    std::printf("%s\t%.6f\n", index.word(n.row).c_str(), n.similarity);
  }
  return 0;
}

}  // namespace

void RegisterNeighborsCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<NeighborsFlags>();
  CLI::App* cmd = root.add_subcommand(
      "neighbors", "Exact cosine nearest neighbours of a word (the word itself excluded)");
  cmd->footer(
      "Prints k lines \"word<TAB>cosine similarity\", most similar first (ties: more frequent "
      "word first).\nExit status: 0 ok, 2 unknown word or missing / malformed vectors file.");
  cmd->add_option("--vectors", flags->vectors, "Vectors file (word2vec text or binary)")
      ->required();
  cmd->add_option("word", flags->word, "Query word (exact, case-sensitive)")->required();
  cmd->add_option("-k,--top-k", flags->k, "Number of neighbours")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([flags, exit_code] { *exit_code = RunNeighbors(*flags); });
}

}  // namespace streamvec::app

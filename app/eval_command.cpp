// `streamvec eval`: word-similarity correlations and 3CosAdd analogy accuracy of a vectors file,
// with gensim 4.2's numbers (see eval/README.md).
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "streamvec/eval/analogy.h"
#include "streamvec/eval/similarity.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec::app {
namespace {

constexpr const char* kEvalDescription =
    R"(Evaluate word vectors (word2vec text or binary format, detected).

Similarity files ("w1<TAB>w2<TAB>score" lines, '#' comments): Spearman and Pearson correlation
of the scores with cosine similarity, over the pairs whose words are among the 300000 most
frequent (case-insensitive), as gensim 4.2 KeyedVectors.evaluate_word_pairs.
Analogy file (": section" lines, then "a b c d"): 3CosAdd accuracy per section and in total over
the questions whose four words are among the --restrict most frequent (case-insensitive); the
answer is searched among those words, a, b and c excluded, as gensim 4.2
KeyedVectors.evaluate_word_analogies(restrict_vocab=N).

--json prints one object:
  {"vectors", "rows", "dim", "format",
   "similarity": [{"file", "name", "pairs", "total", "oov", "oov_ratio", "coverage",
                   "spearman", "pearson", "seconds"}],
   "analogy": {"file", "name", "method", "restrict", "questions", "oov", "oov_ratio", "coverage",
               "correct", "total", "accuracy", "seconds",
               "sections": [{"section", "correct", "total", "accuracy", "oov"}]} or null,
   "seconds": {"load", "total"}}
pairs / total: pairs scored / valid pair lines; oov: lines with an unknown word; oov_ratio: percent;
coverage: fraction in 0..1; a correlation that is undefined (fewer than 2 pairs) is null.
Analogy total: questions answered (all four words known), accuracy = correct / total.
Exit status: 0 ok, 2 bad input (missing or malformed vectors or eval file), 1 other failure.)";

struct EvalFlags {
  std::string vectors;
  std::vector<std::string> similarity;
  std::string analogy;
  size_t restrict_vocab = 30000;
  int threads = 2;
  bool json = false;
};

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound:
    case StatusCode::kInvalidArgument:
    case StatusCode::kCorruption:
      return 2;
    default:
      return 1;
  }
}

int Fail(const Status& status) {
  std::fprintf(stderr, "streamvec eval: error: %s\n", status.message().c_str());
  return ExitCodeFor(status);
}

std::string Stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// Fails fast, before a long vectors load, when an eval file cannot be opened.
Status CheckReadable(const std::string& path, const std::string& what) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return errno == ENOENT ? Status::NotFound(what + " not found: " + path)
                           : Status::IoError("cannot open " + what + " " + path);
  }
  std::fclose(f);
  return Status::Ok();
}

// NaN (an undefined correlation) becomes JSON null.
nlohmann::json Number(double x) {
  return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x);
}

void PrintTable(const EvalFlags& f, const Embeddings& e, VectorFormat format, double load_s,
                const std::vector<eval::SimilarityResult>& sims,
                const std::vector<double>& sim_seconds, const eval::AnalogyResult* analogy,
                double analogy_s) {
  std::printf("vectors %s: %zu words x %d, %s, loaded in %.2f s\n", f.vectors.c_str(), e.rows(),
              e.dim, format == VectorFormat::kText ? "text" : "binary", load_s);
  if (!sims.empty()) {
    std::printf("\n%-24s %13s %9s %7s %9s %9s\n", "similarity", "pairs/total", "coverage", "oov%",
                "spearman", "pearson");
    for (size_t i = 0; i < sims.size(); ++i) {
      const eval::SimilarityResult& s = sims[i];
      const std::string pairs = std::to_string(s.pairs) + "/" + std::to_string(s.total);
      std::printf("%-24s %13s %8.1f%% %7.1f %9.4f %9.4f\n", Stem(s.file).c_str(), pairs.c_str(),
                  100.0 * s.coverage, s.oov_ratio, s.spearman, s.pearson);
    }
    (void)sim_seconds;
  }
  if (analogy != nullptr) {
    std::printf(
        "\nanalogy %s (3CosAdd, restrict %zu): %zu of %zu questions in vocabulary "
        "(%.1f%%), %.2f s\n",
        Stem(analogy->file).c_str(), analogy->restrict_vocab, analogy->total, analogy->questions,
        100.0 - analogy->oov_ratio(), analogy_s);
    std::printf("%-32s %8s %8s %9s\n", "section", "correct", "total", "accuracy");
    for (const eval::AnalogySection& s : analogy->sections) {
      std::printf("%-32s %8zu %8zu %8.2f%%\n", s.name.c_str(), s.correct, s.total,
                  100.0 * s.accuracy());
    }
    std::printf("%-32s %8zu %8zu %8.2f%%\n", "Total accuracy", analogy->correct, analogy->total,
                100.0 * analogy->accuracy());
  }
}

int RunEval(const EvalFlags& f) {
  const auto t0 = Clock::now();
  if (f.similarity.empty() && f.analogy.empty()) {
    return Fail(
        Status::InvalidArgument("nothing to evaluate: give --similarity FILE and/or "
                                "--analogy FILE"));
  }
  if (f.restrict_vocab == 0) return Fail(Status::InvalidArgument("--restrict must be >= 1"));
  for (const std::string& path : f.similarity) {
    if (Status s = CheckReadable(path, "similarity file"); !s.ok()) return Fail(s);
  }
  if (!f.analogy.empty()) {
    if (Status s = CheckReadable(f.analogy, "analogy file"); !s.ok()) return Fail(s);
  }

  VectorFormat format = VectorFormat::kText;
  StatusOr<Embeddings> loaded = ReadWord2Vec(f.vectors, &format);
  if (!loaded.ok()) return Fail(loaded.status());
  const Embeddings& e = *loaded;
  const double load_s = SecondsSince(t0);

  std::vector<eval::SimilarityResult> sims;
  std::vector<double> sim_seconds;
  for (const std::string& path : f.similarity) {
    const auto t = Clock::now();
    StatusOr<eval::SimilarityResult> r = eval::EvaluateWordPairs(e, path);
    if (!r.ok()) return Fail(r.status());
    sims.push_back(*std::move(r));
    sim_seconds.push_back(SecondsSince(t));
  }
  std::unique_ptr<eval::AnalogyResult> analogy;
  double analogy_s = 0;
  if (!f.analogy.empty()) {
    const auto t = Clock::now();
    eval::AnalogyOptions options;
    options.restrict_vocab = f.restrict_vocab;
    options.threads = f.threads;
    StatusOr<eval::AnalogyResult> r = eval::EvaluateAnalogies(e, f.analogy, options);
    if (!r.ok()) return Fail(r.status());
    analogy = std::make_unique<eval::AnalogyResult>(*std::move(r));
    analogy_s = SecondsSince(t);
  }

  if (!f.json) {
    PrintTable(f, e, format, load_s, sims, sim_seconds, analogy.get(), analogy_s);
    return 0;
  }
  nlohmann::json out;
  out["vectors"] = f.vectors;
  out["rows"] = e.rows();
  out["dim"] = e.dim;
  out["format"] = format == VectorFormat::kText ? "text" : "binary";
  out["similarity"] = nlohmann::json::array();
  for (size_t i = 0; i < sims.size(); ++i) {
    const eval::SimilarityResult& s = sims[i];
    out["similarity"].push_back({{"file", s.file},
                                 {"name", Stem(s.file)},
                                 {"pairs", s.pairs},
                                 {"total", s.total},
                                 {"oov", s.oov},
                                 {"oov_ratio", s.oov_ratio},
                                 {"coverage", s.coverage},
                                 {"spearman", Number(s.spearman)},
                                 {"pearson", Number(s.pearson)},
                                 {"seconds", sim_seconds[i]}});
  }
  if (analogy) {
    nlohmann::json sections = nlohmann::json::array();
    for (const eval::AnalogySection& s : analogy->sections) {
      sections.push_back({{"section", s.name},
                          {"correct", s.correct},
                          {"total", s.total},
                          {"accuracy", s.accuracy()},
                          {"oov", s.oov}});
    }
    out["analogy"] = {
        {"file", analogy->file},
        {"name", Stem(analogy->file)},
        {"method", "3CosAdd"},
        {"restrict", analogy->restrict_vocab},
        {"questions", analogy->questions},
        {"oov", analogy->oov},
        {"oov_ratio", analogy->oov_ratio()},
        {"coverage",
         analogy->questions == 0 ? 0.0 : static_cast<double>(analogy->total) / analogy->questions},
        {"correct", analogy->correct},
        {"total", analogy->total},
        {"accuracy", analogy->accuracy()},
        {"seconds", analogy_s},
        {"sections", std::move(sections)}};
  } else {
    out["analogy"] = nullptr;
  }
  out["seconds"] = {{"load", load_s}, {"total", SecondsSince(t0)}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace

void RegisterEvalCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<EvalFlags>();
  CLI::App* cmd =
      root.add_subcommand("eval", "Word-similarity and analogy scores of a vectors file");
  cmd->footer(kEvalDescription);
  cmd->add_option("--vectors", flags->vectors, "Vectors file (word2vec text or binary)")
      ->required();
  cmd->add_option("--similarity", flags->similarity,
                  "Word-pair file (w1<TAB>w2<TAB>score); repeat for several");
  cmd->add_option("--analogy", flags->analogy, "Analogy file (questions-words.txt format)");
  cmd->add_option("--restrict", flags->restrict_vocab,
                  "Analogy: only questions within, and answers among, the N most frequent words")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "Threads scoring analogy questions")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--json", flags->json, "Print one JSON object instead of tables");
  cmd->callback([flags, exit_code] { *exit_code = RunEval(*flags); });
}

}  // namespace streamvec::app

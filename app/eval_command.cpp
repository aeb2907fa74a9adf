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
#include <string_view>
#include <unordered_map>
#include <vector>

#include "commands.h"
#include "oov_eval.h"
#include "streamvec/eval/analogy.h"
#include "streamvec/eval/pip.h"
#include "streamvec/eval/similarity.h"
#include "streamvec/store/word2vec_format.h"
#include "streamvec/trainer/corpus.h"

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

PIP loss (Yin & Shen 2018), a label-free comparison: --pip A B compares two vectors files over
the words both hold, among the --top most frequent of A; --pip-sppmi CORPUS --vectors PATH
compares the vectors with the SPPMI-factorisation reference (Levy & Goldberg 2014: window 5,
shift log 5, rank = the vectors' dim, randomized SVD) of the --top most frequent corpus words.
Prints the number of words, the loss ||E1 E1^T - E2 E2^T||_F, the loss relative to the first PIP
norm, and the scale-free normalized loss in [0, sqrt 2] (--json: {"pip": {"words", "loss",
"relative", "normalized", "norm_a", "norm_b", "seconds"}}).
Exit status: 0 ok, 2 bad input (missing or malformed vectors or eval file), 1 other failure.)";

struct EvalFlags {
  std::string vectors;
  std::vector<std::string> similarity;
  std::string analogy;
  size_t restrict_vocab = 30000;
  int threads = 2;
  bool json = false;
  std::vector<std::string> pip;  // --pip A B
  std::string pip_sppmi;         // --pip-sppmi CORPUS
  size_t top = 10000;            // words compared by --pip / --pip-sppmi
  bool oov = false;              // --oov: score a state's table + character model
  std::string state;             // --state DIR (with --oov)
  size_t table_top = 0;          // --table-top N (with --oov)
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

int PrintPip(const EvalFlags& f, const eval::PipResult& r, double seconds) {
  if (r.words == 0) return Fail(Status::InvalidArgument("--pip: the embeddings share no word"));
  if (f.json) {
    nlohmann::json out;
    out["pip"] = {{"words", r.words},         {"loss", r.loss},     {"relative", r.relative},
                  {"normalized", r.normalized}, {"norm_a", r.norm_a}, {"norm_b", r.norm_b},
                  {"seconds", seconds}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("PIP loss over %zu words: %.6g (relative %.4f, normalized %.4f), %.2f s\n",
                r.words, r.loss, r.relative, r.normalized, seconds);
  }
  return 0;
}

int RunPip(const EvalFlags& f) {
  const auto t0 = Clock::now();
  if (f.top == 0) return Fail(Status::InvalidArgument("--top must be >= 1"));
  if (!f.pip.empty()) {
    StatusOr<Embeddings> a = ReadWord2Vec(f.pip[0]);
    if (!a.ok()) return Fail(a.status());
    StatusOr<Embeddings> b = ReadWord2Vec(f.pip[1]);
    if (!b.ok()) return Fail(b.status());
    return PrintPip(f, eval::PipLoss(*a, *b, f.top), SecondsSince(t0));
  }
  if (f.vectors.empty()) {
    return Fail(Status::InvalidArgument("--pip-sppmi needs --vectors PATH"));
  }
  StatusOr<Embeddings> e = ReadWord2Vec(f.vectors);
  if (!e.ok()) return Fail(e.status());
  CorpusOptions corpus_options;
  corpus_options.min_count = 1;
  corpus_options.threads = f.threads;
  StatusOr<Corpus> corpus = LoadCorpus(f.pip_sppmi, corpus_options);
  if (!corpus.ok()) {
    return Fail(Status(corpus.status().code(), "--pip-sppmi: " + corpus.status().message()));
  }
  const uint32_t top = static_cast<uint32_t>(std::min<size_t>(f.top, corpus->vocab.size()));
  eval::SppmiOptions options;
  options.dim = e->dim;
  StatusOr<std::vector<float>> reference =
      eval::SppmiEmbedding(corpus->tokens, corpus->sentence_offsets, top, options);
  if (!reference.ok()) return Fail(reference.status());
  // Rows of the top corpus words that the vectors hold, in corpus frequency order.
  std::unordered_map<std::string_view, size_t> row_of;
  for (size_t i = 0; i < e->rows(); ++i) row_of.emplace(e->words[i], i);
  std::vector<float> mine, ref;
  size_t n = 0;
  for (uint32_t w = 0; w < top; ++w) {
    auto it = row_of.find(corpus->vocab.word(w));
    if (it == row_of.end()) continue;
    mine.insert(mine.end(), e->row(it->second), e->row(it->second) + e->dim);
    ref.insert(ref.end(), reference->begin() + static_cast<size_t>(w) * e->dim,
               reference->begin() + static_cast<size_t>(w + 1) * e->dim);
    ++n;
  }
  return PrintPip(f, eval::PipLossDense(mine.data(), e->dim, ref.data(), e->dim, n),
                  SecondsSince(t0));
}

int RunEval(const EvalFlags& f) {
  const auto t0 = Clock::now();
  if (!f.pip.empty() || !f.pip_sppmi.empty()) return RunPip(f);
  if (f.vectors.empty()) return Fail(Status::InvalidArgument("--vectors is required"));
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
  cmd->add_option("--vectors", flags->vectors, "Vectors file (word2vec text or binary)");
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
  cmd->add_option("--pip", flags->pip, "PIP loss between two vectors files A B")->expected(2);
  cmd->add_option("--pip-sppmi", flags->pip_sppmi,
                  "PIP loss of --vectors against the SPPMI-factorisation reference of CORPUS");
  cmd->add_option("--top", flags->top, "PIP: the N most frequent words (of A, or of CORPUS)")
      ->capture_default_str();
  cmd->add_flag("--oov", flags->oov,
                "Score every pair of --similarity files from --state DIR: table words from its "
                "table, the others from its character model (docs/char-model.md)");
  cmd->add_option("--state", flags->state, "--oov: state directory (its newest snapshot)");
  cmd->add_option("--table-top", flags->table_top,
                  "--oov: serve only the N most frequent words from the table (0: all)")
      ->capture_default_str();
  cmd->callback([flags, exit_code] {
    if (flags->oov) {
      *exit_code = RunOovEval({flags->state, flags->similarity, flags->table_top, flags->json});
      return;
    }
    *exit_code = RunEval(*flags);
  });
}

}  // namespace streamvec::app

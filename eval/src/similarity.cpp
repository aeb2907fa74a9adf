// Word-pair similarity evaluation, as gensim 4.2's KeyedVectors.evaluate_word_pairs (see
// similarity.h).
#include "streamvec/eval/similarity.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "streamvec/eval/vocabulary.h"
#include "text_lines.h"

namespace streamvec::eval {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// L2 norm accumulated in double, rounded to float32 (numpy/BLAS compute it in float32; the
// difference is at most an ulp or so).
float Norm(const float* v, int dim) {
  double sum = 0;
  for (int i = 0; i < dim; ++i) sum += static_cast<double>(v[i]) * v[i];
  return static_cast<float>(std::sqrt(sum));
}

std::vector<std::string_view> SplitTabs(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string_view::npos ? tab : tab - start));
    if (tab == std::string_view::npos) return fields;
    start = tab + 1;
  }
}

}  // namespace

std::vector<double> AverageRanks(const std::vector<double>& values) {
  const size_t n = values.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(n);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && values[order[j]] == values[order[i]]) ++j;
    // Positions i..j-1 hold equal values: ranks i+1..j, average (i + 1 + j) / 2.
    const double rank = 0.5 * static_cast<double>(i + 1 + j);
    for (size_t t = i; t < j; ++t) ranks[order[t]] = rank;
    i = j;
  }
  return ranks;
}

double PearsonCorrelation(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  if (n != y.size() || n < 2) return kNaN;
  // scipy.stats.pearsonr (1.10): constant input -> NaN; n == 2 -> the sign of the slope.
  if (std::all_of(x.begin(), x.end(), [&](double v) { return v == x[0]; }) ||
      std::all_of(y.begin(), y.end(), [&](double v) { return v == y[0]; })) {
    return kNaN;
  }
  if (n == 2) {
    const double dx = x[1] - x[0], dy = y[1] - y[0];
    return static_cast<double>((dx > 0) - (dx < 0)) * static_cast<double>((dy > 0) - (dy < 0));
  }
  const double mean_x = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(n);
  const double mean_y = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(n);
  double sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mean_x) * (x[i] - mean_x);
    syy += (y[i] - mean_y) * (y[i] - mean_y);
  }
  const double norm_x = std::sqrt(sxx), norm_y = std::sqrt(syy);
  double r = 0;
  for (size_t i = 0; i < n; ++i) r += ((x[i] - mean_x) / norm_x) * ((y[i] - mean_y) / norm_y);
  return std::clamp(r, -1.0, 1.0);
}

double SpearmanCorrelation(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) return kNaN;
  return PearsonCorrelation(AverageRanks(x), AverageRanks(y));
}

float CosineSimilarity(const float* a, const float* b, int dim) {
  const float norm_a = Norm(a, dim), norm_b = Norm(b, dim);
  double dot = 0;
  for (int i = 0; i < dim; ++i) {
    // gensim: dot(unitvec(a), unitvec(b)), each unit vector rounded to float32 first.
    const float ua = norm_a > 0 ? a[i] / norm_a : a[i];
    const float ub = norm_b > 0 ? b[i] / norm_b : b[i];
    dot += static_cast<double>(ua) * ub;
  }
  return static_cast<float>(dot);
}

StatusOr<SimilarityResult> EvaluateWordPairs(const Embeddings& embeddings, const std::string& path,
                                             const SimilarityOptions& options) {
  StatusOr<std::string> data = internal::ReadWholeFile(path, "similarity file");
  if (!data.ok()) return data.status();
  const EvalVocabulary vocab(embeddings, options.restrict_vocab, options.case_insensitive);

  SimilarityResult result;
  result.file = path;
  std::vector<double> gold, model;
  for (std::string_view line : internal::SplitLines(*data)) {
    if (!line.empty() && line.front() == '#') {
      ++result.skipped_lines;
      continue;
    }
    const std::vector<std::string_view> fields = SplitTabs(line);
    double score = 0;
    if (fields.size() != 3 || !internal::ParsePythonFloat(fields[2], &score)) {
      ++result.skipped_lines;
      continue;
    }
    ++result.total;
    const std::optional<size_t> a = vocab.Find(vocab.Key(fields[0]));
    const std::optional<size_t> b = vocab.Find(vocab.Key(fields[1]));
    if (!a || !b) {
      ++result.oov;
      continue;
    }
    gold.push_back(score);
    model.push_back(CosineSimilarity(embeddings.row(*a), embeddings.row(*b), embeddings.dim));
  }
  if (result.total == 0) {
    return Status::InvalidArgument("similarity file " + path +
                                   " holds no valid pair line (expected "
                                   "\"word1<TAB>word2<TAB>score\" lines)");
  }
  result.pairs = gold.size();
  result.oov_ratio = 100.0 * static_cast<double>(result.oov) / static_cast<double>(result.total);
  result.coverage = static_cast<double>(result.pairs) / static_cast<double>(result.total);
  result.spearman = SpearmanCorrelation(gold, model);
  result.pearson = PearsonCorrelation(gold, model);
  return result;
}

}  // namespace streamvec::eval

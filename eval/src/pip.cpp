#include "streamvec/eval/pip.h"

#include <Eigen/Dense>
#include <Eigen/Sparse>

#include <cmath>
#include <random>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "streamvec/base/big_array.h"

namespace streamvec::eval {
namespace {

using Rows = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowsMap = Eigen::Map<const Rows>;

// n x d doubles in 2 MiB pages (10k x 100 words per snapshot under `serve`: 8 MB each), rows
// filled by row(i, out) with d doubles.
template <typename RowFn>
BigVector<double> GatherRows(size_t n, int d, RowFn row) {
  BigVector<double> m(n * static_cast<size_t>(d));
  for (size_t i = 0; i < n; ++i) row(i, m.data() + i * static_cast<size_t>(d));
  return m;
}

PipResult PipOfRows(const RowsMap& ea, const RowsMap& eb) {
  PipResult r;
  r.words = static_cast<size_t>(ea.rows());
  if (r.words == 0) return r;
  const double aa = (ea.transpose() * ea).squaredNorm();
  const double bb = (eb.transpose() * eb).squaredNorm();
  const double ab = (ea.transpose() * eb).squaredNorm();
  r.norm_a = std::sqrt(aa);
  r.norm_b = std::sqrt(bb);
  r.loss = std::sqrt(std::max(0.0, aa + bb - 2.0 * ab));
  r.relative = r.norm_a > 0 ? r.loss / r.norm_a : 0.0;
  if (aa > 0 && bb > 0) {
    r.normalized = std::sqrt(std::max(0.0, 2.0 - 2.0 * ab / (r.norm_a * r.norm_b)));
  }
  return r;
}

template <typename RowFnA, typename RowFnB>
PipResult PipOf(size_t n, int da, RowFnA row_a, int db, RowFnB row_b) {
  const BigVector<double> a = GatherRows(n, da, row_a), b = GatherRows(n, db, row_b);
  const auto rows = static_cast<Eigen::Index>(n);
  return PipOfRows(RowsMap(a.data(), rows, da), RowsMap(b.data(), rows, db));
}

// Copies a row of d floats into d doubles.
void Widen(const float* x, int d, double* out) {
  for (int j = 0; j < d; ++j) out[j] = x[j];
}

}  // namespace

PipResult PipLossDense(const float* a, int da, const float* b, int db, size_t n) {
  return PipOf(
      n, da, [&](size_t i, double* out) { Widen(a + i * static_cast<size_t>(da), da, out); }, db,
      [&](size_t i, double* out) { Widen(b + i * static_cast<size_t>(db), db, out); });
}

PipResult PipLoss(const Embeddings& a, const Embeddings& b, size_t top) {
  std::unordered_map<std::string_view, size_t> in_b;
  for (size_t i = 0; i < b.rows(); ++i) in_b.emplace(b.words[i], i);
  const size_t limit = top == 0 ? a.rows() : std::min(top, a.rows());
  std::vector<std::pair<size_t, size_t>> shared;  // (row in a, row in b)
  for (size_t i = 0; i < limit; ++i) {
    auto it = in_b.find(a.words[i]);
    if (it != in_b.end()) shared.emplace_back(i, it->second);
  }
  return PipOf(
      shared.size(), a.dim,
      [&](size_t i, double* out) { Widen(a.row(shared[i].first), a.dim, out); }, b.dim,
      [&](size_t i, double* out) { Widen(b.row(shared[i].second), b.dim, out); });
}

StatusOr<std::vector<float>> SppmiEmbedding(std::span<const uint32_t> tokens,
                                            const std::vector<uint64_t>& sentence_offsets,
                                            uint32_t vocab, const SppmiOptions& o) {
  if (o.dim < 1 || vocab < static_cast<uint32_t>(o.dim)) {
    return Status::InvalidArgument("SPPMI: --top must be at least the dimension");
  }
  // Co-occurrence counts #(w, c) within the window, both directions.
  std::unordered_map<uint64_t, double> pairs;
  std::vector<double> row_sum(vocab, 0.0);
  double total = 0.0;
  for (size_t s = 0; s + 1 < sentence_offsets.size(); ++s) {
    const uint64_t begin = sentence_offsets[s], end = sentence_offsets[s + 1];
    for (uint64_t i = begin; i < end; ++i) {
      const uint32_t w = tokens[i];
      if (w >= vocab) continue;
      const uint64_t hi = std::min<uint64_t>(end, i + o.window + 1);
      for (uint64_t j = i + 1; j < hi; ++j) {
        const uint32_t c = tokens[j];
        if (c >= vocab) continue;
        pairs[static_cast<uint64_t>(w) << 32 | c] += 1.0;
        pairs[static_cast<uint64_t>(c) << 32 | w] += 1.0;
        row_sum[w] += 1.0;
        row_sum[c] += 1.0;
        total += 2.0;
      }
    }
  }
  if (total == 0.0) return Status::InvalidArgument("SPPMI: no word pair co-occurs in the corpus");
  // SPPMI(w, c) = max(log(#(w,c) D / (#w #c)) - log k, 0).
  std::vector<Eigen::Triplet<double>> entries;
  const double log_k = std::log(o.shift);
  for (const auto& [key, count] : pairs) {
    const uint32_t w = static_cast<uint32_t>(key >> 32), c = static_cast<uint32_t>(key);
    const double v = std::log(count * total / (row_sum[w] * row_sum[c])) - log_k;
    if (v > 0.0) entries.emplace_back(w, c, v);
  }
  const Eigen::Index n = vocab;
  Eigen::SparseMatrix<double> m(n, n);
  m.setFromTriplets(entries.begin(), entries.end());
  // Randomized SVD (Halko, Martinsson & Tropp 2011, algorithms 4.4 and 5.1).
  const Eigen::Index l = std::min<Eigen::Index>(n, o.dim + o.oversample);
  std::mt19937_64 gen(o.seed);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd omega(n, l);
  for (Eigen::Index j = 0; j < l; ++j) {
    for (Eigen::Index i = 0; i < n; ++i) omega(i, j) = normal(gen);
  }
  auto orth = [n, l](const Eigen::MatrixXd& y) {
    Eigen::HouseholderQR<Eigen::MatrixXd> qr(y);
    return Eigen::MatrixXd(qr.householderQ() * Eigen::MatrixXd::Identity(n, l));
  };
  Eigen::MatrixXd q = orth(m * omega);
  for (int it = 0; it < o.power_iterations; ++it) {
    q = orth(m.transpose() * q);
    q = orth(m * q);
  }
  const Eigen::MatrixXd b = q.transpose() * m;  // l x n
  // b is l x n with l = dim + oversample (110 by default): Jacobi SVD (after a QR of b^T) is
  // as fast here as divide and conquer, and compiles in less than half of BDCSVD's time.
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(b, Eigen::ComputeThinU);
  const Eigen::MatrixXd u = q * svd.matrixU();  // n x l
  const Eigen::VectorXd sigma = svd.singularValues();
  std::vector<float> out(static_cast<size_t>(n) * o.dim);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (int j = 0; j < o.dim; ++j) {
      out[static_cast<size_t>(i) * o.dim + j] =
          static_cast<float>(u(i, j) * std::sqrt(std::max(0.0, sigma(j))));
    }
  }
  return out;
}

}  // namespace streamvec::eval

// Orthogonal Procrustes via the SVD of the d x d cross-covariance (Schönemann 1966).
#include "procrustes.h"

#include <Eigen/Dense>
#include <Eigen/SVD>
#include <algorithm>

namespace streamvec::api {

Alignment AlignProcrustes(const ServingSnapshot& from, const ServingSnapshot& to, size_t top) {
  SV_CHECK(from.dim() == to.dim());
  const int dim = to.dim();
  const size_t limit = top == 0 ? to.rows() : std::min(top, to.rows());
  std::vector<std::pair<size_t, size_t>> pairs;  // (row in from, row in to)
  for (size_t r = 0; r < limit; ++r) {
    if (const auto f = from.Find(to.word(r))) pairs.emplace_back(*f, r);
  }
  Alignment out;
  out.shared_words = pairs.size();
  Eigen::MatrixXd m = Eigen::MatrixXd::Zero(dim, dim);  // A^T B, accumulated row by row
  std::vector<float> a(static_cast<size_t>(dim)), b(static_cast<size_t>(dim));
  for (const auto& [fr, tr] : pairs) {
    from.UnitVector(fr, a.data());
    to.UnitVector(tr, b.data());
    const Eigen::Map<const Eigen::VectorXf> av(a.data(), dim), bv(b.data(), dim);
    m.noalias() += av.cast<double>() * bv.cast<double>().transpose();
  }
  Eigen::MatrixXd r = Eigen::MatrixXd::Identity(dim, dim);
  if (!pairs.empty()) {
    const Eigen::JacobiSVD<Eigen::MatrixXd> svd(m, Eigen::ComputeFullU | Eigen::ComputeFullV);
    r = svd.matrixU() * svd.matrixV().transpose();
  }
  out.rotation.resize(static_cast<size_t>(dim) * dim);
  for (int i = 0; i < dim; ++i) {
    for (int j = 0; j < dim; ++j)
      out.rotation[static_cast<size_t>(i) * dim + j] = static_cast<float>(r(i, j));
  }
  return out;
}

void Rotate(const std::vector<float>& rotation, const float* u, int dim, float* out) {
  std::fill(out, out + dim, 0.0f);
  for (int i = 0; i < dim; ++i) {
    const float ui = u[i];
    const float* row = rotation.data() + static_cast<size_t>(i) * dim;
    for (int j = 0; j < dim; ++j) out[j] += ui * row[j];
  }
}

}  // namespace streamvec::api

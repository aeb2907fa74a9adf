// MatMul<float>: OpenBLAS's sgemm where the build found OpenBLAS, else Eigen's product.
#include "streamvec/charmodel/matmul.h"

#include <algorithm>

#ifdef STREAMVEC_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace streamvec {

template <>
void MatMul<float>(const Eigen::Ref<const RowMatrix<float>>& a, bool trans_a,
                   const Eigen::Ref<const RowMatrix<float>>& b, bool trans_b, bool accumulate,
                   Eigen::Ref<RowMatrix<float>> c) {
  const Eigen::Index m = c.rows(), n = c.cols(), k = trans_a ? a.rows() : a.cols();
  eigen_assert((trans_a ? a.cols() : a.rows()) == m);
  eigen_assert((trans_b ? b.cols() : b.rows()) == k && (trans_b ? b.rows() : b.cols()) == n);
#ifdef STREAMVEC_HAVE_OPENBLAS
  // The model's threads each multiply their own words' matrices: OpenBLAS's own thread pool (the
  // pthread build's) would only contend with them.
  static const bool single_threaded = (openblas_set_num_threads(1), true);
  (void)single_threaded;
  if (m > 0 && n > 0 && k > 0) {
    // Row-major, so each leading dimension is a row's stride (at least 1 for a one-column view).
    auto ld = [](Eigen::Index stride, Eigen::Index cols) {
      return static_cast<blasint>(std::max<Eigen::Index>({stride, cols, 1}));
    };
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a.data(),
                ld(a.outerStride(), a.cols()), b.data(), ld(b.outerStride(), b.cols()),
                accumulate ? 1.0f : 0.0f, c.data(), ld(c.outerStride(), c.cols()));
    return;
  }
  if (!accumulate) c.setZero();  // an empty product
#else
  MatMulEigen<float>(a, trans_a, b, trans_b, accumulate, c);
#endif
}

}  // namespace streamvec

// The character model's matrix products: c = op(a) op(b) (or c += ...) on row-major matrices,
// Eigen's product in general and OpenBLAS's sgemm for float where the build found OpenBLAS.
// Thread safety: free functions on caller-owned data.
#ifndef STREAMVEC_CHARMODEL_MATMUL_H_
#define STREAMVEC_CHARMODEL_MATMUL_H_

#include <Eigen/Core>

namespace streamvec {

template <typename Scalar>
using RowMatrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// c = a' b' (accumulate: c += a' b'), where a' is a or its transpose (trans_a), b' likewise, by
// Eigen's product. c must already have the product's shape (it is not resized). Shapes: a' m x k,
// b' k x n, c m x n.
template <typename Scalar>
void MatMulEigen(const Eigen::Ref<const RowMatrix<Scalar>>& a, bool trans_a,
                 const Eigen::Ref<const RowMatrix<Scalar>>& b, bool trans_b, bool accumulate,
                 Eigen::Ref<RowMatrix<Scalar>> c) {
  if (!accumulate) c.setZero();
  if (trans_a && trans_b) {
    c.noalias() += a.transpose() * b.transpose();
  } else if (trans_a) {
    c.noalias() += a.transpose() * b;
  } else if (trans_b) {
    c.noalias() += a * b.transpose();
  } else {
    c.noalias() += a * b;
  }
}

// As MatMulEigen. The float version (matmul.cpp) is OpenBLAS's cblas_sgemm where the build found
// OpenBLAS (STREAMVEC_ENABLE_OPENBLAS): its kernels are chosen at run time (AVX-512 or AVX2 with
// FMA), where the portable build's Eigen multiplies with SSE2 packets; MatMulEigen without it.
// The gradient checks run the generic version in double.
template <typename Scalar>
void MatMul(const Eigen::Ref<const RowMatrix<Scalar>>& a, bool trans_a,
            const Eigen::Ref<const RowMatrix<Scalar>>& b, bool trans_b, bool accumulate,
            Eigen::Ref<RowMatrix<Scalar>> c) {
  MatMulEigen<Scalar>(a, trans_a, b, trans_b, accumulate, c);
}

template <>
void MatMul<float>(const Eigen::Ref<const RowMatrix<float>>& a, bool trans_a,
                   const Eigen::Ref<const RowMatrix<float>>& b, bool trans_b, bool accumulate,
                   Eigen::Ref<RowMatrix<float>> c);

}  // namespace streamvec

#endif  // STREAMVEC_CHARMODEL_MATMUL_H_

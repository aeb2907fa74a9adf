// PIP loss between embeddings (Yin & Shen 2018, "On the Dimensionality of Word Embedding",
// section 2) and the SPPMI-factorisation reference embedding (Levy & Goldberg 2014, "Neural Word
// Embedding as Implicit Matrix Factorization", sections 3-5): a label-free quality measure.
//
// The PIP matrix of an embedding E (n words x d) is E E^T; the PIP loss between E1 and E2 over the
// same n words is ||E1 E1^T - E2 E2^T||_F. It is unitary-invariant (any rotation of either
// embedding leaves it unchanged) and the dimensions may differ. Computed without the n x n
// matrices: ||E1 E1^T - E2 E2^T||_F^2 = ||E1^T E1||_F^2 + ||E2^T E2||_F^2 - 2 ||E1^T E2||_F^2,
// O(n d^2) in double precision.
#ifndef STREAMVEC_EVAL_PIP_H_
#define STREAMVEC_EVAL_PIP_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec::eval {

struct PipResult {
  size_t words = 0;       // n: rows compared
  double loss = 0.0;      // ||E1 E1^T - E2 E2^T||_F
  double norm_a = 0.0;    // ||E1 E1^T||_F
  double norm_b = 0.0;    // ||E2 E2^T||_F
  double relative = 0.0;  // loss / norm_a (0 when norm_a is 0)
  // The loss after scaling each embedding so that its PIP matrix has Frobenius norm 1: in
  // [0, sqrt(2)], independent of the scale of either embedding (SGNS and SPPMI factors differ).
  double normalized = 0.0;
};

// PIP loss of row-major a (n x da) against b (n x db): row i of both is the same word.
PipResult PipLossDense(const float* a, int da, const float* b, int db, size_t n);

// PIP loss over the words both embeddings hold (exact string match), taken in a's order among
// a's first `top` rows (0: all). Each row is used as stored (no normalisation), as in Yin & Shen.
PipResult PipLoss(const Embeddings& a, const Embeddings& b, size_t top = 0);

struct SppmiOptions {
  int window = 5;          // symmetric context radius, every position counted once
  double shift = 5.0;      // k of SPPMI = max(PMI - log k, 0) (SGNS's number of negatives)
  int dim = 100;           // rank of the reference embedding
  int oversample = 10;     // randomized SVD: extra columns (Halko et al. 2011)
  int power_iterations = 3;  // randomized SVD: subspace iterations
  uint64_t seed = 1;       // random test matrix
};

// The reference embedding U_d sqrt(S_d) of the truncated SVD of the SPPMI matrix of words
// 0 .. vocab-1 (Levy & Goldberg 2014, section 5, the symmetric "SVD_1/2" variant). tokens: word
// ids of a corpus (ids >= vocab keep their position but are not counted), sentence_offsets:
// sentence s is tokens[offsets[s], offsets[s+1]). Returns vocab x dim floats, row-major.
// InvalidArgument when vocab < dim or no pair co-occurs.
StatusOr<std::vector<float>> SppmiEmbedding(std::span<const uint32_t> tokens,
                                            const std::vector<uint64_t>& sentence_offsets,
                                            uint32_t vocab, const SppmiOptions& options);

}  // namespace streamvec::eval

#endif  // STREAMVEC_EVAL_PIP_H_

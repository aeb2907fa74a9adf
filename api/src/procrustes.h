// Orthogonal Procrustes alignment of two snapshots' embedding spaces (Schönemann 1966, "A
// generalized solution of the orthogonal Procrustes problem"; applied to diachronic embeddings by
// Hamilton, Leskovec & Jurafsky 2016, "Diachronic Word Embeddings Reveal Statistical Laws of
// Semantic Change", section 2.3). Two SGNS runs (or two snapshots of one run) are only defined
// up to a rotation; aligning on shared words makes a word's vectors comparable across them.
#ifndef STREAMVEC_API_SRC_PROCRUSTES_H_
#define STREAMVEC_API_SRC_PROCRUSTES_H_

#include <cstddef>
#include <vector>

#include "streamvec/api/serving_snapshot.h"

namespace streamvec::api {

struct Alignment {
  // R (dim x dim, row-major): a unit row u of `from` maps to u R in the space of `to`.
  // Orthogonal, so cosines within `from` are unchanged.
  std::vector<float> rotation;
  size_t shared_words = 0;  // words the rotation was fitted on
};

// R = argmin over orthogonal R of ||A R - B||_F, where A and B are the unit rows of the words both
// snapshots hold (taken among the first `top` rows of `to`, 0 = all): with A^T B = U S V^T, R = U
// V^T (Eigen's JacobiSVD, double precision). Cost: shared x dim^2 + dim^3. Both snapshots must have
// the same dim (checked); no shared word gives the identity.
Alignment AlignProcrustes(const ServingSnapshot& from, const ServingSnapshot& to, size_t top);

// Writes u R into out (dim floats); u and out must not overlap.
void Rotate(const std::vector<float>& rotation, const float* u, int dim, float* out);

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_PROCRUSTES_H_

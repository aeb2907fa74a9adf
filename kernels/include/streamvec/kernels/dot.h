// Dot products of float vectors, one build per SIMD level, chosen at run time like the SGNS
// kernels. For callers that need a plain function (hnswlib's distance, exact re-ranking).
#ifndef STREAMVEC_KERNELS_DOT_H_
#define STREAMVEC_KERNELS_DOT_H_

#include <cstddef>
#include <cstdint>

#include "streamvec/base/cpu_features.h"

namespace streamvec {

// sum_i a[i] * b[i] over n floats (any n, any alignment). Builds differ in summation order, so
// results agree to float rounding (about n * 1e-7 relative), not bit for bit.
using DotFn = float (*)(const float* a, const float* b, size_t n);

// The build for `isa`; the caller checks IsaSupported(isa). A build this binary lacks (AVX on a
// non-x86 build) gives the portable one.
DotFn DotFunction(Isa isa);

// Scores of `width` vectors stored column-major (component j of vector i at columns[j * width +
// i], the layout of an exact neighbour scan's blocks) against one query of `dim` floats:
// scores[i] = sum_j columns[j * width + i] * query[j], for i < width. scores: 64-byte aligned.
// Builds differ in rounding (fused multiply-adds or not), as DotFn.
using ColumnScoresFn = void (*)(const float* columns, const float* query, size_t dim,
                                size_t width, float* scores);

// The build for `isa`, as DotFunction.
ColumnScoresFn ColumnScoresFunction(Isa isa);

// sum_i a[i] * b[i] over n int8 codes, exact (in int32: |sum| <= n * 2^14, exact for n < 2^17).
// The inner product of scalar-quantised (SQ8) rows, as an approximate search scores them
// (api/'s HNSW index: each unit row stored as int8 codes and one float step).
using Int8DotFn = int32_t (*)(const int8_t* a, const int8_t* b, size_t n);

// The build for `isa`, as DotFunction. Every build gives the same (exact) result.
Int8DotFn Int8DotFunction(Isa isa);

// out[c] = Int8Dot(query, rows[c], n) for c < count: the scores of one search step's candidates
// in one call (an HNSW node's unvisited neighbours), the query's codes widened once. Exact, the
// same results as Int8DotFn.
using Int8DotManyFn = void (*)(const int8_t* query, const int8_t* const* rows, size_t count,
                               size_t n, int32_t* out);

// The build for `isa`, as DotFunction.
Int8DotManyFn Int8DotManyFunction(Isa isa);

}  // namespace streamvec

#endif  // STREAMVEC_KERNELS_DOT_H_

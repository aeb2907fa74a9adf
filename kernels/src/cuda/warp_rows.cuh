// Internal to kernels/src/cuda: what the CUDA kernels share. A row of the tables is split over a
// warp's lanes in float4 pieces (lane l holds floats 4 (l + 32 c) .. + 4 for c < C, C =
// PiecesPerLane(stride)), so a dot product is 32 partial sums and a butterfly of shuffles; row
// updates are atomic adds. Also the CUDA error plumbing (SV_CUDA).
#ifndef STREAMVEC_KERNELS_SRC_CUDA_WARP_ROWS_CUH_
#define STREAMVEC_KERNELS_SRC_CUDA_WARP_ROWS_CUH_

#include <cuda_runtime.h>

#include <string>

#include "streamvec/base/status.h"

namespace streamvec::cuda_detail {

inline constexpr unsigned kFull = 0xFFFFFFFFu;
inline constexpr int kWarpsPerBlock = 4;  // warps a block, at most
inline constexpr int kGroup = 8;  // targets whose dot products are reduced together

// A CUDA error as Status::Internal naming the call (the sticky error cleared).
inline Status CudaFail(const char* what, cudaError_t e) {
  cudaGetLastError();
  return Status::Internal(std::string(what) + ": " + cudaGetErrorName(e) + " (" +
                          cudaGetErrorString(e) + ")");
}

#define SV_CUDA(call)                                   \
  do {                                                  \
    const cudaError_t sv_e = (call);                    \
    if (sv_e != cudaSuccess) return CudaFail(#call, sv_e); \
  } while (0)

// Rounded up to a template instance: 1, 2, 4 or 8 float4 pieces a lane.
inline int PiecesPerLane(int stride) {
  const int c = (stride + 127) / 128;
  return c <= 1 ? 1 : c <= 2 ? 2 : c <= 4 ? 4 : 8;
}

// A row's float4 pieces held by one lane.
template <int C>
struct Piece {
  float4 v[C];
};

__device__ inline float4 Fma(float a, float4 x, float4 y) {
  return make_float4(fmaf(a, x.x, y.x), fmaf(a, x.y, y.y), fmaf(a, x.z, y.z), fmaf(a, x.w, y.w));
}
__device__ inline float4 Add(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ inline float Dot4(float4 a, float4 b, float acc) {
  return fmaf(a.x, b.x, fmaf(a.y, b.y, fmaf(a.z, b.z, fmaf(a.w, b.w, acc))));
}

template <int C>
__device__ inline void LoadPiece(const float* row, int lane, int stride4, Piece<C>* p) {
  const float4* r = reinterpret_cast<const float4*>(row);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int q = lane + 32 * c;
    p->v[c] = q < stride4 ? r[q] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}
// row += delta, each float4 as one atomic reduction (a vector RED on sm_90, four scalar ones
// before): warps that update the same row at once (Hogwild) add up instead of overwriting each
// other's load-add-store; in one warp's program order a later load sees it.
template <int C>
__device__ inline void AddPiece(float* row, int lane, int stride4, const Piece<C>& delta) {
  float4* r = reinterpret_cast<float4*>(row);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int q = lane + 32 * c;
    if (q < stride4) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      atomicAdd(r + q, delta.v[c]);
#else
      float* f = reinterpret_cast<float*>(r + q);
      atomicAdd(f, delta.v[c].x);
      atomicAdd(f + 1, delta.v[c].y);
      atomicAdd(f + 2, delta.v[c].z);
      atomicAdd(f + 3, delta.v[c].w);
#endif
    }
  }
}

template <int C>
__device__ inline void StorePiece(float* row, int lane, int stride4, const Piece<C>& p) {
  float4* r = reinterpret_cast<float4*>(row);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int q = lane + 32 * c;
    if (q < stride4) r[q] = p.v[c];
  }
}

// The dot products of the lane's piece x with the rows row(k0 + u), u < kGroup, summed over the
// warp: afterwards every lane holds all kGroup sums in part (0 where k0 + u >= n). The kGroup
// butterflies run interleaved, so their shuffles overlap.
template <int C, typename RowOf>
__device__ inline void GroupDots(const Piece<C>& x, int k0, int n, RowOf&& row, int lane,
                                 int stride4, float (&part)[kGroup]) {
#pragma unroll
  for (int u = 0; u < kGroup; ++u) {
    part[u] = 0.f;
    if (k0 + u < n) {
      Piece<C> t;
      LoadPiece<C>(row(k0 + u), lane, stride4, &t);
#pragma unroll
      for (int c = 0; c < C; ++c) part[u] = Dot4(x.v[c], t.v[c], part[u]);
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
    for (int u = 0; u < kGroup; ++u) part[u] += __shfl_xor_sync(kFull, part[u], off);
  }
}

}  // namespace streamvec::cuda_detail

#endif  // STREAMVEC_KERNELS_SRC_CUDA_WARP_ROWS_CUH_

// The streaming learner's Adagrad step on the device (adagrad_step.cuh). Compiled only in a
// CUDA build.
#include "adagrad_step.cuh"

#include <algorithm>
#include <string>

#include "streamvec/kernels/adagrad_math.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"
#include "warp_rows.cuh"

namespace streamvec::cuda_detail {
namespace {

// The streaming learner's Adagrad skip-gram step (trainer/src/adagrad_step.h, whose portable step
// is the oracle): per window, each context row gets its Adagrad update right after its gradient
// (a repeated word of a single window sees its earlier update), each target row after the window.

struct AdagradShared {
  float* gT;      // targets x stride: the targets' summed gradients
  uint32_t* tgt;  // kMaxTargets + 1
  uint32_t* ids;  // max_entries: context words
  int* wi;        // max_entries: occurrences in the window of centre i (pair) or 1
  int* wj;        // max_entries: in the window of centre i + 1 (pair) or 0
};

// row += eta / sqrt(acc + epsilon) * g after acc += |g|^2 / dim (the row's first dim floats; the
// padding of g is zero).
template <int C>
__device__ inline void AdagradRowUpdate(float* row, float* acc, const Piece<C>& g, int lane,
                                        int stride4, int dim, float eta, float epsilon) {
  float ss = 0.f;
#pragma unroll
  for (int c = 0; c < C; ++c) ss = Dot4(g.v[c], g.v[c], ss);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(kFull, ss, off);
  float lr = 0.f;
  if (lane == 0) {
    const float add = ss / static_cast<float>(dim);
    lr = AdagradRate(atomicAdd(acc, add) + add, eta, epsilon);
  }
  lr = __shfl_sync(kFull, lr, 0);
  Piece<C> d;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    d.v[c] = make_float4(lr * g.v[c].x, lr * g.v[c].y, lr * g.v[c].z, lr * g.v[c].w);
  }
  AddPiece<C>(row, lane, stride4, d);
}

template <int C>
__device__ void AdagradWindow(const AdagradParams& p, const AdagradShared& sh, int lane, int nt,
                              int centres, int nc, double* loss, unsigned long long* pairs) {
  const int stride4 = p.stride / 4;
  Piece<C> zero;
#pragma unroll
  for (int c = 0; c < C; ++c) zero.v[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int t = 0; t < nt; ++t) StorePiece<C>(sh.gT + t * p.stride, lane, stride4, zero);
  __syncwarp();
  for (int q = 0; q < nc; ++q) {
    const uint32_t w_id = sh.ids[q];
    const int wi = sh.wi[q], wj = sh.wj[q];
    float* xrow = p.in + static_cast<size_t>(w_id) * p.stride;
    Piece<C> x, gx = zero;
    LoadPiece<C>(xrow, lane, stride4, &x);
    for (int t0 = 0; t0 < nt; t0 += kGroup) {
      float part[kGroup];
      GroupDots<C>(
          x, t0, nt, [&](int k) { return p.out + static_cast<size_t>(sh.tgt[k]) * p.stride; },
          lane, stride4, part);
#pragma unroll
      for (int u = 0; u < kGroup; ++u) {
        const int t = t0 + u;
        if (t >= nt) break;
        const int w = centres == 1 ? 1 : AdagradPairWeight(t, wi, wj);
        if (w == 0) continue;
        const bool positive = t < centres;
        const float g = static_cast<float>(w) *
                        ((positive ? 1.f : 0.f) - TableSigmoid(p.sigmoid, part[u]));
        if (loss != nullptr && lane == 0) {
          *loss += static_cast<double>(w) * AdagradPairLoss(part[u], positive);
        }
        Piece<C> y, gt;
        LoadPiece<C>(p.out + static_cast<size_t>(sh.tgt[t]) * p.stride, lane, stride4, &y);
        LoadPiece<C>(sh.gT + t * p.stride, lane, stride4, &gt);
#pragma unroll
        for (int c = 0; c < C; ++c) {
          gx.v[c] = Fma(g, y.v[c], gx.v[c]);
          gt.v[c] = Fma(g, x.v[c], gt.v[c]);
        }
        StorePiece<C>(sh.gT + t * p.stride, lane, stride4, gt);
      }
    }
    if (pairs != nullptr && lane == 0) *pairs += centres == 1 ? 1 : wi + wj;
    AdagradRowUpdate<C>(xrow, p.acc_in + w_id, gx, lane, stride4, p.dim, p.eta, p.epsilon);
  }
  for (int t = 0; t < nt; ++t) {
    Piece<C> gt;
    LoadPiece<C>(sh.gT + t * p.stride, lane, stride4, &gt);
    AdagradRowUpdate<C>(p.out + static_cast<size_t>(sh.tgt[t]) * p.stride, p.acc_out + sh.tgt[t],
                        gt, lane, stride4, p.dim, p.eta, p.epsilon);
  }
  __syncwarp();
}

template <int C>
__device__ void AdagradSentence(const AdagradParams& p, const AdagradShared& sh, int lane, int s) {
  const uint32_t* tok = p.tokens + (p.sent_off[s] - p.sent_off[0]);
  const uint8_t* win = p.windows + (p.sent_off[s] - p.sent_off[0]);
  const uint32_t* negs = p.negatives + (p.sent_off[s] - p.sent_off[0]) * p.negative;
  const int n = static_cast<int>(p.sent_len[s]);
  const int K = p.negative;
  double loss = 0.0;
  unsigned long long pairs = 0;
  double* loss_ptr = p.loss != nullptr ? &loss : nullptr;
  unsigned long long* pairs_ptr = p.loss != nullptr ? &pairs : nullptr;
  for (int i = 0; i < n; ++i) {
    const uint32_t* ni = negs + static_cast<size_t>(i) * K;
    // AdagradPairAt: positions 2m and 2m + 1 with one draw and K + 2 distinct targets.
    bool pair = false;
    if (p.share == 2 && i % 2 == 0 && i + 1 < n && tok[i] != tok[i + 1]) {
      const uint32_t c0 = tok[i], c1 = tok[i + 1];
      bool ok = true;
      for (int k = lane; k < K; k += 32) {
        ok = ok && ni[k] == ni[K + k] && ni[k] != c0 && ni[k] != c1;
        for (int q = 0; q < k; ++q) ok = ok && ni[q] != ni[k];
      }
      pair = __all_sync(kFull, ok);
    }
    int nt = 0, nc = 0;
    __syncwarp();
    if (lane == 0) {
      if (pair) {
        sh.tgt[nt++] = tok[i];
        sh.tgt[nt++] = tok[i + 1];
        for (int k = 0; k < K; ++k) sh.tgt[nt++] = ni[k];
        // AdagradPairContexts: the distinct words of both windows in order of first position.
        const int j = i + 1;
        const int lo_i = max(0, i - win[i]), hi_i = min(n - 1, i + win[i]);
        const int lo_j = max(0, j - win[j]), hi_j = min(n - 1, j + win[j]);
        for (int c = min(lo_i, lo_j); c <= max(hi_i, hi_j); ++c) {
          const bool in_i = c >= lo_i && c <= hi_i && c != i;
          const bool in_j = c >= lo_j && c <= hi_j && c != j;
          if (!in_i && !in_j) continue;
          const uint32_t w = tok[c];
          int q = 0;
          while (q < nc && sh.ids[q] != w) ++q;
          if (q == nc) {
            sh.ids[nc] = w;
            sh.wi[nc] = 0;
            sh.wj[nc] = 0;
            ++nc;
          }
          sh.wi[q] += in_i ? 1 : 0;
          sh.wj[q] += in_j ? 1 : 0;
        }
      } else {
        sh.tgt[nt++] = tok[i];
        for (int k = 0; k < K; ++k) {
          if (ni[k] != tok[i]) sh.tgt[nt++] = ni[k];
        }
        const int lo = max(0, i - win[i]), hi = min(n - 1, i + win[i]);
        for (int c = lo; c <= hi; ++c) {
          if (c == i) continue;
          sh.ids[nc] = tok[c];
          sh.wi[nc] = 1;
          sh.wj[nc] = 0;
          ++nc;
        }
      }
    }
    nt = __shfl_sync(kFull, nt, 0);
    nc = __shfl_sync(kFull, nc, 0);
    __syncwarp();
    if (pair || nc > 0) AdagradWindow<C>(p, sh, lane, nt, pair ? 2 : 1, nc, loss_ptr, pairs_ptr);
    if (pair) ++i;
  }
  if (p.loss != nullptr && lane == 0) {
    atomicAdd(p.loss, loss);
    atomicAdd(p.pairs, pairs);
  }
}

template <int C>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) AdagradKernel(AdagradParams p) {
  extern __shared__ float4 shared_raw[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* base = reinterpret_cast<float*>(shared_raw) + warp * p.warp_floats;
  AdagradShared sh;
  sh.gT = base;
  sh.tgt = reinterpret_cast<uint32_t*>(base + (p.negative + 2) * p.stride);
  sh.ids = sh.tgt + (kMaxTargets + 1);
  sh.wi = reinterpret_cast<int*>(sh.ids + p.max_entries);
  sh.wj = sh.wi + p.max_entries;
  if (p.serial) {
    if (blockIdx.x != 0 || warp != 0) return;
    for (int s = 0; s < p.num_sentences; ++s) AdagradSentence<C>(p, sh, lane, s);
    return;
  }
  for (;;) {
    int s = 0;
    if (lane == 0) s = atomicAdd(p.next_sentence, 1);
    s = __shfl_sync(kFull, s, 0);
    if (s >= p.num_sentences) break;
    AdagradSentence<C>(p, sh, lane, s);
  }
}

// Row i of `rows` (dim floats) into input row slots[i] (padding zero), output row slots[i] and
// both accumulators zero: a block per row.
__global__ void SetRowsKernel(float* in, float* out, float* acc_in, float* acc_out, int stride,
                              int dim, const uint32_t* slots, const float* rows, int n) {
  const int i = blockIdx.x;
  if (i >= n) return;
  const size_t base = static_cast<size_t>(slots[i]) * stride;
  for (int j = threadIdx.x; j < stride; j += blockDim.x) {
    in[base + j] = j < dim ? rows[static_cast<size_t>(i) * dim + j] : 0.f;
    out[base + j] = 0.f;
  }
  if (threadIdx.x == 0) {
    acc_in[slots[i]] = 0.f;
    acc_out[slots[i]] = 0.f;
  }
}

}  // namespace

int AdagradWarpFloats(int negative, int stride, int window) {
  const int f = (negative + 2) * stride + (kMaxTargets + 1) + 3 * (2 * window + 2);
  return (f + 3) / 4 * 4;
}

Status LaunchAdagrad(AdagradParams p, size_t max_shared, int multiprocessors, int max_warps,
                     cudaStream_t stream) {
  const bool serial = p.serial != 0;
  const size_t per_warp = sizeof(float) * static_cast<size_t>(p.warp_floats);
  if (per_warp > max_shared) {
    return Status::InvalidArgument("the Adagrad step's shared memory a warp (" +
                                   std::to_string(per_warp / 1024) + " KiB) exceeds the device's " +
                                   std::to_string(max_shared / 1024) + " KiB");
  }
  const int warps = serial ? 1
                          : std::max(1, max_warps > 0 ? std::min(max_warps, p.num_sentences)
                                                      : p.num_sentences);
  int wpb = kWarpsPerBlock;
  while (wpb > 1 && (per_warp * wpb > max_shared || wpb > warps)) wpb /= 2;
  const size_t shared = per_warp * wpb;
  auto launch = [&](auto kernel) {
    cudaError_t e = cudaSuccess;
    if (shared > 48 * 1024) {
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(shared));
    }
    int per_sm = 0;
    if (e == cudaSuccess) {
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * wpb, shared);
    }
    if (e != cudaSuccess) return e;
    const int blocks =
        serial ? 1 : std::max(1, std::min((warps + wpb - 1) / wpb, per_sm * multiprocessors));
    kernel<<<blocks, 32 * wpb, shared, stream>>>(p);
    return cudaGetLastError();
  };
  switch (PiecesPerLane(p.stride)) {
    case 1: SV_CUDA(launch(AdagradKernel<1>)); break;
    case 2: SV_CUDA(launch(AdagradKernel<2>)); break;
    case 4: SV_CUDA(launch(AdagradKernel<4>)); break;
    default: SV_CUDA(launch(AdagradKernel<8>)); break;
  }
  return Status::Ok();
}

cudaError_t LaunchSetRows(float* in, float* out, float* acc_in, float* acc_out, int stride,
                          int dim, const uint32_t* slots, const float* rows, int n,
                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SetRowsKernel<<<n, 128, 0, stream>>>(in, out, acc_in, acc_out, stride, dim, slots, rows, n);
  return cudaGetLastError();
}

}  // namespace streamvec::cuda_detail

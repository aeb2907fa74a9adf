// The CUDA twin of the SGNS / CBOW kernels (cuda_sgns.h). Compiled only in a CUDA build.
//
// Layout: a warp owns a sentence and walks its kept positions in order. A row of the tables is
// split over the warp's lanes in float4 pieces (lane l holds floats 4 (l + 32 c) .. + 4 for
// c < C, C = ceil(stride / 128)), so a dot product is 32 partial sums and a butterfly of
// shuffles. Skip-gram keeps the block's target rows and their summed updates in shared memory
// (the targets do not move within a block: SgnsKernel::SkipGram), the context row of the word
// being trained in registers; the entries of a window (distinct words and their counts,
// ReferenceKernel's AddWord) are built by lane 0 in shared memory.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "../loss.h"
#include "adagrad_step.cuh"
#include "streamvec/kernels/cuda_sgns.h"
#include "streamvec/kernels/sgns_math.h"
#include "warp_rows.cuh"

namespace streamvec {
namespace {

using namespace cuda_detail;  // NOLINT: the kernels' shared pieces (warp_rows.cuh)

// TrainCorpus's default bound on warps in flight: one per this many rows of the tables (see
// CudaTrainOptions::max_warps).
constexpr size_t kRowsPerWarp = 16;

// What a training launch reads. Indices into tokens / windows / negatives are relative to the
// launch's first token (token_base in corpus numbering).
struct TrainParams {
  float* in;
  float* out;
  int stride;  // floats per row, a multiple of 16
  const uint32_t* tokens;
  const uint64_t* sent_off;  // sentence s starts at sent_off[s] - token_base
  uint64_t token_base;
  const uint32_t* sent_len;  // kept tokens of sentence s
  int num_sentences;
  const uint8_t* windows;
  const uint32_t* negatives;
  int negative;
  // Learning rate: lr when total_words == 0, else alpha decayed linearly to min_alpha with
  // words_before + sent_off[s] corpus words done of total_words.
  float lr, alpha, min_alpha;
  uint64_t words_before, total_words;
  const float* sigmoid;
  // Loss and pairs (when loss != nullptr) of the sentences s with (sentence_base + s) %
  // loss_every == 0.
  double* loss;
  unsigned long long* pairs;
  uint64_t sentence_base;
  int loss_every;
  int serial;       // one warp trains every sentence in order
  int max_entries;  // entries of a window (2 window + 2)
  int warp_floats;  // shared floats per warp
  int* next_sentence;  // the next sentence a warp takes (zero at the launch)
  int t_shared;     // skip-gram: a copy of the block's target rows in shared memory (else read
                    // from the table, which the block does not change until its end)
};

// The loss term, out of line: its double-precision log1p and exp are needed on sampled sentences
// only, and inlined they doubled the training loop's code (instruction-fetch stalls).
__device__ __noinline__ double LossTerm(float logit, bool positive) {
  return internal::PairLoss(logit, positive);
}

__device__ inline float LearningRate(const TrainParams& p, int s) {
  if (p.total_words == 0) return p.lr;
  const double done = static_cast<double>(p.words_before + p.sent_off[s]);
  const double f = fmin(1.0, done / static_cast<double>(p.total_words));
  return static_cast<float>(p.alpha - (p.alpha - p.min_alpha) * f);
}

// The warp's shared memory: target rows and their updates (skip-gram), target ids, gradients
// and the window's entries.
struct WarpShared {
  const float* T;  // targets x stride (skip-gram; with t_shared, else nullptr)
  float* dT;       // targets x stride (skip-gram)
  uint32_t* tgt;   // kMaxTargets + 1
  float* g;        // kMaxTargets + 1
  uint32_t* ew;    // max_entries
  float* ea;       // max_entries
  float* eb;       // max_entries
};

__device__ inline WarpShared CarveShared(float* base, const TrainParams& p, bool skip_gram) {
  WarpShared w;
  const int nt = p.negative + 2;
  float* f = base;
  const bool t_shared = skip_gram && p.t_shared;
  w.T = t_shared ? f : nullptr;
  w.dT = f + (t_shared ? nt * p.stride : 0);
  f = w.dT + (skip_gram ? nt * p.stride : 0);
  w.tgt = reinterpret_cast<uint32_t*>(f);
  w.g = f + (kMaxTargets + 1);
  w.ew = reinterpret_cast<uint32_t*>(w.g + (kMaxTargets + 1));
  w.ea = w.g + (kMaxTargets + 1) + p.max_entries;
  w.eb = w.ea + p.max_entries;
  return w;
}

// Shared floats a warp needs (a multiple of 4, so that every warp's base is 16-byte aligned).
int WarpFloats(int negative, int stride, int window, bool skip_gram, bool t_shared) {
  const int nt = negative + 2;
  const int entries = 2 * window + 2;
  const int rows = skip_gram ? (t_shared ? 2 : 1) * nt : 0;
  const int f = rows * stride + 2 * (kMaxTargets + 1) + 3 * entries;
  return (f + 3) / 4 * 4;
}

// ReferenceKernel::AddWord: an occurrence of w (a in the first window, b in the second) joins the
// word's last entry unless it is full, else opens one. Lane 0 only.
__device__ inline void AddEntry(const WarpShared& sh, int* n, uint32_t w, float a, float b) {
  int q = *n - 1;
  while (q >= 0 && sh.ew[q] != w) --q;
  if (q >= 0 && sh.ea[q] < kMaxOccurrences && sh.eb[q] < kMaxOccurrences) {
    sh.ea[q] += a;
    sh.eb[q] += b;
  } else {
    sh.ew[*n] = w;
    sh.ea[*n] = a;
    sh.eb[*n] = b;
    ++*n;
  }
}

// One block of entries [q0, q1) against the nt targets in sh.tgt (SgnsKernel::SkipGram).
template <int C>
__device__ void SkipGramBlock(const TrainParams& p, const WarpShared& sh, int lane, int nt,
                              int q0, int q1, bool pair, float lr, bool with_loss, double* loss,
                              double* pairs) {
  const int stride4 = p.stride / 4;
  // The targets' rows as the block finds them (a shared copy, or the table itself), and their
  // zeroed updates.
  for (int k = 0; k < nt; ++k) {
    Piece<C> t;
    if (sh.T != nullptr) {
      LoadPiece<C>(p.out + static_cast<size_t>(sh.tgt[k]) * p.stride, lane, stride4, &t);
      StorePiece<C>(const_cast<float*>(sh.T) + k * p.stride, lane, stride4, t);
    }
#pragma unroll
    for (int c = 0; c < C; ++c) t.v[c] = make_float4(0.f, 0.f, 0.f, 0.f);
    StorePiece<C>(sh.dT + k * p.stride, lane, stride4, t);
  }
  __syncwarp();
  auto target = [&](int k) {
    return sh.T != nullptr ? sh.T + k * p.stride
                           : p.out + static_cast<size_t>(sh.tgt[k]) * p.stride;
  };
  for (int q = q0; q < q1; ++q) {
    const uint32_t w = sh.ew[q];
    const float ca = sh.ea[q], cb = sh.eb[q];
    float* xrow = p.in + static_cast<size_t>(w) * p.stride;
    Piece<C> x, d;
    LoadPiece<C>(xrow, lane, stride4, &x);
#pragma unroll
    for (int c = 0; c < C; ++c) d.v[c] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k0 = 0; k0 < nt; k0 += kGroup) {
      float part[kGroup];
      GroupDots<C>(x, k0, nt, target, lane, stride4, part);
#pragma unroll
      for (int u = 0; u < kGroup; ++u) {
        const int k = k0 + u;
        if (k >= nt) break;
        float g;
        if (!pair) {
          if (k > 0 && sh.tgt[k] == sh.tgt[0]) {
            g = 0.f;  // a negative equal to the centre is skipped
          } else {
            if (with_loss && lane == 0) *loss += ca * LossTerm(part[u], k == 0);
            g = ca * SgnsLogitGradient(p.sigmoid, part[u], k == 0 ? 1.f : 0.f, lr);
          }
        } else {
          const float count = k == 0 ? ca : k == 1 ? cb : ca + cb;
          if (with_loss && lane == 0) *loss += count * LossTerm(part[u], k < 2);
          g = count * SgnsLogitGradient(p.sigmoid, part[u], k < 2 ? 1.f : 0.f, lr);
        }
        Piece<C> t, dt;
        LoadPiece<C>(target(k), lane, stride4, &t);
        LoadPiece<C>(sh.dT + k * p.stride, lane, stride4, &dt);
#pragma unroll
        for (int c = 0; c < C; ++c) {
          d.v[c] = Fma(g, t.v[c], d.v[c]);
          dt.v[c] = Fma(g, x.v[c], dt.v[c]);
        }
        StorePiece<C>(sh.dT + k * p.stride, lane, stride4, dt);
      }
    }
    AddPiece<C>(xrow, lane, stride4, d);
    if (with_loss && lane == 0) *pairs += ca + (pair ? cb : 0.f);
  }
  // The targets take their summed updates, in order (a repeated negative takes each of its).
  for (int k = 0; k < nt; ++k) {
    Piece<C> dt;
    LoadPiece<C>(sh.dT + k * p.stride, lane, stride4, &dt);
    AddPiece<C>(p.out + static_cast<size_t>(sh.tgt[k]) * p.stride, lane, stride4, dt);
  }
  __syncwarp();
}

template <int C>
__device__ void SkipGramSentence(const TrainParams& p, const WarpShared& sh, int lane, int s) {
  const int begin = static_cast<int>(p.sent_off[s] - p.token_base);
  const int end = begin + static_cast<int>(p.sent_len[s]);
  const int K = p.negative;
  const float lr = LearningRate(p, s);
  const bool with_loss = p.loss != nullptr && (p.sentence_base + s) % p.loss_every == 0;
  double loss = 0.0, pairs = 0.0;
  for (int i = begin; i < end; ++i) {
    const uint32_t* neg = p.negatives + static_cast<size_t>(i) * K;
    bool pair = false;
    if (i + 1 < end && K > 0) {
      bool eq = true;
      for (int k = lane; k < K; k += 32) eq = eq && neg[k] == neg[K + k];
      if (__all_sync(kFull, eq)) {
        for (int k = lane; k < K + 2; k += 32) {
          sh.tgt[k] = k < 2 ? p.tokens[i + k] : neg[k - 2];
        }
        __syncwarp();
        bool dup = false;
        for (int k = lane; k < K + 2; k += 32) {
          for (int q = 0; q < k; ++q) dup = dup || sh.tgt[q] == sh.tgt[k];
        }
        pair = !__any_sync(kFull, dup);
      }
    }
    if (!pair) {
      __syncwarp();
      for (int k = lane; k < K + 1; k += 32) sh.tgt[k] = k == 0 ? p.tokens[i] : neg[k - 1];
    }
    int n = 0;
    if (lane == 0) {
      if (pair) {
        const int ra = p.windows[i], rb = p.windows[i + 1];
        const int lo = max(begin, min(i - ra, i + 1 - rb));
        const int hi = min(end - 1, max(i + ra, i + 1 + rb));
        for (int c = lo; c <= hi; ++c) {
          const bool in_a = c != i && c >= i - ra && c <= i + ra;
          const bool in_b = c != i + 1 && c >= i + 1 - rb && c <= i + 1 + rb;
          AddEntry(sh, &n, p.tokens[c], in_a ? 1.f : 0.f, in_b ? 1.f : 0.f);
        }
      } else {
        const int r = p.windows[i];
        const int lo = max(begin, i - r), hi = min(end - 1, i + r);
        for (int c = lo; c <= hi; ++c) {
          if (c != i) AddEntry(sh, &n, p.tokens[c], 1.f, 0.f);
        }
      }
    }
    n = __shfl_sync(kFull, n, 0);
    __syncwarp();
    const int nt = pair ? K + 2 : K + 1;
    for (int q0 = 0; q0 < n; q0 += kMaxContextBlock) {
      SkipGramBlock<C>(p, sh, lane, nt, q0, min(n, q0 + kMaxContextBlock), pair, lr, with_loss,
                       &loss, &pairs);
    }
    if (pair) ++i;
  }
  if (with_loss && lane == 0) {
    atomicAdd(p.loss, loss);
    atomicAdd(p.pairs, static_cast<unsigned long long>(pairs));
  }
}

template <int C>
__device__ void CbowSentence(const TrainParams& p, const WarpShared& sh, int lane, int s) {
  const int begin = static_cast<int>(p.sent_off[s] - p.token_base);
  const int end = begin + static_cast<int>(p.sent_len[s]);
  const int K = p.negative, nt = K + 1;
  const int stride4 = p.stride / 4;
  const float lr = LearningRate(p, s);
  const bool with_loss = p.loss != nullptr && (p.sentence_base + s) % p.loss_every == 0;
  double loss = 0.0;
  unsigned long long pairs = 0;
  for (int i = begin; i < end; ++i) {
    const int r = p.windows[i];
    const int lo = max(begin, i - r), hi = min(end - 1, i + r);
    const int count = hi - lo;
    if (count <= 0) continue;
    const uint32_t* neg = p.negatives + static_cast<size_t>(i) * K;
    __syncwarp();
    for (int k = lane; k < nt; k += 32) sh.tgt[k] = k == 0 ? p.tokens[i] : neg[k - 1];
    __syncwarp();
    Piece<C> h;
#pragma unroll
    for (int c = 0; c < C; ++c) h.v[c] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int c = lo; c <= hi; ++c) {
      if (c == i) continue;
      Piece<C> x;
      LoadPiece<C>(p.in + static_cast<size_t>(p.tokens[c]) * p.stride, lane, stride4, &x);
#pragma unroll
      for (int q = 0; q < C; ++q) h.v[q] = Add(h.v[q], x.v[q]);
    }
    const float inv = 1.0f / static_cast<float>(count);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      h.v[c] = make_float4(h.v[c].x * inv, h.v[c].y * inv, h.v[c].z * inv, h.v[c].w * inv);
    }
    // Every target's gradient from the rows before any update (ReferenceKernel::Cbow).
    for (int k0 = 0; k0 < nt; k0 += kGroup) {
      float part[kGroup];
      GroupDots<C>(
          h, k0, nt, [&](int k) { return p.out + static_cast<size_t>(sh.tgt[k]) * p.stride; },
          lane, stride4, part);
      if (lane == 0) {
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          const int k = k0 + u;
          if (k >= nt) break;
          float g = 0.f;
          if (k == 0 || sh.tgt[k] != sh.tgt[0]) {
            if (with_loss) loss += LossTerm(part[u], k == 0);
            g = SgnsLogitGradient(p.sigmoid, part[u], k == 0 ? 1.f : 0.f, lr);
          }
          sh.g[k] = g;
        }
      }
    }
    __syncwarp();
    Piece<C> e;
#pragma unroll
    for (int c = 0; c < C; ++c) e.v[c] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k = 0; k < nt; ++k) {
      const float g = sh.g[k];
      float* trow = p.out + static_cast<size_t>(sh.tgt[k]) * p.stride;
      Piece<C> t, dt;
      LoadPiece<C>(trow, lane, stride4, &t);
#pragma unroll
      for (int c = 0; c < C; ++c) {
        e.v[c] = Fma(g, t.v[c], e.v[c]);
        dt.v[c] = make_float4(g * h.v[c].x, g * h.v[c].y, g * h.v[c].z, g * h.v[c].w);
      }
      AddPiece<C>(trow, lane, stride4, dt);
    }
    for (int c = lo; c <= hi; ++c) {
      if (c == i) continue;
      AddPiece<C>(p.in + static_cast<size_t>(p.tokens[c]) * p.stride, lane, stride4, e);
    }
    ++pairs;
  }
  if (with_loss && lane == 0) {
    atomicAdd(p.loss, loss);
    atomicAdd(p.pairs, pairs);
  }
}

// Blocks of 4 warps an SM should hold, for rows of up to 256 floats (wider rows need their
// registers: at 8 float4 pieces a lane the cap spilled 3.6 KB a thread): 6 caps the skip-gram
// kernel at 80 registers (110 free; a few bytes spilled) and raised its training phase on an
// H100 from 193M to 236M words/s (100M corpus, dim 100, 5 epochs, two runs each); 8 (64
// registers) was no faster. CBOW is unchanged.
#ifndef SV_CUDA_MIN_BLOCKS
#define SV_CUDA_MIN_BLOCKS 6
#endif
template <int C, bool kSkipGram>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, C <= 2 ? SV_CUDA_MIN_BLOCKS : 1)
    TrainKernel(TrainParams p) {
  extern __shared__ float4 shared_raw[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  float* base = reinterpret_cast<float*>(shared_raw) + warp * p.warp_floats;
  const WarpShared sh = CarveShared(base, p, kSkipGram);
  if (p.serial) {
    if (blockIdx.x != 0 || warp != 0) return;
    for (int s = 0; s < p.num_sentences; ++s) {
      if (kSkipGram) {
        SkipGramSentence<C>(p, sh, lane, s);
      } else {
        CbowSentence<C>(p, sh, lane, s);
      }
    }
    return;
  }
  // A persistent grid: each warp takes the next untrained sentence until none is left, so the
  // warps finish together whatever the sentences' lengths.
  (void)warps;
  for (;;) {
    int s = 0;
    if (lane == 0) s = atomicAdd(p.next_sentence, 1);
    s = __shfl_sync(kFull, s, 0);
    if (s >= p.num_sentences) break;
    if (kSkipGram) {
      SkipGramSentence<C>(p, sh, lane, s);
    } else {
      CbowSentence<C>(p, sh, lane, s);
    }
  }
}

// splitmix64's finaliser (Steele et al. 2014): a counter-based stream of uniform 64-bit numbers.
__device__ inline uint64_t Mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ inline uint64_t Draw(uint64_t seed, uint64_t epoch, uint64_t position, uint64_t what) {
  return Mix(Mix(seed ^ (epoch << 56) ^ (what << 48)) ^ position);
}

struct PrepParams {
  const uint32_t* corpus;     // all tokens (corpus numbering)
  const uint64_t* sent_off;   // sentence s of this chunk (chunk numbering)
  int num_sentences;
  uint64_t token_base;        // corpus index of the chunk's first token
  const uint64_t* keep;       // per word
  const uint32_t* noise;      // alias table
  uint32_t noise_size;
  uint32_t* kept;             // chunk numbering
  uint32_t* sent_len;
  uint8_t* windows;
  uint32_t* negatives;
  int window, negative, share;
  uint64_t seed, epoch;
};

// Subsampling, window radii and negatives of one sentence per warp (BatchTrainer's draws, made
// on the device): kept words are compacted at the sentence's start; a sentence of fewer than two
// kept words trains nothing; `share` consecutive kept positions take one draw of negatives.
__global__ void PrepareKernel(PrepParams p) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= p.num_sentences) return;
  const uint64_t ob = p.sent_off[warp], oe = p.sent_off[warp + 1];
  const uint64_t base = ob - p.token_base;
  uint32_t kept = 0;
  for (uint64_t b = ob; b < oe; b += 32) {
    const uint64_t pos = b + lane;
    bool keep = false;
    uint32_t w = 0;
    if (pos < oe) {
      w = p.corpus[pos];
      keep = (Draw(p.seed, p.epoch, pos, 0) >> 32) < p.keep[w];
    }
    const unsigned mask = __ballot_sync(kFull, keep);
    if (keep) p.kept[base + kept + __popc(mask & ((1u << lane) - 1))] = w;
    kept += __popc(mask);
  }
  if (lane == 0) p.sent_len[warp] = kept >= 2 ? kept : 0;
  if (kept < 2) return;
  for (uint32_t j = lane; j < kept; j += 32) {
    const uint64_t pos = ob + j;
    p.windows[base + j] =
        static_cast<uint8_t>(p.window - static_cast<int>(Draw(p.seed, p.epoch, pos, 1) % p.window));
    const uint64_t first = ob + j / p.share * p.share;  // the draw's first position
    uint32_t* out = p.negatives + (base + j) * p.negative;
    for (int k = 0; k < p.negative; ++k) {
      out[k] = AliasDraw(p.noise, p.noise_size, Draw(p.seed, p.epoch, first, 2 + k));
    }
  }
}

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t size = 0;
  ~DeviceArray() { cudaFree(ptr); }
  cudaError_t Reserve(size_t n) {
    if (n <= size) return cudaSuccess;
    cudaFree(ptr);
    ptr = nullptr;
    size = 0;
    const cudaError_t e = cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T));
    if (e == cudaSuccess) size = n;
    return e;
  }
  cudaError_t Upload(const T* host, size_t n, cudaStream_t stream = 0) {
    cudaError_t e = Reserve(n);
    if (e == cudaSuccess && n > 0) {
      e = cudaMemcpyAsync(ptr, host, n * sizeof(T), cudaMemcpyHostToDevice, stream);
    }
    return e;
  }
};

// Page-locked host memory (cudaMallocHost), so that copies to the device run asynchronously.
template <typename T>
struct PinnedArray {
  T* ptr = nullptr;
  size_t size = 0;
  ~PinnedArray() { cudaFreeHost(ptr); }
  cudaError_t Reserve(size_t n) {
    if (n <= size) return cudaSuccess;
    cudaFreeHost(ptr);
    ptr = nullptr;
    size = 0;
    const size_t want = std::max<size_t>(n + n / 2, 1024);
    const cudaError_t e = cudaMallocHost(&ptr, want * sizeof(T));
    if (e == cudaSuccess) size = want;
    return e;
  }
  cudaError_t Fill(const T* src, size_t n) {
    const cudaError_t e = Reserve(n);
    if (e == cudaSuccess && n > 0) std::memcpy(ptr, src, n * sizeof(T));
    return e;
  }
};

// One enqueued Adagrad step's buffers (EnqueueAdagradStep): pinned host copies of the job, their
// device copies, its stream and the event that marks it done. Two alternate, so one job's
// copies go up while the other's kernel runs.
struct StepSet {
  PinnedArray<uint32_t> h_tokens, h_len, h_negatives, h_slots;
  PinnedArray<uint64_t> h_off;
  PinnedArray<uint8_t> h_windows;
  PinnedArray<float> h_rows;
  DeviceArray<uint32_t> tokens, len, negatives, slots;
  DeviceArray<uint64_t> off;
  DeviceArray<uint8_t> windows;
  DeviceArray<float> rows;
  DeviceArray<double> loss;
  DeviceArray<unsigned long long> pairs;
  DeviceArray<int> counter;
  double* h_loss = nullptr;  // pinned
  unsigned long long* h_pairs = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  bool pending = false;
  bool want_stats = false;
};

// One chunk's device draws, two of them in flight.
struct ChunkBuffers {
  DeviceArray<uint32_t> kept, sent_len, negatives;
  DeviceArray<uint8_t> windows;
  DeviceArray<double> loss;
  DeviceArray<unsigned long long> pairs;
  DeviceArray<int> counter;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
};

// How a launch is laid out: warps per block, their shared memory, and the most warps in flight.
struct Layout {
  int warps_per_block = kWarpsPerBlock;
  int blocks = 0;
  int multiprocessors = 1;
};

// Fits the warps' shared memory into the device's per-block limit: a copy of the skip-gram
// block's target rows when it fits, else only their updates (the rows read from the table);
// fewer warps per block before either. Errors name the flags that make a warp's need too large.
Status PlanLayout(TrainParams* p, bool skip_gram, int window, size_t max_shared, int max_warps,
                  Layout* layout) {
  for (int t_shared = skip_gram ? 1 : 0; t_shared >= 0; --t_shared) {
    p->t_shared = t_shared;
    p->warp_floats = WarpFloats(p->negative, p->stride, window, skip_gram, t_shared != 0);
    const size_t per_warp = sizeof(float) * static_cast<size_t>(p->warp_floats);
    const int warps = p->serial ? 1 : std::max(1, std::min(p->num_sentences, max_warps));
    for (int w = kWarpsPerBlock; w >= 1; w /= 2) {
      if (w <= warps && per_warp * w <= max_shared) {
        layout->warps_per_block = w;
        layout->blocks = (warps + w - 1) / w;
        return Status::Ok();
      }
    }
  }
  return Status::InvalidArgument(
      "--negative " + std::to_string(p->negative) + " with --dim at " + std::to_string(p->stride) +
      " floats a row and --window " + std::to_string(window) + " needs " +
      std::to_string(sizeof(float) * p->warp_floats / 1024) + " KiB of shared memory a warp; "
      "the CUDA device allows " + std::to_string(max_shared / 1024) +
      " KiB (lower --negative or --dim)");
}

template <bool kSkipGram>
cudaError_t LaunchTrain(const TrainParams& p, const Layout& layout, int chunks,
                        cudaStream_t stream) {
  const int blocks = layout.blocks;
  const size_t shared =
      sizeof(float) * static_cast<size_t>(p.warp_floats) * layout.warps_per_block;
  const int threads = 32 * layout.warps_per_block;
  if (blocks == 0 || p.num_sentences == 0) return cudaSuccess;
  auto launch = [&](auto kernel) {
    cudaError_t e = cudaSuccess;
    if (shared > 48 * 1024) {
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(shared));
    }
    // No more blocks than the device holds at once (the grid is persistent).
    int per_sm = 0;
    if (e == cudaSuccess) {
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared);
    }
    if (e != cudaSuccess) return e;
    const int grid = std::max(1, std::min(blocks, per_sm * layout.multiprocessors));
    kernel<<<grid, threads, shared, stream>>>(p);
    return cudaGetLastError();
  };
  switch (chunks) {
    case 1: return launch(TrainKernel<1, kSkipGram>);
    case 2: return launch(TrainKernel<2, kSkipGram>);
    case 4: return launch(TrainKernel<4, kSkipGram>);
    default: return launch(TrainKernel<8, kSkipGram>);
  }
}

std::string Mib(size_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace

struct CudaSgnsModel::Impl {
  CudaDeviceInfo info;
  size_t max_shared = 48 * 1024;  // dynamic shared memory a block may opt in to
  size_t rows = 0;
  int dim = 0;
  int stride = 0;
  float* input = nullptr;
  float* output = nullptr;
  DeviceArray<float> acc_in, acc_out;  // Adagrad accumulators, one a row
  DeviceArray<float> sigmoid;
  // The corpus of SetCorpus.
  DeviceArray<uint32_t> corpus, noise;
  DeviceArray<uint64_t> offsets, keep;
  std::vector<uint64_t> host_offsets;
  uint32_t noise_size = 0;
  ChunkBuffers chunk[2];
  double* host_loss = nullptr;  // pinned, one per chunk buffer
  unsigned long long* host_pairs = nullptr;
  StepSet steps[2];               // Step, AdagradStep and EnqueueAdagradStep
  uint64_t step_seq = 0;
  cudaEvent_t last_kernel = nullptr;  // the newest enqueued step's kernels
  bool any_kernel = false;

  // Waits for set `k` if it holds a step, adding its statistics to *stats.
  Status Collect(StepSet& k, StepStats* stats) {
    if (!k.pending) return Status::Ok();
    SV_CUDA(cudaEventSynchronize(k.done));
    k.pending = false;
    if (k.want_stats && stats != nullptr) {
      stats->loss += *k.h_loss;
      stats->pairs += *k.h_pairs;
    }
    return Status::Ok();
  }

  ~Impl() {
    cudaFree(input);
    cudaFree(output);
    for (ChunkBuffers& c : chunk) {
      if (c.stream) cudaStreamDestroy(c.stream);
      if (c.done) cudaEventDestroy(c.done);
    }
    cudaFreeHost(host_loss);
    cudaFreeHost(host_pairs);
    for (StepSet& k : steps) {
      if (k.stream) cudaStreamDestroy(k.stream);
      if (k.done) cudaEventDestroy(k.done);
      cudaFreeHost(k.h_loss);
      cudaFreeHost(k.h_pairs);
    }
    if (last_kernel) cudaEventDestroy(last_kernel);
  }

  // Enqueues a step on the next of the two StepSets: the job (num_init fresh rows, init_rows
  // num_init x dim, then the batch's sentences) is copied into pinned memory and sent on the
  // set's stream; the rows are set afresh and `launch(set, sentences, widest window)` starts the
  // training kernel after the previous step's kernels. Waits only for the set's previous step,
  // whose statistics go to *finished.
  template <typename Launch>
  Status Enqueue(const MicroBatch& b, const uint32_t* init_slots, size_t num_init,
                 const float* init_rows, bool want_stats, StepStats* finished, Launch&& launch) {
    SV_CUDA(cudaSetDevice(info.ordinal));
    for (size_t i = 0; i < num_init; ++i) {
      if (init_slots[i] >= rows) return Status::InvalidArgument("a slot beyond the tables");
    }
    StepSet& k = steps[step_seq++ % 2];
    SV_RETURN_IF_ERROR(Collect(k, finished));  // its previous step is done: buffers free
    const int ns = std::max(0, b.num_sentences);
    const size_t n = ns > 0 ? b.sentence_offsets[ns] : 0;
    int window = 1;
    for (size_t i = 0; i < n; ++i) window = std::max<int>(window, b.windows[i]);
    // The job into pinned memory (the caller's arrays are free once this returns), then up.
    SV_CUDA(k.h_off.Reserve(ns));
    SV_CUDA(k.h_len.Reserve(ns));
    for (int s = 0; s < ns; ++s) {
      k.h_off.ptr[s] = b.sentence_offsets[s];
      k.h_len.ptr[s] = b.sentence_offsets[s + 1] - b.sentence_offsets[s];
    }
    SV_CUDA(k.h_tokens.Fill(b.tokens, n));
    SV_CUDA(k.h_windows.Fill(b.windows, n));
    SV_CUDA(k.h_negatives.Fill(b.negatives, n * b.negative));
    SV_CUDA(k.h_slots.Fill(init_slots, num_init));
    SV_CUDA(k.h_rows.Fill(init_rows, num_init * static_cast<size_t>(dim)));
    auto up = [&](auto& dev, auto& host, size_t count) -> cudaError_t {
      cudaError_t e = dev.Reserve(std::max<size_t>(count, 1));
      if (e == cudaSuccess && count > 0) {
        e = cudaMemcpyAsync(dev.ptr, host.ptr, count * sizeof(*host.ptr), cudaMemcpyHostToDevice,
                            k.stream);
      }
      return e;
    };
    SV_CUDA(up(k.off, k.h_off, ns));
    SV_CUDA(up(k.len, k.h_len, ns));
    SV_CUDA(up(k.tokens, k.h_tokens, n));
    SV_CUDA(up(k.windows, k.h_windows, n));
    SV_CUDA(up(k.negatives, k.h_negatives, n * b.negative));
    SV_CUDA(up(k.slots, k.h_slots, num_init));
    SV_CUDA(up(k.rows, k.h_rows, num_init * static_cast<size_t>(dim)));
    SV_CUDA(k.loss.Reserve(1));
    SV_CUDA(k.pairs.Reserve(1));
    SV_CUDA(k.counter.Reserve(1));
    // The kernels wait for the previous step's: the steps train in order (a slot set afresh by
    // this job was trained as another word by the previous one).
    if (any_kernel) SV_CUDA(cudaStreamWaitEvent(k.stream, last_kernel, 0));
    SV_CUDA(LaunchSetRows(input, output, acc_in.ptr, acc_out.ptr, stride, dim, k.slots.ptr,
                          k.rows.ptr, static_cast<int>(num_init), k.stream));
    SV_CUDA(cudaMemsetAsync(k.loss.ptr, 0, sizeof(double), k.stream));
    SV_CUDA(cudaMemsetAsync(k.pairs.ptr, 0, sizeof(unsigned long long), k.stream));
    SV_CUDA(cudaMemsetAsync(k.counter.ptr, 0, sizeof(int), k.stream));
    if (ns > 0) SV_RETURN_IF_ERROR(launch(k, ns, window));
    SV_CUDA(cudaEventRecord(last_kernel, k.stream));
    any_kernel = true;
    SV_CUDA(cudaMemcpyAsync(k.h_loss, k.loss.ptr, sizeof(double), cudaMemcpyDeviceToHost,
                            k.stream));
    SV_CUDA(cudaMemcpyAsync(k.h_pairs, k.pairs.ptr, sizeof(unsigned long long),
                            cudaMemcpyDeviceToHost, k.stream));
    SV_CUDA(cudaEventRecord(k.done, k.stream));
    k.pending = true;
    k.want_stats = want_stats;
    return Status::Ok();
  }

  Status FinishAll(StepStats* finished) {
    SV_CUDA(cudaSetDevice(info.ordinal));
    for (StepSet& k : steps) SV_RETURN_IF_ERROR(Collect(k, finished));
    return Status::Ok();
  }

  // The Adagrad step on the next StepSet (Enqueue); serial: one warp in order.
  Status EnqueueAdagrad(const MicroBatch& b, const uint32_t* init_slots, size_t num_init,
                        const float* init_rows, int negative_share, float eta, float epsilon,
                        bool serial, bool want_stats, int max_warps, StepStats* finished) {
    if (b.negative < 0 || b.negative >= kMaxTargets || negative_share < 1 || negative_share > 2) {
      return Status::InvalidArgument("negative must be in [0, kMaxTargets), negative_share 1 or 2");
    }
    return Enqueue(b, init_slots, num_init, init_rows, want_stats, finished,
                   [&](StepSet& k, int ns, int window) {
                     AdagradParams p{};
                     p.in = input;
                     p.out = output;
                     p.acc_in = acc_in.ptr;
                     p.acc_out = acc_out.ptr;
                     p.stride = stride;
                     p.dim = dim;
                     p.tokens = k.tokens.ptr;
                     p.sent_off = k.off.ptr;
                     p.sent_len = k.len.ptr;
                     p.num_sentences = ns;
                     p.windows = k.windows.ptr;
                     p.negatives = k.negatives.ptr;
                     p.negative = b.negative;
                     p.share = negative_share;
                     p.eta = eta;
                     p.epsilon = epsilon;
                     p.sigmoid = sigmoid.ptr;
                     p.loss = want_stats ? k.loss.ptr : nullptr;
                     p.pairs = k.pairs.ptr;
                     p.serial = serial ? 1 : 0;
                     p.next_sentence = k.counter.ptr;
                     p.max_entries = 2 * window + 2;
                     p.warp_floats = AdagradWarpFloats(b.negative, stride, window);
                     return LaunchAdagrad(p, max_shared, info.multiprocessors,
                                          serial ? 0 : max_warps, k.stream);
                   });
  }

  TrainParams BaseParams(int negative, int window) const {
    TrainParams p{};
    p.in = input;
    p.out = output;
    p.stride = stride;
    p.negative = negative;
    p.sigmoid = sigmoid.ptr;
    p.max_entries = 2 * window + 2;
    p.loss_every = 1;
    return p;
  }
};

CudaSgnsModel::CudaSgnsModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaSgnsModel::~CudaSgnsModel() = default;

size_t CudaSgnsModel::TableBytes(size_t rows, int dim) {
  return 2 * rows * PaddedStride(dim) * sizeof(float);
}

const CudaDeviceInfo& CudaSgnsModel::device() const { return impl_->info; }

StatusOr<std::unique_ptr<CudaSgnsModel>> CudaSgnsModel::Create(int ordinal, size_t rows, int dim) {
  auto impl = std::make_unique<Impl>();
  if (Status s = CudaCheckDevice(ordinal, &impl->info); !s.ok()) return s;
  if (dim <= 0 || dim > kCudaMaxDim) {
    return Status::FailedPrecondition("--dim " + std::to_string(dim) + ": the CUDA kernels train " +
                                      "vectors of at most " + std::to_string(kCudaMaxDim) +
                                      " floats");
  }
  impl->rows = rows;
  impl->dim = dim;
  impl->stride = static_cast<int>(PaddedStride(dim));
  const size_t need = TableBytes(rows, dim);
  // Keep room for the corpus chunks and the runtime's own (a quarter of what is free, at most
  // 4 GiB) when saying how many rows fit.
  const size_t free_bytes = impl->info.free_bytes;
  const size_t spare = std::min<size_t>(free_bytes / 4, size_t{4} << 30);
  const size_t row_bytes = 2 * PaddedStride(dim) * sizeof(float);
  auto too_large = [&] {
    const size_t fit = free_bytes > spare ? (free_bytes - spare) / row_bytes : 0;
    return Status::FailedPrecondition(
        "out of device memory: the tables of " + std::to_string(rows) + " words at --dim " +
        std::to_string(dim) + " need " + Mib(need) + ", CUDA device " + std::to_string(ordinal) +
        " (" + impl->info.name + ") has " + Mib(free_bytes) + " free; at most " +
        std::to_string(fit) + " words fit at this --dim");
  };
  if (need + spare > free_bytes) return too_large();
  const size_t bytes = need / 2;
  if (cudaMalloc(&impl->input, std::max<size_t>(bytes, 16)) != cudaSuccess ||
      cudaMalloc(&impl->output, std::max<size_t>(bytes, 16)) != cudaSuccess) {
    cudaGetLastError();
    return too_large();
  }
  SV_CUDA(cudaMemset(impl->input, 0, bytes));
  SV_CUDA(cudaMemset(impl->output, 0, bytes));
  SV_CUDA(impl->acc_in.Reserve(std::max<size_t>(rows, 1)));
  SV_CUDA(impl->acc_out.Reserve(std::max<size_t>(rows, 1)));
  SV_CUDA(cudaMemset(impl->acc_in.ptr, 0, sizeof(float) * std::max<size_t>(rows, 1)));
  SV_CUDA(cudaMemset(impl->acc_out.ptr, 0, sizeof(float) * std::max<size_t>(rows, 1)));
  float table[kSigmoidTableSize];
  FillSigmoidTable(table);
  SV_CUDA(impl->sigmoid.Upload(table, kSigmoidTableSize));
  SV_CUDA(cudaDeviceSynchronize());
  for (ChunkBuffers& c : impl->chunk) {
    SV_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    SV_CUDA(cudaEventCreateWithFlags(&c.done, cudaEventDisableTiming));
  }
  int optin = 0;
  SV_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal));
  impl->max_shared = static_cast<size_t>(std::max(optin, 48 * 1024));
  for (StepSet& k : impl->steps) {
    SV_CUDA(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    SV_CUDA(cudaEventCreateWithFlags(&k.done, cudaEventDisableTiming));
    SV_CUDA(cudaMallocHost(&k.h_loss, sizeof(double)));
    SV_CUDA(cudaMallocHost(&k.h_pairs, sizeof(unsigned long long)));
  }
  SV_CUDA(cudaEventCreateWithFlags(&impl->last_kernel, cudaEventDisableTiming));
  SV_CUDA(cudaMallocHost(&impl->host_loss, 2 * sizeof(double)));
  SV_CUDA(cudaMallocHost(&impl->host_pairs, 2 * sizeof(unsigned long long)));
  return std::unique_ptr<CudaSgnsModel>(new CudaSgnsModel(std::move(impl)));
}

Status CudaSgnsModel::Upload(const float* input, const float* output, size_t rows) {
  const size_t bytes = std::min(rows, impl_->rows) * impl_->stride * sizeof(float);
  SV_CUDA(cudaSetDevice(impl_->info.ordinal));
  SV_CUDA(cudaMemcpy(impl_->input, input, bytes, cudaMemcpyHostToDevice));
  SV_CUDA(cudaMemcpy(impl_->output, output, bytes, cudaMemcpyHostToDevice));
  return Status::Ok();
}

Status CudaSgnsModel::Download(float* input, float* output, size_t rows) {
  const size_t bytes = std::min(rows, impl_->rows) * impl_->stride * sizeof(float);
  SV_CUDA(cudaSetDevice(impl_->info.ordinal));
  SV_CUDA(cudaDeviceSynchronize());
  if (input) SV_CUDA(cudaMemcpy(input, impl_->input, bytes, cudaMemcpyDeviceToHost));
  if (output) SV_CUDA(cudaMemcpy(output, impl_->output, bytes, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

Status CudaSgnsModel::Step(TrainModel model, const MicroBatch& b, float lr, bool serial,
                           StepStats* stats) {
  Impl& m = *impl_;
  if (b.num_sentences <= 0) return Status::Ok();
  if (b.negative < 0 || b.negative >= kMaxTargets) {
    return Status::InvalidArgument("negative must be in [0, kMaxTargets)");
  }
  SV_RETURN_IF_ERROR(m.FinishAll(nullptr));
  const bool skip_gram = model == TrainModel::kSkipGram;
  SV_RETURN_IF_ERROR(m.Enqueue(
      b, nullptr, 0, nullptr, stats != nullptr, nullptr, [&](StepSet& k, int ns, int window) {
        TrainParams p = m.BaseParams(b.negative, window);
        p.tokens = k.tokens.ptr;
        p.sent_off = k.off.ptr;
        p.sent_len = k.len.ptr;
        p.num_sentences = ns;
        p.windows = k.windows.ptr;
        p.negatives = k.negatives.ptr;
        p.lr = lr;
        p.loss = stats ? k.loss.ptr : nullptr;
        p.pairs = k.pairs.ptr;
        p.serial = serial ? 1 : 0;
        p.next_sentence = k.counter.ptr;
        Layout layout;
        layout.multiprocessors = m.info.multiprocessors;
        SV_RETURN_IF_ERROR(PlanLayout(&p, skip_gram, window, m.max_shared, ns, &layout));
        const int pieces = PiecesPerLane(m.stride);
        SV_CUDA(skip_gram ? LaunchTrain<true>(p, layout, pieces, k.stream)
                          : LaunchTrain<false>(p, layout, pieces, k.stream));
        return Status::Ok();
      }));
  return m.FinishAll(stats);
}

Status CudaSgnsModel::UploadAccumulators(const float* acc_in, const float* acc_out, size_t rows) {
  const size_t bytes = std::min(rows, impl_->rows) * sizeof(float);
  SV_CUDA(cudaSetDevice(impl_->info.ordinal));
  SV_CUDA(cudaMemcpy(impl_->acc_in.ptr, acc_in, bytes, cudaMemcpyHostToDevice));
  SV_CUDA(cudaMemcpy(impl_->acc_out.ptr, acc_out, bytes, cudaMemcpyHostToDevice));
  return Status::Ok();
}

Status CudaSgnsModel::DownloadAccumulators(float* acc_in, float* acc_out, size_t rows) {
  const size_t bytes = std::min(rows, impl_->rows) * sizeof(float);
  SV_CUDA(cudaSetDevice(impl_->info.ordinal));
  SV_CUDA(cudaDeviceSynchronize());
  SV_CUDA(cudaMemcpy(acc_in, impl_->acc_in.ptr, bytes, cudaMemcpyDeviceToHost));
  SV_CUDA(cudaMemcpy(acc_out, impl_->acc_out.ptr, bytes, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

Status CudaSgnsModel::AdagradStep(const MicroBatch& b, int negative_share, float eta,
                                  float epsilon, bool serial, StepStats* stats, int max_warps) {
  Impl& m = *impl_;
  if (b.num_sentences <= 0) return Status::Ok();
  SV_RETURN_IF_ERROR(m.FinishAll(nullptr));
  SV_RETURN_IF_ERROR(m.EnqueueAdagrad(b, nullptr, 0, nullptr, negative_share, eta, epsilon,
                                      serial, stats != nullptr, max_warps, nullptr));
  return m.FinishAll(stats);
}

Status CudaSgnsModel::EnqueueAdagradStep(const MicroBatch& b, const uint32_t* init_slots,
                                         size_t num_init, const float* init_rows,
                                         int negative_share, float eta, float epsilon,
                                         bool want_stats, int max_warps, StepStats* finished) {
  return impl_->EnqueueAdagrad(b, init_slots, num_init, init_rows, negative_share, eta, epsilon,
                               /*serial=*/false, want_stats, max_warps, finished);
}

Status CudaSgnsModel::FinishSteps(StepStats* finished) { return impl_->FinishAll(finished); }

Status CudaSgnsModel::SetCorpus(const CudaCorpus& c) {
  Impl& m = *impl_;
  SV_CUDA(cudaSetDevice(m.info.ordinal));
  auto oom = [&](const char* what, cudaError_t e) {
    cudaGetLastError();
    return Status::FailedPrecondition(std::string("out of device memory copying the corpus (") +
                                      what + "): " + cudaGetErrorString(e));
  };
  cudaError_t e;
  if ((e = m.corpus.Upload(c.tokens, c.num_tokens)) != cudaSuccess) return oom("tokens", e);
  if ((e = m.offsets.Upload(c.sentence_offsets, c.num_sentences + 1)) != cudaSuccess) {
    return oom("sentences", e);
  }
  if ((e = m.keep.Upload(c.keep_thresholds, c.vocab_size)) != cudaSuccess) return oom("words", e);
  if ((e = m.noise.Upload(c.noise_entries, 2 * static_cast<size_t>(c.noise_size))) != cudaSuccess) {
    return oom("noise table", e);
  }
  SV_CUDA(cudaDeviceSynchronize());
  m.host_offsets.assign(c.sentence_offsets, c.sentence_offsets + c.num_sentences + 1);
  m.noise_size = c.noise_size;
  return Status::Ok();
}

Status CudaSgnsModel::TrainCorpus(const CudaTrainOptions& o,
                                  const std::function<void(uint64_t, const StepStats&)>& on_chunk) {
  Impl& m = *impl_;
  SV_CUDA(cudaSetDevice(m.info.ordinal));
  if (m.host_offsets.size() < 2) return Status::FailedPrecondition("no corpus on the device");
  if (o.window < 1 || o.window > 255 || o.negative < 0 || o.negative >= kMaxTargets ||
      o.negative_share < 1 || o.epochs < 1 || o.loss_sample_every < 1 || o.chunk_tokens < 1) {
    return Status::InvalidArgument("CudaTrainOptions out of range");
  }
  const std::vector<uint64_t>& off = m.host_offsets;
  const size_t num_sentences = off.size() - 1;
  const uint64_t num_tokens = off.back();
  // Chunks: sentence ranges of about equal token counts, at most about chunk_tokens each.
  const uint64_t nchunks =
      std::max<uint64_t>(1, (num_tokens + o.chunk_tokens - 1) / o.chunk_tokens);
  std::vector<size_t> bounds{0};
  for (uint64_t c = 1; c < nchunks; ++c) {
    const uint64_t target = num_tokens * c / nchunks;
    size_t s = bounds.back();
    while (s < num_sentences && off[s] < target) ++s;
    if (s > bounds.back()) bounds.push_back(s);
  }
  if (bounds.back() != num_sentences) bounds.push_back(num_sentences);
  size_t max_tokens = 0, max_sentences = 0;
  for (size_t c = 0; c + 1 < bounds.size(); ++c) {
    max_tokens = std::max<size_t>(max_tokens, off[bounds[c + 1]] - off[bounds[c]]);
    max_sentences = std::max(max_sentences, bounds[c + 1] - bounds[c]);
  }
  for (ChunkBuffers& c : m.chunk) {
    cudaError_t e = c.kept.Reserve(max_tokens);
    if (e == cudaSuccess) e = c.windows.Reserve(max_tokens);
    if (e == cudaSuccess) e = c.negatives.Reserve(max_tokens * std::max(1, o.negative));
    if (e == cudaSuccess) e = c.sent_len.Reserve(max_sentences);
    if (e == cudaSuccess) e = c.loss.Reserve(1);
    if (e == cudaSuccess) e = c.pairs.Reserve(1);
    if (e == cudaSuccess) e = c.counter.Reserve(1);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return Status::FailedPrecondition("out of device memory for the training chunks (" +
                                        Mib(max_tokens * (5 + 4 * size_t(o.negative))) +
                                        " each, two in flight): " + cudaGetErrorString(e));
    }
  }
  const bool skip_gram = o.model == TrainModel::kSkipGram;
  const int pieces = PiecesPerLane(m.stride);
  const uint64_t total_words = static_cast<uint64_t>(o.epochs) * num_tokens;
  const int max_warps = o.max_warps > 0 ? o.max_warps
                                        : static_cast<int>(std::min<size_t>(
                                              1 << 20, std::max<size_t>(1, m.rows / kRowsPerWarp)));
  struct Pending {
    int set;
    uint64_t words_after;
  };
  std::vector<Pending> pending;
  size_t next = 0;  // first pending chunk not yet finished
  StepStats totals;
  uint64_t words_done = 0;
  auto finish = [&]() -> Status {
    const Pending f = pending[next++];
    SV_CUDA(cudaEventSynchronize(m.chunk[f.set].done));
    totals.loss += m.host_loss[f.set];
    totals.pairs += m.host_pairs[f.set];
    words_done = f.words_after;
    if (on_chunk) on_chunk(words_done, totals);
    return Status::Ok();
  };
  uint64_t seq = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    for (size_t c = 0; c + 1 < bounds.size(); ++c, ++seq) {
      const int set = static_cast<int>(seq % 2);
      if (seq >= 2) {
        if (Status s = finish(); !s.ok()) return s;
      }
      ChunkBuffers& b = m.chunk[set];
      const size_t first = bounds[c], ns = bounds[c + 1] - bounds[c];
      SV_CUDA(cudaMemsetAsync(b.loss.ptr, 0, sizeof(double), b.stream));
      SV_CUDA(cudaMemsetAsync(b.pairs.ptr, 0, sizeof(unsigned long long), b.stream));
      PrepParams pp{};
      pp.corpus = m.corpus.ptr;
      pp.sent_off = m.offsets.ptr + first;
      pp.num_sentences = static_cast<int>(ns);
      pp.token_base = off[first];
      pp.keep = m.keep.ptr;
      pp.noise = m.noise.ptr;
      pp.noise_size = m.noise_size;
      pp.kept = b.kept.ptr;
      pp.sent_len = b.sent_len.ptr;
      pp.windows = b.windows.ptr;
      pp.negatives = b.negatives.ptr;
      pp.window = o.window;
      pp.negative = o.negative;
      pp.share = o.negative_share;
      pp.seed = o.seed;
      pp.epoch = static_cast<uint64_t>(epoch);
      const int prep_threads = 256;
      const int prep_blocks = static_cast<int>((ns * 32 + prep_threads - 1) / prep_threads);
      PrepareKernel<<<prep_blocks, prep_threads, 0, b.stream>>>(pp);
      SV_CUDA(cudaGetLastError());
      TrainParams p = m.BaseParams(o.negative, o.window);
      p.tokens = b.kept.ptr;
      p.sent_off = m.offsets.ptr + first;
      p.token_base = off[first];
      p.sent_len = b.sent_len.ptr;
      p.num_sentences = static_cast<int>(ns);
      p.windows = b.windows.ptr;
      p.negatives = b.negatives.ptr;
      p.alpha = o.alpha;
      p.min_alpha = o.min_alpha;
      p.words_before = static_cast<uint64_t>(epoch) * num_tokens;
      p.total_words = total_words;
      p.loss = b.loss.ptr;
      p.pairs = b.pairs.ptr;
      p.sentence_base = static_cast<uint64_t>(epoch) * num_sentences + first;
      p.loss_every = o.loss_sample_every;
      Layout layout;
      layout.multiprocessors = m.info.multiprocessors;
      p.next_sentence = b.counter.ptr;
      SV_CUDA(cudaMemsetAsync(b.counter.ptr, 0, sizeof(int), b.stream));
      if (Status s = PlanLayout(&p, skip_gram, o.window, m.max_shared, max_warps, &layout);
          !s.ok()) {
        return s;
      }
      SV_CUDA(skip_gram ? LaunchTrain<true>(p, layout, pieces, b.stream)
                        : LaunchTrain<false>(p, layout, pieces, b.stream));
      SV_CUDA(cudaMemcpyAsync(m.host_loss + set, b.loss.ptr, sizeof(double),
                              cudaMemcpyDeviceToHost, b.stream));
      SV_CUDA(cudaMemcpyAsync(m.host_pairs + set, b.pairs.ptr, sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost, b.stream));
      SV_CUDA(cudaEventRecord(b.done, b.stream));
      pending.push_back(
          Pending{set, static_cast<uint64_t>(epoch) * num_tokens + off[bounds[c + 1]]});
    }
  }
  while (next < pending.size()) {
    if (Status s = finish(); !s.ok()) return s;
  }
  SV_CUDA(cudaDeviceSynchronize());
  return Status::Ok();
}

}  // namespace streamvec

// The accelerated CPU kernel, written once over a small vector type `Vec` and compiled once per
// ISA (simd_portable.cpp, simd_avx2.cpp, simd_avx512.cpp, each with its own -m flags). Include
// only from those files, after defining Vec, inside their own namespace.
//
// Same math and operation order as reference_kernel.cpp; in addition it
//  - works on whole padded rows (stride is a multiple of Vec::kLanes; padding stays zero),
//  - prefetches rows ahead (the centre's output row two positions ahead, input rows sixteen
//    tokens ahead) while the current window computes: the tables are far larger than L2,
//  - updates a skip-gram window with all its rows in registers when its target rows are
//    distinct and it has at most kMaxBlockedContexts distinct context words (the common case;
//    BlockedWindow), and a pair of windows that share their negatives likewise (PairWindow).
// Requires: rows 64-byte aligned, stride % 16 == 0. The including file includes the headers
// below first, at global scope, so that these includes are no-ops inside its namespace.

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "loss.h"
#include "streamvec/base/status.h"
#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"

template <int kNT>
struct TargetCount {
  static int Get(int runtime) { return kNT; }
};
template <>
struct TargetCount<0> {
  static int Get(int runtime) { return runtime; }
};

// kLocality as __builtin_prefetch's: 3 (into L1), 2 (into L2; prefetcht1). Always inlined, as
// are the kernel's Prefetch* members: GCC 12 finds a function that only prefetches free of side
// effects (a prefetch has no memory operands in its IR; ipa-pure-const) and deletes the calls to
// it, prefetches and all. Until 2026-11-23 the skip-gram and plain CBOW paths ran without a
// single software prefetch for that reason (tests/kernels/prefetch_test.sh checks the objects).
template <int kLocality = 3>
[[gnu::always_inline]] inline void PrefetchRow(const float* row, size_t stride) {
  const char* p = reinterpret_cast<const char*>(row);
  for (size_t off = 0; off < stride * sizeof(float); off += 64) {
    __builtin_prefetch(p + off, 1, kLocality);
  }
}

class SimdKernel final : public streamvec::SgnsKernel {
 public:
  explicit SimdKernel(const char* name) : name_(name) { streamvec::FillSigmoidTable(sigmoid_); }

  void SkipGram(const streamvec::ModelRows& m, const streamvec::MicroBatch& b, float lr,
                streamvec::StepStats* stats) override {
    switch (b.negative + 1) {
      case 4:
        return SkipGramImpl<4>(m, b, lr, stats);
      case 6:
        return SkipGramImpl<6>(m, b, lr, stats);
      case 11:
        return SkipGramImpl<11>(m, b, lr, stats);
      default:
        return SkipGramImpl<0>(m, b, lr, stats);
    }
  }

  void Cbow(const streamvec::ModelRows& m, const streamvec::MicroBatch& b, float lr,
            streamvec::StepStats* stats) override {
    // The common shape (5 negatives, rows of at most 8 vectors: dim <= 128 with AVX-512) takes
    // the register-resident path, with or without statistics (the loss).
    if (b.negative == 5 && m.stride / L <= 8) {
      switch (m.stride / L) {
        case 1: return CbowFused<6, 1>(m, b, lr, stats);
        case 2: return CbowFused<6, 2>(m, b, lr, stats);
        case 3: return CbowFused<6, 3>(m, b, lr, stats);
        case 4: return CbowFused<6, 4>(m, b, lr, stats);
        case 5: return CbowFused<6, 5>(m, b, lr, stats);
        case 6: return CbowFused<6, 6>(m, b, lr, stats);
        case 7: return CbowFused<6, 7>(m, b, lr, stats);
        case 8: return CbowFused<6, 8>(m, b, lr, stats);
        default: break;
      }
    }
    switch (b.negative + 1) {
      case 6:
        return CbowImpl<6>(m, b, lr, stats);
      default:
        return CbowImpl<0>(m, b, lr, stats);
    }
  }

  const char* name() const override { return name_; }

 private:
  using R = typename Vec::R;
  static constexpr int L = Vec::kLanes;

  void Prepare(const streamvec::MicroBatch& b, size_t stride) {
    const size_t nt = static_cast<size_t>(b.negative) + 1;
    SV_CHECK(nt <= static_cast<size_t>(streamvec::kMaxTargets));
    if (targets_.size() < nt + 1) {  // + 1: a pair of windows has two centres
      targets_.resize(nt + 1);
      rows_.resize(nt + 1);
      g_.resize(std::max<size_t>(nt + 1, 8));  // Gradients8 writes 8
    }
    if (scratch_.size() < (nt + 2) * stride) scratch_.Resize((nt + 2) * stride);
  }

  void LoadTargets(const streamvec::ModelRows& m, const streamvec::MicroBatch& b, int i, int nt) {
    targets_[0] = b.tokens[i];
    const uint32_t* neg = b.negatives + static_cast<size_t>(i) * b.negative;
    for (int k = 1; k < nt; ++k) targets_[k] = neg[k - 1];
    for (int k = 0; k < nt; ++k) rows_[k] = m.Out(targets_[k]);
  }

  // The input rows of position i's context (radius b.windows[i], within the sentence [begin,
  // end), i itself left out) into ctx; returns their number (0: no context).
  static int GatherContext(const streamvec::ModelRows& m, const streamvec::MicroBatch& b, int i,
                           int begin, int end, float** ctx) {
    const int r = b.windows[i];
    const int lo = std::max(begin, i - r), hi = std::min(end - 1, i + r);
    int nc = 0;
    for (int c = lo; c <= hi; ++c) {
      if (c != i) ctx[nc++] = m.In(b.tokens[c]);
    }
    return nc;
  }

  // The last of the n entries ctx_ids_[0, n) that holds word w, or -1.
  int LastEntry(uint32_t w, int n) const {
    const uint32_t* ids = ctx_ids_.data();
    int q = n - 1;
    while (q >= 0 && ids[q] != w) --q;
    return q;
  }

  // The context entries of position i's skip-gram window [lo, hi] (i left out), in order of
  // first occurrence: their input rows into ctx_ and their numbers of occurrences into count_
  // (SgnsKernel::SkipGram: a word that occurs n <= kMaxOccurrences times is one entry with n
  // times the gradient; past that a new entry, and repeated_ is set); returns how many.
  int WindowContexts(const streamvec::ModelRows& m, const streamvec::MicroBatch& b, int i, int lo,
                     int hi) {
    uint32_t* ids = ctx_ids_.data();
    int n = 0;
    repeated_ = false;
    for (int c = lo; c <= hi; ++c) {
      if (c == i) continue;
      const uint32_t w = b.tokens[c];
      const int q = LastEntry(w, n);
      if (q >= 0 && count_[q] < streamvec::kMaxOccurrences) {
        count_[q] += 1.0f;
        continue;
      }
      repeated_ |= q >= 0;
      ids[n] = w;
      count_[n] = 1.0f;
      ctx_[n++] = m.In(w);
    }
    return n;
  }

  // Output rows (centre and negatives) of position i.
  template <int kLocality = 3>
  [[gnu::always_inline]] void PrefetchTargets(const streamvec::ModelRows& m,
                                              const streamvec::MicroBatch& b, int i) {
    PrefetchRow<kLocality>(m.Out(b.tokens[i]), m.stride);
    const uint32_t* neg = b.negatives + static_cast<size_t>(i) * b.negative;
    for (int k = 0; k < b.negative; ++k) {
      PrefetchRow<kLocality>(m.Out(neg[k]), m.stride);
    }
  }

  // Prefetch distances in positions: the centre's output row kTargetLead positions ahead; input
  // rows kInputLead tokens ahead, so that with windows up to kInputLead - 3 every context row is
  // in flight at least three positions before its first use. A single window does not prefetch
  // its negatives' rows: drawn from a pool of TrainOptions::negative_pool words per micro-batch
  // they are in L2 already. A pair of windows, one draw for two positions, prefetches the
  // negatives kNegativeLead positions (two pairs) ahead. Measured with the prefetches compiled in
  // (kernel alone on real micro-batches, bench/kernel_ab/run.sh, both link orders; earlier
  // figures were taken while the compiler deleted them, see PrefetchRow): no negative prefetch in
  // a pair 5% slower, kTargetLead 4 2% slower, kInputLead 24 1% slower.
  static constexpr int kTargetLead = 2;
  static constexpr int kInputLead = 16;
  static constexpr int kNegativeLead = 4;

  [[gnu::always_inline]] void PrefetchAhead(const streamvec::ModelRows& m,
                                            const streamvec::MicroBatch& b, int i, int end) {
    if (i + kTargetLead < end) PrefetchRow(m.Out(b.tokens[i + kTargetLead]), m.stride);
    if (i + kInputLead < end) PrefetchRow(m.In(b.tokens[i + kInputLead]), m.stride);
  }

  // The negatives' output rows of position i + kNegativeLead, if within the sentence.
  [[gnu::always_inline]] void PrefetchPairNegatives(const streamvec::ModelRows& m,
                                                    const streamvec::MicroBatch& b, int i,
                                                    int end) {
    if (i + kNegativeLead >= end) return;
    const uint32_t* neg = b.negatives + static_cast<size_t>(i + kNegativeLead) * b.negative;
    for (int k = 0; k < b.negative; ++k) PrefetchRow(m.Out(neg[k]), m.stride);
  }

  [[gnu::always_inline]] void PrefetchSentenceStart(const streamvec::ModelRows& m,
                                                    const streamvec::MicroBatch& b, int begin,
                                                    int end) {
    for (int i = begin; i < end && i < begin + kTargetLead; ++i) {
      PrefetchRow(m.Out(b.tokens[i]), m.stride);
    }
    for (int i = begin; i < end && i < begin + kInputLead; ++i) {
      PrefetchRow(m.In(b.tokens[i]), m.stride);
    }
  }

  // logits[q * kNT + k] = x[q] . rows_[k] for QB context rows at once: each chunk of the kNT
  // target rows is loaded once for the QB contexts, and every (q, k) sum runs over the chunks in
  // order, so a row's logits do not depend on QB (Dots is the QB = 1 case).
  template <int kNT, int QB>
  void DotsBlock(const float* const* x, size_t chunks, float* logits) {
    static_assert(kNT > 0 && kNT <= 8 && QB >= 1 && QB <= 3);
    R acc[QB][kNT];
    for (int q = 0; q < QB; ++q) {
      for (int k = 0; k < kNT; ++k) acc[q][k] = Vec::Zero();
    }
    for (size_t c = 0; c < chunks; ++c) {
      R tv[kNT];
      for (int k = 0; k < kNT; ++k) tv[k] = Vec::Load(rows_[k] + c * L);
      for (int q = 0; q < QB; ++q) {
        const R xv = Vec::Load(x[q] + c * L);
        for (int k = 0; k < kNT; ++k) acc[q][k] = Vec::Fma(xv, tv[k], acc[q][k]);
      }
    }
    for (int q = 0; q < QB; ++q) {
      if constexpr (Vec::kHasSum8) {
        R all[8];
        for (int k = 0; k < 8; ++k) all[k] = k < kNT ? acc[q][k] : Vec::Zero();
        float sums[8];
        Vec::Sum8(all, sums);
        for (int k = 0; k < kNT; ++k) logits[q * kNT + k] = sums[k];
      } else {
        for (int k = 0; k < kNT; ++k) logits[q * kNT + k] = Vec::Sum(acc[q][k]);
      }
    }
  }

  // logits[k] = x . rows_[k] for k < nt, in blocks of up to 4 targets (independent FMA chains).
  template <int kNT>
  void Dots(const float* x, size_t chunks, int nt_runtime, float* logits) {
    if constexpr (kNT > 0 && kNT <= 8) {
      DotsBlock<kNT, 1>(&x, chunks, logits);
      return;
    }
    const int nt = TargetCount<kNT>::Get(nt_runtime);
    int k = 0;
    for (; k + 4 <= nt; k += 4) {
      R a0 = Vec::Zero(), a1 = Vec::Zero(), a2 = Vec::Zero(), a3 = Vec::Zero();
      const float *t0 = rows_[k], *t1 = rows_[k + 1], *t2 = rows_[k + 2], *t3 = rows_[k + 3];
      for (size_t c = 0; c < chunks; ++c) {
        const R xv = Vec::Load(x + c * L);
        a0 = Vec::Fma(xv, Vec::Load(t0 + c * L), a0);
        a1 = Vec::Fma(xv, Vec::Load(t1 + c * L), a1);
        a2 = Vec::Fma(xv, Vec::Load(t2 + c * L), a2);
        a3 = Vec::Fma(xv, Vec::Load(t3 + c * L), a3);
      }
      logits[k] = Vec::Sum(a0);
      logits[k + 1] = Vec::Sum(a1);
      logits[k + 2] = Vec::Sum(a2);
      logits[k + 3] = Vec::Sum(a3);
    }
    for (; k < nt; ++k) {
      R a0 = Vec::Zero();
      const float* t0 = rows_[k];
      for (size_t c = 0; c < chunks; ++c)
        a0 = Vec::Fma(Vec::Load(x + c * L), Vec::Load(t0 + c * L), a0);
      logits[k] = Vec::Sum(a0);
    }
  }

  // count: occurrences of the context word in the window (skip-gram; 1 for CBOW), which
  // multiplies the gradient and the loss.
  float Gradient(int k, float logit, float lr, streamvec::StepStats* stats,
                 float count = 1.0f) const {
    if (k > 0 && targets_[k] == targets_[0]) return 0.0f;
    if (stats) stats->loss += count * streamvec::internal::PairLoss(logit, k == 0);
    return count * streamvec::SgnsLogitGradient(sigmoid_, logit, k == 0 ? 1.0f : 0.0f, lr);
  }

  // The register-blocked window (the common case): B context rows and kNT target rows, all
  // distinct, updated chunk by chunk, each row's chunk read and written once: dT_k = sum_b
  // g[b][k] x_b and dx_b = sum_k g[b][k] t_k from the old values, then both written. Same
  // math as the general path; distinctness makes the in-order and the simultaneous update equal.
  static constexpr int kMaxBlockedContexts = 10;

  template <int B, int NT>
  static void BlockedUpdate(float* const* x, float* const* t, const float* g, size_t chunks) {
    if constexpr (L >= 16) {
      // AVX-512's 32 registers: per chunk, the NT target chunks and their updates stay in
      // registers and the context rows pass one at a time (2 NT + 3 registers, so any B: a
      // pair's up to 12 contexts too), each gradient broadcast once into a register for both
      // FMAs (below, twice from memory, one load per FMA). The same operations in the same order
      // per accumulator as the loop below, so bit-identical results. Kernel alone on real
      // micro-batches, alternating in one process: 3.8% faster than holding all B context rows
      // in registers for B <= 8 and two sweeps above that.
      for (size_t ch = 0; ch < chunks; ++ch) {
        const size_t off = ch * L;
        R tv[NT], dt[NT];
        for (int k = 0; k < NT; ++k) tv[k] = Vec::Load(t[k] + off);
        for (int k = 0; k < NT; ++k) dt[k] = Vec::Zero();
        for (int q = 0; q < B; ++q) {
          const R xv = Vec::Load(x[q] + off);
          R dx = Vec::Zero();
          for (int k = 0; k < NT; ++k) {
            R gv = Vec::Set1(g[q * NT + k]);
            __asm__("" : "+v"(gv));  // one broadcast for both FMAs, not one folded into each
            dt[k] = Vec::Fma(gv, xv, dt[k]);
            dx = Vec::Fma(gv, tv[k], dx);
          }
          Vec::Store(x[q] + off, Vec::Add(xv, dx));
        }
        for (int k = 0; k < NT; ++k) Vec::Store(t[k] + off, Vec::Add(tv[k], dt[k]));
      }
      return;
    }
    for (size_t ch = 0; ch < chunks; ++ch) {
      const size_t off = ch * L;
      R xv[B], tv[NT];
      for (int q = 0; q < B; ++q) xv[q] = Vec::Load(x[q] + off);
      for (int k = 0; k < NT; ++k) tv[k] = Vec::Load(t[k] + off);
      for (int k = 0; k < NT; ++k) {
        R acc = Vec::Zero();
        for (int q = 0; q < B; ++q) acc = Vec::Fma(Vec::Set1(g[q * NT + k]), xv[q], acc);
        Vec::Store(t[k] + off, Vec::Add(tv[k], acc));
      }
      for (int q = 0; q < B; ++q) {
        R acc = Vec::Zero();
        for (int k = 0; k < NT; ++k) acc = Vec::Fma(Vec::Set1(g[q * NT + k]), tv[k], acc);
        Vec::Store(x[q] + off, Vec::Add(xv[q], acc));
      }
    }
  }

  // V::GradientsN where V has one (kHasGradientsN); a template, so that the other builds never
  // name it.
  template <class V>
  static void CallGradientsN(const float* table, const float* logits, const float* labels, int n,
                             float lr, float* out) {
    V::GradientsN(table, logits, labels, n, lr, out);
  }

  // The labels of a blocked window's logits, laid out as [context][target]: 1 for target 0 (the
  // centre), 0 for the negatives.
  template <int kNT>
  static const float* WindowLabels() {
    static const std::array<float, kMaxBlockedContexts* kNT> labels = [] {
      std::array<float, kMaxBlockedContexts * kNT> a{};
      for (size_t j = 0; j < a.size(); j += kNT) a[j] = 1.0f;
      return a;
    }();
    return labels.data();
  }

  // Whether targets_[0, n) are n different words.
  bool TargetsDistinct(int n) const {
    for (int k = 1; k < n; ++k) {
      for (int q = 0; q < k; ++q) {
        if (targets_[k] == targets_[q]) return false;
      }
    }
    return true;
  }

  // The window of the nb distinct context rows in ctx_ (at most kMaxBlockedContexts) against
  // the kNT distinct target rows, as one small matrix product and its two rank updates.
  template <int kNT>
  void BlockedWindow(const streamvec::ModelRows& m, int nb, float lr, streamvec::StepStats* stats) {
    float* const* x = ctx_.data();
    const float* count = count_.data();
    const size_t chunks = m.stride / L;
    float g[kMaxBlockedContexts * kNT + 8];  // + 8: Gradients8 writes 8 floats
    float all_logits[kMaxBlockedContexts * kNT + 8];
    // Three contexts at a time need 3 x kNT accumulators and kNT target registers: AVX-512's 32
    // registers hold them, the 16 of AVX2 and SSE2 do not (they take one at a time).
    int q = 0;
    if constexpr (kNT <= 8 && L >= 16) {
      for (; q + 3 <= nb; q += 3) DotsBlock<kNT, 3>(x + q, chunks, all_logits + q * kNT);
      if (nb - q == 2) {
        DotsBlock<kNT, 2>(x + q, chunks, all_logits + q * kNT);
        q += 2;
      }
    }
    for (; q < nb; ++q) Dots<kNT>(x[q], chunks, kNT, all_logits + q * kNT);
    if constexpr (Vec::kHasGradientsN) {  // the whole window's gradients at once
      CallGradientsN<Vec>(sigmoid_, all_logits, WindowLabels<kNT>(), nb * kNT, lr, g);
    }
    for (int q = 0; q < nb; ++q) {
      const float* logits = all_logits + q * kNT;
      float* gq = g + q * kNT;
      if constexpr (Vec::kHasGradientsN || (Vec::kHasGradients8 && kNT <= 8)) {
        if constexpr (!Vec::kHasGradientsN) Vec::Gradients8(sigmoid_, logits, lr, gq);
        if (count[q] != 1.0f) {
          for (int k = 0; k < kNT; ++k) gq[k] = count[q] * gq[k];
        }
        if (stats) {  // the loss terms Gradient() adds (the targets are distinct)
          for (int k = 0; k < kNT; ++k) {
            stats->loss += count[q] * streamvec::internal::PairLoss(logits[k], k == 0);
          }
        }
      } else {
        for (int k = 0; k < kNT; ++k) gq[k] = Gradient(k, logits[k], lr, stats, count[q]);
      }
      if (stats) stats->pairs += static_cast<uint64_t>(count[q]);
    }
    UpdateBlock<kNT, kMaxBlockedContexts>(x, nb, g, chunks);  // nb == 0: nothing to learn
  }

  // Whether positions i and i + 1 share one draw of negatives (K >= 1; DrawNegatives with
  // TrainOptions::negative_share 2 writes the same K words for both).
  static bool SharedNegatives(const streamvec::MicroBatch& b, int i) {
    if (b.negative == 0) return false;
    const uint32_t* a = b.negatives + static_cast<size_t>(i) * b.negative;
    return std::equal(a, a + b.negative, a + b.negative);
  }

  // targets_ = [tokens[i], tokens[i + 1], the shared negatives] and their rows; nt2 = K + 2.
  void LoadPairTargets(const streamvec::ModelRows& m, const streamvec::MicroBatch& b, int i,
                       int nt2) {
    targets_[0] = b.tokens[i];
    targets_[1] = b.tokens[i + 1];
    const uint32_t* neg = b.negatives + static_cast<size_t>(i) * b.negative;
    for (int k = 2; k < nt2; ++k) targets_[k] = neg[k - 2];
    for (int k = 0; k < nt2; ++k) rows_[k] = m.Out(targets_[k]);
  }

  // The context entries of the union of the windows of i and i + 1 (radii b.windows[i] and
  // b.windows[i + 1], within [begin, end), each centre left out of its own window), in sentence
  // order: input rows into ctx_, occurrences in the window of i into count_ and in that of
  // i + 1 into count_b_ (at most kMaxOccurrences each; then a new entry, and repeated_ is set).
  // Returns how many.
  int PairContexts(const streamvec::ModelRows& m, const streamvec::MicroBatch& b, int i, int begin,
                   int end) {
    repeated_ = false;
    const int ra = b.windows[i], rb = b.windows[i + 1];
    const int lo = std::max(begin, std::min(i - ra, i + 1 - rb));
    const int hi = std::min(end - 1, std::max(i + ra, i + 1 + rb));
    uint32_t* ids = ctx_ids_.data();
    int n = 0;
    for (int c = lo; c <= hi; ++c) {
      const float in_a = (c != i && c >= i - ra && c <= i + ra) ? 1.0f : 0.0f;
      const float in_b = (c != i + 1 && c >= i + 1 - rb && c <= i + 1 + rb) ? 1.0f : 0.0f;
      const uint32_t w = b.tokens[c];
      const int q = LastEntry(w, n);
      if (q >= 0 && count_[q] < streamvec::kMaxOccurrences &&
          count_b_[q] < streamvec::kMaxOccurrences) {
        count_[q] += in_a;
        count_b_[q] += in_b;
        continue;
      }
      repeated_ |= q >= 0;
      ids[n] = w;
      count_[n] = in_a;
      count_b_[n] = in_b;
      ctx_[n++] = m.In(w);
    }
    return n;
  }

  // Occurrences that multiply the gradient of context q against target k: in a single window
  // (pair false) the word's occurrences; in a pair, those in the window of i for centre i
  // (k = 0), in the window of i + 1 for centre i + 1 (k = 1), and in both for a negative.
  float ContextCount(bool pair, int q, int k) const {
    if (!pair) return count_[q];
    return k == 0 ? count_[q] : k == 1 ? count_b_[q] : count_[q] + count_b_[q];
  }

  // Gradient of a pair's logit (targets distinct: nothing skipped; labels 1 for both centres).
  float PairGradient(int k, float logit, float lr, streamvec::StepStats* stats, float count) const {
    if (stats) stats->loss += count * streamvec::internal::PairLoss(logit, k < 2);
    return count * streamvec::SgnsLogitGradient(sigmoid_, logit, k < 2 ? 1.0f : 0.0f, lr);
  }

  // Any window (pair or not) of nu context entries in ctx_ (distinct words, or a word's
  // further entries past kMaxOccurrences) against the nt targets in rows_, in blocks of
  // kMaxContextBlock entries: per entry, its logits against the targets as the block found
  // them, its update, and the targets' updates accumulated in dT and applied at the end of the
  // block (the reference kernel's order). kNTg: nt when known at compile time (the logits'
  // blocked dot products), else 0.
  template <int kNTg>
  void GeneralWindow(const streamvec::ModelRows& m, int nt, int nu, bool pair, float lr,
                     streamvec::StepStats* stats) {
    float* dT = scratch_.data();  // nt x stride
    float logits[streamvec::kMaxTargets + 1];
    float* g = g_.data();
    // Blocks of at most kMaxContextBlock context rows, each applied to the targets before the
    // next (SgnsKernel::SkipGram).
    for (int q0 = 0; q0 < nu; q0 += streamvec::kMaxContextBlock) {
      ContextBlock<kNTg>(m, nt, q0, std::min(nu, q0 + streamvec::kMaxContextBlock), pair, lr, stats,
                         dT, logits, g);
    }
  }

  // Context rows [q0, q1) of GeneralWindow against the targets as they are, then the targets'
  // updates, accumulated in dT, applied.
  template <int kNTg>
  void ContextBlock(const streamvec::ModelRows& m, int nt, int q0, int q1, bool pair, float lr,
                    streamvec::StepStats* stats, float* dT, float* logits, float* g) {
    const size_t stride = m.stride;
    const size_t chunks = stride / L;
    std::fill(dT, dT + nt * stride, 0.0f);
    for (int q = q0; q < q1; ++q) {
      float* x = ctx_[q];
      Dots<kNTg>(x, chunks, nt, logits);
      for (int k = 0; k < nt; ++k) {
        const float count = ContextCount(pair, q, k);
        g[k] = pair ? PairGradient(k, logits[k], lr, stats, count)
                    : Gradient(k, logits[k], lr, stats, count);
      }
      for (size_t ch = 0; ch < chunks; ++ch) {
        const R xv = Vec::Load(x + ch * L);
        R d = Vec::Zero();
        for (int k = 0; k < nt; ++k) {
          const R gk = Vec::Set1(g[k]);
          d = Vec::Fma(gk, Vec::Load(rows_[k] + ch * L), d);
          float* dt = dT + k * stride + ch * L;
          Vec::Store(dt, Vec::Fma(gk, xv, Vec::Load(dt)));
        }
        Vec::Store(x + ch * L, Vec::Add(xv, d));
      }
      if (stats) stats->pairs += static_cast<uint64_t>(pair ? count_[q] + count_b_[q] : count_[q]);
    }
    for (int k = 0; k < nt; ++k) {
      float* t = rows_[k];
      const float* dt = dT + k * stride;
      for (size_t ch = 0; ch < chunks; ++ch) {
        Vec::Store(t + ch * L, Vec::Add(Vec::Load(t + ch * L), Vec::Load(dt + ch * L)));
      }
    }
  }

  // The labels of a pair's logits, [context][target]: 1 for targets 0 and 1 (the centres).
  static constexpr int kMaxPairContexts = 12;  // the union of two windows of radius <= 5

  template <int kNT2>
  static const float* PairLabels() {
    static const std::array<float, kMaxPairContexts* kNT2> labels = [] {
      std::array<float, kMaxPairContexts * kNT2> a{};
      for (size_t j = 0; j < a.size(); j += kNT2) a[j] = a[j + 1] = 1.0f;
      return a;
    }();
    return labels.data();
  }

  // A pair of windows as one blocked matrix product: the nb distinct context rows of their
  // union (ctx_, at most kMaxPairContexts, no word in two entries) against the kNT2 = K + 2
  // distinct targets [centre i, centre i + 1, shared negatives], each gradient times ContextCount
  // (0 where a word is not in a centre's window), then BlockedUpdate as for one window.
  template <int kNT2>
  void PairWindow(const streamvec::ModelRows& m, int nb, float lr, streamvec::StepStats* stats) {
    static_assert(kNT2 >= 3 && kNT2 <= 8);
    float* const* x = ctx_.data();
    const size_t chunks = m.stride / L;
    float g[kMaxPairContexts * kNT2 + 8];
    float all_logits[kMaxPairContexts * kNT2 + 8];
    int q = 0;
    if constexpr (L >= 16) {  // 3 x kNT2 accumulators: AVX-512's 32 registers
      for (; q + 3 <= nb; q += 3) DotsBlock<kNT2, 3>(x + q, chunks, all_logits + q * kNT2);
      if (nb - q == 2) {
        DotsBlock<kNT2, 2>(x + q, chunks, all_logits + q * kNT2);
        q += 2;
      }
    }
    for (; q < nb; ++q) DotsBlock<kNT2, 1>(x + q, chunks, all_logits + q * kNT2);
    if constexpr (Vec::kHasGradientsN) {
      CallGradientsN<Vec>(sigmoid_, all_logits, PairLabels<kNT2>(), nb * kNT2, lr, g);
      for (int q = 0; q < nb; ++q) {
        float* gq = g + q * kNT2;
        const float* logits = all_logits + q * kNT2;
        const float ca = count_[q], cb = count_b_[q], cn = ca + cb;
        gq[0] = ca * gq[0];
        gq[1] = cb * gq[1];
        for (int k = 2; k < kNT2; ++k) gq[k] = cn * gq[k];
        if (stats) {  // the loss terms PairGradient() adds
          stats->loss += ca * streamvec::internal::PairLoss(logits[0], true);
          stats->loss += cb * streamvec::internal::PairLoss(logits[1], true);
          for (int k = 2; k < kNT2; ++k) {
            stats->loss += cn * streamvec::internal::PairLoss(logits[k], false);
          }
        }
      }
    } else {
      for (int q = 0; q < nb; ++q) {
        for (int k = 0; k < kNT2; ++k) {
          g[q * kNT2 + k] =
              PairGradient(k, all_logits[q * kNT2 + k], lr, stats, ContextCount(true, q, k));
        }
      }
    }
    if (stats) {
      for (int q = 0; q < nb; ++q) stats->pairs += static_cast<uint64_t>(count_[q] + count_b_[q]);
    }
    UpdateBlock<kNT2, kMaxPairContexts>(x, nb, g, chunks);
  }

  // BlockedUpdate<nb, NT> for nb in [1, kMaxB].
  template <int NT, int kMaxB>
  void UpdateBlock(float* const* x, int nb, const float* g, size_t chunks) {
    static_assert(kMaxB <= 12);
    float* const* t = rows_.data();
    switch (nb) {
      case 1:
        return BlockedUpdate<1, NT>(x, t, g, chunks);
      case 2:
        return BlockedUpdate<2, NT>(x, t, g, chunks);
      case 3:
        return BlockedUpdate<3, NT>(x, t, g, chunks);
      case 4:
        return BlockedUpdate<4, NT>(x, t, g, chunks);
      case 5:
        return BlockedUpdate<5, NT>(x, t, g, chunks);
      case 6:
        return BlockedUpdate<6, NT>(x, t, g, chunks);
      case 7:
        return BlockedUpdate<7, NT>(x, t, g, chunks);
      case 8:
        return BlockedUpdate<8, NT>(x, t, g, chunks);
      case 9:
        return BlockedUpdate<9, NT>(x, t, g, chunks);
      case 10:
        return BlockedUpdate<10, NT>(x, t, g, chunks);
      default:
        break;
    }
    if constexpr (kMaxB > 10) {
      if (nb == 11) return BlockedUpdate<11, NT>(x, t, g, chunks);
      if (nb == 12) return BlockedUpdate<12, NT>(x, t, g, chunks);
    }
  }

  template <int kNT>
  void SkipGramImpl(const streamvec::ModelRows& m, const streamvec::MicroBatch& b, float lr,
                    streamvec::StepStats* stats) {
    const int nt = TargetCount<kNT>::Get(b.negative + 1);
    Prepare(b, m.stride);
    for (int s = 0; s < b.num_sentences; ++s) {
      const int begin = static_cast<int>(b.sentence_offsets[s]);
      const int end = static_cast<int>(b.sentence_offsets[s + 1]);
      PrefetchSentenceStart(m, b, begin, end);
      for (int i = begin; i < end; ++i) {
        PrefetchAhead(m, b, i, end);
        // Positions i and i + 1 with one draw of negatives and distinct targets: one window
        // (SgnsKernel::SkipGram).
        if (i + 1 < end && SharedNegatives(b, i)) {
          LoadPairTargets(m, b, i, nt + 1);
          if (TargetsDistinct(nt + 1)) {
            PrefetchAhead(m, b, i + 1, end);
            PrefetchPairNegatives(m, b, i, end);
            const int nu = PairContexts(m, b, i, begin, end);
            bool done = false;
            if constexpr (kNT > 0 && kNT + 1 <= 8) {
              if (nu <= kMaxPairContexts && !repeated_) {
                PairWindow<kNT + 1>(m, nu, lr, stats);
                done = true;
              }
            }
            if (!done) {
              GeneralWindow<(kNT > 0 && kNT + 1 <= 8) ? kNT + 1 : 0>(m, nt + 1, nu, /*pair=*/true,
                                                                     lr, stats);
            }
            ++i;
            continue;
          }
        }
        LoadTargets(m, b, i, nt);
        const int r = b.windows[i];
        const int lo = std::max(begin, i - r), hi = std::min(end - 1, i + r);
        const int nu = WindowContexts(m, b, i, lo, hi);
        if constexpr (kNT > 0) {
          if (nu <= kMaxBlockedContexts && !repeated_ && TargetsDistinct(kNT)) {
            BlockedWindow<kNT>(m, nu, lr, stats);
            continue;
          }
        }
        GeneralWindow<kNT>(m, nt, nu, /*pair=*/false, lr, stats);
      }
    }
  }

  template <int kNT>
  void CbowImpl(const streamvec::ModelRows& m, const streamvec::MicroBatch& b, float lr,
                streamvec::StepStats* stats) {
    const int nt = TargetCount<kNT>::Get(b.negative + 1);
    const size_t stride = m.stride;
    const size_t chunks = stride / L;
    Prepare(b, stride);
    float* h = scratch_.data();
    float logits[streamvec::kMaxTargets];
    float* g = g_.data();
    for (int s = 0; s < b.num_sentences; ++s) {
      const int begin = static_cast<int>(b.sentence_offsets[s]);
      const int end = static_cast<int>(b.sentence_offsets[s + 1]);
      PrefetchSentenceStart(m, b, begin, end);
      for (int i = begin; i < end; ++i) {
        PrefetchAhead(m, b, i, end);
        const int nc = GatherContext(m, b, i, begin, end, ctx_.data());
        if (nc == 0) continue;
        LoadTargets(m, b, i, nt);
        const R inv = Vec::Set1(1.0f / static_cast<float>(nc));
        for (size_t ch = 0; ch < chunks; ++ch) {
          R acc = Vec::Zero();
          for (int q = 0; q < nc; ++q) acc = Vec::Add(acc, Vec::Load(ctx_[q] + ch * L));
          Vec::Store(h + ch * L, Vec::Mul(acc, inv));
        }
        Dots<kNT>(h, chunks, nt, logits);
        bool vectorised = false;
        if constexpr (Vec::kHasGradients8 && kNT > 0 && kNT <= 8) {
          if (stats == nullptr) {
            Vec::Gradients8(sigmoid_, logits, lr, g);
            for (int k = 1; k < kNT; ++k) {
              if (targets_[k] == targets_[0]) g[k] = 0.0f;  // as Gradient(): skipped negative
            }
            vectorised = true;
          }
        }
        if (!vectorised) {
          for (int k = 0; k < nt; ++k) g[k] = Gradient(k, logits[k], lr, stats);
        }
        // One pass per chunk: e = sum_k g_k t_k and t_k += g_k h (each t_k stored before the next
        // is loaded, so repeated target rows behave as in the reference), then x_c += e.
        for (size_t ch = 0; ch < chunks; ++ch) {
          const size_t off = ch * L;
          const R hv = Vec::Load(h + off);
          R ev = Vec::Zero();
          for (int k = 0; k < nt; ++k) {
            const R gk = Vec::Set1(g[k]);
            const R tv = Vec::Load(rows_[k] + off);
            ev = Vec::Fma(gk, tv, ev);
            Vec::Store(rows_[k] + off, Vec::Fma(gk, hv, tv));
          }
          for (int q = 0; q < nc; ++q)
            Vec::Store(ctx_[q] + off, Vec::Add(Vec::Load(ctx_[q] + off), ev));
        }
        if (stats) ++stats->pairs;
      }
    }
  }

  // CBOW with K = kNT - 1 negatives and rows of exactly kChunks vectors, no statistics: the same
  // math and update order as CbowImpl (and the reference), with h kept in registers and fused
  // with the dot products (one pass over the context rows and targets computes h and the logits,
  // a second applies the updates). The centre's output row is prefetched kFusedFarLead
  // positions ahead (a random row of a table far larger than L2); the negatives' rows are not:
  // drawn from the micro-batch's pool of TrainOptions::negative_pool words, they are in L2
  // already. Prefetching the centre and the negatives both 6 ahead and 1 ahead (this path's
  // prefetches until 2026-11-23, which the compiler had deleted; see PrefetchRow) made the step
  // 8% slower than the centre alone at both distances, which is 3% slower than the centre 6
  // ahead only (bench/kernel_ab/run.sh ... cbow).
  static constexpr int kFusedFarLead = 6;

  template <int kNT, int kChunks>
  void CbowFused(const streamvec::ModelRows& m, const streamvec::MicroBatch& b, float lr,
                 streamvec::StepStats* stats) {
    static_assert(kNT <= 8, "Sum8 / Gradients8 handle up to 8 targets");
    const size_t stride = m.stride;
    Prepare(b, stride);
    float** ctx = ctx_.data();
    float* const* t = rows_.data();
    alignas(32) float logits[8];
    alignas(32) float g[8];
    for (int s = 0; s < b.num_sentences; ++s) {
      const int begin = static_cast<int>(b.sentence_offsets[s]);
      const int end = static_cast<int>(b.sentence_offsets[s + 1]);
      for (int i = begin; i < end && i < begin + kFusedFarLead; ++i) {
        PrefetchRow<2>(m.Out(b.tokens[i]), stride);
      }
      for (int i = begin; i < end && i < begin + kInputLead; ++i) {
        PrefetchRow(m.In(b.tokens[i]), stride);
      }
      for (int i = begin; i < end; ++i) {
        if (i + kFusedFarLead < end) PrefetchRow<2>(m.Out(b.tokens[i + kFusedFarLead]), stride);
        if (i + kInputLead < end) PrefetchRow(m.In(b.tokens[i + kInputLead]), stride);
        const int nc = GatherContext(m, b, i, begin, end, ctx);
        if (nc == 0) continue;
        LoadTargets(m, b, i, kNT);
        // Pass 1: h = mean of the context rows (same summation order as CbowImpl), logits = T h.
        const R inv = Vec::Set1(1.0f / static_cast<float>(nc));
        R h[kChunks];
        R acc[8];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; ++k) acc[k] = Vec::Zero();
        _Pragma("GCC unroll 8") for (int ch = 0; ch < kChunks; ++ch) {
          const size_t off = static_cast<size_t>(ch) * L;
          R sum = Vec::Zero();
          for (int q = 0; q < nc; ++q) sum = Vec::Add(sum, Vec::Load(ctx[q] + off));
          h[ch] = Vec::Mul(sum, inv);
          _Pragma("GCC unroll 8") for (int k = 0; k < kNT; ++k) acc[k] = Vec::Fma(h[ch], Vec::Load(t[k] + off), acc[k]);
        }
        if constexpr (Vec::kHasSum8) {
          Vec::Sum8(acc, logits);
        } else {
          for (int k = 0; k < kNT; ++k) logits[k] = Vec::Sum(acc[k]);
        }
        if constexpr (Vec::kHasGradients8) {
          Vec::Gradients8(sigmoid_, logits, lr, g);
          for (int k = 1; k < kNT; ++k) {
            if (targets_[k] == targets_[0]) g[k] = 0.0f;  // as Gradient(): skipped negative
          }
        } else {
          for (int k = 0; k < kNT; ++k) g[k] = Gradient(k, logits[k], lr, nullptr);
        }
        if (stats) {  // the loss terms Gradient() would add
          for (int k = 0; k < kNT; ++k) {
            if (k > 0 && targets_[k] == targets_[0]) continue;
            stats->loss += streamvec::internal::PairLoss(logits[k], k == 0);
          }
          ++stats->pairs;
        }
        R gv[kNT];
        _Pragma("GCC unroll 8") for (int k = 0; k < kNT; ++k) gv[k] = Vec::Set1(g[k]);
        // Pass 2, per chunk as CbowImpl: e = sum_k g_k t_k and t_k += g_k h in target order (a
        // repeated target sees its earlier update), then every context row += e in order.
        _Pragma("GCC unroll 8") for (int ch = 0; ch < kChunks; ++ch) {
          const size_t off = static_cast<size_t>(ch) * L;
          R ev = Vec::Zero();
          _Pragma("GCC unroll 8") for (int k = 0; k < kNT; ++k) {
            const R tv = Vec::Load(t[k] + off);
            ev = Vec::Fma(gv[k], tv, ev);
            Vec::Store(t[k] + off, Vec::Fma(gv[k], h[ch], tv));
          }
          for (int q = 0; q < nc; ++q) Vec::Store(ctx[q] + off, Vec::Add(Vec::Load(ctx[q] + off), ev));
        }
      }
    }
  }

  const char* name_;
  float sigmoid_[streamvec::kSigmoidTableSize];
  std::vector<uint32_t> targets_;
  std::vector<float*> rows_;
  // Context rows of a window (a CBOW window's in order; a skip-gram window's or pair's distinct
  // words, with their ids and numbers of occurrences).
  std::vector<float*> ctx_ = std::vector<float*>(2 * 255 + 2);
  std::vector<uint32_t> ctx_ids_ = std::vector<uint32_t>(2 * 255 + 2);
  std::vector<float> count_ = std::vector<float>(2 * 255 + 2);
  std::vector<float> count_b_ = std::vector<float>(2 * 255 + 2);  // a pair's second window
  bool repeated_ = false;  // a word holds more than one entry (kMaxOccurrences reached)
  std::vector<float> g_;
  streamvec::AlignedFloats scratch_;
};

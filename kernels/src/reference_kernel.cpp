// The scalar reference kernel: the readable statement of the math and the test oracle for every
// accelerated kernel. Operation order matches simd_kernel.h exactly (only the order of additions
// inside dot products differs), so results agree to float rounding.
#include <algorithm>
#include <vector>

#include "loss.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"

namespace streamvec {
namespace {

class ReferenceKernel final : public SgnsKernel {
 public:
  ReferenceKernel() { FillSigmoidTable(sigmoid_); }

  void SkipGram(const ModelRows& m, const MicroBatch& b, float lr, StepStats* stats) override {
    const int nt = b.negative + 1;
    const int dim = m.dim;
    targets_.resize(nt + 1);
    g_.resize(nt + 1);
    dT_.resize(static_cast<size_t>(nt + 1) * dim);
    for (int s = 0; s < b.num_sentences; ++s) {
      const int begin = static_cast<int>(b.sentence_offsets[s]);
      const int end = static_cast<int>(b.sentence_offsets[s + 1]);
      for (int i = begin; i < end; ++i) {
        // Positions i and i + 1 with one draw of negatives and distinct targets [centre i,
        // centre i + 1, negatives] train as one window over the union of their windows.
        if (i + 1 < end && SharedNegatives(b, i)) {
          LoadPairTargets(b, i);
          if (TargetsDistinct(nt + 1)) {
            words_.clear();
            counts_.clear();
            counts_b_.clear();
            AddPairWindows(b, i, begin, end);
            WindowStep(m, nt + 1, /*pair=*/true, lr, stats);
            ++i;
            continue;
          }
        }
        LoadTargets(b, i);
        words_.clear();
        counts_.clear();
        counts_b_.clear();
        AddWindow(b, i, begin, end);
        WindowStep(m, nt, /*pair=*/false, lr, stats);
      }
    }
  }

  void Cbow(const ModelRows& m, const MicroBatch& b, float lr, StepStats* stats) override {
    const int nt = b.negative + 1;
    const int dim = m.dim;
    targets_.resize(nt);
    g_.resize(nt);
    h_.resize(dim);
    e_.resize(dim);
    for (int s = 0; s < b.num_sentences; ++s) {
      const int begin = static_cast<int>(b.sentence_offsets[s]);
      const int end = static_cast<int>(b.sentence_offsets[s + 1]);
      for (int i = begin; i < end; ++i) {
        const int r = b.windows[i];
        const int lo = std::max(begin, i - r), hi = std::min(end - 1, i + r);
        const int count = hi - lo;  // context words, centre excluded
        if (count <= 0) continue;
        LoadTargets(b, i);
        std::fill(h_.begin(), h_.end(), 0.0f);
        for (int c = lo; c <= hi; ++c) {
          if (c == i) continue;
          const float* x = m.In(b.tokens[c]);
          for (int j = 0; j < dim; ++j) h_[j] += x[j];
        }
        const float inv = 1.0f / static_cast<float>(count);
        for (int j = 0; j < dim; ++j) h_[j] *= inv;
        for (int k = 0; k < nt; ++k) {
          const float* t = m.Out(targets_[k]);
          float logit = 0.0f;
          for (int j = 0; j < dim; ++j) logit += h_[j] * t[j];
          g_[k] = Gradient(k, logit, lr, stats);
        }
        std::fill(e_.begin(), e_.end(), 0.0f);
        for (int k = 0; k < nt; ++k) {
          float* t = m.Out(targets_[k]);
          for (int j = 0; j < dim; ++j) {
            e_[j] += g_[k] * t[j];
            t[j] += g_[k] * h_[j];
          }
        }
        for (int c = lo; c <= hi; ++c) {
          if (c == i) continue;
          float* x = m.In(b.tokens[c]);
          for (int j = 0; j < dim; ++j) x[j] += e_[j];
        }
        if (stats) ++stats->pairs;
      }
    }
  }

  const char* name() const override { return "reference"; }

 private:
  // Adds an occurrence of word w (a in the window of i, bo in that of i + 1) to its last entry
  // in words_, or to a new entry at the end if it has none or the last holds kMaxOccurrences in
  // either window.
  void AddWord(uint32_t w, float a, float bo) {
    const auto last = std::find(words_.rbegin(), words_.rend(), w);  // the word's last entry
    const size_t q = words_.rend() - last - 1;
    if (last != words_.rend() && counts_[q] < kMaxOccurrences && counts_b_[q] < kMaxOccurrences) {
      counts_[q] += a;
      counts_b_[q] += bo;
    } else {
      words_.push_back(w);
      counts_.push_back(a);
      counts_b_.push_back(bo);
    }
  }

  // The context words of position i's window (radius b.windows[i], within [begin, end), i left
  // out), counted in counts_.
  void AddWindow(const MicroBatch& b, int i, int begin, int end) {
    const int r = b.windows[i];
    const int lo = std::max(begin, i - r), hi = std::min(end - 1, i + r);
    for (int c = lo; c <= hi; ++c) {
      if (c != i) AddWord(b.tokens[c], 1.0f, 0.0f);
    }
  }

  // The words of the windows of i and i + 1, in sentence order: counts_ in the window of i,
  // counts_b_ in that of i + 1.
  void AddPairWindows(const MicroBatch& b, int i, int begin, int end) {
    const int ra = b.windows[i], rb = b.windows[i + 1];
    const int lo = std::max(begin, std::min(i - ra, i + 1 - rb));
    const int hi = std::min(end - 1, std::max(i + ra, i + 1 + rb));
    for (int c = lo; c <= hi; ++c) {
      const bool in_a = c != i && c >= i - ra && c <= i + ra;
      const bool in_b = c != i + 1 && c >= i + 1 - rb && c <= i + 1 + rb;
      AddWord(b.tokens[c], in_a ? 1.0f : 0.0f, in_b ? 1.0f : 0.0f);
    }
  }

  // One window (or pair) of the distinct context words words_ against the nt targets_: per
  // word, its logits against the targets as the block found them, its update, and the targets'
  // updates collected in dT_ and applied at the end of the block. A gradient counts the word's
  // occurrences: in a single window counts_; in a pair, counts_ (window of i) against centre i,
  // counts_b_ (window of i + 1) against centre i + 1, and both against a negative. A window of more
  // than kMaxContextBlock words is trained in blocks of kMaxContextBlock, each applied to the
  // targets before the next.
  void WindowStep(const ModelRows& m, int nt, bool pair, float lr, StepStats* stats) {
    for (size_t q0 = 0; q0 < words_.size(); q0 += kMaxContextBlock) {
      BlockStep(m, nt, q0, std::min(words_.size(), q0 + kMaxContextBlock), pair, lr, stats);
    }
  }

  void BlockStep(const ModelRows& m, int nt, size_t q0, size_t q1, bool pair, float lr,
                 StepStats* stats) {
    const int dim = m.dim;
    std::fill(dT_.begin(), dT_.begin() + static_cast<size_t>(nt) * dim, 0.0f);
    for (size_t q = q0; q < q1; ++q) {
      float* x = m.In(words_[q]);
      for (int k = 0; k < nt; ++k) {
        const float* t = m.Out(targets_[k]);
        float logit = 0.0f;
        for (int j = 0; j < dim; ++j) logit += x[j] * t[j];
        if (!pair) {
          g_[k] = Gradient(k, logit, lr, stats, counts_[q]);
          continue;
        }
        const float count = k == 0 ? counts_[q] : k == 1 ? counts_b_[q] : counts_[q] + counts_b_[q];
        if (stats) stats->loss += count * internal::PairLoss(logit, k < 2);
        g_[k] = count * SgnsLogitGradient(sigmoid_, logit, k < 2 ? 1.0f : 0.0f, lr);
      }
      for (int j = 0; j < dim; ++j) {
        const float xj = x[j];
        float d = 0.0f;
        for (int k = 0; k < nt; ++k) {
          d += g_[k] * m.Out(targets_[k])[j];
          dT_[k * dim + j] += g_[k] * xj;
        }
        x[j] = xj + d;
      }
      if (stats) stats->pairs += static_cast<uint64_t>(counts_[q] + (pair ? counts_b_[q] : 0.0f));
    }
    for (int k = 0; k < nt; ++k) {
      float* t = m.Out(targets_[k]);
      for (int j = 0; j < dim; ++j) t[j] += dT_[k * dim + j];
    }
  }

  // Whether positions i and i + 1 share one draw of negatives (K >= 1).
  static bool SharedNegatives(const MicroBatch& b, int i) {
    if (b.negative == 0) return false;
    const uint32_t* a = b.negatives + static_cast<size_t>(i) * b.negative;
    return std::equal(a, a + b.negative, a + b.negative);
  }
  void LoadPairTargets(const MicroBatch& b, int i) {
    targets_[0] = b.tokens[i];
    targets_[1] = b.tokens[i + 1];
    for (int k = 0; k < b.negative; ++k) {
      targets_[k + 2] = b.negatives[static_cast<size_t>(i) * b.negative + k];
    }
  }
  bool TargetsDistinct(int n) const {
    for (int k = 1; k < n; ++k) {
      for (int q = 0; q < k; ++q) {
        if (targets_[k] == targets_[q]) return false;
      }
    }
    return true;
  }

  void LoadTargets(const MicroBatch& b, int i) {
    targets_[0] = b.tokens[i];
    for (int k = 0; k < b.negative; ++k) {
      targets_[k + 1] = b.negatives[static_cast<size_t>(i) * b.negative + k];
    }
  }
  // A negative equal to the centre word is skipped (gradient 0, no loss), as in word2vec.c.
  // count: occurrences of the context word in the window (skip-gram), which multiplies the
  // gradient and the loss; 1 for CBOW.
  float Gradient(int k, float logit, float lr, StepStats* stats, float count = 1.0f) const {
    if (k > 0 && targets_[k] == targets_[0]) return 0.0f;
    if (stats) stats->loss += count * internal::PairLoss(logit, k == 0);
    return count * SgnsLogitGradient(sigmoid_, logit, k == 0 ? 1.0f : 0.0f, lr);
  }

  float sigmoid_[kSigmoidTableSize];
  std::vector<uint32_t> targets_, words_;
  std::vector<float> g_, dT_, h_, e_, counts_, counts_b_;
};

}  // namespace

std::unique_ptr<SgnsKernel> MakeReferenceKernel() { return std::make_unique<ReferenceKernel>(); }

}  // namespace streamvec

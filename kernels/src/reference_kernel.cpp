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
    targets_.resize(nt);
    g_.resize(nt);
    dT_.resize(static_cast<size_t>(nt) * dim);
    for (int s = 0; s < b.num_sentences; ++s) {
      const int begin = static_cast<int>(b.sentence_offsets[s]);
      const int end = static_cast<int>(b.sentence_offsets[s + 1]);
      for (int i = begin; i < end; ++i) {
        LoadTargets(b, i);
        const int r = b.windows[i];
        const int lo = std::max(begin, i - r), hi = std::min(end - 1, i + r);
        // The window's distinct context words, each with its number of occurrences.
        words_.clear();
        counts_.clear();
        for (int c = lo; c <= hi; ++c) {
          if (c == i) continue;
          const auto seen = std::find(words_.begin(), words_.end(), b.tokens[c]);
          if (seen != words_.end()) {
            counts_[seen - words_.begin()] += 1.0f;
          } else {
            words_.push_back(b.tokens[c]);
            counts_.push_back(1.0f);
          }
        }
        std::fill(dT_.begin(), dT_.end(), 0.0f);
        for (size_t q = 0; q < words_.size(); ++q) {
          float* x = m.In(words_[q]);
          for (int k = 0; k < nt; ++k) {
            const float* t = m.Out(targets_[k]);
            float logit = 0.0f;
            for (int j = 0; j < dim; ++j) logit += x[j] * t[j];
            g_[k] = Gradient(k, logit, lr, stats, counts_[q]);
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
          if (stats) stats->pairs += static_cast<uint64_t>(counts_[q]);
        }
        for (int k = 0; k < nt; ++k) {
          float* t = m.Out(targets_[k]);
          for (int j = 0; j < dim; ++j) t[j] += dT_[k * dim + j];
        }
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
  std::vector<float> g_, dT_, h_, e_, counts_;
};

}  // namespace

std::unique_ptr<SgnsKernel> MakeReferenceKernel() { return std::make_unique<ReferenceKernel>(); }

}  // namespace streamvec

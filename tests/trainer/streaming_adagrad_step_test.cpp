// Every build of the streaming learner's Adagrad skip-gram step (portable, AVX2, AVX-512) against
// a scalar reference written from AdagradRowUpdate, on fresh random rows and sentences.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

// The step is private to trainer/; its header declares plain functions and one struct.
#include "../../trainer/src/adagrad_step.h"
#include "streamvec/base/cpu_features.h"
#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/cuda.h"
#include "streamvec/kernels/cuda_sgns.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"
#include "streamvec/trainer/streaming_learner.h"

namespace streamvec {
namespace {

struct Model {
  int rows = 0, dim = 0;
  size_t stride = 0;
  AlignedFloats input, output;
  std::vector<float> acc_in, acc_out;  // row r's accumulator at [r * acc_stride]
  size_t acc_stride = 1;
  bool acc_in_rows = false;  // AccumulatorsIntoRows: in the rows' padding instead
};

// What AccumulatorsIntoRows leaves in the padding besides the accumulators.
constexpr float kPaddingJunk = 1000.0f;

// Spreads the packed accumulators of `m` to `stride` floats apart; the floats in between are NaN,
// so a step that read one would spread NaN into rows and accumulators.
void SpreadAccumulators(Model* m, size_t stride) {
  for (std::vector<float>* acc : {&m->acc_in, &m->acc_out}) {
    std::vector<float> spread(acc->size() * stride, std::nanf(""));
    for (size_t r = 0; r < acc->size(); ++r) spread[r * stride] = (*acc)[r];
    *acc = std::move(spread);
  }
  m->acc_stride = stride;
}

// Moves the packed accumulators of `m` into the rows' padding as the streaming learner keeps them
// (input row r's at float dim, output row r's at dim + 1; needs stride >= dim + 2) and fills the
// rest of the padding with kPaddingJunk: a step must keep all of it out of its sums and must
// change only the accumulators.
void AccumulatorsIntoRows(Model* m) {
  for (int r = 0; r < m->rows; ++r) {
    float* in = m->input.data() + r * m->stride;
    float* out = m->output.data() + r * m->stride;
    for (size_t j = static_cast<size_t>(m->dim); j < m->stride; ++j) in[j] = out[j] = kPaddingJunk;
    in[m->dim] = m->acc_in[r];
    out[m->dim + 1] = m->acc_out[r];
  }
  m->acc_in.clear();
  m->acc_out.clear();
  m->acc_in_rows = true;
}

// The input (or output) accumulators of `m` packed (one float per row).
std::vector<float> Packed(const Model& m, bool input) {
  std::vector<float> out(static_cast<size_t>(m.rows));
  for (size_t r = 0; r < out.size(); ++r) {
    if (m.acc_in_rows) {
      out[r] = input ? m.input[r * m.stride + m.dim] : m.output[r * m.stride + m.dim + 1];
    } else {
      out[r] = (input ? m.acc_in : m.acc_out)[r * m.acc_stride];
    }
  }
  return out;
}

Model RandomModel(int rows, int dim, std::mt19937& gen) {
  Model m;
  m.rows = rows;
  m.dim = dim;
  m.stride = PaddedStride(dim);
  m.input.Resize(rows * m.stride);
  m.output.Resize(rows * m.stride);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f), a(0.0f, 2.0f);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < dim; ++j) {  // padding stays zero
      m.input[r * m.stride + j] = u(gen);
      m.output[r * m.stride + j] = u(gen);
    }
  }
  m.acc_in.resize(rows);
  m.acc_out.resize(rows);
  for (int r = 0; r < rows; ++r) {
    // Some rows never updated (G = 0), the others with history.
    m.acc_in[r] = r % 3 == 0 ? 0.0f : a(gen);
    m.acc_out[r] = r % 3 == 1 ? 0.0f : a(gen);
  }
  return m;
}

Model Copy(const Model& m) {
  Model c;
  c.rows = m.rows;
  c.dim = m.dim;
  c.stride = m.stride;
  c.input.Resize(m.input.size());
  c.output.Resize(m.output.size());
  std::copy(m.input.data(), m.input.data() + m.input.size(), c.input.data());
  std::copy(m.output.data(), m.output.data() + m.output.size(), c.output.data());
  c.acc_in = m.acc_in;
  c.acc_out = m.acc_out;
  return c;
}

struct Sentence {
  std::vector<uint32_t> tokens, negatives;
  std::vector<uint8_t> windows;
  int negative = 0;
};

// Tokens from `vocab` words (few words: context rows repeat in a window, the general path);
// some negatives equal their centre (dropped).
Sentence RandomSentence(int n, int vocab, int negative, int window, std::mt19937& gen) {
  Sentence s;
  s.negative = negative;
  std::uniform_int_distribution<int> word(0, vocab - 1), radius(1, window), coin(0, 9);
  for (int i = 0; i < n; ++i) {
    s.tokens.push_back(static_cast<uint32_t>(word(gen)));
    s.windows.push_back(static_cast<uint8_t>(radius(gen)));
  }
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < negative; ++k) {
      s.negatives.push_back(coin(gen) == 0 ? s.tokens[i] : static_cast<uint32_t>(word(gen)));
    }
  }
  return s;
}

// The step as docs/streaming.md states it, one pair at a time: per centre the targets are the
// centre and its negatives that differ from it; each context row (in order) gets
// AdagradRowUpdate with sum_t g_t y_t, and after the window each target row (in order) gets
// AdagradRowUpdate with sum_c g_ct x_c, all g from the rows as they were read.
void ReferenceSentence(Model& m, const Sentence& s, float eta, float epsilon, const float* sigmoid,
                       double* loss, uint64_t* pairs) {
  const int n = static_cast<int>(s.tokens.size());
  const int dim = m.dim;
  for (int i = 0; i < n; ++i) {
    std::vector<uint32_t> targets{s.tokens[i]};
    for (int k = 0; k < s.negative; ++k) {
      const uint32_t neg = s.negatives[i * s.negative + k];
      if (neg != s.tokens[i]) targets.push_back(neg);
    }
    std::vector<std::vector<float>> grad_t(targets.size(), std::vector<float>(dim, 0.0f));
    const int lo = std::max(0, i - s.windows[i]), hi = std::min(n - 1, i + s.windows[i]);
    if (lo == hi) continue;
    for (int c = lo; c <= hi; ++c) {
      if (c == i) continue;
      float* x = m.input.data() + s.tokens[c] * m.stride;
      std::vector<float> grad_x(dim, 0.0f);
      for (size_t t = 0; t < targets.size(); ++t) {
        const float* y = m.output.data() + targets[t] * m.stride;
        float logit = 0.0f;
        for (int j = 0; j < dim; ++j) logit += x[j] * y[j];
        const float g = (t == 0 ? 1.0f : 0.0f) - TableSigmoid(sigmoid, logit);
        const double sig = 1.0 / (1.0 + std::exp(-static_cast<double>(logit)));
        *loss -= std::log(std::max(t == 0 ? sig : 1.0 - sig, 1e-30));
        for (int j = 0; j < dim; ++j) {
          grad_x[j] += g * y[j];
          grad_t[t][j] += g * x[j];
        }
      }
      ++*pairs;
      AdagradRowUpdate(x, grad_x.data(), dim, &m.acc_in[s.tokens[c]], eta, epsilon);
    }
    for (size_t t = 0; t < targets.size(); ++t) {
      AdagradRowUpdate(m.output.data() + targets[t] * m.stride, grad_t[t].data(), dim,
                       &m.acc_out[targets[t]], eta, epsilon);
    }
  }
}

void RunStep(Isa isa, Model& m, const Sentence& s, float eta, float epsilon, const float* sigmoid,
             bool want_loss, double* loss, uint64_t* pairs, int share = 1) {
  AlignedFloats scratch(kAdagradScratchRows * m.stride);
  AdagradSentenceArgs a;
  a.input = m.input.data();
  a.output = m.output.data();
  a.acc_in = m.acc_in_rows ? m.input.data() + m.dim : m.acc_in.data();
  a.acc_out = m.acc_in_rows ? m.output.data() + m.dim + 1 : m.acc_out.data();
  a.acc_stride = m.acc_in_rows ? m.stride : m.acc_stride;
  a.stride = m.stride;
  a.dim = m.dim;
  a.tokens = s.tokens.data();
  a.n = static_cast<int>(s.tokens.size());
  a.windows = s.windows.data();
  a.negatives = s.negatives.data();
  a.negative = s.negative;
  a.negative_share = share;
  a.eta = eta;
  a.epsilon = epsilon;
  a.sigmoid = sigmoid;
  a.scratch = scratch.data();
  a.want_loss = want_loss;
  a.loss_sum = loss;
  a.loss_pairs = pairs;
  AdagradSentence(isa, a);
}

// Largest |a - b| relative to max(1, |b|) over the first `dim` floats of every row (and that the
// padding stayed zero).
double MaxRowDiff(const AlignedFloats& a, const AlignedFloats& b, const Model& m) {
  double worst = 0;
  for (int r = 0; r < m.rows; ++r) {
    for (size_t j = 0; j < m.stride; ++j) {
      const float x = a[r * m.stride + j], y = b[r * m.stride + j];
      if (j >= static_cast<size_t>(m.dim)) {
        const bool acc_lane = m.acc_in_rows && (j == static_cast<size_t>(m.dim) ||
                                                j == static_cast<size_t>(m.dim) + 1);
        if (!acc_lane) {  // (accumulators are compared by MaxAccDiff)
          EXPECT_EQ(x, m.acc_in_rows ? kPaddingJunk : 0.0f) << "padding of row " << r << " changed";
        }
        continue;
      }
      worst = std::max(worst, std::fabs(static_cast<double>(x) - y) /
                                  std::max(1.0, std::fabs(static_cast<double>(y))));
    }
  }
  return worst;
}

double MaxAccDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t r = 0; r < a.size(); ++r) {
    worst = std::max(worst, std::fabs(static_cast<double>(a[r]) - b[r]) /
                                std::max(1.0, std::fabs(static_cast<double>(b[r]))));
  }
  return worst;
}

class StreamingAdagradStepTest : public ::testing::TestWithParam<Isa> {};

// The two sigmoid tables the comparisons below use: the real one (FillSigmoidTable) and a flat
// 0.5 inside (-kMaxLogit, kMaxLogit), where a logit's rounding cannot change its gradient.
struct SigmoidTables {
  float real[kSigmoidTableSize], flat[kSigmoidTableSize];
  SigmoidTables() {
    FillSigmoidTable(real);
    std::fill(flat, flat + kSigmoidTableSize, 0.5f);
  }
};

// Dims with padding (37, 100) and without (16, 64); negative 5 takes the register-blocked path
// for windows with distinct contexts, 3, 7 and 0 the general one; a 6-word vocabulary makes
// context rows repeat (the general path again), a 500-word one mostly not. Two sigmoid tables:
//  - the real one (FillSigmoidTable): rounding differences in a logit now and then move it across
//    a table bucket edge, a gradient change below 2e-3 that Adagrad's normalised first step can
//    magnify; so a loose bound (1% of eta), which still catches any wrong pair, row or order;
//  - a constant 0.5 inside (-kMaxLogit, kMaxLogit), where a logit's rounding cannot change its
//    gradient: the two must then agree to float rounding (1e-5), which checks the update order,
//    the accumulators and the handling of repeated rows and of negatives equal to the centre.
TEST_P(StreamingAdagradStepTest, MatchesTheScalarReferenceOnRandomInputs) {
  const Isa isa = GetParam();
  if (!IsaSupported(isa)) GTEST_SKIP() << IsaName(isa) << " is not supported on this CPU";
  const SigmoidTables tables;
  const float* real = tables.real;
  const float* flat = tables.flat;
  struct Mode {
    const float* table;
    float eta;
    double tolerance;
  };
  std::mt19937 gen(20240611);
  int cases = 0;
  for (const Mode& mode : {Mode{real, 0.2f, 2e-3}, Mode{flat, 0.02f, 1e-5}}) {
    for (int dim : {16, 37, 64, 100}) {
      for (int negative : {5, 3, 7, 0}) {
        for (int vocab : {6, 500}) {
          for (int window : {5, 1, 8}) {
            Model m = RandomModel(vocab, dim, gen);
            const Sentence s = RandomSentence(60, vocab, negative, window, gen);
            Model ref = Copy(m), before = Copy(m);
            double loss = 0, ref_loss = 0;
            uint64_t pairs = 0, ref_pairs = 0;
            const bool want_loss = cases % 2 == 0;
            // Packed accumulators, spread out, or in the rows' padding as the learner keeps
            // them where there is room.
            if (cases % 3 == 2 && m.stride >= static_cast<size_t>(dim) + 2) {
              AccumulatorsIntoRows(&m);
            } else {
              SpreadAccumulators(&m, cases % 3 == 0 ? 1 : 7);
            }
            RunStep(isa, m, s, mode.eta, 1e-6f, mode.table, want_loss, &loss, &pairs);
            ReferenceSentence(ref, s, mode.eta, 1e-6f, mode.table, &ref_loss, &ref_pairs);
            SCOPED_TRACE("table " + std::string(mode.table == real ? "real" : "flat") + " dim " +
                         std::to_string(dim) + " negative " + std::to_string(negative) +
                         " vocab " + std::to_string(vocab) + " window " +
                         std::to_string(window));
            EXPECT_LT(MaxRowDiff(m.input, ref.input, m), mode.tolerance);
            EXPECT_LT(MaxRowDiff(m.output, ref.output, m), mode.tolerance);
            EXPECT_LT(MaxAccDiff(Packed(m, true), ref.acc_in), mode.tolerance);
            EXPECT_LT(MaxAccDiff(Packed(m, false), ref.acc_out), mode.tolerance);
            if (want_loss) {
              EXPECT_EQ(pairs, ref_pairs);
              EXPECT_NEAR(loss, ref_loss, 1e-4 * ref_loss);
            } else {
              EXPECT_EQ(pairs, 0u);
            }
            // The step did change the rows (a no-op would not be compared at all).
            EXPECT_GT(MaxRowDiff(m.input, before.input, m), 10 * mode.tolerance);
            EXPECT_GT(MaxRowDiff(m.output, before.output, m), 10 * mode.tolerance);
            ++cases;
          }
        }
      }
    }
  }
}

// negative_share 2: pairs of positions with one draw of negatives train as one window
// (AdagradPairAt). Each build against the portable step, which states that math: with the flat
// table to float rounding, with the real one within 1% of eta. Windows 5 with negative 5 take
// the blocked pair path, wider windows or other K the general one; a 6-word vocabulary makes
// many pairs fall back to single windows (targets not distinct).
TEST_P(StreamingAdagradStepTest, PairsMatchThePortableStep) {
  const Isa isa = GetParam();
  if (!IsaSupported(isa)) GTEST_SKIP() << IsaName(isa) << " is not supported on this CPU";
  const SigmoidTables tables;
  const float* real = tables.real;
  const float* flat = tables.flat;
  std::mt19937 gen(20261123);
  int pairs_seen = 0;
  for (const float* table : {flat, real}) {
    const double tolerance = table == flat ? 1e-5 : 2e-3;
    const float eta = table == flat ? 0.02f : 0.2f;
    for (int negative : {5, 3}) {
      for (int vocab : {6, 500}) {
        for (int window : {5, 9}) {
          Model m = RandomModel(vocab, 100, gen);
          Sentence s = RandomSentence(61, vocab, negative, window, gen);
          for (size_t i = 1; i < s.tokens.size(); i += 2) {  // odd positions share the draw
            std::copy_n(s.negatives.begin() + (i - 1) * negative, negative,
                        s.negatives.begin() + i * negative);
          }
          AccumulatorsIntoRows(&m);
          Model ref = Copy(m), before = Copy(m);
          ref.acc_in_rows = true;
          double loss = 0, ref_loss = 0;
          uint64_t pairs = 0, ref_pairs = 0;
          RunStep(isa, m, s, eta, 1e-6f, table, true, &loss, &pairs, 2);
          RunStep(Isa::kPortable, ref, s, eta, 1e-6f, table, true, &ref_loss, &ref_pairs, 2);
          SCOPED_TRACE("negative " + std::to_string(negative) + " vocab " + std::to_string(vocab) +
                       " window " + std::to_string(window));
          EXPECT_LT(MaxRowDiff(m.input, ref.input, m), tolerance);
          EXPECT_LT(MaxRowDiff(m.output, ref.output, m), tolerance);
          EXPECT_EQ(pairs, ref_pairs);
          EXPECT_NEAR(loss, ref_loss, 1e-4 * ref_loss);
          EXPECT_GT(MaxRowDiff(m.input, before.input, m), 10 * tolerance);
          for (size_t i = 0; i + 1 < s.tokens.size(); i += 2) {
            AdagradSentenceArgs a;
            a.tokens = s.tokens.data();
            a.n = static_cast<int>(s.tokens.size());
            a.negatives = s.negatives.data();
            a.negative = negative;
            a.negative_share = 2;
            pairs_seen += AdagradPairAt(a, static_cast<int>(i)) ? 1 : 0;
          }
        }
      }
    }
  }
  EXPECT_GT(pairs_seen, 50);  // the pair paths did run
}

// The CUDA twin (CudaSgnsModel::AdagradStep, one warp in order) against the portable step on
// micro-batches of three sentences, single windows and pairs (negative_share 2), packed
// accumulators, the real sigmoid table: within 1% of eta as the CPU builds are (a logit across a
// table bucket edge), the same pairs, the loss within 0.01%.
TEST(StreamingAdagradStepGpuTest, DeviceStepMatchesThePortableStep) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  float table[kSigmoidTableSize];
  FillSigmoidTable(table);
  std::mt19937 gen(20261125);
  const float eta = 0.2f, epsilon = 1e-6f;
  const double tolerance = 2e-3;
  for (int share : {1, 2}) {
    for (int dim : {16, 37, 100, 300}) {
      for (int negative : {0, 3, 5}) {
        for (int vocab : {6, 500}) {
          for (int window : {1, 5, 9}) {
            if (share == 2 && negative == 0) continue;
            Model m = RandomModel(vocab, dim, gen);
            std::vector<Sentence> sentences;
            MicroBatch b;
            std::vector<uint32_t> tokens, negs, offsets{0};
            std::vector<uint8_t> windows;
            for (int k = 0; k < 3; ++k) {
              Sentence s = RandomSentence(40 + 7 * k, vocab, negative, window, gen);
              if (share == 2) {
                for (size_t i = 1; i < s.tokens.size(); i += 2) {
                  std::copy_n(s.negatives.begin() + (i - 1) * negative, negative,
                              s.negatives.begin() + i * negative);
                }
              }
              tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
              negs.insert(negs.end(), s.negatives.begin(), s.negatives.end());
              windows.insert(windows.end(), s.windows.begin(), s.windows.end());
              offsets.push_back(static_cast<uint32_t>(tokens.size()));
              sentences.push_back(std::move(s));
            }
            b.tokens = tokens.data();
            b.sentence_offsets = offsets.data();
            b.num_sentences = 3;
            b.windows = windows.data();
            b.negatives = negs.data();
            b.negative = negative;
            Model ref = Copy(m), before = Copy(m);
            double ref_loss = 0;
            uint64_t ref_pairs = 0;
            for (const Sentence& s : sentences) {
              RunStep(Isa::kPortable, ref, s, eta, epsilon, table, true, &ref_loss, &ref_pairs,
                      share);
            }
            auto gpu = CudaSgnsModel::Create(0, vocab, dim);
            ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
            ASSERT_TRUE(gpu.value()->Upload(m.input.data(), m.output.data()).ok());
            ASSERT_TRUE(gpu.value()->UploadAccumulators(m.acc_in.data(), m.acc_out.data()).ok());
            StepStats st;
            const Status step = gpu.value()->AdagradStep(b, share, eta, epsilon, true, &st);
            ASSERT_TRUE(step.ok()) << step.ToString();
            ASSERT_TRUE(gpu.value()->Download(m.input.data(), m.output.data()).ok());
            ASSERT_TRUE(gpu.value()->DownloadAccumulators(m.acc_in.data(), m.acc_out.data()).ok());
            SCOPED_TRACE("share " + std::to_string(share) + " dim " + std::to_string(dim) +
                         " negative " + std::to_string(negative) + " vocab " +
                         std::to_string(vocab) + " window " + std::to_string(window));
            EXPECT_LT(MaxRowDiff(m.input, ref.input, m), tolerance);
            EXPECT_LT(MaxRowDiff(m.output, ref.output, m), tolerance);
            EXPECT_LT(MaxAccDiff(m.acc_in, ref.acc_in), tolerance);
            EXPECT_LT(MaxAccDiff(m.acc_out, ref.acc_out), tolerance);
            EXPECT_EQ(st.pairs, ref_pairs);
            EXPECT_NEAR(st.loss, ref_loss, 1e-4 * ref_loss);
            EXPECT_GT(MaxRowDiff(m.input, before.input, m), 10 * tolerance);
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, StreamingAdagradStepTest,
                         ::testing::Values(Isa::kPortable, Isa::kAvx2, Isa::kAvx512),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(IsaName(info.param));
                         });

}  // namespace
}  // namespace streamvec

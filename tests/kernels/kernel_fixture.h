// Random tables and micro-batches for comparing SGNS kernels (the CPU ones and the CUDA twin).
#ifndef STREAMVEC_TESTS_KERNELS_KERNEL_FIXTURE_H_
#define STREAMVEC_TESTS_KERNELS_KERNEL_FIXTURE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/sgns_kernel.h"

namespace streamvec {
namespace testing_fixture {

// Fresh random tables and a random micro-batch for kernel comparisons: radii in [1,
// max_window]; `share` consecutive positions (of the micro-batch) share one draw of negatives, as
// DrawNegatives writes them.
struct Fixture {
  Fixture(int rows, int dim, int negative, uint32_t seed, int num_sentences = 3, int max_window = 5,
          int share = 1)
      : rows(rows), dim(dim), stride(PaddedStride(dim)) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    input.Resize(rows * stride);
    output.Resize(rows * stride);
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < dim; ++j) {
        input[r * stride + j] = u(gen);
        output[r * stride + j] = u(gen) * 0.5f;
      }
    }
    std::uniform_int_distribution<uint32_t> word(0, rows - 1);
    std::uniform_int_distribution<int> len(1, 40), win(1, max_window);
    offsets.push_back(0);
    for (int s = 0; s < num_sentences; ++s) {
      const int n = len(gen);
      for (int i = 0; i < n; ++i) tokens.push_back(word(gen));
      offsets.push_back(static_cast<uint32_t>(tokens.size()));
    }
    for (size_t i = 0; i < tokens.size(); ++i) {
      windows.push_back(static_cast<uint8_t>(win(gen)));
      for (int k = 0; k < negative; ++k) {
        negatives.push_back(i % share == 0 ? word(gen) : negatives[negatives.size() - negative]);
      }
    }
    batch.tokens = tokens.data();
    batch.sentence_offsets = offsets.data();
    batch.num_sentences = num_sentences;
    batch.windows = windows.data();
    batch.negatives = negatives.data();
    batch.negative = negative;
  }
  ModelRows model() { return ModelRows{input.data(), output.data(), stride, dim}; }
  // Copy of the tables (same layout) for a second kernel to run on.
  Fixture(const Fixture& o)
      : rows(o.rows),
        dim(o.dim),
        stride(o.stride),
        tokens(o.tokens),
        offsets(o.offsets),
        negatives(o.negatives),
        windows(o.windows),
        batch(o.batch) {
    input.Resize(o.input.size());
    output.Resize(o.output.size());
    std::copy(o.input.data(), o.input.data() + o.input.size(), input.data());
    std::copy(o.output.data(), o.output.data() + o.output.size(), output.data());
    batch.tokens = tokens.data();
    batch.sentence_offsets = offsets.data();
    batch.windows = windows.data();
    batch.negatives = negatives.data();
  }

  int rows, dim;
  size_t stride;
  AlignedFloats input, output;
  std::vector<uint32_t> tokens, offsets, negatives;
  std::vector<uint8_t> windows;
  MicroBatch batch;
};

inline void ExpectTablesNear(const Fixture& a, const Fixture& b, float tol) {
  for (size_t i = 0; i < a.input.size(); ++i) {
    ASSERT_NEAR(a.input[i], b.input[i], tol) << "input float " << i;
    ASSERT_NEAR(a.output[i], b.output[i], tol) << "output float " << i;
  }
}

}  // namespace testing_fixture
}  // namespace streamvec

#endif  // STREAMVEC_TESTS_KERNELS_KERNEL_FIXTURE_H_

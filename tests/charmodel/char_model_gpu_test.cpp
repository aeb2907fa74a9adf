// The character model's encoder on a CUDA device (CharModel::UseCudaDevice) against the CPU path
// on the same parameters: vectors, gradients, chunked encoding, parameters changed on the host,
// the refusals. Tests named *Gpu* skip without a device (ctest label "gpu"); the one below them
// runs where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "streamvec/charmodel/char_model.h"
#include "streamvec/kernels/cuda.h"
#include "word_views.h"

namespace streamvec {
namespace {

CharModelOptions Options(bool bidirectional) {
  CharModelOptions o;
  o.dim = 40;
  o.char_dim = 12;
  o.hidden = 24;
  o.bidirectional = bidirectional;
  o.buckets = 300;
  o.max_word_chars = 10;  // some words below are cut
  o.seed = 5;
  return o;
}

// Words of 1 to 14 code points (a few with 'é' and 'ж'), repeats included.
std::vector<std::string> Words(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<std::string> alphabet = {"a", "b",        "c",        "d",   "e", "s",
                                             "t", "\xC3\xA9", "\xD0\xB6", "ing", "ed"};
  std::vector<std::string> words;
  for (size_t i = 0; i < n; ++i) {
    std::string w;
    const size_t parts = 1 + rng() % 10;
    for (size_t k = 0; k < parts; ++k) w += alphabet[rng() % alphabet.size()];
    words.push_back(w);
  }
  words.push_back(words.front());
  return words;
}

using testing::Views;

// Largest |a - b| over the largest |a| (an absolute error where everything is tiny).
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, scale = 1e-6;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    err = std::max(err, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(double(a[i])));
  }
  return err / scale;
}

class CharModelGpuTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CharModelGpuTest, EncodeMatchesTheCpu) {
  CharModel cpu(Options(GetParam()));
  CharModel gpu(cpu);
  ASSERT_TRUE(gpu.UseCudaDevice(0).ok());
  EXPECT_EQ(gpu.cuda_device(), 0);
  const std::vector<std::string> words = Words(3000, 1);
  std::vector<float> a, b;
  ASSERT_TRUE(cpu.Encode(Views(words), &a).ok());
  ASSERT_TRUE(gpu.Encode(Views(words), &b).ok());
  EXPECT_LT(RelativeError(a, b), 1e-4);
  // The repeated word has one vector wherever it is in the list.
  const size_t dim = 40, last = words.size() - 1;
  EXPECT_LT(std::abs(b[0] - b[last * dim]), 1e-6);
}

TEST_P(CharModelGpuTest, GradientMatchesTheCpu) {
  CharModel cpu(Options(GetParam()));
  CharModel gpu(cpu);
  ASSERT_TRUE(gpu.UseCudaDevice(0).ok());
  const std::vector<std::string> words = Words(2000, 2);
  // L = sum_ij w_ij out_ij with fixed random w: dL/dout = w.
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> weights(words.size() * 40);
  for (float& w : weights) w = normal(rng);
  auto loss = [&](const float* out, size_t n, float* d_out) {
    double l = 0;
    for (size_t i = 0; i < n * 40; ++i) {
      l += double(weights[i]) * out[i];
      d_out[i] = weights[i];
    }
    return l;
  };
  std::vector<float> ga, gb;
  StatusOr<double> la = cpu.ComputeGradient(Views(words), loss, &ga);
  StatusOr<double> lb = gpu.ComputeGradient(Views(words), loss, &gb);
  ASSERT_TRUE(la.ok() && lb.ok()) << lb.status().ToString();
  EXPECT_NEAR(*la, *lb, 1e-3 * (1 + std::abs(*la)));
  EXPECT_LT(RelativeError(ga, gb), 1e-3);
  // Every block of parameters gets a gradient on the device (none left at zero).
  size_t nonzero = 0;
  for (float g : gb) nonzero += g != 0.f;
  EXPECT_GT(nonzero, gb.size() / 10);
}

TEST_P(CharModelGpuTest, AStepOnTheHostReachesTheDevice) {
  CharModel cpu(Options(GetParam()));
  CharModel gpu(cpu);
  ASSERT_TRUE(gpu.UseCudaDevice(0).ok());
  const std::vector<std::string> words = Words(500, 4);
  std::vector<float> target(words.size() * 40, 0.5f), a, b;
  const std::vector<float> weights(words.size(), 1.f);
  double first = 0, last = 0;
  for (int step = 0; step < 5; ++step) {
    StatusOr<double> la = cpu.DistillStep(Views(words), target.data(), weights);
    StatusOr<double> lb = gpu.DistillStep(Views(words), target.data(), weights);
    ASSERT_TRUE(la.ok() && lb.ok()) << lb.status().ToString();
    // Adam divides by the gradients' own scale: tiny rounding differences in small components
    // move their parameters by up to the step size, so the runs drift apart a little.
    EXPECT_NEAR(*la, *lb, 1e-2 * *la) << "step " << step;
    if (step == 0) first = *lb;
    last = *lb;
  }
  EXPECT_LT(last, first) << "the device's gradients do not lower the loss";
  ASSERT_TRUE(cpu.Encode(Views(words), &a).ok());
  ASSERT_TRUE(gpu.Encode(Views(words), &b).ok());
  EXPECT_LT(RelativeError(a, b), 2e-2);
  // A change made through mutable_parameters is seen by the next pass: the projection's last
  // bias adds to the last component of every vector.
  ASSERT_TRUE(gpu.Encode(Views(words), &a).ok());
  gpu.mutable_parameters()[gpu.num_parameters() - 1] += 1.f;
  ASSERT_TRUE(gpu.Encode(Views(words), &b).ok());
  for (size_t i = 0; i < words.size(); ++i) {
    EXPECT_NEAR(b[i * 40 + 39] - a[i * 40 + 39], 1.f, 1e-5) << i;
    EXPECT_NEAR(b[i * 40], a[i * 40], 1e-6) << i;
  }
}

TEST_P(CharModelGpuTest, EncodingMoreWordsThanOneDevicePassHoldsMatchesTheCpu) {
  CharModel cpu(Options(GetParam()));
  CharModel gpu(cpu);
  ASSERT_TRUE(gpu.UseCudaDevice(0).ok());
  const std::vector<std::string> words = Words(70000, 5);  // three device chunks of 32768
  std::vector<float> a, b;
  ASSERT_TRUE(cpu.Encode(Views(words), &a).ok());
  ASSERT_TRUE(gpu.Encode(Views(words), &b).ok());
  EXPECT_LT(RelativeError(a, b), 1e-4);
}

TEST_P(CharModelGpuTest, APassRunsBackwardOnceAndBadWordsAreRefusedBeforeTheDevice) {
  CharModel gpu(Options(GetParam()));
  ASSERT_TRUE(gpu.UseCudaDevice(0).ok());
  const std::vector<std::string> words = Words(100, 6);
  std::vector<float> out;
  auto pass = gpu.Forward(Views(words), &out);
  ASSERT_TRUE(pass.ok());
  const std::vector<float> d_out(out.size(), 1.f);
  std::vector<float> gradient;
  EXPECT_TRUE(gpu.Backward(**pass, d_out.data(), &gradient).ok());
  const Status again = gpu.Backward(**pass, d_out.data(), &gradient);
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition) << again.ToString();
  const Status bad = gpu.Encode({"fine", "bad\xff"}, &out);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("word 1"), std::string::npos) << bad.message();
  // An empty call is no error.
  EXPECT_TRUE(gpu.Encode({}, &out).ok());
  EXPECT_TRUE(out.empty());
}

INSTANTIATE_TEST_SUITE_P(Directions, CharModelGpuTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Bidirectional" : "Forward";
                         });

TEST(CharModelDeviceTest, WithoutADeviceUseCudaDeviceSaysWhyAndTheModelStaysOnTheCpu) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  CharModel model(Options(true));
  const Status s = model.UseCudaDevice(0);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_FALSE(s.message().empty());
  EXPECT_EQ(model.cuda_device(), -1);
  std::vector<float> out;
  EXPECT_TRUE(model.Encode({"still", "works"}, &out).ok());
  EXPECT_EQ(out.size(), 80u);
}

}  // namespace
}  // namespace streamvec

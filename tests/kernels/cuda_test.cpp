// GPU tests: ctest label "gpu" (see tests/CMakeLists.txt). They skip cleanly without a device.
#include "streamvec/kernels/cuda.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernel_fixture.h"
#include "streamvec/kernels/cuda_sgns.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/kernels/sgns_math.h"

namespace streamvec {
namespace {

TEST(CudaTest, NoDeviceMeansZeroDevicesNotAnError) {
  const int n = CudaDeviceCount();
  EXPECT_GE(n, 0);
  if (!CudaBuilt()) {
    EXPECT_EQ(n, 0);
  }
  if (n == 0) {
    float out = 0;
    const float logit = 0, label = 1;
    EXPECT_FALSE(CudaSgnsLogitGradients(&logit, &label, 0.1f, 1, &out).ok());
  }
}

TEST(CudaGpuTest, DeviceLogitGradientsEqualHost) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> u(-10.0f, 10.0f);
  const int n = 10000;
  std::vector<float> logits(n), labels(n), out(n);
  for (int i = 0; i < n; ++i) {
    logits[i] = u(gen);
    labels[i] = static_cast<float>(i % 2);
  }
  ASSERT_TRUE(CudaSgnsLogitGradients(logits.data(), labels.data(), 0.025f, n, out.data()).ok());
  float table[kSigmoidTableSize];
  FillSigmoidTable(table);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], SgnsLogitGradient(table, logits[i], labels[i], 0.025f)) << i;
  }
}

TEST(CudaTest, DeviceFlagParses) {
  DeviceSpec d;
  ASSERT_TRUE(ParseDeviceSpec("cpu", &d).ok());
  EXPECT_FALSE(d.cuda);
  ASSERT_TRUE(ParseDeviceSpec("cuda", &d).ok());
  EXPECT_TRUE(d.cuda);
  EXPECT_EQ(d.ordinal, 0);
  ASSERT_TRUE(ParseDeviceSpec("cuda:3", &d).ok());
  EXPECT_EQ(d.ordinal, 3);
  EXPECT_EQ(d.ToString(), "cuda:3");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda1", "CPU", "", "cuda:99999"}) {
    const Status s = ParseDeviceSpec(bad, &d);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("--device"), std::string::npos) << s.message();
  }
}

TEST(CudaTest, WithoutADeviceTheModelSaysWhy) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  CudaDeviceInfo info;
  const Status check = CudaCheckDevice(0, &info);
  EXPECT_EQ(check.code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(check.message().empty());
  auto model = CudaSgnsModel::Create(0, 100, 16);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), check.message());
}

// The device step against the scalar reference on the same micro-batch, one warp in the CPU's
// order: rows within the CPU kernels' own tolerance (summation order, and a logit across a
// sigmoid-table bucket edge: lr * 0.25 * 16/2048 = 5e-5), the same pairs, the loss within 0.1%.
void ExpectStepMatchesReference(TrainModel model, int rows, int dim, int negative, int max_window,
                                int share, uint32_t seed, int sentences = 4) {
  testing_fixture::Fixture a(rows, dim, negative, seed, sentences, max_window, share);
  testing_fixture::Fixture b(a);
  const float lr = model == TrainModel::kSkipGram ? 0.025f : 0.05f;
  StepStats sa, sb;
  auto ref = MakeReferenceKernel();
  if (model == TrainModel::kSkipGram) {
    ref->SkipGram(a.model(), a.batch, lr, &sa);
  } else {
    ref->Cbow(a.model(), a.batch, lr, &sa);
  }
  auto gpu = CudaSgnsModel::Create(0, rows, dim);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  ASSERT_TRUE(gpu.value()->Upload(b.input.data(), b.output.data()).ok());
  const Status st = gpu.value()->Step(model, b.batch, lr, /*serial=*/true, &sb);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(gpu.value()->Download(b.input.data(), b.output.data()).ok());
  SCOPED_TRACE(testing::Message() << (model == TrainModel::kSkipGram ? "skip-gram" : "cbow")
                                  << " rows " << rows << " dim " << dim << " negative "
                                  << negative << " window " << max_window << " share " << share);
  testing_fixture::ExpectTablesNear(a, b, 2e-4f);
  EXPECT_EQ(sa.pairs, sb.pairs);
  EXPECT_NEAR(sa.loss, sb.loss, 1e-3 * sa.loss + 1e-3);
  // The step changed the tables (a comparison of untouched tables proves nothing).
  testing_fixture::Fixture untouched(rows, dim, negative, seed, sentences, max_window, share);
  float moved = 0.0f;
  for (size_t i = 0; i < b.input.size(); ++i) {
    moved = std::max(moved, std::fabs(b.input[i] - untouched.input[i]));
  }
  EXPECT_GT(moved, 1e-4f);
}

TEST(CudaGpuTest, SkipGramStepMatchesReference) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  // Dims across one to eight float4 pieces a lane, pairs (share 2) and single windows, windows
  // wider than a block of kMaxContextBlock entries, more targets than a warp has lanes, and a
  // tiny vocabulary (repeated words past kMaxOccurrences, negatives equal to the centre).
  for (int dim : {1, 37, 100, 130, 300, 1000}) {
    for (int negative : {0, 1, 5, 40}) {
      for (int share : {1, 2}) {
        ExpectStepMatchesReference(TrainModel::kSkipGram, 300, dim, negative, 5, share,
                                   100 + dim + negative * 7 + share);
      }
    }
  }
  for (int window : {10, 30}) {
    ExpectStepMatchesReference(TrainModel::kSkipGram, 300, 50, 5, window, 2, 7 + window);
    ExpectStepMatchesReference(TrainModel::kSkipGram, 4, 50, 5, window, 2, 9 + window);
    ExpectStepMatchesReference(TrainModel::kSkipGram, 4, 50, 5, window, 1, 11 + window);
  }
}

TEST(CudaGpuTest, CbowStepMatchesReference) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  for (int dim : {1, 37, 100, 130, 300, 1000}) {
    for (int negative : {0, 5, 40}) {
      ExpectStepMatchesReference(TrainModel::kCbow, 300, dim, negative, 5, 1, 500 + dim + negative);
      ExpectStepMatchesReference(TrainModel::kCbow, 5, dim, negative, 10, 2, 900 + dim + negative);
    }
  }
}

// A warp per sentence (Hogwild between sentences) trains the same pairs and lowers the loss of
// the second pass over the same micro-batch, as the serial order does.
TEST(CudaGpuTest, ParallelSentencesTrain) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  testing_fixture::Fixture a(2000, 64, 5, 77, /*num_sentences=*/200, 5, 2);
  auto gpu = CudaSgnsModel::Create(0, a.rows, a.dim);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  ASSERT_TRUE(gpu.value()->Upload(a.input.data(), a.output.data()).ok());
  StepStats first, last;
  ASSERT_TRUE(gpu.value()->Step(TrainModel::kSkipGram, a.batch, 0.05f, false, &first).ok());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(gpu.value()->Step(TrainModel::kSkipGram, a.batch, 0.05f, false, nullptr).ok());
  }
  ASSERT_TRUE(gpu.value()->Step(TrainModel::kSkipGram, a.batch, 0.05f, false, &last).ok());
  StepStats serial;
  testing_fixture::Fixture b(a);
  MakeReferenceKernel()->SkipGram(b.model(), b.batch, 0.05f, &serial);
  EXPECT_EQ(first.pairs, serial.pairs);
  EXPECT_EQ(last.pairs, first.pairs);
  EXPECT_LT(last.loss, 0.8 * first.loss);
}

}  // namespace
}  // namespace streamvec

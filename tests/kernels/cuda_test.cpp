// GPU tests: ctest label "gpu" (see tests/CMakeLists.txt). They skip cleanly without a device.
#include "streamvec/kernels/cuda.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace streamvec

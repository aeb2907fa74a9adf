// The CUDA batch trainer against the CPU one (label "gpu" for the *Gpu* tests: they skip
// without a device).
#include "streamvec/trainer/cuda_batch_trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>

#include "streamvec/kernels/cuda.h"
#include "streamvec/kernels/cuda_sgns.h"
#include "streamvec/trainer/batch_trainer.h"

namespace streamvec {
namespace {

// Two groups of words that only co-occur within their group.
std::string PlantedCorpus(int sentences, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> pick(0, 9), group(0, 1);
  std::string text;
  for (int s = 0; s < sentences; ++s) {
    const char prefix = group(gen) ? 'a' : 'b';
    for (int i = 0; i < 20; ++i) text += prefix + std::to_string(pick(gen)) + ' ';
    text += '\n';
  }
  return text;
}

Corpus LoadText(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("streamvec_cuda_trainer_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(path) << text;
  CorpusOptions o;
  o.min_count = 1;
  auto c = LoadCorpus(path.string(), o);
  std::filesystem::remove(path);
  SV_CHECK(c.ok());
  return std::move(c).value();
}

// Mean cosine within the planted groups minus mean cosine across them.
double GroupSeparation(const Corpus& c, const float* input, size_t stride, int dim) {
  double within = 0, across = 0;
  int nw = 0, na = 0;
  for (uint32_t i = 0; i < c.vocab.size(); ++i) {
    for (uint32_t j = i + 1; j < c.vocab.size(); ++j) {
      const float* a = input + i * stride;
      const float* b = input + j * stride;
      double ab = 0, aa = 0, bb = 0;
      for (int k = 0; k < dim; ++k) {
        ab += a[k] * b[k];
        aa += a[k] * a[k];
        bb += b[k] * b[k];
      }
      const double cos = ab / std::sqrt(aa * bb);
      (c.vocab.word(i)[0] == c.vocab.word(j)[0] ? within : across) += cos;
      ++(c.vocab.word(i)[0] == c.vocab.word(j)[0] ? nw : na);
    }
  }
  return within / nw - across / na;
}

TEST(CudaBatchTrainerTest, WithoutADeviceFailsNamingTheCause) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  Corpus c = LoadText(PlantedCorpus(50, 1));
  TrainOptions o;
  o.dim = 8;
  BatchTrainer t(c, o);
  auto r = TrainBatchOnCuda(c, o, 0, t.rows(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(r.status().message().empty());
}

// The same small runs on the CPU and the GPU: both separate the planted groups, by about the
// same margin, every corpus word is counted, and the final sampled loss agrees within 10%.
TEST(CudaBatchTrainerGpuTest, SmallRunsMatchTheCpuTrainer) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  Corpus c = LoadText(PlantedCorpus(3000, 5));
  for (TrainModel model : {TrainModel::kSkipGram, TrainModel::kCbow}) {
    TrainOptions o;
    o.model = model;
    o.dim = 16;
    o.epochs = 3;
    o.sample = 0;
    o.alpha = model == TrainModel::kCbow ? 0.05f : 0.025f;
    o.isa = DetectBestIsa();
    o.threads = 1;
    o.loss_sample_every = 1;
    BatchTrainer cpu(c, o);
    const TrainSummary cs = cpu.Train();
    BatchTrainer gpu_tables(c, o);
    auto gs = TrainBatchOnCuda(c, o, 0, gpu_tables.rows(), {});
    ASSERT_TRUE(gs.ok()) << gs.status().ToString();
    SCOPED_TRACE(model == TrainModel::kCbow ? "cbow" : "skip-gram");
    EXPECT_EQ(gs.value().words_done, 3 * c.tokens.size());
    const double sep_cpu = GroupSeparation(c, cpu.input(), cpu.stride(), o.dim);
    const double sep_gpu = GroupSeparation(c, gpu_tables.input(), gpu_tables.stride(), o.dim);
    EXPECT_GT(sep_gpu, 0.5);
    EXPECT_NEAR(sep_gpu, sep_cpu, 0.1);
    EXPECT_NEAR(gs.value().loss, cs.loss, 0.1 * cs.loss);
    EXPECT_NE(gs.value().kernel.find("cuda:0"), std::string::npos);
  }
}

TEST(CudaBatchTrainerGpuTest, TooLargeAVocabularySaysHowManyWordsFit) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  CudaDeviceInfo info;
  ASSERT_TRUE(CudaCheckDevice(0, &info).ok());
  // Rows for twice the device's memory at dim 1000.
  const size_t rows = info.total_bytes / (2 * 1008 * sizeof(float)) * 2;
  auto m = CudaSgnsModel::Create(0, rows, 1000);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(m.status().message().find("out of device memory"), std::string::npos);
  EXPECT_NE(m.status().message().find("words fit at this --dim"), std::string::npos);
}

}  // namespace
}  // namespace streamvec

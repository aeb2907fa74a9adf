#include "streamvec/trainer/batch_trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "corpus_options.h"
#include "streamvec/kernels/cuda.h"
#include "streamvec/kernels/cuda_sgns.h"
#include "streamvec/trainer/cuda_batch_trainer.h"

namespace streamvec {
namespace {

using testing::MinCount;

// A planted corpus: two groups of words that only co-occur within their group.
std::string PlantedCorpus(int sentences, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> pick(0, 9), group(0, 1);
  std::string text;
  for (int s = 0; s < sentences; ++s) {
    const char prefix = group(gen) ? 'a' : 'b';
    for (int i = 0; i < 20; ++i) {
      text += prefix;
      text += std::to_string(pick(gen));
      text += ' ';
    }
    text += '\n';
  }
  return text;
}

class BatchTrainerTest : public ::testing::Test {
 protected:
  static Corpus Load(const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("streamvec_trainer_" + std::to_string(::getpid()) + ".txt");
    std::ofstream(path) << text;
    auto c = LoadCorpus(path.string(), MinCount(1));
    std::filesystem::remove(path);
    SV_CHECK(c.ok());
    return std::move(c).value();
  }
  static double Cosine(const float* a, const float* b, int dim) {
    double ab = 0, aa = 0, bb = 0;
    for (int j = 0; j < dim; ++j) {
      ab += a[j] * b[j];
      aa += a[j] * a[j];
      bb += b[j] * b[j];
    }
    return ab / std::sqrt(aa * bb);
  }
  // Mean cosine within groups minus mean cosine across groups.
  static double GroupSeparation(const Corpus& c, BatchTrainer& t, int dim) {
    double within = 0, across = 0;
    int nw = 0, na = 0;
    for (uint32_t i = 0; i < c.vocab.size(); ++i) {
      for (uint32_t j = i + 1; j < c.vocab.size(); ++j) {
        const double cos = Cosine(t.input() + i * t.stride(), t.input() + j * t.stride(), dim);
        if (c.vocab.word(i)[0] == c.vocab.word(j)[0]) {
          within += cos;
          ++nw;
        } else {
          across += cos;
          ++na;
        }
      }
    }
    return within / nw - across / na;
  }

  // Trains with each negative_share in `shares` (options o otherwise), expects every run to
  // separate the planted groups, and returns each run's input table.
  static std::vector<std::vector<float>> InputsPerShare(const Corpus& c, TrainOptions o,
                                                        std::initializer_list<int> shares) {
    std::vector<std::vector<float>> inputs;
    for (int share : shares) {
      o.negative_share = share;
      BatchTrainer t(c, o);
      t.Train();
      EXPECT_GT(GroupSeparation(c, t, o.dim), 0.5) << "negative_share " << share;
      inputs.emplace_back(t.input(), t.input() + c.vocab.size() * t.stride());
    }
    return inputs;
  }
};

// Skip-gram on a planted corpus: small vectors, three epochs, no subsampling.
TrainOptions PlantedSkipGramOptions() {
  TrainOptions o;
  o.dim = 16;
  o.epochs = 3;
  o.sample = 0;
  o.isa = DetectBestIsa();
  return o;
}

TEST_F(BatchTrainerTest, SkipGramSeparatesPlantedGroups) {
  Corpus c = Load(PlantedCorpus(2000, 1));
  ASSERT_EQ(c.vocab.size(), 20u);
  TrainOptions o = PlantedSkipGramOptions();
  o.threads = 2;
  BatchTrainer t(c, o);
  TrainSummary s = t.Train();
  EXPECT_EQ(s.words_done, 3 * c.tokens.size());
  EXPECT_GT(GroupSeparation(c, t, o.dim), 0.5);
}

// CBOW on a planted corpus: small vectors, three epochs, no subsampling.
TrainOptions PlantedCbowOptions() {
  TrainOptions o;
  o.model = TrainModel::kCbow;
  o.dim = 16;
  o.epochs = 3;
  o.alpha = 0.05f;
  o.sample = 0;
  o.isa = DetectBestIsa();
  return o;
}

TEST_F(BatchTrainerTest, CbowSeparatesPlantedGroups) {
  Corpus c = Load(PlantedCorpus(2000, 2));
  const TrainOptions o = PlantedCbowOptions();
  BatchTrainer t(c, o);
  t.Train();
  EXPECT_GT(GroupSeparation(c, t, o.dim), 0.5);
}

TEST_F(BatchTrainerTest, CbowLearnsWithAndWithoutSharedNegatives) {
  // negative_share 1 is word2vec's own draw per position; 2 (the CBOW default) and 4 share a
  // draw between neighbouring positions: all must learn the planted groups, and a shared draw
  // changes the result (it is not ignored).
  Corpus c = Load(PlantedCorpus(2000, 6));
  TrainOptions o = PlantedCbowOptions();
  o.threads = 1;
  const std::vector<std::vector<float>> inputs = InputsPerShare(c, o, {1, 2, 4});
  EXPECT_NE(inputs[0], inputs[1]);
  EXPECT_NE(inputs[1], inputs[2]);
  o.negative_share = 0;  // the default for CBOW: 2
  BatchTrainer d(c, o);
  d.Train();
  EXPECT_EQ(std::vector<float>(d.input(), d.input() + c.vocab.size() * d.stride()), inputs[1]);
}

TEST_F(BatchTrainerTest, OutputReplicasLearnAndReachTheSharedTable) {
  // Two threads, each on its own replica of the output table (all rows, or only the 5 most
  // frequent), merged every micro-batch, every 4, or only once at the end; each merge covering
  // all rows (the default hot rows exceed this vocabulary), or 2 hot rows and one of 3 chunks of
  // the others in turn: the groups separate, and the shared output table (zero before training)
  // holds a learnt row for every word.
  Corpus c = Load(PlantedCorpus(2000, 7));
  for (TrainModel model : {TrainModel::kCbow, TrainModel::kSkipGram}) {
    for (int sync : {1, 4, 1 << 20}) {
      for (size_t rows : {size_t{1} << 17, size_t{5}}) {
        for (size_t hot : {TrainOptions{}.replica_hot_rows, size_t{2}}) {
          TrainOptions o = PlantedCbowOptions();
          o.model = model;
          o.threads = 2;
          o.batch_tokens = 256;  // many micro-batches, so many merges
          o.replica_sync = sync;
          o.replica_rows = rows;
          o.replica_hot_rows = hot;
          o.replica_cold_period = hot == 2 ? 3 : TrainOptions{}.replica_cold_period;
          BatchTrainer t(c, o);
          t.Train();
          SCOPED_TRACE(::testing::Message() << "cbow " << (model == TrainModel::kCbow) << " sync "
                                            << sync << " rows " << rows << " hot " << hot);
          EXPECT_GT(GroupSeparation(c, t, o.dim), 0.5);
          for (uint32_t w = 0; w < c.vocab.size(); ++w) {
            const float* row = t.output() + w * t.stride();
            EXPECT_GT(std::abs(row[0]) + std::abs(row[1]) + std::abs(row[2]), 1e-3f) << w;
          }
        }
      }
    }
  }
}

TEST_F(BatchTrainerTest, SkipGramLearnsWithAndWithoutSharedNegatives) {
  // negative_share 1 is word2vec's own draw per position; 2 (the default) trains each pair of
  // neighbours with one draw as one window, and 3 leaves every third position alone: all must
  // learn the planted groups, and a shared draw changes the result.
  Corpus c = Load(PlantedCorpus(2000, 8));
  TrainOptions o = PlantedSkipGramOptions();
  o.threads = 1;
  const std::vector<std::vector<float>> inputs = InputsPerShare(c, o, {1, 2, 3});
  EXPECT_NE(inputs[0], inputs[1]);
  EXPECT_NE(inputs[1], inputs[2]);
  o.negative_share = 0;
  EXPECT_EQ(EffectiveNegativeShare(o), 2);  // window 5
  o.window = kCombinedWindowMax + 1;
  EXPECT_EQ(EffectiveNegativeShare(o), 1);  // wide windows: one draw per position
  o.model = TrainModel::kCbow;
  EXPECT_EQ(EffectiveNegativeShare(o), 2);
  o.model = TrainModel::kSkipGram;
  o.window = 5;
  BatchTrainer d(c, o);
  d.Train();
  EXPECT_EQ(std::vector<float>(d.input(), d.input() + c.vocab.size() * d.stride()), inputs[1]);
}

TEST_F(BatchTrainerTest, WideWindowsWithManyNegativesStayFinite) {
  // 3 MB of real text, 63 negatives. Radius 100: one matrix product over a window of up to 200
  // context rows overshot and diverged to NaN; blocks of kMaxContextBlock rows do not. Radius
  // 255: a frequent word 30 times in a window, one row with 30 times the gradient, grew without
  // bound; entries of at most kMaxOccurrences occurrences do not (SgnsKernel::SkipGram).
  std::ifstream in(std::string(STREAMVEC_SOURCE_DIR) + "/data/demo/enwiki-text8style-small-5m.txt");
  std::string text(3000000, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  ASSERT_EQ(text.size(), 3000000u);
  Corpus c = Load(text);
  for (int window : {100, 255}) {
    TrainOptions o;
    o.dim = 20;
    o.window = window;
    o.negative = 63;
    o.epochs = 1;
    o.threads = 2;
    o.isa = DetectBestIsa();
    BatchTrainer t(c, o);
    const TrainSummary s = t.Train();
    EXPECT_TRUE(std::isfinite(s.loss)) << "window " << window;
    for (size_t i = 0; i < c.vocab.size() * t.stride(); ++i) {
      ASSERT_TRUE(std::isfinite(t.input()[i]) && std::fabs(t.input()[i]) < 100.0f)
          << "window " << window << ", input float " << i << ": " << t.input()[i];
    }
  }
}

TEST(TrainOptionsTest, ReplicasAreTheDefaultWithSeveralThreads) {
  TrainOptions o;
  o.threads = 2;
  o.model = TrainModel::kCbow;
  EXPECT_EQ(EffectiveReplicaSync(o), kDefaultReplicaSync);
  o.model = TrainModel::kSkipGram;
  EXPECT_EQ(EffectiveReplicaSync(o), kDefaultReplicaSync);
  o.replica_sync = 0;  // word2vec's shared table on request
  EXPECT_EQ(EffectiveReplicaSync(o), 0);
  o.replica_sync = 8;
  EXPECT_EQ(EffectiveReplicaSync(o), 8);
  o.threads = 1;  // nothing to share: the shared table, deterministic training
  EXPECT_EQ(EffectiveReplicaSync(o), 0);
  // Beyond two threads the default is the shared table (the replicas' summed deltas diverged
  // with 8 and 16 threads); an explicit --replica-sync still holds.
  o.replica_sync = -1;
  o.threads = 3;
  EXPECT_EQ(EffectiveReplicaSync(o), 0);
  o.threads = 16;
  EXPECT_EQ(EffectiveReplicaSync(o), 0);
  o.replica_sync = 8;
  EXPECT_EQ(EffectiveReplicaSync(o), 8);
  o.threads = 1;
  o.model = TrainModel::kCbow;
  o.replica_sync = -1;
  EXPECT_EQ(EffectiveReplicaSync(o), 0);
}

TEST_F(BatchTrainerTest, UntrainedVectorsDoNotSeparateGroups) {
  // The check above can fail: random initial vectors show no group structure.
  Corpus c = Load(PlantedCorpus(200, 3));
  TrainOptions o;
  o.dim = 16;
  BatchTrainer t(c, o);
  EXPECT_LT(std::abs(GroupSeparation(c, t, o.dim)), 0.2);
}

TEST_F(BatchTrainerTest, OneThreadWithFixedSeedIsDeterministic) {
  Corpus c = Load(PlantedCorpus(300, 4));
  TrainOptions o;
  o.dim = 8;
  o.epochs = 2;
  o.threads = 1;
  o.isa = DetectBestIsa();
  BatchTrainer a(c, o), b(c, o);
  a.Train();
  b.Train();
  const size_t n = c.vocab.size() * a.stride();
  EXPECT_EQ(std::memcmp(a.input(), b.input(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.output(), b.output(), n * sizeof(float)), 0);
  o.seed = 2;
  BatchTrainer d(c, o);
  d.Train();
  EXPECT_NE(std::memcmp(a.input(), d.input(), n * sizeof(float)), 0);
}

TEST_F(BatchTrainerTest, ReferenceAndSimdKernelsTrainToSimilarQuality) {
  Corpus c = Load(PlantedCorpus(1000, 5));
  TrainOptions o;
  o.dim = 16;
  o.epochs = 2;
  o.sample = 0;
  o.reference_kernel = true;
  BatchTrainer ref(c, o);
  ref.Train();
  o.reference_kernel = false;
  o.isa = DetectBestIsa();
  BatchTrainer fast(c, o);
  fast.Train();
  EXPECT_NEAR(GroupSeparation(c, ref, o.dim), GroupSeparation(c, fast, o.dim), 0.02);
}

TEST(TrainOptionsTest, ValidationNamesTheFlag) {
  TrainOptions o;
  o.dim = 0;
  EXPECT_NE(ValidateTrainOptions(o).message().find("--dim"), std::string::npos);
  o = TrainOptions{};
  o.window = -1;
  EXPECT_NE(ValidateTrainOptions(o).message().find("--window"), std::string::npos);
  o = TrainOptions{};
  o.negative = 64;
  EXPECT_NE(ValidateTrainOptions(o).message().find("--negative"), std::string::npos);
  o = TrainOptions{};
  o.min_alpha = 1.0f;
  EXPECT_NE(ValidateTrainOptions(o).message().find("--min-alpha"), std::string::npos);
  o = TrainOptions{};
  o.negative_share = -1;
  EXPECT_FALSE(ValidateTrainOptions(o).ok());
  o = TrainOptions{};
  o.negative_pool = -1;
  EXPECT_NE(ValidateTrainOptions(o).message().find("--negative-pool"), std::string::npos);
  o = TrainOptions{};
  o.replica_sync = -2;
  EXPECT_NE(ValidateTrainOptions(o).message().find("--replica-sync"), std::string::npos);
  o = TrainOptions{};
  o.replica_cold_period = 0;
  EXPECT_NE(ValidateTrainOptions(o).message().find("replica_cold_period"), std::string::npos);
  EXPECT_TRUE(ValidateTrainOptions(TrainOptions{}).ok());
}

// The CUDA batch trainer (label "gpu" for the *Gpu* tests: they skip without a device) against
// the CPU one, on the same planted corpora.
class CudaBatchTrainerTest : public BatchTrainerTest {};
class CudaBatchTrainerGpuTest : public BatchTrainerTest {};

TEST_F(CudaBatchTrainerTest, WithoutADeviceFailsNamingTheCause) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  Corpus c = Load(PlantedCorpus(50, 1));
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
TEST_F(CudaBatchTrainerGpuTest, SmallRunsMatchTheCpuTrainer) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  Corpus c = Load(PlantedCorpus(3000, 5));
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
    const double sep_cpu = GroupSeparation(c, cpu, o.dim);
    const double sep_gpu = GroupSeparation(c, gpu_tables, o.dim);
    EXPECT_GT(sep_gpu, 0.5);
    EXPECT_NEAR(sep_gpu, sep_cpu, 0.1);
    EXPECT_NEAR(gs.value().loss, cs.loss, 0.1 * cs.loss);
    EXPECT_NE(gs.value().kernel.find("cuda:0"), std::string::npos);
  }
}

TEST_F(CudaBatchTrainerGpuTest, TooLargeAVocabularySaysHowManyWordsFit) {
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

#include "streamvec/trainer/streaming_learner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "planted_suffixes.h"
#include "streamvec/kernels/cuda.h"
#include "streamvec/kernels/sgns_kernel.h"

namespace streamvec {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

Status Train(StreamingLearner& learner, const std::vector<std::string>& lines, size_t batch = 7) {
  for (size_t i = 0; i < lines.size(); i += batch) {
    std::vector<std::string_view> views;
    for (size_t j = i; j < std::min(lines.size(), i + batch); ++j) views.push_back(lines[j]);
    SV_RETURN_IF_ERROR(learner.TrainMicroBatch(views));
  }
  return Status::Ok();
}

// Two groups of words that only co-occur within their group.
std::vector<std::string> PlantedLines(int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> pick(0, 9), group(0, 1);
  std::vector<std::string> lines;
  for (int s = 0; s < n; ++s) {
    const char prefix = group(gen) ? 'a' : 'b';
    std::string line;
    for (int i = 0; i < 20; ++i) line += std::string(1, prefix) + std::to_string(pick(gen)) + " ";
    lines.push_back(line);
  }
  return lines;
}

StreamingOptions Small() {
  StreamingOptions o;
  o.dim = 16;
  o.vocab_capacity = 64;
  o.min_count = 2;
  o.noise_table_size = 4096;
  o.sample = 0;
  o.isa = DetectBestIsa();
  return o;
}

using testing::Cosine;

using State = std::map<std::string, std::string>;

State Save(const StreamingLearner& learner) {
  State state;
  Status s = learner.SaveState([&state](const std::string& k, std::string_view v) {
    state[k] = std::string(v);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return state;
}

StatusOr<std::unique_ptr<StreamingLearner>> Load(const State& state) {
  return StreamingLearner::LoadState(
      [&state](const std::string& k) -> StatusOr<std::string> {
        auto it = state.find(k);
        if (it == state.end()) return Status::NotFound(k);
        return it->second;
      },
      DetectBestIsa());
}

TEST(AdagradRowUpdateTest, MatchesHandComputation) {
  // g = (0.3, -0.4): mean square 0.125; G = 0.5 + 0.125 = 0.625; lr = 0.1 / sqrt(0.625 + 1e-6).
  float row[2] = {1.0f, 2.0f};
  const float g[2] = {0.3f, -0.4f};
  float acc = 0.5f;
  AdagradRowUpdate(row, g, 2, &acc, 0.1f, 1e-6f);
  const double lr = 0.1 / std::sqrt(0.625 + 1e-6);
  EXPECT_NEAR(acc, 0.625, 1e-7);
  EXPECT_NEAR(row[0], 1.0 + lr * 0.3, 1e-6);
  EXPECT_NEAR(row[1], 2.0 - lr * 0.4, 1e-6);
  // A second identical gradient takes a smaller step: G grew.
  const float before = row[0];
  AdagradRowUpdate(row, g, 2, &acc, 0.1f, 1e-6f);
  EXPECT_NEAR(row[0] - before, 0.1 / std::sqrt(0.75 + 1e-6) * 0.3, 1e-6);
}

TEST(StreamingLearnerTest, WordIsAdmittedWhenItsCountReachesMinCount) {
  StreamingOptions o = Small();
  o.min_count = 3;
  StreamingLearner learner(o);
  ASSERT_TRUE(learner.TrainMicroBatch({"apple pear", "apple plum"}).ok());
  EXPECT_EQ(learner.Count("apple"), 2.0);
  EXPECT_FALSE(learner.Admitted("apple"));
  EXPECT_EQ(learner.InputRow("apple"), nullptr);
  ASSERT_TRUE(learner.TrainMicroBatch({"apple fig"}).ok());
  EXPECT_TRUE(learner.Admitted("apple"));
  EXPECT_NE(learner.InputRow("apple"), nullptr);
  EXPECT_FALSE(learner.Admitted("pear"));
  EXPECT_EQ(learner.stats().admitted, 1u);
}

// AdmittedSlotsBySlot: AdmittedSlots' slots and counts in slot order, WordAt their words.
TEST(StreamingLearnerTest, AdmittedSlotsBySlotMatchAdmittedSlots) {
  StreamingOptions o = Small();
  StreamingLearner learner(o);
  ASSERT_TRUE(learner.TrainMicroBatch({"x y y z z z w", "y z z w v"}).ok());
  std::vector<std::string> words;
  std::vector<uint32_t> slots, by_slot;
  std::vector<double> counts, by_slot_counts;
  learner.AdmittedSlots(&words, &slots, &counts);
  learner.AdmittedSlotsBySlot(&by_slot, &by_slot_counts);
  ASSERT_EQ(slots.size(), 3u);  // z, y, w (x and v once: below min_count 2)
  std::map<uint32_t, std::pair<std::string, double>> expected;
  for (size_t i = 0; i < slots.size(); ++i) expected[slots[i]] = {words[i], counts[i]};
  ASSERT_EQ(by_slot.size(), expected.size());
  size_t i = 0;
  for (const auto& [slot, word_count] : expected) {
    EXPECT_EQ(by_slot[i], slot);
    EXPECT_EQ(learner.WordAt(slot), word_count.first);
    EXPECT_EQ(by_slot_counts[i], word_count.second);
    ++i;
  }
}

// A trainer of a group (SetGroupCounts): a word is admitted by its own guaranteed count plus
// the rest of the group's, and weighed in the noise table by both; a lone learner, or a word the
// group does not count, by its own alone.
TEST(StreamingLearnerTest, GroupCountsAdmitWordsAndWeighTheNoiseTable) {
  StreamingOptions o = Small();
  o.min_count = 5;
  o.noise_table_size = 1 << 16;  // not full: each count^0.75 increase appends its copies
  StreamingLearner learner(o);
  std::map<std::string, double, std::less<>> known = {{"kiwi", 9.0}};
  learner.SetGroupCounts([&known](std::string_view w) {
    const auto it = known.find(w);
    return it == known.end() ? 0.0 : it->second;
  });
  ASSERT_TRUE(learner.TrainMicroBatch({"apple pear apple", "kiwi pear"}).ok());
  // "kiwi": seen once here, counted 9 times by the others when it took its slot.
  EXPECT_EQ(learner.GroupCount("kiwi"), 9.0);
  EXPECT_TRUE(learner.Admitted("kiwi"));
  EXPECT_FALSE(learner.Admitted("apple"));  // 2 of 5
  EXPECT_FALSE(learner.Admitted("pear"));
  // Raised: 2 + 3 reaches min_count; a lower count later is ignored.
  EXPECT_TRUE(learner.SetGroupCount("apple", 3.0));
  EXPECT_TRUE(learner.Admitted("apple"));
  EXPECT_FALSE(learner.SetGroupCount("apple", 1.0));
  EXPECT_EQ(learner.GroupCount("apple"), 3.0);
  EXPECT_FALSE(learner.SetGroupCount("plum", 50.0));  // not held
  EXPECT_FALSE(learner.SetGroupCount("pear", -1.0));
  EXPECT_FALSE(learner.Admitted("pear"));
  // The noise table weighs "pear" (2 + 400) far above "apple" (2 + 3).
  EXPECT_TRUE(learner.SetGroupCount("pear", 400.0));
  EXPECT_GT(learner.NoiseProbability("pear"), 10 * learner.NoiseProbability("apple"));
  EXPECT_EQ(learner.stats().admitted, 3u);  // apple, pear and kiwi
  // Alone (SetGroupCounts never called): own counts only.
  StreamingLearner alone(o);
  ASSERT_TRUE(alone.TrainMicroBatch({"apple pear apple", "kiwi pear"}).ok());
  EXPECT_FALSE(alone.Admitted("kiwi"));
  EXPECT_EQ(alone.GroupCount("kiwi"), 0.0);
  EXPECT_FALSE(alone.SetGroupCount("apple", 3.0));
  EXPECT_FALSE(alone.Admitted("apple"));
  EXPECT_EQ(alone.stats().admitted, 0u);
}

TEST(StreamingLearnerTest, EvictionKeepsHeavyHittersAndBoundsMemory) {
  StreamingOptions o = Small();
  o.vocab_capacity = 32;
  StreamingLearner learner(o);
  // 8 heavy words in every line, then a new rare word never seen again.
  int rare = 0;
  auto feed = [&](int lines) {
    std::vector<std::string> text;
    for (int i = 0; i < lines; ++i) {
      const std::string r1 = "rare" + std::to_string(rare++);
      const std::string r2 = "rare" + std::to_string(rare++);
      text.push_back("h0 h1 h2 h3 h4 h5 h6 h7 " + r1 + " " + r2);
    }
    return Train(learner, text);
  };
  ASSERT_TRUE(feed(200).ok());
  const size_t memory_early = learner.MemoryBytes();
  ASSERT_TRUE(feed(5000).ok());
  EXPECT_LE(learner.stats().vocab_size, 32u);
  EXPECT_GT(learner.stats().evictions, 10000u);
  for (int h = 0; h < 8; ++h) {
    const std::string w = "h" + std::to_string(h);
    EXPECT_TRUE(learner.Admitted(w)) << w;
    EXPECT_GE(learner.Count(w), 5200.0) << w;  // space-saving never undercounts
  }
  // Rare words come and go; the table does not grow with the stream.
  EXPECT_LE(learner.MemoryBytes(), memory_early + 4096);
  EXPECT_FALSE(learner.Admitted("rare5"));
}

TEST(StreamingLearnerTest, DecayedCountsConvergeAcrossRescales) {
  StreamingOptions o = Small();
  o.count_half_life = 10;  // rescaled every 640 words
  o.min_count = 5;
  StreamingLearner learner(o);
  std::vector<std::string> lines(500, "a a a a a a a a a a");  // 5000 words, only "a"
  ASSERT_TRUE(Train(learner, lines).ok());
  // A word seen at every step converges to sum_k 2^(-k/10) = 1 / (1 - 2^(-1/10)) = 14.93.
  EXPECT_NEAR(learner.Count("a"), 1.0 / (1.0 - std::exp2(-0.1)), 1e-6);
  EXPECT_TRUE(learner.Admitted("a"));
  // 100 other words later "a" has decayed to 2^-10 of that: below --min-count, not trained.
  std::string bs;
  for (int i = 0; i < 100; ++i) bs += "b ";
  ASSERT_TRUE(learner.TrainMicroBatch({bs}).ok());
  EXPECT_NEAR(learner.Count("a"), 14.93 / 1024, 1e-3);
  EXPECT_FALSE(learner.Admitted("a"));
}

TEST(StreamingLearnerTest, EvictedWordGetsFreshRows) {
  StreamingOptions o = Small();
  o.vocab_capacity = 4;
  o.min_count = 1;
  StreamingLearner learner(o);
  ASSERT_TRUE(learner.TrainMicroBatch({"a b c d a b c d a b c d"}).ok());
  ASSERT_NE(learner.InputRow("d"), nullptr);
  // "e" takes the slot of the least frequent word and starts from a fresh small row.
  ASSERT_TRUE(learner.TrainMicroBatch({"e"}).ok());
  EXPECT_EQ(learner.stats().evictions, 1u);
  const float* row = learner.InputRow("e");
  ASSERT_NE(row, nullptr);
  for (int j = 0; j < o.dim; ++j) EXPECT_LE(std::fabs(row[j]), 0.5f / o.dim);
}

TEST(StreamingLearnerTest, AdaptiveNoiseTableFollowsChangingCounts) {
  StreamingOptions o = Small();
  o.noise_table_size = 512;
  o.min_count = 1;
  StreamingLearner learner(o);
  std::vector<std::string> first(300, "x x x x y"), second(3000, "y y y y x");
  ASSERT_TRUE(Train(learner, first).ok());
  const double x_early = learner.NoiseProbability("x");
  const double y_early = learner.NoiseProbability("y");
  EXPECT_GT(x_early, y_early);
  ASSERT_TRUE(Train(learner, second).ok());
  // Counts now 4200 x / 12300 y: the table's share moves towards count^0.75 (0.31 / 0.69).
  EXPECT_LT(learner.NoiseProbability("x"), x_early);
  EXPECT_GT(learner.NoiseProbability("y"), 0.6);
}

TEST(StreamingLearnerTest, SubsamplingUsesRunningCounts) {
  StreamingOptions o = Small();
  o.sample = 1e-3;
  o.min_count = 1;
  StreamingLearner learner(o);
  std::vector<std::string> lines(500, "the the the the the the the the cat dog");
  ASSERT_TRUE(Train(learner, lines).ok());
  const StreamingStats st = learner.stats();
  EXPECT_EQ(st.words_seen, 5000u);
  // "the" (80% of the stream) is kept with probability ~ sqrt(1.25e-3) + 1.25e-3 ~ 0.037.
  EXPECT_LT(st.words_trained, 2000u);
}

// Mean cosine within the planted groups minus across them, from the learner's input rows.
// -1 when a planted word has no row.
double PlantedSeparation(const StreamingLearner& learner, int dim) {
  double within = 0, across = 0;
  int nw = 0, na = 0;
  for (int i = 0; i < 10; ++i) {
    for (int j = 0; j < 10; ++j) {
      const float* ai = learner.InputRow("a" + std::to_string(i));
      const float* aj = learner.InputRow("a" + std::to_string(j));
      const float* bj = learner.InputRow("b" + std::to_string(j));
      if (!(ai && aj && bj)) return -1.0;
      if (i != j) {
        within += Cosine(ai, aj, dim);
        ++nw;
      }
      across += Cosine(ai, bj, dim);
      ++na;
    }
  }
  return within / nw - across / na;
}

TEST(StreamingLearnerTest, LearnsPlantedGroupsWithAdagradAndConstantRateOnOneOrTwoThreads) {
  for (int variant = 0; variant < 4; ++variant) {
    const StreamOptimizer opt = variant % 2 ? StreamOptimizer::kConstant : StreamOptimizer::kAdagrad;
    StreamingOptions o = Small();
    o.optimizer = opt;
    o.threads = variant < 2 ? 1 : 2;
    StreamingLearner learner(o);
    ASSERT_TRUE(Train(learner, PlantedLines(3000, 3)).ok());
    EXPECT_GT(PlantedSeparation(learner, o.dim), 0.3) << "variant " << variant;
    EXPECT_EQ(learner.stats().words_seen, 3000u * 20u);
    EXPECT_GT(learner.stats().loss, 0.0);
  }
}

TEST(StreamingLearnerTest, DeviceNeedsAdagradAndASupportedDim) {
  StreamingOptions o = Small();
  o.cuda_device = 0;
  o.optimizer = StreamOptimizer::kConstant;
  Status s = ValidateStreamingOptions(o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--device"), std::string::npos) << s.message();
  o.optimizer = StreamOptimizer::kAdagrad;
  o.dim = 2000;
  EXPECT_FALSE(ValidateStreamingOptions(o).ok());
  if (CudaDeviceCount() == 0) {  // without a device the learner says why (and trains on the CPU)
    o.dim = 16;
    StreamingLearner learner(o);
    EXPECT_FALSE(learner.device_status().ok());
  }
}

// The learner with its rows on the device: the same planted groups learnt as on the CPU, every
// word counted, a loss reported.
TEST(StreamingLearnerGpuTest, LearnsPlantedGroupsOnTheDeviceAsOnTheCpu) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  StreamingOptions o = Small();
  StreamingLearner cpu(o);
  o.cuda_device = 0;
  StreamingLearner gpu(o);
  ASSERT_TRUE(gpu.device_status().ok()) << gpu.device_status().ToString();
  const std::vector<std::string> lines = PlantedLines(3000, 3);
  ASSERT_TRUE(Train(cpu, lines).ok());
  ASSERT_TRUE(Train(gpu, lines).ok());
  ASSERT_TRUE(gpu.FinishStream().ok());
  const double sep_cpu = PlantedSeparation(cpu, o.dim), sep_gpu = PlantedSeparation(gpu, o.dim);
  EXPECT_GT(sep_gpu, 0.3);
  EXPECT_NEAR(sep_gpu, sep_cpu, 0.15);
  EXPECT_EQ(gpu.stats().words_seen, cpu.stats().words_seen);
  EXPECT_EQ(gpu.stats().words_trained, cpu.stats().words_trained);
  EXPECT_GT(gpu.TakeLoss(), 0.0);
  EXPECT_TRUE(gpu.device_status().ok());
}

// A device learner's state is the same bytes a CPU learner loaded from it writes again (rows
// and accumulators came back, in the host layout: packed at dim 16, in the rows' padding at dim
// 37), and a learner loaded onto the device trains on from it.
TEST(StreamingLearnerGpuTest, DeviceStateSavesLoadsAndResumes) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  for (int dim : {16, 37}) {
    StreamingOptions o = Small();
    o.dim = dim;
    o.cuda_device = 0;
    StreamingLearner gpu(o);
    ASSERT_TRUE(Train(gpu, PlantedLines(500, 1)).ok());
    ASSERT_TRUE(gpu.FinishStream().ok());
    const State state = Save(gpu);
    auto cpu = Load(state);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    EXPECT_EQ(Save(*cpu.value()), state) << "dim " << dim;
    const float* a = gpu.InputRow("a1");
    const float* b = cpu.value()->InputRow("a1");
    ASSERT_TRUE(a && b);
    for (int j = 0; j < dim; ++j) EXPECT_EQ(a[j], b[j]);
    auto resumed = StreamingLearner::LoadState(
        [&state](const std::string& k) -> StatusOr<std::string> {
          auto it = state.find(k);
          if (it == state.end()) return Status::NotFound(k);
          return it->second;
        },
        DetectBestIsa(), 1, 0);
    ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
    const std::vector<float> before(b, b + dim);
    ASSERT_TRUE(Train(*resumed.value(), PlantedLines(500, 2)).ok());
    const float* after = resumed.value()->InputRow("a1");
    ASSERT_NE(after, nullptr);
    float moved = 0;
    for (int j = 0; j < dim; ++j) moved = std::max(moved, std::fabs(after[j] - before[j]));
    EXPECT_GT(moved, 1e-4f);
  }
}

TEST(StreamingLearnerTest, Avx2AdagradStepMatchesThePortableStep) {
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  StreamingOptions o = Small();
  o.isa = Isa::kPortable;
  StreamingLearner portable(o);
  o.isa = Isa::kAvx2;
  StreamingLearner avx2(o);
  const std::vector<std::string> lines = PlantedLines(60, 9);
  ASSERT_TRUE(Train(portable, lines).ok());
  ASSERT_TRUE(Train(avx2, lines).ok());
  std::vector<std::string> w1, w2;
  std::vector<float> v1, v2;
  portable.ExportVectors(&w1, &v1);
  avx2.ExportVectors(&w2, &v2);
  ASSERT_EQ(w1, w2);
  ASSERT_FALSE(v1.empty());
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < v1.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(v1[i] - v2[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(v1[i])));
  }
  EXPECT_LT(max_diff, 1e-3 * max_abs) << "rounding differences only (FMA, summation order)";
}

// The state as a version that kept the Adagrad accumulators only in the 'vocab' entry wrote it:
// every row's padding (floats dim .. stride) zero.
State WithZeroPadding(State state, int dim) {
  const size_t stride = PaddedStride(dim);
  for (auto& [key, value] : state) {
    if (key.rfind("input/", 0) != 0 && key.rfind("output/", 0) != 0) continue;
    std::vector<float> rows(value.size() / sizeof(float));
    std::memcpy(rows.data(), value.data(), value.size());
    for (size_t r = 0; r * stride < rows.size(); ++r) {
      std::fill(rows.begin() + r * stride + dim, rows.begin() + (r + 1) * stride, 0.0f);
    }
    value.assign(reinterpret_cast<const char*>(rows.data()), value.size());
  }
  return state;
}

// dim 16: no padding (accumulators in arrays); dim 21: accumulators in the rows' padding; a state
// whose rows carry no accumulators (written before they moved there) resumes the same.
TEST(StreamingLearnerTest, ResumedRunIsBitIdenticalToOneRun) {
  const std::vector<std::string> a = PlantedLines(400, 1), b = PlantedLines(400, 2);
  for (const auto& [opt, dim] : std::vector<std::pair<StreamOptimizer, int>>{
           {StreamOptimizer::kAdagrad, 16},
           {StreamOptimizer::kAdagrad, 21},
           {StreamOptimizer::kConstant, 16}}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    StreamingOptions o = Small();
    o.dim = dim;
    o.optimizer = opt;
    o.vocab_capacity = 16;  // below the 20 words: evictions happen in both parts
    o.count_half_life = 100;  // counts are rescaled every 6400 words: within both parts
    o.sample = 0.05;
    StreamingLearner one_run(o);
    ASSERT_TRUE(Train(one_run, a).ok());
    ASSERT_TRUE(Train(one_run, b).ok());

    StreamingLearner first(o);
    ASSERT_TRUE(Train(first, a).ok());
    const State state = Save(first);
    auto resumed = Load(state);
    ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
    ASSERT_TRUE(Train(**resumed, b, 5).ok());  // another batch cut: same sentences

    std::vector<std::string> w1, w2;
    std::vector<float> v1, v2;
    one_run.ExportVectors(&w1, &v1);
    (*resumed)->ExportVectors(&w2, &v2);
    ASSERT_FALSE(w1.empty());
    EXPECT_EQ(w1, w2);
    ASSERT_EQ(v1.size(), v2.size());
    EXPECT_EQ(std::memcmp(v1.data(), v2.data(), v1.size() * sizeof(float)), 0);
    EXPECT_GT(one_run.stats().evictions, 0u);
    EXPECT_EQ(one_run.stats().words_seen, (*resumed)->stats().words_seen);
    // The saved state of both is the same too (counts, noise table, RNG, optimizer).
    EXPECT_EQ(Save(one_run), Save(**resumed));

    auto from_old = Load(WithZeroPadding(state, dim));
    ASSERT_TRUE(from_old.ok()) << from_old.status().ToString();
    ASSERT_TRUE(Train(**from_old, b, 5).ok());
    std::vector<std::string> w3;
    std::vector<float> v3;
    (*from_old)->ExportVectors(&w3, &v3);
    EXPECT_EQ(w1, w3);
    ASSERT_EQ(v1.size(), v3.size());
    EXPECT_EQ(std::memcmp(v1.data(), v3.data(), v1.size() * sizeof(float)), 0);
  }
}

TEST(StreamingLearnerTest, WorkerThreadsAreDrainedBeforeSaving) {
  StreamingOptions o = Small();
  o.threads = 2;
  StreamingLearner learner(o);
  ASSERT_TRUE(Train(learner, PlantedLines(500, 4)).ok());
  const State state = Save(learner);
  auto loaded = Load(state);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  // The saved rows are the learner's rows: no update was still in flight.
  std::vector<std::string> w1, w2;
  std::vector<float> v1, v2;
  learner.ExportVectors(&w1, &v1);
  (*loaded)->ExportVectors(&w2, &v2);
  EXPECT_EQ(w1, w2);
  EXPECT_EQ(v1, v2);
  EXPECT_EQ((*loaded)->options().threads, 1);  // a runtime choice, not saved
}

// InputRowNoWait finds the same row as InputRow, for the same words, without waiting for the
// workers: the row's values may lag the queued training, its place does not.
TEST(StreamingLearnerTest, InputRowNoWaitFindsInputRowsRow) {
  StreamingOptions o = Small();
  o.threads = 2;
  o.min_count = 3;
  StreamingLearner learner(o);
  ASSERT_TRUE(Train(learner, PlantedLines(500, 4)).ok());
  std::vector<std::string> words;
  std::vector<uint32_t> slots;
  std::vector<double> counts;
  learner.AdmittedSlots(&words, &slots, &counts);
  ASSERT_GT(words.size(), 5u);
  for (const std::string& w : words) {
    const float* row = learner.InputRowNoWait(w);
    ASSERT_NE(row, nullptr) << w;
    EXPECT_EQ(row, learner.InputRow(w)) << w;
  }
  ASSERT_TRUE(learner.TrainMicroBatch({"rare1 rare1 rare2"}).ok());
  EXPECT_EQ(learner.InputRowNoWait("rare1"), nullptr);  // held, not admitted
  EXPECT_EQ(learner.InputRowNoWait("never-seen"), nullptr);
}

// AdmittedSlotsNoWait reads the vocabulary as it stands, training queued or not: the slots and
// counts of AdmittedSlotsBySlot, and after a micro-batch that admits a word, that word too.
TEST(StreamingLearnerTest, AdmittedSlotsNoWaitReadsTheVocabularyWithTrainingQueued) {
  StreamingOptions o = Small();
  o.threads = 2;
  o.min_count = 3;
  StreamingLearner learner(o);
  ASSERT_TRUE(Train(learner, PlantedLines(500, 4)).ok());
  ASSERT_TRUE(learner.TrainMicroBatch({"newword newword newword"}).ok());  // maybe queued
  std::vector<uint32_t> slots, waited_slots;
  std::vector<double> counts, waited_counts;
  learner.AdmittedSlotsNoWait(&slots, &counts);
  learner.AdmittedSlotsBySlot(&waited_slots, &waited_counts);
  ASSERT_GT(slots.size(), 5u);
  EXPECT_EQ(slots, waited_slots);
  EXPECT_EQ(counts, waited_counts);
  std::vector<std::string_view> words;
  for (uint32_t s : slots) words.push_back(learner.WordAt(s));
  EXPECT_NE(std::find(words.begin(), words.end(), "newword"), words.end());
  ASSERT_TRUE(learner.TrainMicroBatch({"rare1 rare1"}).ok());
  learner.AdmittedSlotsNoWait(&slots, &counts);
  for (uint32_t s : slots) EXPECT_NE(learner.WordAt(s), "rare1");  // held, not admitted
}

TEST(StreamingLearnerTest, LoadStateRejectsMissingAndMalformedEntries) {
  StreamingLearner learner(Small());
  ASSERT_TRUE(Train(learner, PlantedLines(50, 1)).ok());
  State state = Save(learner);
  State no_vocab = state;
  no_vocab.erase("vocab");
  auto r1 = Load(no_vocab);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r1.status().message().find("vocab"), std::string::npos);
  State bad_rows = state;
  bad_rows["input/00000000"].resize(10);
  EXPECT_EQ(Load(bad_rows).status().code(), StatusCode::kCorruption);
  State foreign = state;
  foreign["config"] = "hello=world\n";
  EXPECT_EQ(Load(foreign).status().code(), StatusCode::kCorruption);
  // The chunked noise table: a size that is not a number or exceeds the table, a short chunk.
  for (const char* size : {"12x", "999999999"}) {
    State bad_size = state;
    bad_size["noise_size"] = size;
    auto r = Load(bad_size);
    ASSERT_FALSE(r.ok()) << size;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << size;
    EXPECT_NE(r.status().message().find("noise_size"), std::string::npos) << r.status().message();
  }
  State short_noise = state;
  ASSERT_TRUE(short_noise.count("noise/00000000"));
  short_noise["noise/00000000"].resize(short_noise["noise/00000000"].size() - 4);
  auto r2 = Load(short_noise);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r2.status().message().find("noise/00000000"), std::string::npos)
      << r2.status().message();
  // The pool of negatives: [pool_left u64][size u64][size u32 slots], little-endian. Cut short,
  // a trailing byte, a countdown past the pool's period, a size past --negative-pool, a slot
  // past the vocabulary: each is Corruption naming the entry. Without the entry (a state
  // written before the pool) the learner loads and draws a pool afresh.
  ASSERT_TRUE(state.count("negative_pool"));
  const std::string pool = state.at("negative_pool");
  ASSERT_GT(pool.size(), 16u);  // a pool was drawn
  auto with_u64 = [&pool](size_t at, uint64_t v) {
    std::string p = pool;
    for (int b = 0; b < 8; ++b) p[at + b] = static_cast<char>((v >> (8 * b)) & 0xFF);
    return p;
  };
  std::string bad_slot = pool;
  for (size_t b = pool.size() - 4; b < pool.size(); ++b) bad_slot[b] = '\xFF';
  const std::vector<std::string> bad_pools = {pool.substr(0, pool.size() - 1), pool + "x",
                                              with_u64(0, 1u << 20), with_u64(8, 1u << 21),
                                              bad_slot};
  for (size_t i = 0; i < bad_pools.size(); ++i) {
    State bad = state;
    bad["negative_pool"] = bad_pools[i];
    auto r = Load(bad);
    ASSERT_FALSE(r.ok()) << i;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << i;
    EXPECT_NE(r.status().message().find("state entry 'negative_pool' is malformed"),
              std::string::npos)
        << i << ": " << r.status().message();
  }
  State no_pool = state;
  no_pool.erase("negative_pool");
  EXPECT_TRUE(Load(no_pool).ok());
}

// States written before entries were kept small (one 'noise' entry, rows in 4 MiB chunks) and
// states with any other whole-row chunking load to the same learner.
TEST(StreamingLearnerTest, LoadStateAcceptsEarlierAndOtherChunkings) {
  StreamingOptions o = Small();
  o.dim = 100;           // 448-byte rows: several 256 KiB chunks per table
  o.vocab_capacity = 2000;
  o.min_count = 1;
  StreamingLearner learner(o);
  std::vector<std::string> lines;
  for (int s = 0; s < 300; ++s) {
    std::string line;
    for (int i = 0; i < 20; ++i) line += "w" + std::to_string((s * 37 + i * 11) % 1500) + " ";
    lines.push_back(line);
  }
  ASSERT_TRUE(Train(learner, lines).ok());
  const State state = Save(learner);
  ASSERT_TRUE(state.count("input/00000001")) << "more than one row chunk";
  ASSERT_TRUE(state.count("noise_size"));
  // Re-chunk: one 'noise' entry, and all rows of a table in one entry.
  State earlier;
  for (const auto& [k, v] : state) {
    if (k == "noise_size") continue;
    const std::string table = k.substr(0, k.find('/'));
    if (table == "noise" || table == "input" || table == "output") {
      earlier[table == "noise" ? "noise" : table + "/00000000"] += v;
    } else {
      earlier[k] = v;
    }
  }
  auto loaded = Load(earlier);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(Save(**loaded), state);
  State cut = earlier;
  cut["input/00000000"].resize(cut["input/00000000"].size() - 448);  // a row short
  EXPECT_EQ(Load(cut).status().code(), StatusCode::kCorruption);
}

TEST(StreamingLearnerTest, InvalidUtf8AndBinaryGarbageAreSkippedAndCounted) {
  StreamingOptions o = Small();
  o.min_count = 1;
  StreamingLearner learner(o);
  // Invalid: "\xff\xfe", "bad\xc3" (truncated sequence), "\0\x01\x02" (NUL), "\x80\x81".
  std::string garbage = "good \xff\xfe bad\xc3 word ";
  garbage += std::string("\0\x01\x02 ok", 6);
  ASSERT_TRUE(learner.TrainChunk(garbage).ok());
  ASSERT_TRUE(learner.TrainChunk(" \x80\x81\n more words\n").ok());
  ASSERT_TRUE(learner.FinishStream().ok());
  const StreamingStats st = learner.stats();
  EXPECT_EQ(st.invalid_tokens, 4u);
  EXPECT_TRUE(learner.Admitted("good"));
  EXPECT_TRUE(learner.Admitted("word"));
  EXPECT_TRUE(learner.Admitted("ok"));
  EXPECT_TRUE(learner.Admitted("words"));
  EXPECT_EQ(st.words_seen, 5u);
}

TEST(StreamingLearnerTest, DriftingStreamAdmitsNewWordsAndEvictsOldOnes) {
  StreamingOptions o = Small();
  o.vocab_capacity = 1000;  // each part holds about 4000 distinct words
  o.min_count = 5;
  o.count_half_life = 5000;
  StreamingLearner learner(o);
  const std::string dir = std::string(STREAMVEC_TEST_DATA) + "/streaming/";
  ASSERT_TRUE(Train(learner, Lines(ReadFile(dir + "shakespeare-80k.txt")), 64).ok());
  EXPECT_TRUE(learner.Admitted("thy"));
  EXPECT_TRUE(learner.Admitted("Marcius"));
  EXPECT_FALSE(learner.Admitted("anarchism"));
  ASSERT_TRUE(Train(learner, Lines(ReadFile(dir + "wiki-80k.txt")), 64).ok());
  // Words of the second part are admitted; words only of the first are gone.
  for (const char* w : {"anarchism", "political", "state", "autism"}) {
    EXPECT_TRUE(learner.Admitted(w)) << w;
  }
  for (const char* w : {"thou", "thy", "Marcius"}) {
    EXPECT_EQ(learner.Count(w), 0.0) << w;
  }
  EXPECT_LE(learner.stats().vocab_size, 1000u);
}

}  // namespace
}  // namespace streamvec

// The character model as SGNS's input side (--model char-lstm): a planted suffix carries over
// to unseen words in both modes, sum mode starts as plain SGNS, the serving rows are the model's
// vectors, and a resumed run is identical.
#include "streamvec/trainer/char_sgns.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "planted_suffixes.h"
#include "streamvec/base/cpu_features.h"
#include "streamvec/kernels/cuda.h"
#include "streamvec/store/embedding_entries.h"
#include "streamvec/trainer/char_distiller.h"

namespace streamvec {
namespace {

using testing::Cosine;
using testing::From;
using testing::PlantedSentences;
using testing::Stems;
using State = testing::State;

using testing::PlantedLearnerOptions;

CharSgnsOptions Char(CharMode mode) {
  CharSgnsOptions c;
  c.model.dim = 16;
  c.model.char_dim = 16;
  c.model.hidden = 32;
  c.model.learning_rate = 1e-2f;
  c.mode = mode;
  c.batch_words = 60;  // about ten sentences a step
  return c;
}

// Micro-batches of 20 sentences (as the Kafka trainer hands them over).
Status Train(StreamingLearner& learner, CharSgns& char_sgns,
             const std::vector<std::string>& lines) {
  for (size_t i = 0; i < lines.size(); i += 20) {
    std::vector<std::string_view> batch;
    for (size_t j = i; j < std::min(lines.size(), i + 20); ++j) batch.push_back(lines[j]);
    SV_RETURN_IF_ERROR(char_sgns.TrainMicroBatch(&learner, batch));
  }
  return Status::Ok();
}

State Save(const StreamingLearner& learner, const CharSgns& char_sgns, bool checkpoint) {
  State state;
  const StateSink sink = testing::Into(&state);
  EXPECT_TRUE(learner.SaveState(sink).ok());
  EXPECT_TRUE(char_sgns.Save(sink, checkpoint).ok());
  return state;
}

class CharSgnsModeTest : public ::testing::TestWithParam<CharMode> {};

// Trains the planted suffixes (the character model on CUDA device `device`, or the CPU for -1)
// and checks that unseen words land near their suffix's group.
void ExpectUnseenWordsLandNearTheirGroup(CharMode mode, int device) {
  const std::vector<std::string> stems = Stems(40, 1), unseen = Stems(30, 2);
  StreamingLearner learner(PlantedLearnerOptions());
  CharSgns char_sgns(Char(mode), /*threads=*/1);
  if (device >= 0) {
    ASSERT_TRUE(char_sgns.UseCudaDevice(device).ok());
  }
  ASSERT_TRUE(Train(learner, char_sgns, PlantedSentences(stems, 6000, 3)).ok());
  ASSERT_GT(char_sgns.stats().steps, 500u);
  // The groups' centroids among the served vectors.
  std::vector<std::string> words;
  std::vector<float> vectors;
  ASSERT_TRUE(char_sgns.ExportVectors(learner, &words, &vectors).ok());
  std::map<std::string, const float*> served;
  for (size_t i = 0; i < words.size(); ++i) served[words[i]] = vectors.data() + i * 16;
  std::vector<double> ca(16, 0), cb(16, 0);
  for (const std::string& s : stems) {
    ASSERT_TRUE(served.count(s + "ing") && served.count(s + "ed")) << s;
    for (int j = 0; j < 16; ++j) {
      ca[j] += served[s + "ing"][j];
      cb[j] += served[s + "ed"][j];
    }
  }
  std::vector<float> fa(ca.begin(), ca.end()), fb(cb.begin(), cb.end());
  ASSERT_LT(Cosine(fa.data(), fb.data(), 16), 0.5) << "the groups are not apart";
  int right = 0, total = 0;
  for (const std::string& s : unseen) {
    std::vector<float> v;
    ASSERT_TRUE(char_sgns.model().Encode({s + "ing", s + "ed"}, &v).ok());
    right += Cosine(v.data(), fa.data(), 16) > Cosine(v.data(), fb.data(), 16);
    right += Cosine(v.data() + 16, fb.data(), 16) > Cosine(v.data() + 16, fa.data(), 16);
    total += 2;
  }
  EXPECT_GE(right, total * 9 / 10) << right << " of " << total;
}

TEST_P(CharSgnsModeTest, UnseenWordsWithAPlantedSuffixLandNearTheirGroup) {
  ExpectUnseenWordsLandNearTheirGroup(GetParam(), -1);
}

// The same with the character model's passes on a CUDA device (label gpu; skips without one).
TEST_P(CharSgnsModeTest, GpuUnseenWordsWithAPlantedSuffixLandNearTheirGroup) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  ExpectUnseenWordsLandNearTheirGroup(GetParam(), 0);
}

TEST_P(CharSgnsModeTest, ResumedRunIsBitIdenticalToOneRun) {
  const std::vector<std::string> stems = Stems(20, 6);
  const std::vector<std::string> a = PlantedSentences(stems, 600, 7),
                                 b = PlantedSentences(stems, 600, 8);
  StreamingLearner one_learner(PlantedLearnerOptions());
  CharSgns one(Char(GetParam()), 1);
  ASSERT_TRUE(Train(one_learner, one, a).ok());
  (void)Save(one_learner, one, /*checkpoint=*/true);  // as the trainer does
  ASSERT_TRUE(Train(one_learner, one, b).ok());

  StreamingLearner first(PlantedLearnerOptions());
  CharSgns first_char(Char(GetParam()), 1);
  ASSERT_TRUE(Train(first, first_char, a).ok());
  const State state = Save(first, first_char, /*checkpoint=*/true);
  auto learner = StreamingLearner::LoadState(From(state), DetectBestIsa());
  ASSERT_TRUE(learner.ok()) << learner.status().ToString();
  auto resumed = CharSgns::Load(From(state), 1);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ((*resumed)->options().mode, GetParam());
  EXPECT_EQ((*resumed)->options().batch_words, 60u);
  ASSERT_TRUE(Train(**learner, **resumed, b).ok());
  EXPECT_GT(one.stats().steps, 10u);
  EXPECT_EQ((*resumed)->stats().steps, one.stats().steps);
  EXPECT_TRUE((*resumed)->model().Serialize(true) == one.model().Serialize(true));
  std::vector<std::string> w1, w2;
  std::vector<float> v1, v2;
  ASSERT_TRUE(one.ExportVectors(one_learner, &w1, &v1).ok());
  ASSERT_TRUE((*resumed)->ExportVectors(**learner, &w2, &v2).ok());
  EXPECT_EQ(w1, w2);
  EXPECT_TRUE(v1 == v2);
}

TEST_P(CharSgnsModeTest, ServingEntriesHoldTheServedVectorsAndTheModel) {
  const std::vector<std::string> stems = Stems(20, 4);
  StreamingLearner learner(PlantedLearnerOptions());
  CharSgns char_sgns(Char(GetParam()), 1);
  ASSERT_TRUE(Train(learner, char_sgns, PlantedSentences(stems, 400, 5)).ok());
  State serving;
  const StateSink sink = testing::Into(&serving);
  ASSERT_TRUE(char_sgns.WriteServingEntries(learner, sink).ok());
  ASSERT_TRUE(char_sgns.Save(sink, /*checkpoint=*/false).ok());
  EXPECT_EQ(serving.count(kCharModelEntry), 1u);
  EXPECT_EQ(serving.count(kCharModelStateEntry), 0u);
  EXPECT_EQ(CharSgns::Load(From(serving), 1).status().code(), StatusCode::kNotFound);
  auto e = ReadEmbeddingEntries(From(serving));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  std::vector<std::string> words;
  std::vector<float> vectors;
  ASSERT_TRUE(char_sgns.ExportVectors(learner, &words, &vectors).ok());
  ASSERT_EQ(e->words, words);
  ASSERT_EQ(e->dim, 16);
  for (size_t i = 0; i < words.size(); ++i) {
    for (int j = 0; j < 16; ++j) {
      ASSERT_EQ(e->vectors[i * 16 + j], vectors[i * 16 + j]) << words[i];
    }
  }
  // Replace mode serves the model's vector of a table word; sum mode its row plus that vector.
  // Encoding one word runs a matrix product of another shape than the export's batch, and
  // BLAS kernels chosen per CPU may round it differently in the last bits: compare to 1e-5.
  std::vector<float> c;
  ASSERT_TRUE(char_sgns.model().Encode({words[0]}, &c).ok());
  const float* row = learner.InputRow(words[0]);
  for (int j = 0; j < 16; ++j) {
    const float want = GetParam() == CharMode::kSum ? row[j] + c[j] : c[j];
    EXPECT_NEAR(vectors[j], want, 1e-5f * (1.0f + std::fabs(want))) << j;
  }
  float row_norm = 0.0f;  // the tolerance is far below what tells the two modes apart
  for (int j = 0; j < 16; ++j) row_norm += row[j] * row[j];
  EXPECT_GT(std::sqrt(row_norm), 1e-2f);
  auto model = CharModel::Deserialize(serving.at(kCharModelEntry));
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->Serialize(false), char_sgns.model().Serialize(false));
}

INSTANTIATE_TEST_SUITE_P(Modes, CharSgnsModeTest,
                         ::testing::Values(CharMode::kReplace, CharMode::kSum),
                         [](const ::testing::TestParamInfo<CharMode>& info) {
                           return std::string(CharModeName(info.param));
                         });

TEST(CharSgnsTest, SumModeStartsAsPlainSgnsAndItsModelLearns) {
  const std::vector<std::string> stems = Stems(20, 9);
  const std::vector<std::string> lines = PlantedSentences(stems, 200, 10);
  StreamingLearner plain(PlantedLearnerOptions()), with_char(PlantedLearnerOptions());
  CharSgnsOptions options = Char(CharMode::kSum);
  options.batch_words = 1000000;  // the batch in one step: the model is still at zero in it
  CharSgns char_sgns(options, 1);
  std::vector<std::string_view> batch(lines.begin(), lines.end());
  // Admits the words (no rows are trained through the model before they are admitted).
  ASSERT_TRUE(plain.TrainMicroBatch(batch).ok());
  ASSERT_TRUE(with_char.TrainMicroBatch(batch).ok());
  std::vector<float> zero;
  ASSERT_TRUE(char_sgns.model().Encode({stems[0] + "ing"}, &zero).ok());
  for (float x : zero) ASSERT_EQ(x, 0.f) << "the projection starts at zero";
  ASSERT_TRUE(plain.TrainMicroBatch(batch).ok());
  ASSERT_TRUE(char_sgns.TrainMicroBatch(&with_char, batch).ok());
  EXPECT_EQ(char_sgns.stats().steps, 1u);
  EXPECT_GT(char_sgns.stats().types, 20u);
  for (const std::string& s : stems) {
    const float* a = plain.InputRow(s + "ing");
    const float* b = with_char.InputRow(s + "ing");
    ASSERT_TRUE(a && b);
    for (int j = 0; j < 16; ++j) EXPECT_NEAR(a[j], b[j], 1e-6f) << s;
  }
  std::vector<float> moved;
  ASSERT_TRUE(char_sgns.model().Encode({stems[0] + "ing"}, &moved).ok());
  double norm = 0;
  for (float x : moved) norm += double(x) * x;
  EXPECT_GT(norm, 0) << "the model took no step";
}

TEST(CharSgnsTest, WordsTheModelCannotReadTrainAsPlainRows) {
  StreamingLearner learner(PlantedLearnerOptions());
  CharSgns char_sgns(Char(CharMode::kReplace), 1);
  // "\x01x" is valid UTF-8 without NUL (the learner trains it) but a control character
  // (CharIds refuses it): it keeps a plain row and the batch trains.
  std::vector<std::string> lines(50, "alpha \x01x beta gamma alpha beta");
  ASSERT_TRUE(Train(learner, char_sgns, lines).ok());
  EXPECT_TRUE(learner.Admitted("\x01x"));
  std::vector<std::string> words;
  std::vector<float> vectors;
  ASSERT_TRUE(char_sgns.ExportVectors(learner, &words, &vectors).ok());
  const auto it = std::find(words.begin(), words.end(), "\x01x");
  ASSERT_NE(it, words.end());
  const float* row = learner.InputRow("\x01x");
  const size_t i = static_cast<size_t>(it - words.begin());
  for (int j = 0; j < 16; ++j) EXPECT_EQ(vectors[i * 16 + j], row[j]);
}

// Step 1 reads a piece on several threads (a run of text each) and merges their finds in text
// order: the words encoded are those one thread finds, none cut or counted twice.
TEST(CharSgnsTest, WordsFoundOnSeveralThreadsAreThoseFoundOnOne) {
  const std::vector<std::string> stems = Stems(40, 1);
  std::string text;
  for (const std::string& line : PlantedSentences(stems, 20000, 4)) text += line + "\n";
  ASSERT_GT(text.size(), size_t{4} << 16);  // several runs of 64 KB
  CharSgnsOptions c = Char(CharMode::kSum);
  c.batch_words = 30000;  // pieces of about 180 KB
  std::vector<CharSgnsStats> stats;
  for (int threads : {1, 4}) {
    StreamingLearner learner(PlantedLearnerOptions());
    CharSgns char_sgns(c, threads);
    // Cut mid-word on purpose: TrainChunk keeps the tail for the next call.
    ASSERT_TRUE(char_sgns.TrainChunk(&learner, std::string_view(text).substr(0, 100001)).ok());
    ASSERT_TRUE(char_sgns.TrainChunk(&learner, std::string_view(text).substr(100001)).ok());
    ASSERT_TRUE(char_sgns.FinishStream(&learner).ok());
    stats.push_back(char_sgns.stats());
  }
  EXPECT_GT(stats[0].steps, 2u);
  EXPECT_GT(stats[0].types, 40u);
  EXPECT_EQ(stats[0].steps, stats[1].steps);
  EXPECT_EQ(stats[0].types, stats[1].types);
}

TEST(CharSgnsTest, ParseCharModeKnowsTheTwoModes) {
  CharMode m = CharMode::kSum;
  EXPECT_TRUE(ParseCharMode("replace", &m));
  EXPECT_EQ(m, CharMode::kReplace);
  EXPECT_TRUE(ParseCharMode("sum", &m));
  EXPECT_EQ(m, CharMode::kSum);
  EXPECT_FALSE(ParseCharMode("concat", &m));
}

TEST(CharSgnsTest, LoadNamesAMalformedEntry) {
  StreamingLearner learner(PlantedLearnerOptions());
  CharSgns char_sgns(Char(CharMode::kSum), 1);
  State state = Save(learner, char_sgns, /*checkpoint=*/true);
  state[kCharSgnsEntry] = "{";
  const Status s = CharSgns::Load(From(state), 1).status();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find(kCharSgnsEntry), std::string::npos) << s.message();
}

}  // namespace
}  // namespace streamvec

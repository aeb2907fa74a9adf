// MIMICK beside the streaming learner: the character model follows the learner's vectors, a
// planted suffix carries over to unseen words, snapshots hold it, and a resumed run is identical.
#include "streamvec/trainer/char_distiller.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "planted_suffixes.h"
#include "streamvec/base/cpu_features.h"

namespace streamvec {
namespace {

using testing::Cosine;
using testing::From;
using testing::PlantedSentences;
using testing::Stems;
using State = testing::State;

using testing::PlantedLearnerOptions;

CharDistillOptions Distill() {
  CharDistillOptions d;
  d.model.dim = 16;
  d.model.char_dim = 16;
  d.model.hidden = 32;
  d.model.learning_rate = 1e-2f;
  d.batch_types = 64;
  d.every_words = 300;
  d.refresh_steps = 5;
  return d;
}

Status Train(StreamingLearner& learner, CharDistiller& distiller,
             const std::vector<std::string>& lines) {
  // Micro-batches of 20 sentences, a distillation turn after each (as the Kafka trainer does).
  for (size_t i = 0; i < lines.size(); i += 20) {
    std::vector<std::string_view> batch;
    for (size_t j = i; j < std::min(lines.size(), i + 20); ++j) batch.push_back(lines[j]);
    SV_RETURN_IF_ERROR(learner.TrainMicroBatch(batch));
    SV_RETURN_IF_ERROR(distiller.MaybeStep(learner));
  }
  return distiller.Wait();  // stats() counts finished steps
}

State Save(const StreamingLearner& learner, const CharDistiller& distiller, bool checkpoint) {
  State state;
  const StateSink sink = testing::Into(&state);
  EXPECT_TRUE(learner.SaveState(sink).ok());
  EXPECT_TRUE(distiller.Save(sink, checkpoint).ok());
  return state;
}

TEST(CharDistillerTest, UnseenWordsWithAPlantedSuffixLandNearTheirGroup) {
  const std::vector<std::string> stems = Stems(40, 1), unseen = Stems(30, 2);
  StreamingLearner learner(PlantedLearnerOptions());
  CharDistiller distiller(Distill());
  ASSERT_TRUE(Train(learner, distiller, PlantedSentences(stems, 6000, 3)).ok());
  ASSERT_GT(distiller.stats().steps, 100u);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(distiller.Step(learner).ok());
  // The groups' centroids in the learner's table.
  std::vector<double> ca(16, 0), cb(16, 0);
  for (const std::string& s : stems) {
    const float* a = learner.InputRow(s + "ing");
    const float* b = learner.InputRow(s + "ed");
    ASSERT_TRUE(a && b) << s;
    for (int j = 0; j < 16; ++j) {
      ca[j] += a[j];
      cb[j] += b[j];
    }
  }
  std::vector<float> fa(ca.begin(), ca.end()), fb(cb.begin(), cb.end());
  ASSERT_LT(Cosine(fa.data(), fb.data(), 16), 0.5) << "SGNS did not separate the groups";
  int right = 0, total = 0;
  for (const std::string& s : unseen) {
    std::vector<float> v;
    ASSERT_TRUE(distiller.model().Encode({s + "ing", s + "ed"}, &v).ok());
    right += Cosine(v.data(), fa.data(), 16) > Cosine(v.data(), fb.data(), 16);
    right += Cosine(v.data() + 16, fb.data(), 16) > Cosine(v.data() + 16, fa.data(), 16);
    total += 2;
  }
  EXPECT_GE(right, total * 9 / 10) << right << " of " << total;
  EXPECT_GT(distiller.stats().types, 0u);
}

TEST(CharDistillerTest, CheckpointHoldsTheStateAndPublicationOnlyTheServingModel) {
  const std::vector<std::string> stems = Stems(20, 4);
  StreamingLearner learner(PlantedLearnerOptions());
  CharDistiller distiller(Distill());
  ASSERT_TRUE(Train(learner, distiller, PlantedSentences(stems, 400, 5)).ok());
  const State publication = Save(learner, distiller, /*checkpoint=*/false);
  EXPECT_EQ(publication.count(kCharModelEntry), 1u);
  EXPECT_EQ(publication.count(kCharModelStateEntry), 0u);
  EXPECT_EQ(CharDistiller::Load(From(publication)).status().code(), StatusCode::kNotFound);
  const State checkpoint = Save(learner, distiller, /*checkpoint=*/true);
  ASSERT_EQ(checkpoint.count(kCharModelStateEntry), 1u);
  auto serving = CharModel::Deserialize(checkpoint.at(kCharModelEntry));
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  EXPECT_EQ((*serving)->Serialize(false), distiller.model().Serialize(false));
  State damaged = checkpoint;
  damaged[kCharDistillEntry] = "{";
  EXPECT_EQ(CharDistiller::Load(From(damaged)).status().code(), StatusCode::kCorruption);
}

void ExpectResumedRunBitIdenticalToOneRun(const CharDistillOptions& options) {
  const std::vector<std::string> stems = Stems(20, 6);
  const std::vector<std::string> a = PlantedSentences(stems, 600, 7),
                                 b = PlantedSentences(stems, 600, 8);
  StreamingLearner one_learner(PlantedLearnerOptions());
  CharDistiller one_distiller(options);
  ASSERT_TRUE(Train(one_learner, one_distiller, a).ok());
  (void)Save(one_learner, one_distiller, /*checkpoint=*/true);  // as the trainer does
  ASSERT_TRUE(Train(one_learner, one_distiller, b).ok());

  StreamingLearner first(PlantedLearnerOptions());
  CharDistiller first_distiller(options);
  ASSERT_TRUE(Train(first, first_distiller, a).ok());
  const State state = Save(first, first_distiller, /*checkpoint=*/true);
  auto learner = StreamingLearner::LoadState(From(state), DetectBestIsa());
  ASSERT_TRUE(learner.ok()) << learner.status().ToString();
  auto distiller = CharDistiller::Load(From(state));
  ASSERT_TRUE(distiller.ok()) << distiller.status().ToString();
  ASSERT_TRUE(Train(**learner, **distiller, b).ok());
  EXPECT_GT(one_distiller.stats().steps, 4u);
  EXPECT_EQ((*distiller)->stats().steps, one_distiller.stats().steps);
  EXPECT_TRUE((*distiller)->model().Serialize(true) == one_distiller.model().Serialize(true));
}

TEST(CharDistillerTest, ResumedRunIsBitIdenticalToOneRun) {
  ExpectResumedRunBitIdenticalToOneRun(Distill());
}

// With an n-gram bag (--char-ngram-buckets): its rows and Adagrad state resume too.
TEST(CharDistillerTest, ResumedRunWithAnNgramBagIsBitIdenticalToOneRun) {
  CharDistillOptions o = Distill();
  o.model.ngram_buckets = 3000;
  ExpectResumedRunBitIdenticalToOneRun(o);
}

// A background step (the default) computes on the distiller's thread what an inline one computes
// on the caller's: the batch is gathered at the same moment, so the models match bit for bit.
TEST(CharDistillerTest, BackgroundStepsGiveTheModelOfInlineSteps) {
  CharDistillOptions inline_options = Distill();
  inline_options.model.ngram_buckets = 3000;
  inline_options.background = false;
  CharDistillOptions background_options = inline_options;
  background_options.background = true;
  const std::vector<std::string> lines = PlantedSentences(Stems(20, 6), 1200, 9);
  StreamingLearner a(PlantedLearnerOptions()), b(PlantedLearnerOptions());
  CharDistiller inline_distiller(inline_options), background(background_options);
  ASSERT_TRUE(Train(a, inline_distiller, lines).ok());
  ASSERT_TRUE(Train(b, background, lines).ok());
  EXPECT_GT(background.stats().steps, 10u);
  EXPECT_EQ(background.stats().steps, inline_distiller.stats().steps);
  EXPECT_EQ(background.stats().types, inline_distiller.stats().types);
  EXPECT_TRUE(background.model().Serialize(true) == inline_distiller.model().Serialize(true));
}

TEST(CharDistillerTest, ValidateNamesTheFlag) {
  CharDistillOptions o = Distill();
  o.batch_types = 0;
  EXPECT_NE(ValidateCharDistillOptions(o).message().find("--char-distill-batch"),
            std::string::npos);
  o = Distill();
  o.model.hidden = 0;
  EXPECT_NE(ValidateCharDistillOptions(o).message().find("--char-hidden"), std::string::npos);
}

}  // namespace
}  // namespace streamvec

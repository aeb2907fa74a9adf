// Runs the built `streamvec train` on real files and bad input.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_util.h"
#include "streamvec/kernels/cuda.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec {
namespace {

using ::testing::HasSubstr;

CliRun Train(const std::string& args) { return Shell("SV train " + args); }

class TrainCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("streamvec_train_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    // Planted corpus: "a*" and "b*" words never share a line; "a0" is the most frequent word.
    std::mt19937 gen(5);
    std::uniform_int_distribution<int> pick(0, 9);
    std::string text;
    for (int s = 0; s < 600; ++s) {
      const char g = s % 2 ? 'a' : 'b';
      for (int i = 0; i < 15; ++i) text += std::string(1, g) + std::to_string(pick(gen)) + " ";
      text += "a0\n";
    }
    corpus_ = Write("corpus.txt", text);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
  std::string corpus_;
};

TEST_F(TrainCliTest, WritesTextVectorsMostFrequentWordFirst) {
  const CliRun run = Train("--input " + corpus_ + " --output " + Path("v.txt") +
                        " --dim 8 --epochs 2 --min-count 1 --threads 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Not a terminal: exactly one summary line.
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("words/s"));
  auto v = ReadWord2Vec(Path("v.txt"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->rows(), 20u);
  EXPECT_EQ(v->dim, 8);
  EXPECT_EQ(v->words[0], "a0");
}

TEST_F(TrainCliTest, BinaryAndTextFormatsHoldTheSameVectors) {
  const std::string common = "--input " + corpus_ + " --dim 5 --epochs 1 --threads 1 --seed 3 ";
  ASSERT_EQ(Train(common + "--output " + Path("v.txt") + " --format text").exit_code, 0);
  ASSERT_EQ(Train(common + "--output " + Path("v.bin") + " --format binary").exit_code, 0);
  VectorFormat ft, fb;
  auto t = ReadWord2Vec(Path("v.txt"), &ft);
  auto b = ReadWord2Vec(Path("v.bin"), &fb);
  ASSERT_TRUE(t.ok() && b.ok());
  EXPECT_EQ(ft, VectorFormat::kText);
  EXPECT_EQ(fb, VectorFormat::kBinary);
  EXPECT_EQ(t->words, b->words);
  EXPECT_EQ(t->vectors, b->vectors);  // text floats round-trip exactly
}

TEST_F(TrainCliTest, TrainsWithAndWithoutOutputReplicasAndNegativePools) {
  // --replica-sync 0: one shared output table (Hogwild); 1: per-thread replicas merged after
  // every micro-batch; default (32). --negative-pool 0: every negative from the whole noise
  // distribution; 3: pools of three words. Each run writes all 20 words.
  for (const std::string model : {"cbow", "sgns"}) {
    for (const std::string flag : {" --replica-sync 0", " --replica-sync 1", "",
                                   " --negative-pool 0", " --negative-pool 3"}) {
      const CliRun run = Train("--input " + corpus_ + " --output " + Path("r.txt") + " --model " +
                               model + " --dim 8 --epochs 1 --min-count 1 --threads 2" + flag);
      ASSERT_EQ(run.exit_code, 0) << model << flag << "\n" << run.output;
      auto v = ReadWord2Vec(Path("r.txt"));
      ASSERT_TRUE(v.ok()) << model << flag;
      EXPECT_EQ(v->rows(), 20u) << model << flag;
    }
  }
}

TEST_F(TrainCliTest, ReadsStandardInput) {
  const std::string command = "cat " + corpus_ + " | '" + STREAMVEC_BINARY +
                              "' train --input - --output " + Path("s.txt") +
                              " --dim 4 --epochs 1 --min-count 1 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0);
  auto v = ReadWord2Vec(Path("s.txt"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->rows(), 20u);
}

TEST_F(TrainCliTest, BadFlagsExitTwoNamingTheFlag) {
  const std::string io = "--input " + corpus_ + " --output " + Path("x.txt") + " ";
  struct Case {
    std::string args, expect;
  } cases[] = {
      {io + "--dim 0", "--dim"},
      {io + "--window -1", "--window"},
      {io + "--negative 100", "--negative"},
      {io + "--epochs 0", "--epochs"},
      {io + "--dim abc", "--dim"},
      {io + "--model skipgramz", "--model"},
      {io + "--format xml", "--format"},
      {io + "--alpha 0.01 --min-alpha 0.5", "--min-alpha"},
      {io + "--negative-share 65", "--negative-share"},
      {io + "--replica-sync -1", "--replica-sync"},
      {io + "--negative-pool -1", "--negative-pool"},
      {"--input " + corpus_ + " --stream --state " + Path("st") + " --replica-sync 4",
       "--replica-sync applies to batch training only"},
      {"--input " + corpus_ + " --stream --state " + Path("st") + " --negative-share 3",
       "--negative-share must be 0, 1 or 2 with --stream"},
      {"--output " + Path("x.txt"), "--input"},
  };
  for (const Case& c : cases) {
    const CliRun run = Train(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args << "\n" << run.output;
    EXPECT_THAT(run.output, HasSubstr(c.expect)) << c.args;
  }
  EXPECT_FALSE(std::filesystem::exists(Path("x.txt")));
}

// --device: a bad value and a GPU that is not there (batch, --stream, char-lstm) exit
// 2 before any training, naming the flag and the cause. (The GPU itself: tests labelled gpu.)
TEST_F(TrainCliTest, DeviceFlagErrorsExitTwoNamingTheCause) {
  const std::string io = " --input " + corpus_ + " --output " + Path("v.txt") + " --min-count 1";
  CliRun run = Train("--device gpu" + io);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--device must be cpu, cuda or cuda:N"));
  if (CudaDeviceCount() == 0) {
    run = Train("--device cuda --stream --state " + Path("st") + io);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_THAT(run.output, HasSubstr("--device cuda: "));
    run = Train("--device cuda:0" + io);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_THAT(run.output, HasSubstr("--device cuda:0: "));
    // --model char-lstm puts its character model there (the learner stays on the CPU).
    run = Train("--device cuda --stream --model char-lstm --state " + Path("st2") + io);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_THAT(run.output, HasSubstr("--device cuda: "));
    EXPECT_FALSE(std::filesystem::exists(Path("v.txt")));
  }
  run = Train("--device cpu --dim 8 --epochs 1" + io);
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

// --stream --normalize: natural text in any script loses its case and punctuation (Arabic commas
// too) and full-width forms, as the Kafka path's --normalize does; batch training refuses it.
TEST_F(TrainCliTest, StreamNormalizeFoldsCasePunctuationAndWidth) {
  const std::string in = Write("natural.txt", "The Fox, the FOX! \xEF\xBC\xA6\xEF\xBC\xAF\xEF\xBC\xB8 text.\n"
                                               "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7\xD8\x8C "
                                               "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7.\n");
  const CliRun run = Train("--input " + in + " --stream --normalize --state " + Path("st") +
                           " --output " + Path("v.txt") + " --min-count 1 --dim 4");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto v = ReadWord2Vec(Path("v.txt"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  std::set<std::string> words(v->words.begin(), v->words.end());
  EXPECT_EQ(words, (std::set<std::string>{"the", "fox", "text", "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7"}));
  const CliRun batch = Train("--input " + in + " --output " + Path("b.txt") + " --normalize");
  EXPECT_EQ(batch.exit_code, 2);
  EXPECT_THAT(batch.output, HasSubstr("--normalize needs --stream"));
}

TEST_F(TrainCliTest, MissingEmptyAndUnwritableFilesExitTwo) {
  CliRun run = Train("--input " + Path("missing.txt") + " --output " + Path("x.txt"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("missing.txt"));
  run = Train("--input " + Write("empty.txt", "") + " --output " + Path("x.txt"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("no words"));
  run = Train("--input " + corpus_ + " --output " + Path("no/such/dir/x.txt"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--output"));
}

TEST_F(TrainCliTest, InvalidUtf8IsSkippedAndReportedWithItsOffset) {
  const std::string text = "ok ok ok \xff\xfe\xfd ok ok more more more\n";
  const CliRun run = Train("--input " + Write("bad.txt", text) + " --output " + Path("v.txt") +
                        " --min-count 1 --dim 4 --epochs 1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("invalid UTF-8"));
  EXPECT_THAT(run.output, HasSubstr("byte offset 9"));
  auto v = ReadWord2Vec(Path("v.txt"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->rows(), 2u);
}

TEST_F(TrainCliTest, TenMegabyteLineTrainsFully) {
  // One line of 10 MB (about 2M words); it is cut into 1000-word sentences, all trained on.
  std::string line;
  line.reserve(10 << 20);
  std::mt19937 gen(9);
  std::uniform_int_distribution<int> pick(0, 99);
  while (line.size() < (10u << 20)) line += "w" + std::to_string(pick(gen)) + " ";
  const CliRun run = Train("--input " + Write("long.txt", line) + " --output " + Path("v.txt") +
                        " --dim 4 --epochs 1 --min-count 1 --sample 0");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("(100 in vocabulary)"));
  auto v = ReadWord2Vec(Path("v.txt"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->rows(), 100u);
}

}  // namespace
}  // namespace streamvec

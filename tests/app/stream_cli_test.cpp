// Runs the built `streamvec train --stream` and `streamvec export` on real files and bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;


std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class StreamCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("streamvec_stream_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    a_ = Write("a.txt", Planted(300, 1));
    b_ = Write("b.txt", Planted(300, 2));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Two groups of words that never share a line; "a0" ends every line (most frequent).
  static std::string Planted(int lines, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> pick(0, 9);
    std::string text;
    for (int s = 0; s < lines; ++s) {
      const char g = s % 2 ? 'a' : 'b';
      for (int i = 0; i < 15; ++i) text += std::string(1, g) + std::to_string(pick(gen)) + " ";
      text += "a0\n";
    }
    return text;
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return Path(name);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  std::string a_, b_;
};

constexpr char kSmall[] =
    " --dim 12 --vocab-capacity 16 --min-count 2 --noise-table-size 4096 --count-half-life 1000"
    " --seed 7 --snapshot-every 700 --threads 1 ";  // 1 thread: deterministic

TEST_F(StreamCliTest, StopResumeGivesBitIdenticalVectorsToOneRun) {
  const std::string s1 = Path("s1"), s2 = Path("s2");
  CliRun run = Shell("SV train --input - --stream --state " + s1 + kSmall + " < " + a_);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  run = Shell("SV train --input - --stream --state " + s1 + kSmall + " < " + b_);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("resuming from"));
  EXPECT_THAT(run.output, HasSubstr("ignored on resume: --dim --min-count --seed --vocab-capacity"));
  run = Shell("cat " + a_ + " " + b_ + " | SV train --input - --stream --state " + s2 + kSmall);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(Shell("SV export --state " + s1 + " --output " + Path("v1.bin") + " --format binary")
                .exit_code,
            0);
  ASSERT_EQ(Shell("SV export --state " + s2 + " --output " + Path("v2.bin") + " --format binary")
                .exit_code,
            0);
  const std::string v1 = ReadAll(Path("v1.bin")), v2 = ReadAll(Path("v2.bin"));
  EXPECT_GT(v1.size(), 100u);
  EXPECT_TRUE(v1 == v2) << "resumed and one-run vectors differ";
}

TEST_F(StreamCliTest, ExportWritesAdmittedWordsMostFrequentFirst) {
  ASSERT_EQ(Shell("SV train --input " + a_ + " --stream --state " + Path("s") +
                  " --dim 8 --min-count 3 --output " + Path("direct.txt"))
                .exit_code,
            0);
  const CliRun run = Shell("SV export --state " + Path("s") + " --output " + Path("v.txt"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto v = ReadWord2Vec(Path("v.txt"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->dim, 8);
  EXPECT_EQ(v->rows(), 20u);
  EXPECT_EQ(v->words[0], "a0");
  EXPECT_EQ(ReadAll(Path("v.txt")), ReadAll(Path("direct.txt")));
}

TEST_F(StreamCliTest, GarbageOnStdinIsSkippedAndCounted) {
  Write("bad.bin", std::string("good words here\n\xff\xfe\x00\x01 garbage\xc3\n", 30) +
                       ReadAll(a_));
  const CliRun run =
      Shell("SV train --input - --stream --state " + Path("s") + kSmall + " < " + Path("bad.bin"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("skipped 2 token(s)"));
}

TEST_F(StreamCliTest, ForeignStateDirectoryIsRefusedAndLeftAlone) {
  fs::create_directories(Path("mine"));
  Write("mine/notes.txt", "precious");
  const CliRun run =
      Shell("SV train --input - --stream --state " + Path("mine") + kSmall + " < " + a_);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--state"));
  EXPECT_THAT(run.output, HasSubstr("not empty"));
  EXPECT_EQ(ReadAll(Path("mine/notes.txt")), "precious");
  EXPECT_EQ(std::distance(fs::directory_iterator(Path("mine")), fs::directory_iterator()), 1);
  EXPECT_EQ(Shell("SV export --state " + Path("mine") + " --output " + Path("x.txt")).exit_code,
            2);
}

// An overwritten CURRENT file: the live database is refused with RocksDB's reason, and the
// state resumes from its newest intact snapshot (the last one written: nothing is lost), the
// damaged file kept aside.
TEST_F(StreamCliTest, CorruptStateResumesFromTheNewestIntactSnapshotAndKeepsTheDamage) {
  ASSERT_EQ(Shell("SV train --input - --stream --state " + Path("s") + kSmall + " < " + a_)
                .exit_code,
            0);
  Write("s/CURRENT", "not a manifest\n");
  const CliRun run =
      Shell("SV train --input - --stream --state " + Path("s") + kSmall + " < " + b_);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("the live database was damaged"));
  EXPECT_THAT(run.output, HasSubstr("resumed from snapshot"));
  ASSERT_TRUE(fs::is_directory(Path("s/damaged")));
  std::vector<fs::path> aside;
  for (const auto& e : fs::directory_iterator(Path("s/damaged"))) aside.push_back(e.path());
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(ReadAll((aside[0] / "CURRENT").string()), "not a manifest\n");
}

// `state verify` says which snapshots are intact (exit 1 when one is not); `state repair` moves
// the damaged one aside and publishes the snapshot again; a directory with no state is exit 2.
TEST_F(StreamCliTest, StateVerifyAndRepairFindAndMendADamagedSnapshot) {
  ASSERT_EQ(
      Shell("SV train --input - --stream --state " + Path("s") + kSmall + " < " + a_).exit_code, 0);
  CliRun run = Shell("SV state verify --state " + Path("s"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("intact"));
  EXPECT_THAT(run.output, ::testing::Not(HasSubstr("DAMAGED")));
  // The newest checkpoint's metadata, garbled.
  std::vector<fs::path> checkpoints;
  for (const auto& e : fs::directory_iterator(Path("s/checkpoints"))) {
    checkpoints.push_back(e.path());
  }
  std::sort(checkpoints.begin(), checkpoints.end());
  ASSERT_FALSE(checkpoints.empty());
  std::ofstream(checkpoints.back() / "metadata.json", std::ios::trunc) << "{bad";
  run = Shell("SV state verify --state " + Path("s"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("DAMAGED"));
  EXPECT_THAT(run.output, HasSubstr("state repair"));
  run = Shell("SV state repair --state " + Path("s"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("moved to"));
  EXPECT_THAT(run.output, HasSubstr("published snapshot"));
  run = Shell("SV state verify --state " + Path("s"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  fs::create_directories(Path("empty"));
  EXPECT_EQ(Shell("SV state verify --state " + Path("empty")).exit_code, 2);
  EXPECT_EQ(Shell("SV state repair --state " + Path("empty")).exit_code, 2);
  EXPECT_EQ(Shell("SV state verify").exit_code, 2);
}

TEST_F(StreamCliTest, StreamNeedsStateAndRejectsBadSnapshotEvery) {
  CliRun run = Shell("SV train --input - --stream < " + a_);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--state"));
  run = Shell("SV train --input - --stream --state " + Path("s") + " --snapshot-every 5x < " + a_);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--snapshot-every"));
  run = Shell("SV train --input " + a_ + " --state " + Path("s") + " --output " + Path("v.txt"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--state needs --stream"));
  run = Shell("SV train --input - --stream --state " + Path("s") + " --vocab-capacity 1 < " + a_);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--vocab-capacity"));
}

TEST_F(StreamCliTest, EvalPipComparesVectorsWithEachOtherAndWithTheSppmiReference) {
  ASSERT_EQ(Shell("SV train --input " + a_ + " --stream --state " + Path("s") +
                  " --dim 8 --min-count 1 --output " + Path("v.txt"))
                .exit_code,
            0);
  ASSERT_EQ(Shell("SV train --input " + a_ + " --output " + Path("b.txt") +
                  " --dim 6 --min-count 1 --progress never")
                .exit_code,
            0);
  CliRun run = Shell("SV eval --pip " + Path("v.txt") + " " + Path("v.txt") + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("\"words\": 20"));
  EXPECT_THAT(run.output, HasSubstr("\"loss\": 0.0"));
  run = Shell("SV eval --pip " + Path("v.txt") + " " + Path("b.txt"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("PIP loss over 20 words"));
  run = Shell("SV eval --pip-sppmi " + a_ + " --vectors " + Path("v.txt") + " --top 15");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("PIP loss over 15 words"));
  run = Shell("SV eval --pip-sppmi " + a_ + " --top 15");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--vectors"));
}

TEST_F(StreamCliTest, SigtermEndsTheStreamWithAFinalSnapshot) {
  int in[2], err[2];
  ASSERT_EQ(pipe(in), 0);
  ASSERT_EQ(pipe(err), 0);
  const std::string state = Path("s");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(err[1], 1);  // spdlog logs to stdout
    dup2(err[1], 2);
    close(in[1]);
    close(err[0]);
    execl(STREAMVEC_BINARY, STREAMVEC_BINARY, "train", "--input", "-", "--stream", "--state",
          state.c_str(), "--dim", "8", "--min-count", "1", "--progress", "never",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  close(err[1]);
  // Wait for the "streaming from" line: the signal handlers are installed by then.
  std::string log;
  char buf[512];
  while (log.find("streaming from") == std::string::npos) {
    const ssize_t got = read(err[0], buf, sizeof buf);
    ASSERT_GT(got, 0) << log;
    log.append(buf, got);
  }
  const std::string text = "alpha beta gamma\nalpha beta delta\n";
  ASSERT_EQ(write(in[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  kill(pid, SIGTERM);  // stdin stays open: only the signal ends the stream
  ssize_t got;
  while ((got = read(err[0], buf, sizeof buf)) > 0) log.append(buf, got);
  int status = 0;
  waitpid(pid, &status, 0);
  close(in[1]);
  close(err[0]);
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 0) << log;
  EXPECT_THAT(log, HasSubstr("stopped by signal"));
  const CliRun run = Shell("SV export --state " + state + " --output " + Path("v.txt"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

}  // namespace
}  // namespace streamvec

// Runs the built `streamvec` binary's eval and neighbors subcommands on the fixtures.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

using ::testing::HasSubstr;

const std::string kData = STREAMVEC_TEST_DATA "/eval/";

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout, or stdout + stderr when merged
};

// Runs `streamvec <args>` through the shell; stderr is merged into `out` when merge_stderr.
CommandResult Streamvec(const std::string& args, bool merge_stderr = false) {
  const std::string command =
      std::string("'") + STREAMVEC_BINARY + "' " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  CommandResult run;
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), pipe)) > 0) run.out.append(buf, got);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

nlohmann::json Reference() {
  std::ifstream in(kData + "gensim-reference.json");
  return nlohmann::json::parse(in);
}

TEST(EvalCliTest, JsonOutputParsesAndEqualsGensim) {
  const CommandResult run =
      Streamvec("eval --vectors " + kData + "small-vectors.txt --similarity " + kData +
                "EN-WS-353-ALL.txt --similarity " + kData + "EN-MEN-TR-3k.txt --analogy " + kData +
                "questions-words.txt --restrict 2000 --json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const nlohmann::json out = nlohmann::json::parse(run.out);
  const nlohmann::json ref = Reference();
  EXPECT_EQ(out["rows"], 4328);
  EXPECT_EQ(out["dim"], 32);
  EXPECT_EQ(out["format"], "text");
  ASSERT_EQ(out["similarity"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json& s = out["similarity"][i];
    EXPECT_EQ(s["pairs"], ref["similarity"][i]["pairs"]);
    EXPECT_EQ(s["oov"], ref["similarity"][i]["oov"]);
    EXPECT_NEAR(s["spearman"].get<double>(), ref["similarity"][i]["spearman"].get<double>(), 1e-6);
    EXPECT_NEAR(s["pearson"].get<double>(), ref["similarity"][i]["pearson"].get<double>(), 1e-6);
    EXPECT_NEAR(s["oov_ratio"].get<double>(), ref["similarity"][i]["oov_ratio"].get<double>(),
                1e-9);
  }
  EXPECT_EQ(out["similarity"][0]["name"], "EN-WS-353-ALL");
  const nlohmann::json& analogy = out["analogy"];
  const nlohmann::json& gensim = ref["analogy"][1];  // restrict_vocab 2000
  ASSERT_EQ(gensim["restrict"], 2000);
  EXPECT_EQ(analogy["restrict"], 2000);
  EXPECT_EQ(analogy["questions"], gensim["questions"]);
  EXPECT_EQ(analogy["oov"], gensim["oov"]);
  EXPECT_NEAR(analogy["accuracy"].get<double>(), gensim["accuracy"].get<double>(), 1e-12);
  ASSERT_EQ(analogy["sections"].size() + 1, gensim["sections"].size());
  for (size_t i = 0; i < analogy["sections"].size(); ++i) {
    EXPECT_EQ(analogy["sections"][i]["section"], gensim["sections"][i]["section"]);
    EXPECT_EQ(analogy["sections"][i]["correct"], gensim["sections"][i]["correct"]);
  }
}

TEST(EvalCliTest, TableOutputShowsSectionsAndTotal) {
  const CommandResult run =
      Streamvec("eval --vectors " + kData + "small-vectors.txt --analogy " + kData +
                "questions-words.txt --similarity " + kData + "EN-WS-353-ALL.txt");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("capital-common-countries"));
  EXPECT_THAT(run.out, HasSubstr("Total accuracy"));
  EXPECT_THAT(run.out, HasSubstr("EN-WS-353-ALL"));
}

TEST(EvalCliTest, MissingVectorsFileExitsTwoNamingIt) {
  const CommandResult run = Streamvec(
      "eval --vectors /nonexistent/vectors.txt --similarity " + kData + "EN-WS-353-ALL.txt",
      /*merge_stderr=*/true);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("/nonexistent/vectors.txt"));
}

TEST(EvalCliTest, MissingEvalFileExitsTwoNamingIt) {
  const CommandResult run = Streamvec(
      "eval --vectors " + kData + "small-vectors.txt --similarity " + kData + "no-such-pairs.txt",
      /*merge_stderr=*/true);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("no-such-pairs.txt"));
}

TEST(EvalCliTest, EmptyEvalFileAndMalformedVectorsExitTwo) {
  const std::filesystem::path dir = ::testing::TempDir();
  const std::string empty = (dir / "cli-empty-pairs.txt").string();
  const std::string corrupt = (dir / "cli-corrupt-vectors.txt").string();
  std::ofstream(empty) << "";
  std::ofstream(corrupt) << "2 3\nthe 0.1 0.2 0.3\nof 0.1 oops 0.3\n";

  const CommandResult empty_run =
      Streamvec("eval --vectors " + kData + "small-vectors.txt --similarity " + empty, true);
  EXPECT_EQ(empty_run.exit_code, 2);
  EXPECT_THAT(empty_run.out, HasSubstr(empty));

  const CommandResult corrupt_run =
      Streamvec("eval --vectors " + corrupt + " --similarity " + kData + "EN-WS-353-ALL.txt", true);
  EXPECT_EQ(corrupt_run.exit_code, 2);
  EXPECT_THAT(corrupt_run.out, HasSubstr(corrupt));
  EXPECT_THAT(corrupt_run.out, HasSubstr("line 3"));
  std::filesystem::remove(empty);
  std::filesystem::remove(corrupt);
}

TEST(NeighborsCliTest, PrintsKTabSeparatedLinesWithoutTheWord) {
  const CommandResult run =
      Streamvec("neighbors --vectors " + kData + "small-vectors.txt king -k 5");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  std::istringstream lines(run.out);
  std::string line;
  int count = 0;
  double previous = 2;
  while (std::getline(lines, line)) {
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    EXPECT_NE(line.substr(0, tab), "king");
    const double similarity = std::stod(line.substr(tab + 1));
    EXPECT_LE(similarity, previous);
    EXPECT_LE(similarity, 1.0);
    previous = similarity;
    ++count;
  }
  EXPECT_EQ(count, 5);
}

TEST(NeighborsCliTest, UnknownWordExitsTwoNamingIt) {
  const CommandResult run =
      Streamvec("neighbors --vectors " + kData + "small-vectors.txt zzqxq", true);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("zzqxq"));
}

// --oov: every pair of WS-353 scored from a streamed state, the 300 most frequent words from its
// table and every other word from its character model (--char-distill), reported apart.
TEST(EvalCliTest, OovScoresEveryPairFromTheTableAndTheCharacterModel) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("streamvec_eval_oov_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string corpus =
      std::string(STREAMVEC_SOURCE_DIR) + "/data/demo/enwiki-text8style-small-5m.txt";
  const std::string train = "head -c 1000000 '" + corpus + "' | '" + STREAMVEC_BINARY +
                            "' train --input - --stream --state '" + (dir / "s").string() +
                            "' --dim 32 --char-distill --char-distill-every 20000 2>&1";
  ASSERT_EQ(std::system(train.c_str()), 0);
  const CommandResult run = Streamvec("eval --oov --state " + (dir / "s").string() +
                                      " --similarity " + kData +
                                      "EN-WS-353-ALL.txt --table-top 300 --json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const nlohmann::json out = nlohmann::json::parse(run.out);
  EXPECT_EQ(out["table_words"], 300);
  const nlohmann::json& s = out["similarity"][0];
  EXPECT_EQ(s["total"], 353);
  EXPECT_EQ(s["skipped"], 0);
  EXPECT_GT(s["table"]["pairs"].get<int>(), 0);
  EXPECT_GT(s["oov"]["pairs"].get<int>(), 100);
  EXPECT_EQ(s["table"]["pairs"].get<int>() + s["oov"]["pairs"].get<int>(), 353);
  EXPECT_EQ(s["all"]["pairs"], 353);
  EXPECT_TRUE(s["all"]["spearman"].is_number());
  const CommandResult text = Streamvec("eval --oov --state " + (dir / "s").string() +
                                       " --similarity " + kData + "EN-WS-353-ALL.txt");
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_THAT(text.out, HasSubstr("EN-WS-353-ALL.txt"));

  // A state without a character model, and no state at all: exit 2, named.
  const std::string plain = "head -c 200000 '" + corpus + "' | '" + STREAMVEC_BINARY +
                            "' train --input - --stream --state '" + (dir / "p").string() +
                            "' --dim 32 2>&1";
  ASSERT_EQ(std::system(plain.c_str()), 0);
  CommandResult bad = Streamvec("eval --oov --state " + (dir / "p").string() + " --similarity " +
                                    kData + "EN-WS-353-ALL.txt",
                                /*merge_stderr=*/true);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.out, HasSubstr("no character model"));
  bad = Streamvec("eval --oov --similarity " + kData + "EN-WS-353-ALL.txt", true);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.out, HasSubstr("--state"));
  std::filesystem::remove_all(dir);
}

}  // namespace

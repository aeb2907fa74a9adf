// Runs the built `streamvec vectors` on states written by `train --stream` (with and without
// --char-distill) and on a word2vec file exported from one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"

namespace streamvec {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

constexpr int kDim = 12;
constexpr char kTrain[] =
    " --dim 12 --vocab-capacity 40 --min-count 2 --noise-table-size 4096 --seed 7 --threads 1"
    " --char-dim 8 --char-hidden 8 ";

// The fields of one word2vec text row.
std::vector<std::string> Fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> fields;
  for (std::string f; in >> f;) fields.push_back(f);
  return fields;
}

std::vector<std::string> Lines(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class VectorsCliTest : public ::testing::Test {
 protected:
  // One state with a character model, one without, from the same generated lines: words
  // "w0".."w29" ("w0" the most frequent), 15 a line.
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("streamvec_vectors_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::mt19937 gen(3);
    std::geometric_distribution<int> pick(0.12);
    std::string text;
    for (int line = 0; line < 400; ++line) {
      for (int i = 0; i < 15; ++i) text += "w" + std::to_string(pick(gen) % 30) + " ";
      text += "\n";
    }
    std::ofstream(dir_ / "corpus.txt") << text;
    const std::string corpus = Path("corpus.txt");
    ASSERT_EQ(Shell("SV train --input " + corpus + " --stream --state " + Path("char") + kTrain +
                    "--char-distill --char-distill-every 500")
                  .exit_code,
              0);
    ASSERT_EQ(Shell("SV train --input " + corpus + " --stream --state " + Path("plain") + kTrain)
                  .exit_code,
              0);
    ASSERT_EQ(
        Shell("SV export --state " + Path("char") + " --output " + Path("char.txt")).exit_code, 0);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string Path(const std::string& name) { return (dir_ / name).string(); }

  static fs::path dir_;
};

fs::path VectorsCliTest::dir_;

TEST_F(VectorsCliTest, TableWordsAreTheTablesRows) {
  const CliRun run = Shell("SV vectors --state " + Path("char") + " w0 w3 2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<std::string> lines = Lines(run.output);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(Fields(lines[0]).size(), kDim + 1u);
  EXPECT_EQ(Fields(lines[0])[0], "w0");
  EXPECT_EQ(Fields(lines[1])[0], "w3");
  // The same rows as the exported file gives, read with --vectors, byte for byte.
  const CliRun file = Shell("SV vectors --vectors " + Path("char.txt") + " w0 w3 2>/dev/null");
  ASSERT_EQ(file.exit_code, 0) << file.output;
  EXPECT_EQ(file.output, run.output);
  const CliRun json = Shell("SV vectors --json --state " + Path("char") + " w0");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json j = nlohmann::json::parse(json.output);
  EXPECT_EQ(j["word"], "w0");
  EXPECT_EQ(j["source"], "table");
  EXPECT_EQ(j["vector"].size(), static_cast<size_t>(kDim));
}

TEST_F(VectorsCliTest, WordsOutsideTheTableComeFromTheCharacterModel) {
  const CliRun run = Shell("SV vectors --json --state " + Path("char") + " zqxjvwordish w0");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<std::string> lines = Lines(run.output);
  ASSERT_EQ(lines.size(), 2u);
  const nlohmann::json oov = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(oov["word"], "zqxjvwordish");
  EXPECT_EQ(oov["source"], "char-lstm");
  ASSERT_EQ(oov["vector"].size(), static_cast<size_t>(kDim));
  double norm = 0;
  for (double x : oov["vector"]) norm += x * x;
  EXPECT_GT(norm, 0);
  // --table-top 1: only "w0" (the most frequent) from the table, "w3" from the model.
  const CliRun top = Shell("SV vectors --json --table-top 1 --state " + Path("char") + " w0 w3");
  ASSERT_EQ(top.exit_code, 0) << top.output;
  EXPECT_EQ(nlohmann::json::parse(Lines(top.output)[0])["source"], "table");
  EXPECT_EQ(nlohmann::json::parse(Lines(top.output)[1])["source"], "char-lstm");
}

// --model char-lstm --char-mode replace: every vector is the character model's, table words'
// included, and the snapshot serves them as the exported file has them.
TEST_F(VectorsCliTest, CharLstmReplaceModeServesTheModelsVectorsForEveryWord) {
  const CliRun train = Shell("SV train --input " + Path("corpus.txt") + " --stream --state " +
                             Path("lstm") + kTrain + "--model char-lstm --char-mode replace " +
                             "--char-batch-words 500 --output " + Path("lstm.txt") + " 2>&1");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_THAT(train.output, HasSubstr("character model (--model char-lstm, --char-mode replace)"));
  // --model char-lstm reads words forward only unless told otherwise.
  EXPECT_THAT(train.output, HasSubstr("; LSTM forward only, 8 hidden"));
  const CliRun state = Shell("SV vectors --state " + Path("lstm") + " w0 w3 2>/dev/null");
  ASSERT_EQ(state.exit_code, 0) << state.output;
  const CliRun file = Shell("SV vectors --vectors " + Path("lstm.txt") + " w0 w3 2>/dev/null");
  EXPECT_EQ(file.output, state.output);
  // w3 from the table and from the model (--table-top 1 keeps only w0 in the table): the same
  // vector, up to the batched encoder's summation order.
  const CliRun table = Shell("SV vectors --json --state " + Path("lstm") + " w3");
  const CliRun model = Shell("SV vectors --json --table-top 1 --state " + Path("lstm") + " w3");
  ASSERT_EQ(table.exit_code, 0) << table.output;
  ASSERT_EQ(model.exit_code, 0) << model.output;
  const nlohmann::json t = nlohmann::json::parse(table.output),
                       m = nlohmann::json::parse(model.output);
  EXPECT_EQ(t["source"], "table");
  EXPECT_EQ(m["source"], "char-lstm");
  ASSERT_EQ(t["vector"].size(), static_cast<size_t>(kDim));
  ASSERT_EQ(m["vector"].size(), static_cast<size_t>(kDim));
  for (size_t j = 0; j < size_t{kDim}; ++j) {
    EXPECT_NEAR(t["vector"][j].get<double>(), m["vector"][j].get<double>(), 1e-4) << j;
  }
  const CliRun oov = Shell("SV vectors --json --state " + Path("lstm") + " zqxjvwordish");
  ASSERT_EQ(oov.exit_code, 0) << oov.output;
  EXPECT_EQ(nlohmann::json::parse(oov.output)["source"], "char-lstm");
}

// --char-bidirectional still gives --model char-lstm a backward reader; the state keeps it.
TEST_F(VectorsCliTest, CharLstmReadsBackwardTooWhenAskedTo) {
  const std::string train = "SV train --input " + Path("corpus.txt") + " --stream --state " +
                            Path("bidi") + kTrain + "--model char-lstm --char-batch-words 500 ";
  const CliRun bidi = Shell(train + "--char-bidirectional 2>&1");
  ASSERT_EQ(bidi.exit_code, 0) << bidi.output;
  EXPECT_THAT(bidi.output, HasSubstr("; LSTM bidirectional, 8 hidden"));
  // Resumed without the flag: the state's own model, still bidirectional.
  const CliRun resumed = Shell(train + "2>&1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("; LSTM bidirectional, 8 hidden"));
}

// Batch --model char-lstm: --epochs passes of the streaming learner over the file, the
// vocabulary's vectors in --output and the model in --state; without --state, a temporary state
// that is gone at the end.
TEST_F(VectorsCliTest, BatchCharLstmTrainsItsEpochsAndKeepsTheModelInItsState) {
  const CliRun train = Shell("SV train --input " + Path("corpus.txt") + " --output " +
                             Path("batch.txt") + " --state " + Path("batch") + " --epochs 3" +
                             kTrain + "--model char-lstm --char-batch-words 500 2>&1");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  // 400 lines of 15 words, three times.
  EXPECT_THAT(train.output, HasSubstr("18000 words (18000 in total)"));
  EXPECT_THAT(train.output, HasSubstr("character model (--model char-lstm, --char-mode sum)"));
  const CliRun state = Shell("SV vectors --state " + Path("batch") + " w0 w3 2>/dev/null");
  const CliRun file = Shell("SV vectors --vectors " + Path("batch.txt") + " w0 w3 2>/dev/null");
  ASSERT_EQ(state.exit_code, 0) << state.output;
  EXPECT_EQ(file.output, state.output);
  const CliRun oov = Shell("SV vectors --json --state " + Path("batch") + " zqxjvwordish");
  ASSERT_EQ(oov.exit_code, 0) << oov.output;
  EXPECT_EQ(nlohmann::json::parse(oov.output)["source"], "char-lstm");

  const CliRun bare =
      Shell("SV train --input " + Path("corpus.txt") + " --output " + Path("bare.txt") +
            " --epochs 2" + kTrain + "--model char-lstm --char-batch-words 500 2>&1");
  ASSERT_EQ(bare.exit_code, 0) << bare.output;
  EXPECT_THAT(bare.output, HasSubstr("12000 words (12000 in total)"));
  const size_t at = bare.output.find("trained in ");
  ASSERT_NE(at, std::string::npos) << bare.output;
  const std::string temporary =
      bare.output.substr(at + 11, bare.output.find(' ', at + 11) - (at + 11));
  EXPECT_FALSE(fs::exists(temporary)) << temporary;
  const CliRun rows = Shell("SV vectors --vectors " + Path("bare.txt") + " w0 2>/dev/null");
  ASSERT_EQ(rows.exit_code, 0) << rows.output;
  EXPECT_EQ(Fields(rows.output).size(), static_cast<size_t>(kDim + 1));
}

TEST_F(VectorsCliTest, ReadsWordsFromStdinOnePerLine) {
  const CliRun args = Shell("SV vectors --state " + Path("char") + " w1 unseenword 2>/dev/null");
  ASSERT_EQ(args.exit_code, 0) << args.output;
  CliRun run =
      Shell("printf 'w1\\r\\nunseenword\\n' | SV vectors --state " + Path("char") + " 2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, args.output);
  run = Shell("printf 'unseenword\\n' | SV vectors --state " + Path("char") + " w1 - 2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, args.output);
}

TEST_F(VectorsCliTest, StateWithoutCharacterModelReportsTheMissingWordAndPrintsTheOthers) {
  const CliRun run = Shell("SV vectors --state " + Path("plain") + " w0 xyz w1");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("streamvec vectors: 'xyz': not in the vocabulary and the "
                                    "state has no character model"));
  EXPECT_THAT(run.output, HasSubstr("w0 "));
  EXPECT_THAT(run.output, HasSubstr("w1 "));
  // --table-top needs a character model: a usage error.
  EXPECT_EQ(Shell("SV vectors --table-top 5 --state " + Path("plain") + " w0").exit_code, 2);
}

TEST_F(VectorsCliTest, WordsTheCharacterModelRefusesAreNamedWithTheReason) {
  CliRun run = Shell("printf 'ab\\377c\\n\\nw0\\nx\\001y\\n' | SV vectors --state " + Path("char"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("'ab\\xffc': "));
  EXPECT_THAT(run.output, HasSubstr("UTF-8"));
  EXPECT_THAT(run.output, HasSubstr("'': "));
  EXPECT_THAT(run.output, HasSubstr("empty"));
  EXPECT_THAT(run.output, HasSubstr("'x\\x01y': "));
  EXPECT_THAT(run.output, HasSubstr("control"));
  EXPECT_THAT(run.output, HasSubstr("w0 "));  // the readable word is still printed
  // A word with a space has a vector, but only --json can print it.
  run = Shell("SV vectors --state " + Path("char") + " 'two words'");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("whitespace"));
  run = Shell("SV vectors --json --state " + Path("char") + " 'two words'");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(nlohmann::json::parse(run.output)["word"], "two words");
}

TEST_F(VectorsCliTest, VectorsFileGivesItsWordsOnly) {
  const CliRun run = Shell("SV vectors --vectors " + Path("char.txt") + " w2 zqxj");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("'zqxj': not in the vocabulary of " + Path("char.txt")));
  EXPECT_THAT(run.output, HasSubstr("w2 "));
}

// One --state per parameter-node shard, as serve takes them: their joined tables, no character
// model across shards.
TEST_F(VectorsCliTest, SeveralStatesGiveTheirJoinedTablesOnly) {
  const CliRun run =
      Shell("SV vectors --state " + Path("char") + " --state " + Path("plain") + " w0 zqxj");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("w0 "));
  EXPECT_THAT(run.output, HasSubstr("'zqxj': not in the vocabulary (several shards' states"));
}

TEST_F(VectorsCliTest, UsageErrorsExitTwoNamingTheFlag) {
  CliRun run = Shell("SV vectors w0");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--state"));
  run = Shell("SV vectors --state " + Path("char") + " --vectors " + Path("char.txt") + " w0");
  EXPECT_EQ(run.exit_code, 2);
  run = Shell("SV vectors --state " + Path("nothere") + " w0");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr(Path("nothere")));
  EXPECT_THAT(run.output, Not(HasSubstr("\nw0 ")));
  run = Shell("SV vectors --vectors " + Path("corpus.txt") + " w0");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--vectors"));
}

}  // namespace
}  // namespace streamvec

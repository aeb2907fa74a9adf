// `streamvec tokenize`: what the trainer's tokenizer makes of a text, one token per line.
#include <sys/wait.h>

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_util.h"

namespace streamvec {
namespace {

using ::testing::HasSubstr;

// stdout and stderr apart: the tokens, then the report.
CliRun Tokenize(const std::string& printf_text, const std::string& flags,
                bool stderr_too = false) {
  return Shell("printf '" + printf_text + "' | SV tokenize " + flags +
               (stderr_too ? "" : " 2>/dev/null"));
}

TEST(TokenizeCliTest, PrintsTheTokensOnePerLine) {
  const CliRun run = Tokenize("The quick,  brown\\tfox.\\nover\\n\\nthe dog", "");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.output, "The\nquick,\nbrown\nfox.\nover\nthe\ndog\n");
}

TEST(TokenizeCliTest, NormalizeLowercasesAndDropsPunctuation) {
  const CliRun run = Tokenize("The Quick, don\\047t state-of-the-art (fox).", "--normalize");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.output, "the\nquick\ndon't\nstate-of-the-art\nfox\n");
}

TEST(TokenizeCliTest, InvalidUtf8IsSkippedAndReportedWithItsOffset) {
  const CliRun run = Tokenize("ok foo\\377bar fine", "", /*stderr_too=*/true);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.output, HasSubstr("ok\nfine\n"));
  EXPECT_THAT(run.output, HasSubstr("skipped 1 token(s) with invalid UTF-8"));
  EXPECT_THAT(run.output, HasSubstr("first at byte offset 3"));
  EXPECT_THAT(run.output, ::testing::Not(HasSubstr("bar")));
}

TEST(TokenizeCliTest, MissingInputExitsTwo) {
  const CliRun run = Shell("SV tokenize --input /nonexistent/x.txt");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("/nonexistent/x.txt"));
}

}  // namespace
}  // namespace streamvec

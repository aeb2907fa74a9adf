// `streamvec tokenize`: the tokens a trainer sees in a text, one per line.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "streamvec/tokenizer/normalize.h"
#include "streamvec/tokenizer/whitespace_tokenizer.h"

namespace streamvec::app {
namespace {

struct TokenizeFlags {
  std::string input = "-";
  bool normalize = false;
};

int RunTokenize(const TokenizeFlags& f) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (f.input != "-") {
    file.open(f.input, std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "streamvec tokenize: error: --input: cannot open '%s'\n",
                   f.input.c_str());
      return 2;
    }
    in = &file;
  }
  WhitespaceTokenizer tokenizer;
  std::string out;
  auto on_token = [&out](std::string_view t) {
    out.append(t);
    out.push_back('\n');
    if (out.size() >= (1 << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  };
  auto on_line = [] {};
  // Line by line, so that --normalize never sees a character cut in two.
  std::string line;
  while (std::getline(*in, line)) {
    if (!in->eof()) line.push_back('\n');
    if (f.normalize) line = NormalizeText(line);
    tokenizer.Feed(line, on_token, on_line);
  }
  tokenizer.Finish(on_token);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  const TokenizerStats& st = tokenizer.stats();
  if (st.invalid_utf8_tokens + st.overlong_tokens > 0) {
    std::fprintf(stderr,
                 "streamvec tokenize: skipped %llu token(s) with invalid UTF-8 or a NUL byte and "
                 "%llu longer than %zu bytes; first at byte offset %llu%s\n",
                 static_cast<unsigned long long>(st.invalid_utf8_tokens),
                 static_cast<unsigned long long>(st.overlong_tokens),
                 TokenizerOptions{}.max_token_bytes,
                 static_cast<unsigned long long>(st.first_skipped_offset),
                 f.normalize ? " of the normalised text" : "");
  }
  return 0;
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* cmd = root.add_subcommand(
      "tokenize", "Print the tokens a trainer sees in a text, one per line (stdin by default)");
  cmd->add_option("--input", flags->input, "Text file, or - for standard input")
      ->capture_default_str();
  cmd->add_flag("--normalize", flags->normalize,
                "Normalise first, as train --brokers --normalize and run do (lowercase, "
                "punctuation and symbols to spaces; tokenizer/normalize.h)");
  cmd->callback([flags, exit_code] { *exit_code = RunTokenize(*flags); });
}

}  // namespace streamvec::app

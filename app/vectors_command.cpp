// `streamvec vectors (--state DIR... | --vectors FILE) [WORD... | -]`: the vectors of any
// strings, one word2vec text row (or one JSON line) per word. From a state: what `serve` answers,
// the table's row for a vocabulary word and the character model's vector for any other word
// (docs/char-model.md); from a word2vec file: its rows only.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "streamvec/api/serving_snapshot.h"
#include "streamvec/charmodel/char_model.h"
#include "streamvec/store/snapshot_reader.h"
#include "streamvec/store/word2vec_format.h"
#include "streamvec/tokenizer/utf8.h"

namespace streamvec::app {
namespace {

struct VectorsFlags {
  std::vector<std::string> state;  // one, or one per parameter-node shard (their union)
  std::string vectors;             // a word2vec text or binary file
  std::vector<std::string> words;  // "-" (or none): one word per line of stdin
  size_t table_top = 0;            // only the N most frequent table words from the table
  bool json = false;               // {"word", "source", "vector"} lines
};

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "streamvec vectors: error: %s\n", message.c_str());
  return code;
}

// The word as it can be shown on a terminal: control bytes, and every byte >= 0x80 when the
// word is not valid UTF-8, as \xNN; at most 200 bytes.
std::string Printable(std::string_view word) {
  const bool utf8 = FindInvalidUtf8(word) == std::string_view::npos;
  std::string out;
  for (char c : word.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || (u >= 0x80 && !utf8) || c == '\\') {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out.push_back(c);
    }
  }
  if (word.size() > 200) out += "...";
  return out;
}

// Appends the floats, each in its shortest form that reads back to the same float32 (as
// WriteWord2Vec writes them), separated by `separator`.
void AppendFloats(const std::vector<float>& v, char separator, std::string* out) {
  char buf[32];
  for (size_t j = 0; j < v.size(); ++j) {
    if (j > 0) out->push_back(separator);
    const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v[j]);
    out->append(buf, r.ptr);
  }
}

// Where the vectors come from: one loaded snapshot of the state(s), or a word2vec file's rows.
struct Source {
  std::shared_ptr<const api::ServingSnapshot> snapshot;
  std::string why_missing;  // the reason a word outside the table has no vector
};

StatusOr<Source> OpenSource(const VectorsFlags& f) {
  Source source;
  if (!f.vectors.empty()) {
    StatusOr<Embeddings> e = ReadWord2Vec(f.vectors);
    if (!e.ok()) return Status::InvalidArgument("--vectors: " + e.status().message());
    source.snapshot = std::make_shared<api::ServingSnapshot>(std::move(*e), SnapshotInfo{});
    source.why_missing = "not in the vocabulary of " + f.vectors;
    return source;
  }
  for (const std::string& dir : f.state) {
    StatusOr<std::vector<SnapshotInfo>> list = SnapshotReader::List(dir);
    if (!list.ok())
      return Status::InvalidArgument("--state " + dir + ": " + list.status().message());
    if (list->empty()) return Status::InvalidArgument("--state " + dir + " holds no snapshot yet");
  }
  // The same loading as `serve --state DIR [--state DIR2 ...]`.
  std::shared_ptr<api::SnapshotSource> states =
      f.state.size() == 1 ? api::NewStateDirSnapshotSource(f.state[0])
                          : api::NewShardedStateDirSnapshotSource(f.state);
  StatusOr<std::shared_ptr<const api::ServingSnapshot>> snapshot = states->LoadNewerThan(0);
  if (!snapshot.ok()) {
    const std::string& m = snapshot.status().message();
    return Status::InvalidArgument(m.starts_with("--state") ? m : "--state: " + m);
  }
  if (*snapshot == nullptr) return Status::InvalidArgument("--state: no snapshot published yet");
  source.snapshot = std::move(*snapshot);
  source.why_missing = f.state.size() == 1
                           ? "not in the vocabulary and the state has no character model"
                           : "not in the vocabulary (several shards' states are served from "
                             "their tables only)";
  return source;
}

// Prints the vector of `word` on stdout; false (after a message on stderr) when it has none.
bool PrintWord(const VectorsFlags& f, const Source& source, const std::string& word) {
  const api::ServingSnapshot& s = *source.snapshot;
  const CharModel* model = s.char_model();
  std::vector<float> vector;
  std::optional<size_t> row = s.Find(word);
  if (row && f.table_top > 0 && s.rank(*row) > f.table_top) row.reset();
  Status status = Status::Ok();
  if (row) {
    const float* v = s.vector(*row);
    vector.assign(v, v + s.dim());
  } else if (model == nullptr) {
    status = Status::NotFound(source.why_missing);
  } else if (word.size() > api::kMaxCharModelWordBytes) {
    status = Status::InvalidArgument("the character model reads words of at most " +
                                     std::to_string(api::kMaxCharModelWordBytes) +
                                     " bytes, this one has " + std::to_string(word.size()));
  } else {
    status = model->Encode({word}, &vector);
  }
  if (status.ok() && !f.json && word.find_first_of(" \t\n\v\f\r") != std::string::npos) {
    status = Status::InvalidArgument(
        "holds whitespace, which a word2vec text row cannot (--json prints it)");
  }
  if (!status.ok()) {
    std::fprintf(stderr, "streamvec vectors: '%s': %s\n", Printable(word).c_str(),
                 status.message().c_str());
    return false;
  }
  std::string line;
  if (f.json) {
    const nlohmann::json w = word;
    line = "{\"word\": " + w.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
           ", \"source\": \"" + (row ? "table" : "char-lstm") + "\", \"vector\": [";
    AppendFloats(vector, ',', &line);
    line += "]}\n";
  } else {
    line = word + ' ';
    AppendFloats(vector, ' ', &line);
    line.push_back('\n');
  }
  std::fwrite(line.data(), 1, line.size(), stdout);
  return true;
}

int RunVectors(const VectorsFlags& f) {
  if (f.state.empty() == f.vectors.empty()) {
    return Fail(
        "give either --state DIR (repeated once per parameter-node shard) or "
        "--vectors FILE",
        2);
  }
  StatusOr<Source> source = OpenSource(f);
  if (!source.ok()) return Fail(source.status().message(), 2);
  if (f.table_top > 0 && source->snapshot->char_model() == nullptr) {
    return Fail("--table-top needs a state with a character model (train --char-distill)", 2);
  }
  bool all_found = true;
  std::vector<std::string> words = f.words;
  if (words.empty()) words.push_back("-");
  for (const std::string& word : words) {
    if (word != "-") {
      all_found = PrintWord(f, *source, word) && all_found;
      continue;
    }
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      all_found = PrintWord(f, *source, line) && all_found;
      std::fflush(stdout);  // one answer per line read, for a caller that asks word by word
    }
  }
  return all_found ? 0 : 1;
}

}  // namespace

void RegisterVectorsCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<VectorsFlags>();
  CLI::App* cmd = root.add_subcommand(
      "vectors",
      "Print the vectors of any words (word2vec text rows): table words from the table, others "
      "from the state's character model");
  cmd->add_option("--state", flags->state,
                  "State directory (its newest snapshot, as serve reads it); repeat it once per "
                  "parameter-node shard to read their union (table words only)")
      ->allow_extra_args(false);  // one directory per --state: the words follow
  cmd->add_option("--vectors", flags->vectors, "word2vec text or binary file (its words only)");
  cmd->add_option("--table-top", flags->table_top,
                  "Only the N most frequent table words from the table, every other word from "
                  "the character model (0: the whole table)")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json,
                "One JSON object a line: {\"word\", \"source\": \"table\" or \"char-lstm\", "
                "\"vector\"}");
  cmd->add_option("words", flags->words,
                  "Words to print; none or '-': one word per line of stdin. Exit status 1 when "
                  "a word has no vector (named on stderr; the others are printed)");
  cmd->footer(
      "Prints one word2vec text row \"word v1 v2 ...\" a word (no header line), in the order "
      "given.\nFrom --state: what serve answers, the table's row for a word of the vocabulary "
      "(exact match),\nelse the character model's vector (docs/char-model.md); a word the "
      "model refuses (empty,\ninvalid UTF-8, a control character, over 4096 bytes) is named on "
      "stderr with the reason.\nExit status: 0 every word printed, 1 some word had no vector "
      "(the others are printed),\n2 usage (no --state or --vectors, unreadable state or file).");
  cmd->callback([flags, exit_code] { *exit_code = RunVectors(*flags); });
}

}  // namespace streamvec::app

#include "streamvec/trainer/corpus.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace streamvec {
namespace {

constexpr uint32_t kLineEnd = 0xFFFFFFFEu;

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr && f != stdin) std::fclose(f);
  }
};

}  // namespace

StatusOr<Corpus> LoadCorpus(const std::string& path, const CorpusOptions& options) {
  std::unique_ptr<std::FILE, FileCloser> file;
  uint64_t size_hint = 0;
  if (path == "-") {
    file.reset(stdin);
  } else {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return Status::NotFound("cannot open '" + path + "': " + std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) return Status::InvalidArgument("'" + path + "' is a directory");
    size_hint = static_cast<uint64_t>(st.st_size);
    file.reset(std::fopen(path.c_str(), "rb"));
    if (!file) return Status::NotFound("cannot open '" + path + "': " + std::strerror(errno));
  }

  VocabularyBuilder builder;
  std::vector<uint32_t> ids;  // provisional ids and kLineEnd markers
  // Untouched reserved pages cost no memory; a token needs at least two bytes with its separator.
  if (size_hint > 0) ids.reserve(size_hint / 2 + 16);
  WhitespaceTokenizer tokenizer(options.tokenizer);
  std::vector<char> buffer(options.chunk_bytes);
  auto on_token = [&](std::string_view w) { ids.push_back(builder.Add(w)); };
  auto on_line = [&] { ids.push_back(kLineEnd); };
  while (true) {
    const size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get());
    if (n > 0) tokenizer.Feed(std::string_view(buffer.data(), n), on_token, on_line);
    if (n < buffer.size()) {
      if (std::ferror(file.get())) {
        return Status::IoError("read error on '" + path + "' after " +
                               std::to_string(tokenizer.stats().bytes) + " bytes");
      }
      break;
    }
  }
  tokenizer.Finish(on_token);
  buffer = {};

  Corpus corpus;
  corpus.tokenizer_stats = tokenizer.stats();
  corpus.raw_words = tokenizer.stats().tokens;
  if (corpus.raw_words == 0) {
    return Status::InvalidArgument("'" + path + "' contains no words (" +
                                   std::to_string(tokenizer.stats().bytes) + " bytes read)");
  }
  std::vector<uint32_t> remap;
  corpus.vocab = builder.Build(options.min_count, &remap);
  if (corpus.vocab.size() == 0) {
    return Status::InvalidArgument("no word of '" + path + "' occurs --min-count=" +
                                   std::to_string(options.min_count) + " times");
  }

  // Compact in place: drop out-of-vocabulary words, cut sentences at newlines and max length.
  size_t out = 0;
  size_t sentence_start = 0;
  corpus.sentence_offsets.push_back(0);
  const size_t max_len = static_cast<size_t>(options.max_sentence_length);
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t id = ids[i];
    if (id == kLineEnd) {
      if (out > sentence_start) {
        corpus.sentence_offsets.push_back(out);
        sentence_start = out;
      }
      continue;
    }
    const uint32_t final_id = remap[id];
    if (final_id == VocabularyBuilder::kDropped) continue;
    ids[out++] = final_id;
    if (out - sentence_start == max_len) {
      corpus.sentence_offsets.push_back(out);
      sentence_start = out;
    }
  }
  if (out > sentence_start) corpus.sentence_offsets.push_back(out);
  ids.resize(out);
  corpus.tokens = std::move(ids);
  return corpus;
}

}  // namespace streamvec

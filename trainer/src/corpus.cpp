#include "streamvec/trainer/corpus.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

namespace streamvec {
namespace {

constexpr uint32_t kLineEnd = 0xFFFFFFFEu;

// One byte range of the input, tokenised and counted on its own.
struct Part {
  uint64_t begin = 0, end = 0;  // byte range (files only)
  VocabularyBuilder builder;
  BigVector<uint32_t> ids;  // provisional ids of `builder`, and kLineEnd markers
  TokenizerStats stats;
  Status status;
  // After compaction:
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> sentence_ends;  // relative to this part's tokens
};

// Feeds `read(buffer, size) -> bytes (0 at end, -1 on error)` through a tokenizer into `part`.
template <typename Read>
void TokenizeInto(Part* part, const CorpusOptions& options, Read&& read, const std::string& path) {
  WhitespaceTokenizer tokenizer(options.tokenizer);
  BigVector<char> buffer(options.chunk_bytes);  // filled by read: no zeroing
  // Tokens are counted in batches (VocabularyBuilder::AddBatch prefetches the table); a line end
  // is a null view in the batch, so order is kept. Views stay valid until the next Feed.
  constexpr size_t kBatch = 256;
  std::string_view batch[kBatch];
  uint32_t ids[kBatch];
  size_t pending = 0;
  auto flush = [&] {
    size_t start = 0;
    for (size_t i = 0; i <= pending; ++i) {
      if (i == pending || batch[i].data() == nullptr) {
        part->builder.AddBatch(batch + start, i - start, ids + start);
        part->ids.insert(part->ids.end(), ids + start, ids + i);
        if (i < pending) part->ids.push_back(kLineEnd);
        start = i + 1;
      }
    }
    pending = 0;
  };
  auto on_token = [&](std::string_view w) {
    batch[pending++] = w;
    if (pending == kBatch) flush();
  };
  auto on_line = [&] {
    batch[pending++] = std::string_view();
    if (pending == kBatch) flush();
  };
  while (true) {
    const ssize_t n = read(buffer.data(), buffer.size());
    if (n < 0) {
      part->status = Status::IoError("read error on '" + path + "' after " +
                                     std::to_string(part->begin + tokenizer.stats().bytes) +
                                     " bytes: " + std::strerror(errno));
      return;
    }
    if (n == 0) break;
    tokenizer.Feed(std::string_view(buffer.data(), static_cast<size_t>(n)), on_token, on_line);
    flush();
  }
  tokenizer.Finish(on_token);
  flush();
  part->stats = tokenizer.stats();
  if (part->stats.first_skipped_offset != TokenizerStats::kNoOffset) {
    part->stats.first_skipped_offset += part->begin;
  }
}

// Split points for `parts` ranges of a file: after a newline near each even split, else after any
// whitespace (then a sentence is cut there, as by max_sentence_length), else mid-way through a
// token longer than the search window (which is then skipped as overlong on both sides).
std::vector<uint64_t> SplitPoints(int fd, uint64_t size, int parts) {
  constexpr size_t kWindow = 1 << 20;
  std::vector<uint64_t> points = {0};
  std::vector<char> buf(kWindow);
  for (int t = 1; t < parts; ++t) {
    const uint64_t pos = std::max(points.back(), size * t / parts);
    const ssize_t n = ::pread(fd, buf.data(), kWindow, static_cast<off_t>(pos));
    uint64_t split = size;
    if (n > 0) {
      const char* nl = static_cast<const char*>(std::memchr(buf.data(), '\n', n));
      if (nl != nullptr) {
        split = pos + (nl - buf.data()) + 1;
      } else {
        const char* ws = std::find_if(buf.data(), buf.data() + n, [](char c) {
          return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
        });
        split = ws != buf.data() + n ? pos + (ws - buf.data()) + 1
                                     : std::min<uint64_t>(size, pos + kWindow / 2);
      }
    }
    points.push_back(std::min(split, size));
  }
  points.push_back(size);
  return points;
}

}  // namespace

StatusOr<Corpus> LoadCorpus(const std::string& path, const CorpusOptions& options) {
  std::vector<std::unique_ptr<Part>> parts;
  if (path == "-") {
    parts.push_back(std::make_unique<Part>());
    TokenizeInto(
        parts[0].get(), options,
        [](char* buf, size_t size) -> ssize_t {
          const size_t n = std::fread(buf, 1, size, stdin);
          if (n == 0 && std::ferror(stdin)) return -1;
          return static_cast<ssize_t>(n);
        },
        path);
  } else {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::NotFound("cannot open '" + path + "': " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument("'" + path + "' is a directory or cannot be read");
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    int n_parts = 1;
    if (S_ISREG(st.st_mode)) {
      n_parts = static_cast<int>(std::clamp<uint64_t>(size >> 22, 1, std::max(1, options.threads)));
    }
    std::vector<uint64_t> points = {0, size};
    if (n_parts > 1) points = SplitPoints(fd, size, n_parts);
    std::vector<std::thread> threads;
    for (int t = 0; t < n_parts; ++t) {
      parts.push_back(std::make_unique<Part>());
      Part* part = parts.back().get();
      part->begin = points[t];
      part->end = S_ISREG(st.st_mode) ? points[t + 1] : UINT64_MAX;
      // Untouched reserved pages cost no memory; a token needs two bytes with its separator.
      if (S_ISREG(st.st_mode)) part->ids.reserve((part->end - part->begin) / 2 + 16);
      auto run = [part, fd, &options, &path] {
        uint64_t offset = part->begin;
        TokenizeInto(
            part, options,
            [part, fd, &offset](char* buf, size_t want) -> ssize_t {
              if (part->end != UINT64_MAX) want = std::min<uint64_t>(want, part->end - offset);
              if (want == 0) return 0;
              const ssize_t n = part->end == UINT64_MAX
                                    ? ::read(fd, buf, want)
                                    : ::pread(fd, buf, want, static_cast<off_t>(offset));
              if (n > 0) offset += static_cast<uint64_t>(n);
              return n;
            },
            path);
      };
      if (n_parts == 1) {
        run();
      } else {
        threads.emplace_back(run);
      }
    }
    for (auto& th : threads) th.join();
    ::close(fd);
  }
  for (const auto& p : parts) SV_RETURN_IF_ERROR(p->status);

  // Merge the parts' counts into the first builder; ids stay first-occurrence ordered.
  VocabularyBuilder& global = parts[0]->builder;
  std::vector<std::vector<uint32_t>> to_global(parts.size());
  for (size_t t = 1; t < parts.size(); ++t) {
    const VocabularyBuilder& local = parts[t]->builder;
    to_global[t].resize(local.size());
    for (uint32_t id = 0; id < local.size(); ++id) {
      to_global[t][id] = global.AddCount(local.word(id), local.count(id));
    }
  }

  Corpus corpus;
  for (const auto& p : parts) {
    const TokenizerStats& s = p->stats;
    TokenizerStats& c = corpus.tokenizer_stats;
    c.bytes += s.bytes;
    c.tokens += s.tokens;
    c.lines += s.lines;
    c.invalid_utf8_tokens += s.invalid_utf8_tokens;
    c.overlong_tokens += s.overlong_tokens;
    c.first_skipped_offset = std::min(c.first_skipped_offset, s.first_skipped_offset);
  }
  corpus.raw_words = corpus.tokenizer_stats.tokens;
  if (corpus.raw_words == 0) {
    return Status::InvalidArgument("'" + path + "' contains no words (" +
                                   std::to_string(corpus.tokenizer_stats.bytes) + " bytes read)");
  }
  std::vector<uint32_t> remap;
  corpus.vocab = global.Build(options.min_count, &remap);
  if (corpus.vocab.size() == 0) {
    return Status::InvalidArgument("no word of '" + path + "' occurs --min-count=" +
                                   std::to_string(options.min_count) + " times");
  }

  // Compact each part (in parallel): drop out-of-vocabulary words, cut sentences at newlines and
  // every max_sentence_length kept words. Each part starts a new sentence. With several parts,
  // each writes straight into its slice of the final token array (no merge copy afterwards): the
  // kept words of part t >= 1 are the sum of its local counts of kept words, and part 0 keeps the
  // rest of the vocabulary's total.
  const size_t max_len = static_cast<size_t>(options.max_sentence_length);
  std::vector<uint64_t> part_begin(parts.size() + 1, 0);
  if (parts.size() > 1) {
    uint64_t others = 0;
    for (size_t t = 1; t < parts.size(); ++t) {
      const VocabularyBuilder& local = parts[t]->builder;
      uint64_t kept = 0;
      for (uint32_t id = 0; id < local.size(); ++id) {
        if (remap[to_global[t][id]] != VocabularyBuilder::kDropped) kept += local.count(id);
      }
      part_begin[t + 1] = kept;
      others += kept;
    }
    SV_CHECK(corpus.vocab.total_count() >= others);
    part_begin[1] = corpus.vocab.total_count() - others;
    for (size_t t = 1; t <= parts.size(); ++t) part_begin[t] += part_begin[t - 1];
    corpus.tokens.resize(part_begin.back());  // uninitialised: each part fills its slice
  }
  auto compact = [&](size_t t) {
    Part& p = *parts[t];
    const BigVector<uint32_t>& ids = p.ids;
    // One part: in place; several: into this part's slice of corpus.tokens.
    uint32_t* dst = parts.size() == 1 ? p.ids.data() : corpus.tokens.data() + part_begin[t];
    const uint32_t* to_global_t = t == 0 ? nullptr : to_global[t].data();
    size_t out = 0, sentence_start = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const uint32_t id = ids[i];
      if (id == kLineEnd) {
        if (out > sentence_start) p.sentence_ends.push_back(sentence_start = out);
        continue;
      }
      const uint32_t final_id = remap[to_global_t == nullptr ? id : to_global_t[id]];
      if (final_id == VocabularyBuilder::kDropped) continue;
      dst[out++] = final_id;
      if (out - sentence_start == max_len) p.sentence_ends.push_back(sentence_start = out);
    }
    if (out > sentence_start) p.sentence_ends.push_back(out);
    if (parts.size() == 1) {
      p.ids.resize(out);
    } else {
      SV_CHECK(out == part_begin[t + 1] - part_begin[t]);
      p.ids = {};
    }
  };
  {
    std::vector<std::thread> threads;
    for (size_t t = 1; t < parts.size(); ++t) threads.emplace_back(compact, t);
    compact(0);
    for (auto& th : threads) th.join();
  }
  if (parts.size() == 1) corpus.tokens = std::move(parts[0]->ids);
  corpus.sentence_offsets.push_back(0);
  for (size_t t = 0; t < parts.size(); ++t) {
    const uint64_t base = part_begin[t];
    for (uint64_t e : parts[t]->sentence_ends) corpus.sentence_offsets.push_back(base + e);
  }
  return corpus;
}

}  // namespace streamvec

#include "streamvec/store/embedding_entries.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_set>

namespace streamvec {
namespace {

// Rows per entry: small values keep RocksDB's write batches, memtables and table blocks (each
// holds a value whole) small during a snapshot. Readers accept any chunking.
constexpr size_t kChunkBytes = size_t{256} << 10;

constexpr char kCountsKey[] = "embedding/counts";

std::string RowsKey(size_t chunk) { return "embedding/rows/" + std::to_string(chunk); }

// Table chunk keys ascend in byte order (the store writes them to one table file).
std::string TableKey(size_t chunk) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "embedding/table/%08zu", chunk);
  return buf;
}

Status JoinWords(const std::vector<std::string>& word_list, std::string* words) {
  for (const std::string& w : word_list) {
    if (w.empty() || w.find('\n') != std::string::npos) {
      return Status::InvalidArgument("embedding word is empty or holds a newline");
    }
    *words += w;
    *words += '\n';
  }
  return Status::Ok();
}

// "embedding/meta" and "embedding/words", shared by both layouts.
Status WriteWords(const std::vector<std::string>& word_list, int dim, const SnapshotSink& sink) {
  std::string words;
  SV_RETURN_IF_ERROR(JoinWords(word_list, &words));
  SV_RETURN_IF_ERROR(sink("embedding/meta", std::to_string(word_list.size()) + " " +
                                                std::to_string(dim)));
  return sink("embedding/words", words);
}

StatusOr<std::vector<std::string>> SplitWords(const std::string& words, size_t expected) {
  std::vector<std::string> out;
  out.reserve(expected);
  size_t start = 0;
  while (start < words.size()) {
    const size_t nl = words.find('\n', start);
    if (nl == std::string::npos) break;
    out.emplace_back(words.substr(start, nl - start));
    start = nl + 1;
  }
  if (out.size() != expected) {
    return Status::Corruption("entry 'embedding/words' holds " + std::to_string(out.size()) +
                              " words, 'embedding/meta' says " + std::to_string(expected));
  }
  return out;
}

}  // namespace

Status WriteEmbeddingEntries(const Embeddings& e, const SnapshotSink& sink) {
  if (e.dim <= 0) return Status::InvalidArgument("embedding dim must be positive");
  if (e.vectors.size() != e.words.size() * static_cast<size_t>(e.dim)) {
    return Status::InvalidArgument("embedding has " + std::to_string(e.vectors.size()) +
                                   " floats for " + std::to_string(e.words.size()) + " x " +
                                   std::to_string(e.dim));
  }
  std::vector<const float*> rows(e.words.size());
  for (size_t r = 0; r < rows.size(); ++r) rows[r] = e.vectors.data() + r * e.dim;
  return WriteEmbeddingEntries(e.words, rows, e.dim, sink);
}

Status WriteEmbeddingEntries(const std::vector<std::string>& word_list,
                             const std::vector<const float*>& rows, int dim,
                             const SnapshotSink& sink) {
  if (dim <= 0) return Status::InvalidArgument("embedding dim must be positive");
  if (rows.size() != word_list.size()) {
    return Status::InvalidArgument("embedding has " + std::to_string(rows.size()) + " rows for " +
                                   std::to_string(word_list.size()) + " words");
  }
  SV_RETURN_IF_ERROR(WriteWords(word_list, dim, sink));
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  const size_t rows_per_chunk = std::max<size_t>(1, kChunkBytes / row_bytes);
  std::string chunk_bytes;
  size_t chunk = 0;
  for (size_t r = 0; r < rows.size(); r += rows_per_chunk, ++chunk) {
    const size_t n = std::min(rows_per_chunk, rows.size() - r);
    chunk_bytes.resize(n * row_bytes);
    for (size_t q = 0; q < n; ++q) {
      std::memcpy(chunk_bytes.data() + q * row_bytes, rows[r + q], row_bytes);
    }
    SV_RETURN_IF_ERROR(sink(RowsKey(chunk), chunk_bytes));
  }
  return Status::Ok();
}

Status WriteEmbeddingTable(const std::vector<std::string>& word_list,
                           const std::vector<uint32_t>& slots,
                           const std::vector<const float*>& table_rows, int dim, int stride,
                           size_t rows_per_chunk, const SnapshotSink& sink) {
  if (dim <= 0 || stride < dim || rows_per_chunk == 0) {
    return Status::InvalidArgument("embedding table needs 0 < dim <= stride and rows per chunk");
  }
  if (slots.size() != word_list.size()) {
    return Status::InvalidArgument("embedding has " + std::to_string(slots.size()) +
                                   " slots for " + std::to_string(word_list.size()) + " words");
  }
  std::vector<bool> used(table_rows.size(), false);
  for (uint32_t s : slots) {
    if (s >= table_rows.size() || used[s] || table_rows[s] == nullptr) {
      return Status::InvalidArgument("embedding slot " + std::to_string(s) +
                                     " is outside the table of " +
                                     std::to_string(table_rows.size()) +
                                     " rows, used twice or has no row");
    }
    used[s] = true;
  }
  SV_RETURN_IF_ERROR(WriteWords(word_list, dim, sink));
  SV_RETURN_IF_ERROR(sink("embedding/slots",
                          std::string_view(reinterpret_cast<const char*>(slots.data()),
                                           slots.size() * sizeof(uint32_t))));
  SV_RETURN_IF_ERROR(sink("embedding/table", std::to_string(table_rows.size()) + " " +
                                                 std::to_string(stride)));
  const size_t row_bytes = static_cast<size_t>(stride) * sizeof(float);
  std::string chunk_bytes;
  size_t chunk = 0;
  for (size_t r = 0; r < table_rows.size(); r += rows_per_chunk, ++chunk) {
    const size_t n = std::min(rows_per_chunk, table_rows.size() - r);
    chunk_bytes.assign(n * row_bytes, '\0');
    for (size_t q = 0; q < n; ++q) {
      if (table_rows[r + q] != nullptr) {
        std::memcpy(chunk_bytes.data() + q * row_bytes, table_rows[r + q], row_bytes);
      }
    }
    SV_RETURN_IF_ERROR(sink(TableKey(chunk), chunk_bytes));
  }
  return Status::Ok();
}

namespace {

// The table layout (WriteEmbeddingTable): each chunk's rows scattered to their words' places.
StatusOr<Embeddings> ReadTable(
    const std::function<StatusOr<std::string>(const std::string& key)>& get, size_t rows,
    int dim, const std::string& slots_bytes, std::vector<std::string> words) {
  if (slots_bytes.size() != rows * sizeof(uint32_t)) {
    return Status::Corruption("entry 'embedding/slots' has the wrong size");
  }
  StatusOr<std::string> table = get("embedding/table");
  if (!table.ok()) return Status::Corruption("entry 'embedding/table': " + table.status().message());
  unsigned long long table_rows = 0;
  int stride = 0;
  if (std::sscanf(table->c_str(), "%llu %d", &table_rows, &stride) != 2 || table_rows < rows ||
      table_rows > (uint64_t{1} << 32) || stride < dim || stride > (1 << 20)) {
    return Status::Corruption("entry 'embedding/table' is malformed: '" + *table + "'");
  }
  std::vector<int64_t> place(table_rows, -1);  // table row -> word
  for (size_t i = 0; i < rows; ++i) {
    uint32_t s = 0;
    std::memcpy(&s, slots_bytes.data() + i * sizeof(uint32_t), sizeof s);
    if (s >= table_rows || place[s] >= 0) {
      return Status::Corruption("entry 'embedding/slots' names row " + std::to_string(s) +
                                " outside the table or twice");
    }
    place[s] = static_cast<int64_t>(i);
  }
  Embeddings e;
  e.dim = dim;
  e.words = std::move(words);
  e.vectors.resize(rows * static_cast<size_t>(dim));
  const size_t row_bytes = static_cast<size_t>(stride) * sizeof(float);
  const size_t vector_bytes = static_cast<size_t>(dim) * sizeof(float);
  size_t have = 0;  // table rows read
  for (size_t chunk = 0; have < table_rows; ++chunk) {
    StatusOr<std::string> part = get(TableKey(chunk));
    if (!part.ok()) {
      return Status::Corruption("entry '" + TableKey(chunk) + "': " + part.status().message());
    }
    if (part->empty() || part->size() % row_bytes != 0 ||
        part->size() / row_bytes > table_rows - have) {
      return Status::Corruption("entry '" + TableKey(chunk) + "' has the wrong size");
    }
    const size_t n = part->size() / row_bytes;
    for (size_t q = 0; q < n; ++q) {
      const int64_t i = place[have + q];
      if (i >= 0) {
        std::memcpy(e.vectors.data() + static_cast<size_t>(i) * dim, part->data() + q * row_bytes,
                    vector_bytes);
      }
    }
    have += n;
  }
  return e;
}

}  // namespace

StatusOr<Embeddings> ReadEmbeddingEntries(
    const std::function<StatusOr<std::string>(const std::string& key)>& get) {
  StatusOr<std::string> meta = get("embedding/meta");
  if (!meta.ok()) {
    if (meta.status().code() == StatusCode::kNotFound) {
      return Status::NotFound("snapshot holds no embedding (entry 'embedding/meta')");
    }
    return meta.status();
  }
  unsigned long long rows = 0;
  int dim = 0;
  if (std::sscanf(meta->c_str(), "%llu %d", &rows, &dim) != 2 || dim <= 0) {
    return Status::Corruption("entry 'embedding/meta' is malformed: '" + *meta + "'");
  }
  StatusOr<std::string> words = get("embedding/words");
  if (!words.ok()) return Status::Corruption("entry 'embedding/words': " + words.status().message());
  StatusOr<std::vector<std::string>> word_list = SplitWords(*words, rows);
  if (!word_list.ok()) return word_list.status();
  words->clear();
  words->shrink_to_fit();
  StatusOr<std::string> slots = get("embedding/slots");
  if (slots.ok()) return ReadTable(get, rows, dim, *slots, std::move(*word_list));
  if (slots.status().code() != StatusCode::kNotFound) return slots.status();
  Embeddings e;
  e.dim = dim;
  e.words = std::move(*word_list);
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  e.vectors.resize(rows * static_cast<size_t>(dim));
  size_t have = 0;
  char* out = reinterpret_cast<char*>(e.vectors.data());
  for (size_t chunk = 0; have < rows * row_bytes; ++chunk) {
    StatusOr<std::string> part = get(RowsKey(chunk));
    if (!part.ok()) {
      return Status::Corruption("entry '" + RowsKey(chunk) + "': " + part.status().message());
    }
    if (part->empty() || part->size() % row_bytes != 0 || have + part->size() > rows * row_bytes) {
      return Status::Corruption("entry '" + RowsKey(chunk) + "' has the wrong size");
    }
    std::memcpy(out + have, part->data(), part->size());
    have += part->size();
  }
  return e;
}

StatusOr<Embeddings> InterleaveEmbeddings(std::vector<Embeddings> shards,
                                          const std::vector<std::vector<double>>* counts,
                                          std::vector<double>* joined_counts) {
  if (joined_counts) joined_counts->clear();
  if (shards.empty()) return Status::InvalidArgument("no embedding to join");
  size_t total = 0, longest = 0;
  bool by_count = counts != nullptr;
  if (by_count) SV_CHECK(counts->size() == shards.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].dim != shards[0].dim) {
      return Status::InvalidArgument("shard " + std::to_string(i) + " has dim " +
                                     std::to_string(shards[i].dim) + ", shard 0 has dim " +
                                     std::to_string(shards[0].dim));
    }
    if (by_count && (*counts)[i].size() != shards[i].rows()) {
      if (!(*counts)[i].empty()) {
        return Status::InvalidArgument("shard " + std::to_string(i) + " has " +
                                       std::to_string((*counts)[i].size()) + " counts for " +
                                       std::to_string(shards[i].rows()) + " words");
      }
      by_count = false;  // a shard without counts: by rank
    }
    total += shards[i].rows();
    longest = std::max(longest, shards[i].rows());
  }
  // (shard, rank) in the union's order.
  std::vector<std::pair<uint32_t, size_t>> order;
  order.reserve(total);
  if (by_count) {
    for (size_t i = 0; i < shards.size(); ++i) {
      for (size_t r = 0; r < shards[i].rows(); ++r) order.emplace_back(i, r);
    }
    std::sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
      const double cx = (*counts)[x.first][x.second], cy = (*counts)[y.first][y.second];
      if (cx != cy) return cx > cy;
      return x.second != y.second ? x.second < y.second : x.first < y.first;
    });
  } else {
    if (shards.size() == 1) return std::move(shards[0]);
    for (size_t rank = 0; rank < longest; ++rank) {
      for (size_t i = 0; i < shards.size(); ++i) {
        if (rank < shards[i].rows()) order.emplace_back(i, rank);
      }
    }
  }
  Embeddings out;
  out.dim = shards[0].dim;
  const size_t dim = static_cast<size_t>(out.dim);
  out.words.reserve(total);
  out.vectors.resize(total * dim);
  if (by_count && joined_counts) joined_counts->reserve(total);
  std::unordered_set<std::string_view> seen;
  size_t row = 0;
  for (const auto& [shard, rank] : order) {
    const Embeddings& e = shards[shard];
    if (!seen.insert(e.words[rank]).second) continue;
    out.words.push_back(e.words[rank]);
    std::memcpy(out.vectors.data() + row * dim, e.row(rank), dim * sizeof(float));
    if (by_count && joined_counts) joined_counts->push_back((*counts)[shard][rank]);
    ++row;
  }
  out.vectors.resize(row * dim);
  return out;
}

Status WriteEmbeddingCounts(const std::vector<double>& counts, const SnapshotSink& sink) {
  for (size_t i = 0; i < counts.size(); ++i) {
    if (!(counts[i] >= 0) || !std::isfinite(counts[i])) {
      return Status::InvalidArgument("count of word " + std::to_string(i) + " is " +
                                     std::to_string(counts[i]) + " (a count is finite and >= 0)");
    }
  }
  return sink(kCountsKey, std::string_view(reinterpret_cast<const char*>(counts.data()),
                                           counts.size() * sizeof(double)));
}

StatusOr<std::vector<double>> ReadEmbeddingCounts(
    const std::function<StatusOr<std::string>(const std::string& key)>& get, size_t rows) {
  StatusOr<std::string> bytes = get(kCountsKey);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) {
      return Status::NotFound(std::string("snapshot holds no word counts (entry '") + kCountsKey +
                              "')");
    }
    return bytes.status();
  }
  if (bytes->size() != rows * sizeof(double)) {
    return Status::Corruption(std::string("entry '") + kCountsKey + "' holds " +
                              std::to_string(bytes->size()) + " bytes for " + std::to_string(rows) +
                              " words (8 bytes each)");
  }
  std::vector<double> counts(rows);
  // An empty vector's data() may be null, and memcpy to null is undefined even for 0 bytes (a
  // snapshot taken before any word was admitted has no rows: UBSan stopped `run` there).
  if (rows > 0) std::memcpy(counts.data(), bytes->data(), bytes->size());
  for (size_t i = 0; i < rows; ++i) {
    if (!(counts[i] >= 0) || !std::isfinite(counts[i])) {
      return Status::Corruption(std::string("entry '") + kCountsKey + "': count of word " +
                                std::to_string(i) + " is not a finite number >= 0");
    }
  }
  return counts;
}

StatusOr<std::vector<double>> ReadEmbeddingCountsIfAny(
    const std::function<StatusOr<std::string>(const std::string& key)>& get, size_t rows) {
  StatusOr<std::vector<double>> counts = ReadEmbeddingCounts(get, rows);
  if (!counts.ok() && counts.status().code() == StatusCode::kNotFound) {
    return std::vector<double>{};
  }
  return counts;
}

}  // namespace streamvec

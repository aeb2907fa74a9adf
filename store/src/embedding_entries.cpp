#include "streamvec/store/embedding_entries.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace streamvec {
namespace {

// Rows per entry: small values keep RocksDB's write batches, memtables and table blocks (each
// holds a value whole) small during a snapshot. Readers accept any chunking.
constexpr size_t kChunkBytes = size_t{256} << 10;

std::string RowsKey(size_t chunk) { return "embedding/rows/" + std::to_string(chunk); }

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
  std::string words;
  for (const std::string& w : word_list) {
    if (w.empty() || w.find('\n') != std::string::npos) {
      return Status::InvalidArgument("embedding word is empty or holds a newline");
    }
    words += w;
    words += '\n';
  }
  SV_RETURN_IF_ERROR(sink("embedding/meta", std::to_string(word_list.size()) + " " +
                                                std::to_string(dim)));
  SV_RETURN_IF_ERROR(sink("embedding/words", words));
  words = std::string();
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
  Embeddings e;
  e.dim = dim;
  e.words.reserve(rows);
  size_t start = 0;
  while (start < words->size()) {
    const size_t nl = words->find('\n', start);
    if (nl == std::string::npos) break;
    e.words.emplace_back(words->substr(start, nl - start));
    start = nl + 1;
  }
  if (e.words.size() != rows) {
    return Status::Corruption("entry 'embedding/words' holds " + std::to_string(e.words.size()) +
                              " words, 'embedding/meta' says " + std::to_string(rows));
  }
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

}  // namespace streamvec

// The serving copy of a model inside a snapshot: the admitted words (most frequent first) and
// their input vectors, dense. Trainers write it next to their learner state; api/ reads only this,
// so serving never depends on a learner's private state format.
//
// Entries (keys relative to the snapshot):
//   "embedding/meta"       "<rows> <dim>"
//   "embedding/words"      the words joined by '\n'
//   "embedding/rows/<i>"   chunk i (i = 0, 1, ...) of row-major float32 rows (host byte order),
//                          at most 256 KiB each (4 MiB in earlier snapshots), whole rows only
// or, written by WriteEmbeddingTable, the rows in a stable order of their own (a learner's
// slots), so that a snapshot of a slowly changing model has few entries whose bytes changed:
//   "embedding/slots"      uint32 per word (host byte order): its row in the table
//   "embedding/table"      "<table rows> <stride>" (stride: floats per row, >= dim; the vector
//                          is a row's first dim floats)
//   "embedding/table/<i>"  chunk i (8 decimal digits) of the table's float32 rows, whole rows
// and, optionally (WriteEmbeddingCounts; snapshots written before it have none):
//   "embedding/counts"     float64 per word (host byte order), in the order of the words: the
//                          writer's running count of each word (occurrences seen, as the trainer
//                          counts them), which orders the vocabulary for browsing
#ifndef STREAMVEC_STORE_EMBEDDING_ENTRIES_H_
#define STREAMVEC_STORE_EMBEDDING_ENTRIES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/store/state_store.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec {

// Writes `e` (e.words.size() x e.dim) as entries. Errors: InvalidArgument for dim <= 0 or a word
// holding '\n'; whatever the sink returns.
Status WriteEmbeddingEntries(const Embeddings& e, const SnapshotSink& sink);

// The same entries from `words` and one pointer per word to its `dim` floats (rows need not be
// contiguous: a learner's padded rows are passed as they are). Holds one 256 KiB chunk at a time
// instead of a dense copy of all rows. Errors as above, and InvalidArgument if the sizes differ.
Status WriteEmbeddingEntries(const std::vector<std::string>& words,
                             const std::vector<const float*>& rows, int dim,
                             const SnapshotSink& sink);

// The table layout: `words` in serving order (most frequent first), `slots[i]` the table row of
// words[i], `table_rows[r]` the `stride` floats of table row r (nullptr: written as zeros),
// `rows_per_chunk` rows an entry. With a learner's own row layout (stride, chunking) a chunk
// equals the learner's state entry of the same rows, and the state store writes it once.
// Errors: InvalidArgument for dim <= 0, stride < dim, rows_per_chunk 0, a word empty or holding
// '\n', sizes that differ, a slot outside the table, used twice or without a row; the sink's.
Status WriteEmbeddingTable(const std::vector<std::string>& words,
                           const std::vector<uint32_t>& slots,
                           const std::vector<const float*>& table_rows, int dim, int stride,
                           size_t rows_per_chunk, const SnapshotSink& sink);

// Reads entries written by WriteEmbeddingEntries or WriteEmbeddingTable. Errors: NotFound if the snapshot has none,
// Corruption naming the entry that is malformed or missing.
StatusOr<Embeddings> ReadEmbeddingEntries(
    const std::function<StatusOr<std::string>(const std::string& key)>& get);

// The union of several shards' embeddings (parameter-node shards, which hold disjoint words,
// issue 20). With `counts` (one vector per shard, SV_CHECK) holding every shard's word counts
// (counts[i][r]: shard i's word r, as ReadEmbeddingCountsIfAny gives them), the words are in count
// order, most frequent first (ties: the lower rank, then the lower shard), and `joined_counts`
// (optional) receives the union's counts. Without (`counts` null, or some shard's counts missing:
// an empty vector), they are interleaved by rank (rank 0 of shard 0, of shard 1, ..., then rank 1
// of each, ...; a shard's words are most frequent first and words are spread over shards by a hash,
// so the result is close to most frequent first overall) and `joined_counts` is cleared. A word
// held by several shards keeps its first row (and count). Errors: InvalidArgument for no shard,
// dims that differ (naming the shards), or a shard's counts of another size than its words.
StatusOr<Embeddings> InterleaveEmbeddings(std::vector<Embeddings> shards,
                                          const std::vector<std::vector<double>>* counts = nullptr,
                                          std::vector<double>* joined_counts = nullptr);

// Writes "embedding/counts": counts[i] is the count of the i-th word of the embedding.
// Errors: InvalidArgument for a negative or non-finite count; the sink's.
Status WriteEmbeddingCounts(const std::vector<double>& counts, const SnapshotSink& sink);

// Reads "embedding/counts" of an embedding of `rows` words. Errors: NotFound when the snapshot
// has none (written before counts were, or by a writer without counts), Corruption when its size
// is not rows x 8 bytes or a count is negative or not finite.
StatusOr<std::vector<double>> ReadEmbeddingCounts(
    const std::function<StatusOr<std::string>(const std::string& key)>& get, size_t rows);

// ReadEmbeddingCounts, with a snapshot that has no counts giving an empty vector (readers that
// serve or join such snapshots without counts). Errors: Corruption as above.
StatusOr<std::vector<double>> ReadEmbeddingCountsIfAny(
    const std::function<StatusOr<std::string>(const std::string& key)>& get, size_t rows);

}  // namespace streamvec

#endif  // STREAMVEC_STORE_EMBEDDING_ENTRIES_H_

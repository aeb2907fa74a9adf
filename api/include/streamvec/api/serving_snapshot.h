// What `streamvec serve` answers queries from: one published snapshot's embedding, copied into
// memory and prepared for exact cosine queries, plus where snapshots come from (SnapshotSource).
//
// A ServingSnapshot is immutable once built, so any number of request threads share it through a
// std::shared_ptr<const ServingSnapshot> while the server swaps in a newer one; the old one is
// freed when its last request finishes.
#ifndef STREAMVEC_API_SERVING_SNAPSHOT_H_
#define STREAMVEC_API_SERVING_SNAPSHOT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/store/snapshot_reader.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec {
class CharModel;  // streamvec/charmodel/char_model.h
}  // namespace streamvec

namespace streamvec::api {

// Longest word (bytes) the character model is asked about; a longer query is InvalidArgument.
inline constexpr size_t kMaxCharModelWordBytes = 4096;

// An embedding ready to serve. Memory: about 2 x rows x dim floats (the vectors as trained, and
// unit-length copies laid out for the neighbour scan) plus the word -> row map.
// Thread safety: immutable; all methods are const and safe from any thread.
class ServingSnapshot {
 public:
  struct Neighbor {
    size_t row = 0;        // row of the neighbour (0 = most frequent word)
    float similarity = 0;  // cosine similarity with the query, in [-1, 1]
    // The order of every neighbour list: similarity descending, ties by row ascending.
    static bool Better(const Neighbor& x, const Neighbor& y) {
      return x.similarity > y.similarity || (x.similarity == y.similarity && x.row < y.row);
    }
  };

  // Takes the embedding (rows most frequent first), the snapshot it was read from and, when the
  // snapshot has them, the words' counts (counts[row]; empty: unknown; otherwise one per row,
  // finite and >= 0, else a CHECK fails). Duplicate words: the first row wins. All-zero rows
  // have cosine 0 with everything. Cost beyond the copy: a sort of the rows by count.
  // `char_model` (may be null): the snapshot's character model (kCharModelEntry), which gives
  // vectors to words outside the vocabulary (WordVector); its dim must equal the embedding's.
  ServingSnapshot(Embeddings embeddings, SnapshotInfo info, std::vector<double> counts = {},
                  std::shared_ptr<const CharModel> char_model = nullptr);

  const SnapshotInfo& info() const { return info_; }
  uint64_t version() const { return info_.version; }
  size_t rows() const { return emb_.words.size(); }
  int dim() const { return emb_.dim; }
  // The embedding as trained (rows most frequent first), e.g. for eval/ on the snapshot.
  const Embeddings& embeddings() const { return emb_; }

  // Row of `word` (exact, case-sensitive byte match), or nullopt if it is not in the vocabulary.
  std::optional<size_t> Find(std::string_view word) const;
  const std::string& word(size_t row) const { return emb_.words[row]; }
  // The vector as trained (dim floats, not normalised).
  const float* vector(size_t row) const { return emb_.row(row); }
  // Counts, from the snapshot's "embedding/counts" (the trainer's running count of each word).
  bool has_counts() const { return !counts_.empty(); }
  // The count of `row`; NaN when the snapshot has no counts.
  double count(size_t row) const;
  // Rows in count order: count descending, ties by row ascending (the snapshot's own order, most
  // frequent first, when it has no counts). rows() entries.
  const std::vector<uint32_t>& rows_by_count() const { return by_count_; }
  // 1-based position of `row` in rows_by_count().
  size_t rank(size_t row) const { return static_cast<size_t>(rank_[row]) + 1; }

  // The character model of the snapshot, or null (docs/char-model.md).
  const CharModel* char_model() const { return char_model_.get(); }

  // A word's vector (dim floats, as trained) into *vector: its table row when the word is in
  // the vocabulary (*row set), else the character model's vector (*row = nullopt). Errors:
  // NotFound when the word is not in the vocabulary and the snapshot has no character model;
  // InvalidArgument when the character model cannot read the word (empty, invalid UTF-8, a
  // control character) or it is over kMaxCharModelWordBytes. Cost: a hash lookup, or one
  // encoding of the word (tens of microseconds).
  Status WordVector(std::string_view word, std::vector<float>* vector,
                    std::optional<size_t>* row) const;

  // Writes the unit-length copy of `row` into out[0 .. dim) (all zeros for a zero row).
  void UnitVector(size_t row, float* out) const;

  // Dot product of row's unit-length vector with `unit_query` (dim floats): the cosine when the
  // query is unit length (0 for a zero row). Reads the contiguous row (fast for a few hundred
  // candidates); equal to the scan's score up to float rounding (a few ulp).
  float UnitDot(size_t row, const float* unit_query) const;
  // Asks the CPU to fetch what UnitDot(row, ...) reads (the row and its norm) into the cache,
  // so that scoring a list of candidates overlaps their cache misses. A hint: no effect on
  // results.
  void PrefetchRow(size_t row) const;

  // Cosine similarity of two rows, in [-1, 1]; 0 when either row is all zeros.
  float Similarity(size_t a, size_t b) const;

  // The k rows most cosine-similar to `row` (< rows()), `row` itself excluded: an exact scan of
  // every row. Sorted by similarity descending, ties by row ascending; fewer than k when the
  // vocabulary is smaller. Cost: rows x dim multiply-adds (about 0.3-1 ms for 50k x 100 on one
  // core).
  std::vector<Neighbor> Neighbors(size_t row, size_t k) const;

  // The k rows among the first `limit_rows` (clamped to rows()) with the highest dot product with
  // `query` (dim floats; a unit vector gives cosines), rows in `exclude` skipped. Exact scan, same
  // order and cost as Neighbors.
  std::vector<Neighbor> NearestToVector(const float* query, size_t k,
                                        std::span<const size_t> exclude, size_t limit_rows) const;

 private:
  Embeddings emb_;  // rows x dim, row-major, as trained
  SnapshotInfo info_;
  std::vector<float> norms_;  // L2 norm of each row
  std::vector<double> counts_;      // per row; empty: the snapshot has none
  std::vector<uint32_t> by_count_;  // rows in count order
  std::vector<uint32_t> rank_;      // row -> its index in by_count_
  // Unit rows in blocks of kBlock rows, each block column-major: the unit value of row
  // b * kBlock + i, component j, is at blocks_[(b * dim + j) * kBlock + i] (last block padded with
  // zeros). The scan then multiplies contiguous columns, which vectorises without reordering sums.
  BigVector<float> blocks_;  // 2 MiB pages: one of these per snapshot, as large as the rows
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> row_of_;
  std::shared_ptr<const CharModel> char_model_;  // null: table words only

  static constexpr size_t kBlock = 256;
};

// Where the server gets snapshots from. The server calls LoadNewerThan from its polling thread
// and List from request threads, so implementations must be thread-safe.
class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;
  // Published snapshots, oldest first (empty when none yet).
  virtual StatusOr<std::vector<SnapshotInfo>> List() = 0;
  // The newest published snapshot, loaded and ready to serve, if its version is greater than
  // `version`; nullptr when there is nothing newer (or nothing published yet).
  // Errors: Corruption / IoError when the newest snapshot cannot be read or holds no embedding.
  virtual StatusOr<std::shared_ptr<const ServingSnapshot>> LoadNewerThan(uint64_t version) = 0;
  // Published snapshots left out at the last listing because they are damaged (0 if the source
  // cannot tell).
  virtual size_t damaged() const { return 0; }
  // Published snapshot `version`, loaded and ready to serve (a request pinning an older
  // snapshot). Called from request threads. Errors: NotFound naming the version when it is not
  // published any more (or never was, or this source keeps no older snapshots: the default);
  // Corruption / IoError when it cannot be read.
  virtual StatusOr<std::shared_ptr<const ServingSnapshot>> Load(uint64_t version);
};

// Reads the snapshots a StateStore publishes in `state_dir` (SnapshotReader): List is
// SnapshotReader::List (a damaged checkpoint is logged once, counted in damaged() and skipped),
// LoadNewerThan opens the newest checkpoint and copies its embedding entries, word counts and
// character model (kCharModelEntry), if any (store/embedding_entries.h), into a
// ServingSnapshot; Load does the same for a retained older checkpoint (SnapshotReader::Open).
// A checkpoint whose database does not open or read back (Corruption: a truncated table file, a
// bad checksum) is damaged too: LoadNewerThan logs it once, leaves it out of List from then on,
// counts it in damaged() and loads the next older one instead.
// A missing or empty directory is "nothing published yet", not an error, so a server can start
// before its trainer.
std::shared_ptr<SnapshotSource> NewStateDirSnapshotSource(std::string state_dir);

// The union of several state directories, one per parameter-node shard (`serve --state A --state
// B`): their newest snapshots' embeddings joined by InterleaveEmbeddings (store/). It lists one
// snapshot, the newest combination, whose version is the sum of the shards' newest versions (so
// it grows whenever a shard publishes; a shard whose state is started afresh must be served anew),
// created_at the newest shard's, and metadata {"kind": "shards", "shards": [{"state", "version",
// "metadata"}...]}. Nothing is published until every shard has published. Errors: Corruption /
// IoError as NewStateDirSnapshotSource, naming the directory; Corruption for shards of different
// dims.
std::shared_ptr<SnapshotSource> NewShardedStateDirSnapshotSource(std::vector<std::string> dirs);

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SERVING_SNAPSHOT_H_

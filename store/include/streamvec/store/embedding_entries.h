// The serving copy of a model inside a snapshot: the admitted words (most frequent first) and
// their input vectors, dense. Trainers write it next to their learner state; api/ reads only this,
// so serving never depends on a learner's private state format.
//
// Entries (keys relative to the snapshot):
//   "embedding/meta"       "<rows> <dim>"
//   "embedding/words"      the words joined by '\n'
//   "embedding/rows/<i>"   chunk i (i = 0, 1, ...) of row-major float32 rows (host byte order),
//                          at most 256 KiB each (4 MiB in earlier snapshots), whole rows only
#ifndef STREAMVEC_STORE_EMBEDDING_ENTRIES_H_
#define STREAMVEC_STORE_EMBEDDING_ENTRIES_H_

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

// Reads entries written by WriteEmbeddingEntries. Errors: NotFound if the snapshot has none,
// Corruption naming the entry that is malformed or missing.
StatusOr<Embeddings> ReadEmbeddingEntries(
    const std::function<StatusOr<std::string>(const std::string& key)>& get);

}  // namespace streamvec

#endif  // STREAMVEC_STORE_EMBEDDING_ENTRIES_H_

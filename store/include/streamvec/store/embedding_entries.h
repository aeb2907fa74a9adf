// The serving copy of a model inside a snapshot: the admitted words (most frequent first) and
// their input vectors, dense. Trainers write it next to their learner state; api/ reads only this,
// so serving never depends on a learner's private state format.
//
// Entries (keys relative to the snapshot):
//   "embedding/meta"       "<rows> <dim>"
//   "embedding/words"      the words joined by '\n'
//   "embedding/rows/<i>"   chunk i (i = 0, 1, ...) of row-major float32 rows (host byte order),
//                          at most 4 MiB each, whole rows only
#ifndef STREAMVEC_STORE_EMBEDDING_ENTRIES_H_
#define STREAMVEC_STORE_EMBEDDING_ENTRIES_H_

#include <functional>
#include <string>

#include "streamvec/base/status.h"
#include "streamvec/store/state_store.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec {

// Writes `e` (e.words.size() x e.dim) as entries. Errors: InvalidArgument for dim <= 0 or a word
// holding '\n'; whatever the sink returns.
Status WriteEmbeddingEntries(const Embeddings& e, const SnapshotSink& sink);

// Reads entries written by WriteEmbeddingEntries. Errors: NotFound if the snapshot has none,
// Corruption naming the entry that is malformed or missing.
StatusOr<Embeddings> ReadEmbeddingEntries(
    const std::function<StatusOr<std::string>(const std::string& key)>& get);

}  // namespace streamvec

#endif  // STREAMVEC_STORE_EMBEDDING_ENTRIES_H_

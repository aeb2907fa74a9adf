// Checking a state directory, and making a damaged one resumable again.
//
// A state directory (state_store.h) holds the live RocksDB database a writer resumes from and
// the checkpoints it publishes for readers (snapshot_reader.h). A bad disk or a stray write can
// damage either. VerifyState reads every byte of each and says which are intact; RepairState
// makes the directory one a writer resumes from again: when the live database is damaged it is
// replaced by the newest intact checkpoint. Nothing is deleted: what is damaged is moved under
// <state_dir>/damaged/<UTC time>/ (kept for inspection; remove it when no longer needed).
//
// A checkpoint (or the live database) is intact when: its metadata.json is a JSON object naming
// its version (checkpoints only) and equal to the metadata stored inside; RocksDB opens it
// (every table file present at the size its MANIFEST records); every block of every table
// file matches its checksum (DB::VerifyChecksum); its format mark is a streamvec state's and
// meta/current its version; its snapshot manifest decodes, and every entry's bytes are present
// with the size and XXH3-128 hash the manifest records. The cost is a read of every byte.
//
// Thread safety: free functions; each takes the state's LOCK while it looks at or changes the
// live database, so it never races a writer (it reports the directory in use instead).
#ifndef STREAMVEC_STORE_STATE_CHECK_H_
#define STREAMVEC_STORE_STATE_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec {

// What VerifyState found about the live database or one checkpoint.
struct PartHealth {
  uint64_t version = 0;  // the snapshot it holds (the checkpoint's name; the live database's
                         // meta/current when readable, else 0)
  std::string path;      // the checkpoint's directory, or the state directory (live database)
  Status status;         // OK when intact, else what is damaged (Corruption, IoError)
};

struct StateHealth {
  PartHealth live;           // the live database: what a writer resumes from
  bool live_checked = true;  // false: a running process holds the state (not checked; `live`
                             // says FailedPrecondition)
  std::vector<PartHealth> checkpoints;  // every published checkpoint, oldest first
  // The live database (when checked) and every checkpoint are intact.
  bool intact() const;
};

// Checks the live database and every published checkpoint of `state_dir` (see above). A
// checkpoint the writer retires while it is checked is left out. Errors: NotFound when
// state_dir holds no streamvec state (neither a RocksDB CURRENT file nor checkpoints/), IoError
// listing it.
StatusOr<StateHealth> VerifyState(const std::string& state_dir);

// What RepairState did.
struct StateRepair {
  std::vector<std::string> actions;  // one line per change; empty when nothing was damaged
  uint64_t version = 0;              // the live database's snapshot afterwards (0: none yet)
  std::string moved_to;              // where damaged parts were moved; empty if none
};

// Makes `state_dir` resumable from its newest intact snapshot: damaged checkpoints are moved
// aside; a damaged live database (or a missing CURRENT) is moved aside and rebuilt from the
// newest intact checkpoint (its table files hard-linked, the rest copied), so a writer resumes
// from that snapshot with its offsets; then the live snapshot is published again if its
// checkpoint was damaged (unless an intact checkpoint is newer than it). Never deletes or
// changes an intact checkpoint. Errors: NotFound (no streamvec state), FailedPrecondition when a
// running process holds the state, Corruption when the live database is damaged and no checkpoint
// is intact (nothing is changed then), IoError from the file system.
StatusOr<StateRepair> RepairState(const std::string& state_dir);

}  // namespace streamvec

#endif  // STREAMVEC_STORE_STATE_CHECK_H_

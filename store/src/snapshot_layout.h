// Private to store/: the on-disk names shared by StateStore (writer) and SnapshotReader.
//
// <state_dir>/                         the live RocksDB database (the writer's LOCK)
//   meta/format                        kStateFormat
//   meta/current                       decimal version of the current snapshot
//   meta/snapshot                      its metadata JSON (committed in the same batch)
//   snap/<version, 16 hex>/<key>       entries of that version
// <state_dir>/checkpoints/<v, 20 dec>/ a published snapshot, appears by one rename:
//   metadata.json                      the same metadata, readable without RocksDB
//   db/                                RocksDB checkpoint (hard links of the table files)
// <v>.partial/ (being built) and <v>.deleting/ (being removed) are never read.
#ifndef STREAMVEC_STORE_SRC_SNAPSHOT_LAYOUT_H_
#define STREAMVEC_STORE_SRC_SNAPSHOT_LAYOUT_H_

#include <rocksdb/status.h>

#include <cstdint>
#include <string>

#include "streamvec/base/status.h"

namespace streamvec::internal {

inline constexpr char kFormatKey[] = "meta/format";
inline constexpr char kCurrentKey[] = "meta/current";
inline constexpr char kMetadataKey[] = "meta/snapshot";
inline constexpr char kCheckpointsDir[] = "checkpoints";
inline constexpr char kMetadataFile[] = "metadata.json";
inline constexpr char kCheckpointDb[] = "db";
inline constexpr char kPartialSuffix[] = ".partial";
inline constexpr char kDeletingSuffix[] = ".deleting";

// "snap/<16 hex digits>/": the key prefix of a version's entries.
std::string SnapshotPrefix(uint64_t version);
// The 20-digit zero-padded decimal name of a published checkpoint (sorts like the number).
std::string CheckpointName(uint64_t version);
// True (and *version set) if `name` is exactly a CheckpointName.
bool ParseCheckpointName(const std::string& name, uint64_t* version);

// A RocksDB status as ours, prefixed with `what`.
Status FromRocks(const rocksdb::Status& s, const std::string& what);

// Writes `contents` to a new file `path` and fsyncs it. IoError naming the path.
Status WriteFileSynced(const std::string& path, const std::string& contents);
// fsyncs a directory (makes renames and new entries in it durable). IoError naming it.
Status SyncDir(const std::string& path);
// The whole file. NotFound if it does not exist, IoError otherwise.
StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace streamvec::internal

#endif  // STREAMVEC_STORE_SRC_SNAPSHOT_LAYOUT_H_

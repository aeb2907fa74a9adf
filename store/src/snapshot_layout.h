// Private to store/: the on-disk names shared by StateStore (writer) and SnapshotReader.
//
// <state_dir>/                         the live RocksDB database (the writer's LOCK)
//   meta/format                        kStateFormat (or kStateFormatV1: read, upgraded on write)
//   meta/current                       decimal version of the current snapshot
//   meta/snapshot                      its metadata JSON (committed in the same batch)
//   meta/manifest                      its Manifest: where each entry's bytes are (same batch)
//   data/<writer, 16 hex>/<key>        bytes of an entry of >= kDirectBytes, written by version
//                                      <writer> into table files of their own (ingested)
//   small/<writer, 16 hex>/<key>       bytes of a smaller entry (through the memtables)
//   snap/<version, 16 hex>/<key>       entries of a version in kStateFormatV1 (no manifest)
// A version refers to bytes written by itself or, where an entry's bytes are already on disk
// (the same key unchanged, or another entry with the same bytes), by an earlier version or
// another key: a writer's bytes are dropped (its table files at once) when no entry of the current
// version refers to them.
// <state_dir>/checkpoints/<v, 20 dec>/ a published snapshot, appears by one rename:
//   metadata.json                      the same metadata, readable without RocksDB
//   db/                                RocksDB checkpoint (hard links of the table files)
// <v>.partial/ (being built) and <v>.deleting/ (being removed) are never read.
#ifndef STREAMVEC_STORE_SRC_SNAPSHOT_LAYOUT_H_
#define STREAMVEC_STORE_SRC_SNAPSHOT_LAYOUT_H_

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/status.h>

#include <cstdarg>
#include <cstdint>
#include <map>
#include <string>

#include "streamvec/base/status.h"
#include "streamvec/store/snapshot_reader.h"

namespace streamvec::internal {

inline constexpr char kFormatKey[] = "meta/format";
inline constexpr char kCurrentKey[] = "meta/current";
inline constexpr char kMetadataKey[] = "meta/snapshot";
inline constexpr char kCheckpointsDir[] = "checkpoints";
inline constexpr char kMetadataFile[] = "metadata.json";
inline constexpr char kCheckpointDb[] = "db";
inline constexpr char kPartialSuffix[] = ".partial";
inline constexpr char kDeletingSuffix[] = ".deleting";
inline constexpr char kManifestKey[] = "meta/manifest";
// The first layout: every entry under snap/<version>/, no manifest.
inline constexpr char kStateFormatV1[] = "streamvec-state v1";
// Entries of at least this many bytes go to table files of their own ("data/").
inline constexpr size_t kDirectBytes = size_t{8} << 10;

// Where the bytes of one entry of a version are.
struct EntryRef {
  uint64_t writer = 0;  // the version that wrote them
  uint64_t size = 0;    // bytes
  uint64_t hash = 0;    // XXH3-128 of the bytes (low, high)
  uint64_t hash_high = 0;
  bool direct = false;     // under data/ (else small/)
  std::string stored_key;  // the entry key they were written under; empty: this entry's own
};

// The entries of one version and the bytes each earlier writer still has on disk.
struct Manifest {
  std::map<std::string, EntryRef> entries;
  std::map<uint64_t, uint64_t> written;  // writer -> bytes it wrote (live and superseded)
};

std::string EncodeManifest(const Manifest& m);
// Corruption (naming `where`) if `bytes` is not a manifest.
StatusOr<Manifest> DecodeManifest(const std::string& bytes, const std::string& where);

// "data/<16 hex>/" and "small/<16 hex>/": a writer's key prefixes.
std::string DataPrefix(uint64_t writer);
std::string SmallPrefix(uint64_t writer);
// The database key holding an entry's bytes.
std::string EntryKey(const std::string& key, const EntryRef& ref);

// Reads an entry of `version` from a database of either layout: through `manifest` when the
// version has one, else under snap/<version>/ (kStateFormatV1). NotFound naming the key.
StatusOr<std::string> ReadEntry(rocksdb::DB* db, uint64_t version, const Manifest* manifest,
                                const std::string& key, const std::string& where);

// "snap/<16 hex digits>/": the key prefix of a version's entries.
std::string SnapshotPrefix(uint64_t version);
// The 20-digit zero-padded decimal name of a published checkpoint (sorts like the number).
std::string CheckpointName(uint64_t version);
// True (and *version set) if `name` is exactly a CheckpointName.
bool ParseCheckpointName(const std::string& name, uint64_t* version);

// A reader must not write into a published checkpoint (RocksDB would put its LOG there).
class NullLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
};

// A checkpoint's metadata.json (read from `path`): Corruption naming the path unless it is a
// JSON object with an unsigned "version" and a numeric "created_at".
StatusOr<SnapshotInfo> ParseSnapshotInfo(const std::string& json, const std::string& path);

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

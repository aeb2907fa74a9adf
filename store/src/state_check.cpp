#include "streamvec/store/state_check.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "snapshot_layout.h"
#include "state_restore.h"
#include "streamvec/store/state_store.h"

namespace streamvec {
namespace internal {
namespace {

namespace fs = std::filesystem;

// Where damaged parts of a state go, and the staging directory of a rebuilt live database.
constexpr char kDamagedDir[] = "damaged";
constexpr char kRestoreStaging[] = "restore.partial";

Status FsError(const std::string& what, const fs::path& path, const std::error_code& ec) {
  return Status::IoError(what + " " + path.string() + ": " + ec.message());
}

// The published checkpoints under dir/checkpoints, oldest first (none when it is missing).
StatusOr<std::vector<std::pair<uint64_t, fs::path>>> CheckpointDirs(const std::string& dir) {
  std::vector<std::pair<uint64_t, fs::path>> out;
  std::error_code ec;
  const fs::path root = fs::path(dir) / kCheckpointsDir;
  if (!fs::is_directory(root, ec)) return out;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    uint64_t v = 0;
    if (ParseCheckpointName(it->path().filename().string(), &v) && it->is_directory()) {
      out.emplace_back(v, it->path());
    }
  }
  if (ec) return FsError("cannot list", root, ec);
  std::sort(out.begin(), out.end());
  return out;
}

bool IsState(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / "CURRENT", ec) ||
         fs::is_directory(fs::path(dir) / kCheckpointsDir, ec);
}

// A new directory dir/damaged/<UTC time>[-n]/.
StatusOr<fs::path> NewAsideDir(const std::string& dir) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  std::error_code ec;
  for (int n = 1;; ++n) {
    fs::path p = fs::path(dir) / kDamagedDir /
                 (n == 1 ? std::string(stamp) : std::string(stamp) + "-" + std::to_string(n));
    if (fs::exists(p, ec)) continue;
    fs::create_directories(p, ec);
    if (ec) return FsError("cannot create", p, ec);
    return p;
  }
}

// Moves the live database's files of `dir` aside and puts a copy of checkpoint database `src`
// in their place (see RestoreFromNewestIntact).
Status RebuildLive(const std::string& dir, const fs::path& src, const fs::path& aside) {
  std::error_code ec;
  const fs::path staging = fs::path(dir) / kRestoreStaging;
  fs::remove_all(staging, ec);
  fs::create_directory(staging, ec);
  if (ec) return FsError("cannot create", staging, ec);
  std::vector<fs::path> copied;
  for (fs::directory_iterator it(src, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_regular_file() || name == "LOCK") continue;
    const fs::path to = staging / name;
    // Table files are immutable: shared by hard links, as the checkpoints share them.
    bool linked = false;
    if (name.ends_with(".sst") || name.ends_with(".blob")) {
      std::error_code link_ec;
      fs::create_hard_link(it->path(), to, link_ec);
      linked = !link_ec;
    }
    if (!linked) {
      StatusOr<std::string> bytes = ReadWholeFile(it->path().string());
      if (!bytes.ok()) return bytes.status();
      SV_RETURN_IF_ERROR(WriteFileSynced(to.string(), *bytes));
    }
    copied.push_back(to);
  }
  if (ec) return FsError("cannot list", src, ec);
  SV_RETURN_IF_ERROR(SyncDir(staging.string()));
  // The live database's files go aside (LOCK stays: the caller holds it).
  std::vector<fs::path> live;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file() && it->path().filename() != "LOCK") live.push_back(it->path());
  }
  if (ec) return FsError("cannot list", dir, ec);
  for (const fs::path& p : live) {
    fs::rename(p, aside / p.filename(), ec);
    if (ec) return FsError("cannot move aside", p, ec);
  }
  SV_RETURN_IF_ERROR(SyncDir(aside.string()));
  // CURRENT last: until it is in place the directory is no database, and a restart restores
  // again from the checkpoints.
  std::stable_partition(copied.begin(), copied.end(),
                        [](const fs::path& p) { return p.filename() != "CURRENT"; });
  for (const fs::path& p : copied) {
    fs::rename(p, fs::path(dir) / p.filename(), ec);
    if (ec) return FsError("cannot move into place", p, ec);
  }
  SV_RETURN_IF_ERROR(SyncDir(dir));
  fs::remove_all(staging, ec);
  return Status::Ok();
}

// Moves checkpoint directory `ckpt` to aside/checkpoints/<its name>.
Status MoveCheckpointAside(const fs::path& ckpt, const fs::path& aside) {
  std::error_code ec;
  const fs::path to = aside / kCheckpointsDir / ckpt.filename();
  fs::create_directories(to.parent_path(), ec);
  if (!ec) fs::rename(ckpt, to, ec);
  if (ec) return FsError("cannot move aside", ckpt, ec);
  return SyncDir(ckpt.parent_path().string());
}

}  // namespace

StatusOr<std::unique_ptr<StateLock>> StateLock::Acquire(const std::string& dir) {
  rocksdb::FileLock* lock = nullptr;
  const rocksdb::Status s = rocksdb::Env::Default()->LockFile(dir + "/LOCK", &lock);
  if (!s.ok()) {
    const std::string m = s.ToString();
    if (m.find("lock hold by current process") != std::string::npos ||
        m.find("While lock file") != std::string::npos) {
      return Status::FailedPrecondition("state directory " + dir +
                                        " is in use by another process (" + m + ")");
    }
    return FromRocks(s, "cannot lock state directory " + dir);
  }
  std::unique_ptr<StateLock> out(new StateLock());
  out->lock_ = lock;
  return out;
}

StateLock::~StateLock() {
  if (lock_ != nullptr) {
    (void)rocksdb::Env::Default()->UnlockFile(static_cast<rocksdb::FileLock*>(lock_));
  }
}

Status CheckDatabase(const std::string& db_dir, uint64_t expect_version, uint64_t* version,
                     std::string* metadata) {
  *version = 0;
  metadata->clear();
  rocksdb::Options options;
  options.create_if_missing = false;
  options.paranoid_checks = true;
  options.max_open_files = -1;
  options.info_log = std::make_shared<NullLogger>();  // writes nothing into the directory
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status opened = rocksdb::DB::OpenForReadOnly(options, db_dir, &raw);
  std::unique_ptr<rocksdb::DB> db(raw);
  SV_RETURN_IF_ERROR(FromRocks(opened, "cannot open " + db_dir));
  SV_RETURN_IF_ERROR(FromRocks(db->VerifyChecksum(), "checksums of " + db_dir));
  const rocksdb::ReadOptions ro;
  std::string format;
  rocksdb::Status s = db->Get(ro, kFormatKey, &format);
  if (s.IsNotFound() || (s.ok() && format != kStateFormat && format != kStateFormatV1)) {
    return Status::Corruption(db_dir + " is not a streamvec state (format '" + format + "')");
  }
  SV_RETURN_IF_ERROR(FromRocks(s, "cannot read " + db_dir));
  std::string current;
  s = db->Get(ro, kCurrentKey, &current);
  if (s.IsNotFound()) {
    if (expect_version != 0) {
      return Status::Corruption(db_dir + " holds no snapshot, expected version " +
                                std::to_string(expect_version));
    }
    return Status::Ok();  // a state created before its first snapshot
  }
  SV_RETURN_IF_ERROR(FromRocks(s, "cannot read " + db_dir));
  try {
    size_t used = 0;
    *version = std::stoull(current, &used);
    if (used != current.size()) throw std::invalid_argument(current);
  } catch (const std::exception&) {
    return Status::Corruption(db_dir + ": bad meta/current '" + current + "'");
  }
  if (expect_version != 0 && *version != expect_version) {
    return Status::Corruption(db_dir + " holds version " + current + ", expected " +
                              std::to_string(expect_version));
  }
  s = db->Get(ro, kMetadataKey, metadata);
  if (!s.ok() && !s.IsNotFound()) return FromRocks(s, "cannot read " + db_dir);
  std::string manifest_bytes;
  s = db->Get(ro, kManifestKey, &manifest_bytes);
  if (s.IsNotFound()) {
    if (format == kStateFormatV1) return Status::Ok();  // the first layout: checksums only
    return Status::Corruption(db_dir + ": version " + current + " has no manifest");
  }
  SV_RETURN_IF_ERROR(FromRocks(s, "cannot read " + db_dir));
  StatusOr<Manifest> manifest = DecodeManifest(manifest_bytes, db_dir);
  if (!manifest.ok()) return manifest.status();
  for (const auto& [key, ref] : manifest->entries) {
    StatusOr<std::string> value = ReadEntry(db.get(), *version, &*manifest, key, db_dir);
    if (!value.ok()) return value.status();
    const XXH128_hash_t h = XXH3_128bits(value->data(), value->size());
    if (value->size() != ref.size || h.low64 != ref.hash || h.high64 != ref.hash_high) {
      return Status::Corruption("entry '" + key + "' of version " + current + " in " + db_dir +
                                " does not match its manifest (size or XXH3-128 hash)");
    }
  }
  return Status::Ok();
}

Status CheckCheckpoint(const std::string& ckpt_dir, uint64_t version) {
  const std::string meta_path = (fs::path(ckpt_dir) / kMetadataFile).string();
  StatusOr<std::string> json = ReadWholeFile(meta_path);
  if (!json.ok()) {
    return json.status().code() == StatusCode::kNotFound
               ? Status::Corruption("snapshot metadata " + meta_path + " is missing")
               : json.status();
  }
  StatusOr<SnapshotInfo> info = ParseSnapshotInfo(*json, meta_path);
  if (!info.ok()) return info.status();
  if (info->version != version) {
    return Status::Corruption("snapshot metadata " + meta_path + " says version " +
                              std::to_string(info->version));
  }
  uint64_t stored_version = 0;
  std::string stored;
  SV_RETURN_IF_ERROR(CheckDatabase((fs::path(ckpt_dir) / kCheckpointDb).string(), version,
                                   &stored_version, &stored));
  if (!stored.empty() && stored != *json) {
    return Status::Corruption("snapshot metadata " + meta_path +
                              " differs from the metadata stored in its database");
  }
  return Status::Ok();
}

StatusOr<StateRestore> RestoreFromNewestIntact(const std::string& dir, const std::string& damage) {
  StateRestore r;
  r.damage = damage;
  StatusOr<std::vector<std::pair<uint64_t, fs::path>>> ckpts = CheckpointDirs(dir);
  if (!ckpts.ok()) return ckpts.status();
  std::vector<fs::path> damaged;
  const fs::path* chosen = nullptr;
  for (auto it = ckpts->rbegin(); it != ckpts->rend(); ++it) {
    const Status st = CheckCheckpoint(it->second.string(), it->first);
    if (st.ok()) {
      chosen = &it->second;
      r.version = it->first;
      break;
    }
    r.skipped.push_back("snapshot " + std::to_string(it->first) + ": " + st.message());
    damaged.push_back(it->second);
  }
  if (chosen == nullptr) {
    std::string why;
    for (const std::string& s : r.skipped) why += "; " + s;
    return Status::Corruption("no published snapshot of " + dir + " is intact to restore from" +
                              (ckpts->empty() ? " (none published)" : why));
  }
  StatusOr<fs::path> aside = NewAsideDir(dir);
  if (!aside.ok()) return aside.status();
  SV_RETURN_IF_ERROR(RebuildLive(dir, *chosen / kCheckpointDb, *aside));
  for (const fs::path& p : damaged) SV_RETURN_IF_ERROR(MoveCheckpointAside(p, *aside));
  r.restored = true;
  r.moved_to = aside->string();
  return r;
}

}  // namespace internal

bool StateHealth::intact() const {
  if (live_checked && !live.status.ok()) return false;
  return std::all_of(checkpoints.begin(), checkpoints.end(),
                     [](const PartHealth& c) { return c.status.ok(); });
}

namespace {

namespace fs = std::filesystem;

// The live database of `dir` (the caller holds its lock).
PartHealth CheckLive(const std::string& dir) {
  PartHealth live;
  live.path = dir;
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "CURRENT", ec)) {
    live.status =
        Status::Corruption("the live database of " + dir + " has no RocksDB CURRENT file");
    return live;
  }
  std::string metadata;
  live.status = internal::CheckDatabase(dir, 0, &live.version, &metadata);
  return live;
}

}  // namespace

StatusOr<StateHealth> VerifyState(const std::string& state_dir) {
  if (!internal::IsState(state_dir)) return Status::NotFound("no streamvec state in " + state_dir);
  StateHealth health;
  {
    StatusOr<std::unique_ptr<internal::StateLock>> lock = internal::StateLock::Acquire(state_dir);
    if (lock.ok()) {
      health.live = CheckLive(state_dir);
    } else if (lock.status().code() == StatusCode::kFailedPrecondition) {
      health.live_checked = false;
      health.live.path = state_dir;
      health.live.status = lock.status();
    } else {
      return lock.status();
    }
  }
  StatusOr<std::vector<std::pair<uint64_t, fs::path>>> ckpts = internal::CheckpointDirs(state_dir);
  if (!ckpts.ok()) return ckpts.status();
  for (const auto& [version, path] : *ckpts) {
    PartHealth c;
    c.version = version;
    c.path = path.string();
    c.status = internal::CheckCheckpoint(c.path, version);
    std::error_code ec;
    if (!c.status.ok() && !fs::exists(path, ec)) continue;  // retired by the writer meanwhile
    health.checkpoints.push_back(std::move(c));
  }
  return health;
}

StatusOr<StateRepair> RepairState(const std::string& state_dir) {
  if (!internal::IsState(state_dir)) return Status::NotFound("no streamvec state in " + state_dir);
  StateRepair repair;
  uint64_t newest_intact = 0, live_version = 0;
  {
    StatusOr<std::unique_ptr<internal::StateLock>> lock = internal::StateLock::Acquire(state_dir);
    if (!lock.ok()) return lock.status();
    const PartHealth live = CheckLive(state_dir);
    live_version = live.version;
    if (!live.status.ok()) {
      // Checks every checkpoint, rebuilds from the newest intact one and moves the newer ones
      // aside; older damaged ones are moved aside below.
      StatusOr<StateRestore> restored =
          internal::RestoreFromNewestIntact(state_dir, live.status.message());
      if (!restored.ok()) {
        return Status(restored.status().code(),
                      "the live database is damaged (" + live.status.message() +
                          ") and cannot be restored: " + restored.status().message());
      }
      live_version = restored->version;
      repair.moved_to = restored->moved_to;
      repair.actions.push_back("live database damaged (" + live.status.message() + "): moved to " +
                               restored->moved_to + " and rebuilt from snapshot " +
                               std::to_string(restored->version));
      for (const std::string& s : restored->skipped) {
        repair.actions.push_back("damaged " + s + ": moved to " + restored->moved_to);
      }
    }
    StatusOr<std::vector<std::pair<uint64_t, fs::path>>> ckpts =
        internal::CheckpointDirs(state_dir);
    if (!ckpts.ok()) return ckpts.status();
    for (const auto& [version, path] : *ckpts) {
      const Status st = internal::CheckCheckpoint(path.string(), version);
      if (st.ok()) {
        newest_intact = std::max(newest_intact, version);
        continue;
      }
      if (repair.moved_to.empty()) {
        StatusOr<fs::path> aside = internal::NewAsideDir(state_dir);
        if (!aside.ok()) return aside.status();
        repair.moved_to = aside->string();
      }
      SV_RETURN_IF_ERROR(internal::MoveCheckpointAside(path, fs::path(repair.moved_to)));
      repair.actions.push_back("damaged snapshot " + std::to_string(version) + " (" + st.message() +
                               "): moved to " + repair.moved_to);
    }
  }
  // The live snapshot's checkpoint again, when it was damaged: StateStore::Open publishes it
  // (and would retire checkpoints newer than the live snapshot: not when an intact one is).
  repair.version = live_version;
  if (live_version > 0 && newest_intact < live_version) {
    StatusOr<std::unique_ptr<StateStore>> store =
        StateStore::Open(state_dir, StateStore::Mode::kCreateOrOpen);
    if (!store.ok()) return store.status();
    SV_RETURN_IF_ERROR((*store)->last_publish_error());
    repair.actions.push_back("published snapshot " + std::to_string(live_version) + " again");
  }
  return repair;
}

}  // namespace streamvec

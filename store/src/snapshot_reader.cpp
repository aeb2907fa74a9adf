#include "streamvec/store/snapshot_reader.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>

#include <algorithm>
#include <cstdarg>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "snapshot_layout.h"
#include "streamvec/store/state_store.h"

namespace streamvec {
namespace {

namespace fs = std::filesystem;

// How many times OpenNewest lists again when the checkpoints it tried were all removed by the
// writer while it opened them (each round already falls back to older ones).
constexpr int kOpenRounds = 3;

}  // namespace

struct SnapshotReader::Impl {
  SnapshotInfo info;
  std::string path;  // the checkpoint's database directory
  std::unique_ptr<rocksdb::DB> db;
  bool has_manifest = false;  // false: the first layout (snap/<version>/)
  internal::Manifest manifest;
};

SnapshotReader::SnapshotReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SnapshotReader::~SnapshotReader() = default;

StatusOr<std::vector<SnapshotInfo>> SnapshotReader::List(const std::string& state_dir,
                                                          std::vector<std::string>* damaged) {
  std::error_code ec;
  const fs::path root = fs::path(state_dir) / internal::kCheckpointsDir;
  if (!fs::is_directory(root, ec)) {
    if (fs::exists(fs::path(state_dir) / "CURRENT", ec)) return std::vector<SnapshotInfo>{};
    return Status::NotFound("no streamvec state in " + state_dir);
  }
  std::vector<SnapshotInfo> out;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    uint64_t version = 0;
    if (!internal::ParseCheckpointName(it->path().filename().string(), &version)) continue;
    const std::string meta_path = (it->path() / internal::kMetadataFile).string();
    StatusOr<std::string> json = internal::ReadWholeFile(meta_path);
    // NotFound: retired by the writer since the directory was listed.
    if (!json.ok() && json.status().code() == StatusCode::kNotFound) continue;
    if (!json.ok()) return json.status();
    StatusOr<SnapshotInfo> info = internal::ParseSnapshotInfo(*json, meta_path);
    // A damaged checkpoint is left out: readers go on with the intact ones.
    if (!info.ok()) {
      if (damaged != nullptr) damaged->push_back(info.status().message());
      continue;
    }
    if (info->version != version) {
      if (damaged != nullptr) {
        damaged->push_back("snapshot metadata " + meta_path + " says version " +
                           std::to_string(info->version));
      }
      continue;
    }
    out.push_back(std::move(*info));
  }
  if (ec) return Status::IoError("cannot list " + root.string() + ": " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const SnapshotInfo& a, const SnapshotInfo& b) { return a.version < b.version; });
  return out;
}

// Opens the checkpoint of `info` (a listed snapshot of state_dir). *retired (when the open
// failed): the writer removed the checkpoint meanwhile, so the failure is not damage.
StatusOr<std::unique_ptr<SnapshotReader>> SnapshotReader::OpenListed(const std::string& state_dir,
                                                                     const SnapshotInfo& info,
                                                                     bool* retired) {
  *retired = false;
  const fs::path ckpt =
      fs::path(state_dir) / internal::kCheckpointsDir / internal::CheckpointName(info.version);
  auto impl = std::make_unique<Impl>();
  impl->info = info;
  impl->path = (ckpt / internal::kCheckpointDb).string();
  rocksdb::Options options;
  options.create_if_missing = false;
  options.paranoid_checks = true;
  // Every table file is opened now: the writer may retire this checkpoint at any time
  // after, and open files stay readable (POSIX unlink semantics).
  options.max_open_files = -1;
  options.info_log = std::make_shared<internal::NullLogger>();
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(options, impl->path, &raw);
  impl->db.reset(raw);
  Status st = internal::FromRocks(s, "cannot open snapshot " + impl->path);
  std::string value;
  if (st.ok()) {
    st = internal::FromRocks(impl->db->Get(rocksdb::ReadOptions(), internal::kFormatKey, &value),
                             "cannot read snapshot " + impl->path);
    if (st.ok() && value != kStateFormat && value != internal::kStateFormatV1) {
      st = Status::Corruption("snapshot " + impl->path + " is not a streamvec state");
    }
  }
  if (st.ok()) {
    st = internal::FromRocks(impl->db->Get(rocksdb::ReadOptions(), internal::kCurrentKey, &value),
                             "cannot read snapshot " + impl->path);
    if (st.ok() && value != std::to_string(info.version)) {
      st = Status::Corruption("snapshot " + impl->path + " holds version " + value);
    }
  }
  if (st.ok()) {
    rocksdb::Status ms = impl->db->Get(rocksdb::ReadOptions(), internal::kManifestKey, &value);
    if (ms.ok()) {
      StatusOr<internal::Manifest> manifest = internal::DecodeManifest(value, impl->path);
      if (manifest.ok()) {
        impl->manifest = std::move(*manifest);
        impl->has_manifest = true;
      } else {
        st = manifest.status();
      }
    } else if (!ms.IsNotFound()) {
      st = internal::FromRocks(ms, "cannot read snapshot " + impl->path);
    }
  }
  if (st.ok()) return std::unique_ptr<SnapshotReader>(new SnapshotReader(std::move(impl)));
  std::error_code ec;
  *retired = !fs::exists(ckpt / internal::kMetadataFile, ec);
  return st;
}

StatusOr<std::unique_ptr<SnapshotReader>> SnapshotReader::OpenNewest(
    const std::string& state_dir, std::vector<std::string>* skipped) {
  Status last = Status::NotFound("no published snapshot in " + state_dir);
  for (int round = 0; round < kOpenRounds; ++round) {
    StatusOr<std::vector<SnapshotInfo>> list = List(state_dir, skipped);
    if (!list.ok()) return list.status();
    if (list->empty()) return Status::NotFound("no published snapshot in " + state_dir);
    bool damaged = false;
    for (auto it = list->rbegin(); it != list->rend(); ++it) {
      bool retired = false;
      StatusOr<std::unique_ptr<SnapshotReader>> reader = OpenListed(state_dir, *it, &retired);
      if (reader.ok()) return reader;
      last = reader.status();
      // Retired by the writer while we opened it: try the next newest. Otherwise it is damaged
      // (a truncated or missing table file, a bad checksum): skip it, and serve an older one.
      if (!retired) {
        damaged = true;
        if (skipped != nullptr) skipped->push_back(reader.status().message());
      }
    }
    if (damaged) return last;  // none of the listed ones opens: listing again would not help
  }
  return last;
}

StatusOr<std::unique_ptr<SnapshotReader>> SnapshotReader::Open(const std::string& state_dir,
                                                               uint64_t version) {
  StatusOr<std::vector<SnapshotInfo>> list = List(state_dir);
  if (!list.ok()) return list.status();
  const auto it = std::find_if(list->begin(), list->end(),
                               [version](const SnapshotInfo& i) { return i.version == version; });
  const auto not_published = [&] {
    return Status::NotFound("snapshot " + std::to_string(version) + " is not published in " +
                            state_dir + " (retired or never written)");
  };
  if (it == list->end()) return not_published();
  bool retired = false;
  StatusOr<std::unique_ptr<SnapshotReader>> reader = OpenListed(state_dir, *it, &retired);
  if (!reader.ok() && retired) return not_published();
  return reader;
}

const SnapshotInfo& SnapshotReader::info() const { return impl_->info; }

StatusOr<std::string> SnapshotReader::Get(const std::string& key) const {
  StatusOr<std::string> v =
      internal::ReadEntry(impl_->db.get(), impl_->info.version,
                          impl_->has_manifest ? &impl_->manifest : nullptr, key, impl_->path);
  if (!v.ok() && v.status().code() == StatusCode::kNotFound) {
    return Status::NotFound("snapshot entry '" + key + "' not found in version " +
                            std::to_string(impl_->info.version));
  }
  return v;
}

}  // namespace streamvec

#include "streamvec/store/snapshot_reader.h"

// Placeholder until checkpoints are published (store/ owner replaces this file).
namespace streamvec {

struct SnapshotReader::Impl {
  SnapshotInfo info;
};

SnapshotReader::SnapshotReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SnapshotReader::~SnapshotReader() = default;

StatusOr<std::vector<SnapshotInfo>> SnapshotReader::List(const std::string& state_dir) {
  return Status::NotFound("no published snapshots in " + state_dir);
}

StatusOr<std::unique_ptr<SnapshotReader>> SnapshotReader::OpenNewest(const std::string& state_dir) {
  return Status::NotFound("no published snapshot in " + state_dir);
}

const SnapshotInfo& SnapshotReader::info() const { return impl_->info; }

StatusOr<std::string> SnapshotReader::Get(const std::string& key) const {
  return Status::NotFound(key);
}

}  // namespace streamvec

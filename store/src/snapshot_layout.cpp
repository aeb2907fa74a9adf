#include "snapshot_layout.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace streamvec::internal {
namespace {

Status Errno(const std::string& what, const std::string& path, int err) {
  const std::string m = what + " " + path + ": " + std::strerror(err);
  return err == ENOENT ? Status::NotFound(m) : Status::IoError(m);
}

}  // namespace

std::string SnapshotPrefix(uint64_t version) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "snap/%016llx/", static_cast<unsigned long long>(version));
  return buf;
}

std::string CheckpointName(uint64_t version) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020llu", static_cast<unsigned long long>(version));
  return buf;
}

bool ParseCheckpointName(const std::string& name, uint64_t* version) {
  if (name.size() != 20) return false;
  uint64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *version = v;
  return true;
}

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  const std::string m = what + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(m);
  if (s.IsNotFound()) return Status::NotFound(m);
  return Status::IoError(m);
}

Status WriteFileSynced(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", path, errno);
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Errno("cannot write", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Errno("cannot sync", path, err);
  }
  if (::close(fd) != 0) return Errno("cannot close", path, errno);
  return Status::Ok();
}

Status SyncDir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open directory", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? Status::Ok() : Errno("cannot sync directory", path, err);
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path, errno);
  std::string out;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Errno("cannot read", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace streamvec::internal

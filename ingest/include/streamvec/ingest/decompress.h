// Compressed input files (gzip, xz, zstd), recognised by their content (the format's magic number
// at the start of the file), not by their name, and decoded as one stream of bytes with the
// formats' own libraries (zlib, liblzma, libzstd), which verify the checksums the formats carry.
// Concatenated gzip members, xz streams and zstd frames decode as one stream, as `gzip -d`,
// `xz -d` and `zstd -d` do. What the connectors (ingestor.h) read a compressed source with; a
// file in none of the three formats is left to the plain path.
#ifndef STREAMVEC_INGEST_DECOMPRESS_H_
#define STREAMVEC_INGEST_DECOMPRESS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "streamvec/base/status.h"

namespace streamvec {

// The compressed format whose magic number `head` (a file's first bytes, at least 6 for a sure
// answer) starts with: "gzip", "xz" or "zstd"; "" for none of them.
std::string_view DetectCompression(std::string_view head);

// Thread safety: one thread at a time per reader.
class DecompressingReader {
 public:
  // Opens `path` and looks at its first bytes. Returns nullptr (with OK) when the file is not
  // gzip, xz or zstd data (plain text, an empty file). IoError naming the file when it cannot be
  // opened or read.
  static StatusOr<std::unique_ptr<DecompressingReader>> Open(const std::string& path);
  ~DecompressingReader();
  DecompressingReader(const DecompressingReader&) = delete;
  DecompressingReader& operator=(const DecompressingReader&) = delete;

  // "gzip", "xz" or "zstd".
  std::string_view format() const;

  // Decodes up to `size` bytes into `buf`; 0 at the end of the data. Corruption naming the file,
  // the format and the decoded offset reached when the data is corrupt (a checksum mismatch
  // included) or ends early (a truncated file); IoError when the file cannot be read. The bytes
  // returned before an error were decoded correctly (up to the checksum at the end of their
  // member, stream or frame).
  StatusOr<size_t> Read(char* buf, size_t size);

  // Decoded bytes returned so far.
  int64_t decoded_bytes() const;

 private:
  struct Impl;
  explicit DecompressingReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_INGEST_DECOMPRESS_H_

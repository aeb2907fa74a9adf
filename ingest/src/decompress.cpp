#include "streamvec/ingest/decompress.h"

#include <fcntl.h>
#include <lzma.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace streamvec {
namespace {

constexpr size_t kInputBytes = size_t{1} << 20;
constexpr std::string_view kGzipMagic("\x1f\x8b", 2);
constexpr std::string_view kXzMagic("\xfd\x37\x7a\x58\x5a\x00", 6);  // FD "7zXZ" 00
constexpr std::string_view kZstdMagic("\x28\xb5\x2f\xfd", 4);

enum class Codec { kGzip, kXz, kZstd };

std::string LzmaError(lzma_ret r) {
  switch (r) {
    case LZMA_MEM_ERROR:
      return "out of memory";
    case LZMA_MEMLIMIT_ERROR:
      return "memory limit reached";
    case LZMA_FORMAT_ERROR:
      return "not in the xz format";
    case LZMA_OPTIONS_ERROR:
      return "unsupported compression options";
    case LZMA_DATA_ERROR:
      return "compressed data is corrupt";
    case LZMA_BUF_ERROR:
      return "compressed data is truncated";
    default:
      return "liblzma error " + std::to_string(static_cast<int>(r));
  }
}

}  // namespace

std::string_view DetectCompression(std::string_view head) {
  if (head.starts_with(kGzipMagic)) return "gzip";
  if (head.starts_with(kXzMagic)) return "xz";
  if (head.starts_with(kZstdMagic)) return "zstd";
  return "";
}

struct DecompressingReader::Impl {
  std::string path;
  std::string_view format;
  Codec codec = Codec::kGzip;
  int fd = -1;
  std::vector<char> in = std::vector<char>(kInputBytes);
  size_t in_pos = 0, in_len = 0;  // unread input: in[in_pos, in_len)
  bool file_eof = false;
  int64_t compressed = 0;  // compressed bytes consumed
  int64_t decoded = 0;
  bool open_unit = false;  // inside a gzip member or zstd frame (their end not reached yet)
  bool done = false;
  z_stream zs{};
  lzma_stream xz = LZMA_STREAM_INIT;
  ZSTD_DCtx* zstd = nullptr;

  ~Impl() {
    if (codec == Codec::kGzip) inflateEnd(&zs);
    if (codec == Codec::kXz) lzma_end(&xz);
    ZSTD_freeDCtx(zstd);
    if (fd >= 0) ::close(fd);
  }

  size_t avail() const { return in_len - in_pos; }

  Status Corrupt(const std::string& what) const {
    return Status::Corruption(path + ": corrupt " + std::string(format) + " data (" + what +
                              ") at compressed byte " + std::to_string(compressed) + ", after " +
                              std::to_string(decoded) + " decoded bytes");
  }

  // Keeps at least `want` unread bytes in the buffer unless the file ends first.
  Status Fill(size_t want) {
    if (avail() >= want || file_eof) return Status::Ok();
    std::memmove(in.data(), in.data() + in_pos, avail());
    in_len = avail();
    in_pos = 0;
    while (in_len < want && !file_eof) {
      const ssize_t n = ::read(fd, in.data() + in_len, in.size() - in_len);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::IoError("cannot read " + path + ": " + strerror(errno));
      }
      if (n == 0) file_eof = true;
      in_len += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  // One decoding step into out[0, size): sets *produced. At the end of the input, done is set
  // (or an error returned for a truncated unit).
  Status Step(char* out, size_t size, size_t* produced) {
    *produced = 0;
    const bool finishing = file_eof && avail() == 0;
    const char* next = in.data() + in_pos;
    size_t consumed = 0;
    switch (codec) {
      case Codec::kGzip: {
        if (!open_unit) {
          // A member starts here: another gzip member, or the end of the data.
          SV_RETURN_IF_ERROR(Fill(kGzipMagic.size()));
          if (avail() == 0) {
            done = true;
            return Status::Ok();
          }
          if (!std::string_view(in.data() + in_pos, avail()).starts_with(kGzipMagic)) {
            return Corrupt("trailing bytes that are not a gzip member");
          }
          if (inflateReset(&zs) != Z_OK) return Corrupt("zlib cannot reset");
          open_unit = true;
          next = in.data() + in_pos;
        }
        if (finishing) return Corrupt("the file ends inside a gzip member: truncated");
        zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(next));
        zs.avail_in = static_cast<uInt>(avail());
        zs.next_out = reinterpret_cast<Bytef*>(out);
        zs.avail_out = static_cast<uInt>(size);
        const int r = inflate(&zs, Z_NO_FLUSH);
        consumed = avail() - zs.avail_in;
        *produced = size - zs.avail_out;
        if (r == Z_STREAM_END) {
          open_unit = false;
        } else if (r != Z_OK && r != Z_BUF_ERROR) {
          compressed += static_cast<int64_t>(consumed);
          *produced = 0;
          return Corrupt(zs.msg != nullptr ? zs.msg : "zlib error " + std::to_string(r));
        }
        break;
      }
      case Codec::kXz: {
        xz.next_in = reinterpret_cast<const uint8_t*>(next);
        xz.avail_in = avail();
        xz.next_out = reinterpret_cast<uint8_t*>(out);
        xz.avail_out = size;
        const lzma_ret r = lzma_code(&xz, finishing ? LZMA_FINISH : LZMA_RUN);
        consumed = avail() - xz.avail_in;
        *produced = size - xz.avail_out;
        if (r == LZMA_STREAM_END) {
          done = true;
        } else if (r != LZMA_OK) {
          compressed += static_cast<int64_t>(consumed);
          *produced = 0;
          return Corrupt(r == LZMA_BUF_ERROR && finishing ? "the file ends inside an xz stream: "
                                                            "truncated"
                                                          : LzmaError(r));
        }
        break;
      }
      case Codec::kZstd: {
        if (finishing) {
          if (open_unit) return Corrupt("the file ends inside a zstd frame: truncated");
          done = true;
          return Status::Ok();
        }
        ZSTD_inBuffer zin{next, avail(), 0};
        ZSTD_outBuffer zout{out, size, 0};
        const size_t r = ZSTD_decompressStream(zstd, &zout, &zin);
        if (ZSTD_isError(r)) {
          compressed += static_cast<int64_t>(zin.pos);
          return Corrupt(ZSTD_getErrorName(r));
        }
        consumed = zin.pos;
        *produced = zout.pos;
        open_unit = r != 0;
        break;
      }
    }
    in_pos += consumed;
    compressed += static_cast<int64_t>(consumed);
    decoded += static_cast<int64_t>(*produced);
    return Status::Ok();
  }
};

DecompressingReader::DecompressingReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DecompressingReader::~DecompressingReader() = default;

std::string_view DecompressingReader::format() const { return impl_->format; }
int64_t DecompressingReader::decoded_bytes() const { return impl_->decoded; }

StatusOr<std::unique_ptr<DecompressingReader>> DecompressingReader::Open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl->fd < 0) return Status::IoError("cannot open " + path + ": " + strerror(errno));
  SV_RETURN_IF_ERROR(impl->Fill(kXzMagic.size()));
  impl->format = DetectCompression(std::string_view(impl->in.data(), impl->avail()));
  if (impl->format.empty()) return std::unique_ptr<DecompressingReader>();
  if (impl->format == "gzip") {
    impl->codec = Codec::kGzip;
    // 16 + 15: gzip wrapper only, 32 KiB window; the reader checks CRC-32 and size.
    if (inflateInit2(&impl->zs, 16 + MAX_WBITS) != Z_OK) return Status::Internal("zlib: init");
  } else if (impl->format == "xz") {
    impl->codec = Codec::kXz;
    // LZMA_CONCATENATED: streams one after another, as xz -d reads them; the check is verified.
    if (lzma_stream_decoder(&impl->xz, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) {
      return Status::Internal("liblzma: init");
    }
  } else {
    impl->codec = Codec::kZstd;
    impl->zstd = ZSTD_createDCtx();
    if (impl->zstd == nullptr) return Status::Internal("libzstd: init");
  }
  return std::unique_ptr<DecompressingReader>(new DecompressingReader(std::move(impl)));
}

StatusOr<size_t> DecompressingReader::Read(char* buf, size_t size) {
  Impl& m = *impl_;
  while (!m.done && size > 0) {
    SV_RETURN_IF_ERROR(m.Fill(1));
    size_t produced = 0;
    SV_RETURN_IF_ERROR(m.Step(buf, size, &produced));
    if (produced > 0) return produced;
  }
  return size_t{0};
}

}  // namespace streamvec

// Test helpers: text compressed in memory by the formats' own libraries (the same ones the
// connector decodes with, used here in the other direction).
#ifndef STREAMVEC_TESTS_INGEST_COMPRESS_UTIL_H_
#define STREAMVEC_TESTS_INGEST_COMPRESS_UTIL_H_

#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <stdexcept>
#include <string>

namespace streamvec::testing {

// One gzip member (RFC 1952) holding `text`.
inline std::string Gzip(const std::string& text) {
  z_stream zs{};
  if (deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2");
  }
  std::string out(deflateBound(&zs, text.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// One xz stream (CRC-64 check) holding `text`.
inline std::string Xz(const std::string& text) {
  std::string out(lzma_stream_buffer_bound(text.size()), '\0');
  size_t pos = 0;
  if (lzma_easy_buffer_encode(
          6, LZMA_CHECK_CRC64, nullptr, reinterpret_cast<const uint8_t*>(text.data()), text.size(),
          reinterpret_cast<uint8_t*>(out.data()), &pos, out.size()) != LZMA_OK) {
    throw std::runtime_error("lzma_easy_buffer_encode");
  }
  out.resize(pos);
  return out;
}

// One zstd frame with a content checksum (as the zstd tool writes by default) holding `text`.
inline std::string Zstd(const std::string& text) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const size_t n = ZSTD_compress2(c, out.data(), out.size(), text.data(), text.size());
  ZSTD_freeCCtx(c);
  if (ZSTD_isError(n)) throw std::runtime_error(ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

}  // namespace streamvec::testing

#endif  // STREAMVEC_TESTS_INGEST_COMPRESS_UTIL_H_

// word2vec C tool text / binary formats: see word2vec_format.h.
#include "streamvec/store/word2vec_format.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "streamvec/base/big_array.h"

namespace streamvec {
namespace {

// Rows formatted per thread between two writes: bounds the text buffers to about
// threads * kRowsPerTask * dim * 16 bytes whatever the table size.
constexpr size_t kRowsPerTask = 4096;
// Longest shortest-round-trip float32: "-1.23456789e-38" is 15 characters; 32 leaves room.
constexpr size_t kMaxFloatChars = 32;

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::string ErrnoText() { return std::strerror(errno); }

Status ValidateWords(const std::vector<std::string>& words) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.empty() || w.find_first_of(" \t\n\r") != std::string::npos) {
      return Status::InvalidArgument("word2vec format cannot store word #" + std::to_string(i) +
                                     " ('" + w + "'): empty or contains whitespace");
    }
  }
  return Status::Ok();
}

// Writes "<word> v_0 ... v_{dim-1}\n" for rows [begin, end) into *out (replacing its contents).
// A BigVector: reused from task to task and not zero-filled when it grows (std::string::resize
// writes every byte it adds: for 4096 rows of dim 100 that is ~13 MB of memset per task).
void FormatTextRows(const std::vector<std::string>& words, const float* rows, size_t stride,
                    int dim, size_t begin, size_t end, BigVector<char>* out) {
  size_t bytes = 0;
  for (size_t i = begin; i < end; ++i) bytes += words[i].size();
  const size_t capacity =
      bytes + (end - begin) * (static_cast<size_t>(dim) * (kMaxFloatChars + 1) + 1);
  out->resize(capacity);
  char* const start = out->data();
  char* p = start;
  char* const limit = start + capacity;
  for (size_t i = begin; i < end; ++i) {
    std::memcpy(p, words[i].data(), words[i].size());
    p += words[i].size();
    const float* row = rows + i * stride;
    for (int j = 0; j < dim; ++j) {
      *p++ = ' ';
      // Shortest form that reads back to the same float32 (what gensim writes with repr()).
      const std::to_chars_result r = std::to_chars(p, limit, row[j]);
      SV_CHECK(r.ec == std::errc());
      p = r.ptr;
    }
    *p++ = '\n';
  }
  out->resize(static_cast<size_t>(p - start));
}

void AppendBinaryRow(const std::string& word, const float* row, int dim, std::string* out) {
  out->append(word);
  out->push_back(' ');
  const size_t at = out->size();
  out->resize(at + static_cast<size_t>(dim) * sizeof(float));
  char* p = out->data() + at;
  for (int j = 0; j < dim; ++j) {
    uint32_t bits = std::bit_cast<uint32_t>(row[j]);
    if constexpr (std::endian::native == std::endian::big) bits = __builtin_bswap32(bits);
    std::memcpy(p + j * sizeof(float), &bits, sizeof(bits));
  }
  out->push_back('\n');
}

Status WriteAll(std::FILE* f, std::string_view bytes, const std::string& tmp_path) {
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    return Status::IoError("write failed on " + tmp_path + ": " + ErrnoText());
  }
  return Status::Ok();
}

Status WriteBody(std::FILE* f, const std::string& tmp_path, const std::vector<std::string>& words,
                 const float* rows, size_t stride, int dim, VectorFormat format, int threads) {
  const size_t n = words.size();
  if (format == VectorFormat::kBinary) {
    std::string buffer;
    for (size_t i = 0; i < n; ++i) {
      AppendBinaryRow(words[i], rows + i * stride, dim, &buffer);
      if (buffer.size() >= (1u << 20)) {
        SV_RETURN_IF_ERROR(WriteAll(f, buffer, tmp_path));
        buffer.clear();
      }
    }
    return WriteAll(f, buffer, tmp_path);
  }
  // Text: each round formats up to `threads` consecutive row ranges in parallel while the calling
  // thread writes the previous round's buffers, in order, so the file is identical for any
  // thread count and the write overlaps the formatting.
  const size_t workers = static_cast<size_t>(std::max(1, threads));
  std::vector<BigVector<char>> current(workers), previous(workers);
  size_t previous_used = 0;
  Status status;
  for (size_t round_begin = 0; round_begin < n || previous_used > 0;
       round_begin += workers * kRowsPerTask) {
    std::vector<std::thread> pool;
    size_t used = 0;
    for (size_t t = 0; t < workers && round_begin + t * kRowsPerTask < n; ++t, ++used) {
      const size_t begin = round_begin + t * kRowsPerTask;
      const size_t end = std::min(n, begin + kRowsPerTask);
      if (workers == 1) {
        FormatTextRows(words, rows, stride, dim, begin, end, &current[t]);
      } else {
        pool.emplace_back(FormatTextRows, std::cref(words), rows, stride, dim, begin, end,
                          &current[t]);
      }
    }
    for (size_t t = 0; t < previous_used && status.ok(); ++t) {
      status = WriteAll(f, std::string_view(previous[t].data(), previous[t].size()), tmp_path);
    }
    for (std::thread& th : pool) th.join();
    if (!status.ok()) return status;
    std::swap(current, previous);
    previous_used = used;
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Reading.

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// 1-based line number of byte `offset` (only computed on the error path).
size_t LineOf(std::string_view data, size_t offset) {
  return 1 + static_cast<size_t>(
                 std::count(data.begin(), data.begin() + std::min(offset, data.size()), '\n'));
}

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out.push_back(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      out += hex;
    }
  }
  if (s.size() > 40) out += "...";
  return out;
}

// Parses one float token [first, last). Accepts what Python's float() accepts in practice
// (a leading '+', nan, inf); values beyond float32 range become +-inf or 0 like numpy's cast.
bool ParseFloat(const char* first, const char* last, float* value) {
  if (first == last) return false;
  const char* p = first;
  if (*p == '+') ++p;
  if (p == last) return false;
  const std::from_chars_result r = std::from_chars(p, last, *value);
  if (r.ptr != last) return false;
  if (r.ec == std::errc()) return true;
  if (r.ec != std::errc::result_out_of_range) return false;
  const std::string copy(first, last);
  *value = static_cast<float>(std::strtod(copy.c_str(), nullptr));
  return true;
}

struct Header {
  size_t rows = 0;
  int dim = 0;
  size_t body = 0;  // byte offset of the first row
};

StatusOr<Header> ParseHeader(std::string_view data, const std::string& path) {
  const size_t eol = data.find('\n');
  if (eol == std::string_view::npos) {
    return Status::Corruption(path + ": line 1: no header line \"<rows> <dim>\" (file has " +
                              std::to_string(data.size()) + " bytes and no newline)");
  }
  const char* p = data.data();
  const char* const end = data.data() + eol;
  auto skip_blanks = [&] {
    while (p < end && (IsBlank(*p) || *p == '\r')) ++p;
  };
  uint64_t rows = 0;
  int64_t dim = 0;
  skip_blanks();
  auto r1 = std::from_chars(p, end, rows);
  bool ok = r1.ec == std::errc() && r1.ptr < end && IsBlank(*r1.ptr);
  if (ok) {
    p = r1.ptr;
    skip_blanks();
    auto r2 = std::from_chars(p, end, dim);
    ok = r2.ec == std::errc();
    p = r2.ptr;
    skip_blanks();
    ok = ok && p == end;
  }
  if (!ok || dim <= 0 || dim > (1 << 20)) {
    return Status::Corruption(path + ": line 1: bad header '" + Printable(data.substr(0, eol)) +
                              "', expected \"<rows> <dim>\" with dim in 1..1048576");
  }
  // Every value takes at least 2 bytes in text and 4 in binary: refuse absurd headers before
  // allocating for them.
  if (rows > data.size() / (2 * static_cast<uint64_t>(dim))) {
    return Status::Corruption(path + ": line 1: header claims " + std::to_string(rows) +
                              " rows x " + std::to_string(dim) + " but the file has only " +
                              std::to_string(data.size()) + " bytes");
  }
  Header h;
  h.rows = rows;
  h.dim = static_cast<int>(dim);
  h.body = eol + 1;
  return h;
}

// Bytes that appear in a text row after the word: digits, signs, '.', exponents, nan/inf, blanks.
bool IsTextNumberByte(char c) {
  return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E' ||
         IsBlank(c) || c == '\r' || std::strchr("nafityNAFITY", c) != nullptr;
}

// Text when the first row is "<word> <dim numbers>" (the C tool's binary rows hold raw float
// bytes, which are practically never all digits, blanks and signs for dim numbers).
enum class Guess { kText, kTextLike, kBinary };
Guess GuessFormat(std::string_view data, const Header& h) {
  size_t p = h.body;
  while (p < data.size() && data[p] == '\n') ++p;
  const size_t space = data.find_first_of(" \t\n", p);
  if (space == std::string_view::npos || data[space] == '\n') return Guess::kBinary;
  size_t eol = data.find('\n', space);
  if (eol == std::string_view::npos) eol = data.size();
  const std::string_view rest = data.substr(space, eol - space);
  bool digit = false;
  for (char c : rest) {
    if (!IsTextNumberByte(c)) return Guess::kBinary;
    digit = digit || (c >= '0' && c <= '9');
  }
  int tokens = 0;
  bool numbers = true;  // every token reads as a float
  for (size_t i = 0; i < rest.size();) {
    while (i < rest.size() && (IsBlank(rest[i]) || rest[i] == '\r')) ++i;
    if (i == rest.size()) break;
    const size_t start = i;
    while (i < rest.size() && !IsBlank(rest[i]) && rest[i] != '\r') ++i;
    float unused;
    numbers = numbers && ParseFloat(rest.data() + start, rest.data() + i, &unused);
    ++tokens;
  }
  // A row of only nan and inf values has no digit (a diverged model's first row): text when it
  // holds dim floats. Otherwise bytes without a digit are a binary row's.
  if (!digit) return tokens == h.dim && numbers ? Guess::kText : Guess::kBinary;
  return tokens == h.dim ? Guess::kText : Guess::kTextLike;
}

Status ParseText(std::string_view data, const Header& h, const std::string& path, Embeddings* out) {
  out->dim = h.dim;
  out->words.resize(h.rows);
  out->vectors.resize(h.rows * static_cast<size_t>(h.dim));
  const char* const begin = data.data();
  const char* const end = data.data() + data.size();
  const char* p = begin + h.body;
  size_t line = 2;
  for (size_t i = 0; i < h.rows; ++i, ++line) {
    if (p >= end) {
      return Status::Corruption(path + ": line " + std::to_string(line) + ": file ends after " +
                                std::to_string(i) + " of the header's " + std::to_string(h.rows) +
                                " rows");
    }
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', end - p));
    if (eol == nullptr) eol = end;
    const char* stop = eol;
    // The C tool ends rows with " \n"; Windows tools with "\r\n".
    while (stop > p && (IsBlank(stop[-1]) || stop[-1] == '\r')) --stop;
    const char* q = p;
    while (q < stop && !IsBlank(*q)) ++q;
    if (q == p) {
      return Status::Corruption(path + ": line " + std::to_string(line) + " (byte offset " +
                                std::to_string(p - begin) + "): empty row, expected a word and " +
                                std::to_string(h.dim) + " values");
    }
    out->words[i].assign(p, q);
    float* row = out->vectors.data() + i * static_cast<size_t>(h.dim);
    int j = 0;
    while (true) {
      while (q < stop && IsBlank(*q)) ++q;
      if (q == stop) break;
      const char* t = q;
      while (t < stop && !IsBlank(*t)) ++t;
      if (j == h.dim) {
        return Status::Corruption(path + ": line " + std::to_string(line) + ": word '" +
                                  Printable(out->words[i]) + "' has more than " +
                                  std::to_string(h.dim) + " values");
      }
      if (!ParseFloat(q, t, &row[j])) {
        return Status::Corruption(path + ": line " + std::to_string(line) + ", byte offset " +
                                  std::to_string(q - begin) + ": value " + std::to_string(j + 1) +
                                  " of word '" + Printable(out->words[i]) + "' is not a number: '" +
                                  Printable(std::string_view(q, t - q)) + "'");
      }
      ++j;
      q = t;
    }
    if (j != h.dim) {
      return Status::Corruption(path + ": line " + std::to_string(line) + ": word '" +
                                Printable(out->words[i]) + "' has " + std::to_string(j) +
                                " values, expected " + std::to_string(h.dim));
    }
    p = eol < end ? eol + 1 : end;
  }
  for (const char* q = p; q < end; ++q) {
    if (!IsBlank(*q) && *q != '\r' && *q != '\n') {
      return Status::Corruption(path + ": line " + std::to_string(LineOf(data, q - begin)) +
                                ": unexpected content after the header's " +
                                std::to_string(h.rows) + " rows");
    }
  }
  return Status::Ok();
}

Status ParseBinary(std::string_view data, const Header& h, const std::string& path,
                   Embeddings* out) {
  out->dim = h.dim;
  out->words.resize(h.rows);
  out->vectors.resize(h.rows * static_cast<size_t>(h.dim));
  const size_t row_bytes = static_cast<size_t>(h.dim) * sizeof(float);
  size_t p = h.body;
  for (size_t i = 0; i < h.rows; ++i) {
    // The C tool writes '\n' after each row, gensim does not; both readers skip it here.
    while (p < data.size() && data[p] == '\n') ++p;
    const size_t space = data.find(' ', p);
    if (p >= data.size() || space == std::string_view::npos) {
      return Status::Corruption(path + ": byte offset " + std::to_string(p) +
                                ": file ends inside binary row " + std::to_string(i) + " of " +
                                std::to_string(h.rows) + " (no word followed by a space)");
    }
    if (space == p) {
      return Status::Corruption(path + ": byte offset " + std::to_string(p) +
                                ": empty word in binary row " + std::to_string(i));
    }
    out->words[i].assign(data.data() + p, space - p);
    p = space + 1;
    if (data.size() - p < row_bytes) {
      return Status::Corruption(
          path + ": byte offset " + std::to_string(p) + ": truncated binary row " +
          std::to_string(i) + " (word '" + Printable(out->words[i]) + "'): needs " +
          std::to_string(row_bytes) + " bytes, " + std::to_string(data.size() - p) + " left");
    }
    float* row = out->vectors.data() + i * static_cast<size_t>(h.dim);
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(row, data.data() + p, row_bytes);
    } else {
      for (int j = 0; j < h.dim; ++j) {
        uint32_t bits;
        std::memcpy(&bits, data.data() + p + j * sizeof(float), sizeof(bits));
        row[j] = std::bit_cast<float>(__builtin_bswap32(bits));
      }
    }
    p += row_bytes;
  }
  for (size_t q = p; q < data.size(); ++q) {
    if (data[q] != '\n' && data[q] != '\r' && !IsBlank(data[q])) {
      return Status::Corruption(path + ": byte offset " + std::to_string(q) +
                                ": unexpected bytes after the header's " + std::to_string(h.rows) +
                                " binary rows");
    }
  }
  return Status::Ok();
}

StatusOr<std::string> ReadFile(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    if (errno == ENOENT) return Status::NotFound("vectors file not found: " + path);
    return Status::IoError("cannot open " + path + ": " + ErrnoText());
  }
  std::string data;
  if (std::fseek(f.get(), 0, SEEK_END) == 0) {
    const long size = std::ftell(f.get());
    if (size > 0) data.reserve(static_cast<size_t>(size));
    std::rewind(f.get());
  }
  char chunk[1 << 16];
  while (true) {
    const size_t got = std::fread(chunk, 1, sizeof(chunk), f.get());
    data.append(chunk, got);
    if (got < sizeof(chunk)) break;
  }
  if (std::ferror(f.get())) return Status::IoError("read failed on " + path + ": " + ErrnoText());
  return data;
}

}  // namespace

bool ParseVectorFormat(const std::string& name, VectorFormat* format) {
  if (name == "text") {
    *format = VectorFormat::kText;
    return true;
  }
  if (name == "binary") {
    *format = VectorFormat::kBinary;
    return true;
  }
  return false;
}

Status WriteWord2Vec(const std::string& path, const std::vector<std::string>& words,
                     const float* rows, size_t stride, int dim, VectorFormat format, int threads) {
  if (dim <= 0 || stride < static_cast<size_t>(dim) || (rows == nullptr && !words.empty())) {
    return Status::InvalidArgument("WriteWord2Vec(" + path +
                                   "): need dim > 0 and stride >= dim, got dim " +
                                   std::to_string(dim) + ", stride " + std::to_string(stride));
  }
  SV_RETURN_IF_ERROR(ValidateWords(words));
  const std::string tmp_path = path + ".tmp";
  File f(std::fopen(tmp_path.c_str(), "wb"));
  if (!f) return Status::IoError("cannot create " + tmp_path + ": " + ErrnoText());
  const std::string header = std::to_string(words.size()) + " " + std::to_string(dim) + "\n";
  Status status = WriteAll(f.get(), header, tmp_path);
  if (status.ok()) status = WriteBody(f.get(), tmp_path, words, rows, stride, dim, format, threads);
  if (status.ok() && std::fflush(f.get()) != 0) {
    status = Status::IoError("write failed on " + tmp_path + ": " + ErrnoText());
  }
  if (std::fclose(f.release()) != 0 && status.ok()) {
    status = Status::IoError("close failed on " + tmp_path + ": " + ErrnoText());
  }
  if (status.ok() && std::rename(tmp_path.c_str(), path.c_str()) != 0) {
    status = Status::IoError("cannot rename " + tmp_path + " to " + path + ": " + ErrnoText());
  }
  if (!status.ok()) std::remove(tmp_path.c_str());
  return status;
}

Status WriteWord2Vec(const std::string& path, const Embeddings& embeddings, VectorFormat format,
                     int threads) {
  if (embeddings.vectors.size() != embeddings.rows() * static_cast<size_t>(embeddings.dim)) {
    return Status::InvalidArgument("WriteWord2Vec(" + path +
                                   "): " + std::to_string(embeddings.vectors.size()) +
                                   " floats do not make " + std::to_string(embeddings.rows()) +
                                   " rows of " + std::to_string(embeddings.dim));
  }
  return WriteWord2Vec(path, embeddings.words, embeddings.vectors.data(),
                       static_cast<size_t>(embeddings.dim), embeddings.dim, format, threads);
}

Status CheckWritable(const std::string& path) {
  const std::string probe = path + ".tmp";
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  if (f == nullptr) return Status::IoError("cannot write " + path + ": " + ErrnoText());
  std::fclose(f);
  std::remove(probe.c_str());
  return Status::Ok();
}

StatusOr<Embeddings> ReadWord2Vec(const std::string& path, VectorFormat* detected) {
  StatusOr<std::string> file = ReadFile(path);
  if (!file.ok()) return file.status();
  return ParseWord2Vec(*file, path, detected);
}

StatusOr<Embeddings> ParseWord2Vec(std::string_view data, const std::string& path,
                                   VectorFormat* detected) {
  StatusOr<Header> header = ParseHeader(data, path);
  if (!header.ok()) return header.status();
  Embeddings out;
  const Guess guess = header->rows == 0 ? Guess::kText : GuessFormat(data, *header);
  VectorFormat format = guess == Guess::kBinary ? VectorFormat::kBinary : VectorFormat::kText;
  Status status;
  if (guess == Guess::kTextLike) {
    // A text-looking first row with the wrong count is a malformed text file, unless the whole
    // file happens to parse as binary.
    status = ParseBinary(data, *header, path, &out);
    if (status.ok()) {
      format = VectorFormat::kBinary;
    } else {
      out = Embeddings();
      status = ParseText(data, *header, path, &out);
    }
  } else if (format == VectorFormat::kText) {
    status = ParseText(data, *header, path, &out);
  } else {
    status = ParseBinary(data, *header, path, &out);
  }
  if (!status.ok()) return status;
  if (detected != nullptr) *detected = format;
  return out;
}

}  // namespace streamvec

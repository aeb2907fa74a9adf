#include "streamvec/ingest/decompress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "compress_util.h"

namespace streamvec {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

struct Format {
  std::string name;
  std::function<std::string(const std::string&)> compress;
};

std::vector<Format> Formats() {
  return {{"gzip", testing::Gzip}, {"xz", testing::Xz}, {"zstd", testing::Zstd}};
}

class DecompressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("streamvec_decompress_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }

  // Decodes a whole file in reads of `chunk` bytes; the error, if any, in *error.
  static std::string DecodeAll(DecompressingReader& r, size_t chunk, Status* error) {
    std::string out, buf(chunk, '\0');
    while (true) {
      StatusOr<size_t> n = r.Read(buf.data(), buf.size());
      if (!n.ok()) {
        *error = n.status();
        return out;
      }
      if (*n == 0) return out;
      out.append(buf.data(), *n);
    }
  }

  fs::path dir_;
};

// About 3 MB of lines: several input blocks and output reads.
std::string Text() {
  std::string text;
  for (int i = 0; i < 60000; ++i) {
    text +=
        "line " + std::to_string(i) + " of the text, with words " + std::to_string(i * 7) + "\n";
  }
  return text;
}

TEST(DetectCompressionTest, MagicNumbersNotNames) {
  EXPECT_EQ(DetectCompression(std::string("\x1f\x8b\x08\x00", 4)), "gzip");
  EXPECT_EQ(DetectCompression(std::string("\xfd\x37\x7a\x58\x5a\x00\x00", 7)), "xz");
  EXPECT_EQ(DetectCompression(std::string("\x28\xb5\x2f\xfd\x00", 5)), "zstd");
  EXPECT_EQ(DetectCompression("plain text\n"), "");
  EXPECT_EQ(DetectCompression(""), "");
  EXPECT_EQ(DetectCompression(std::string("\xfd\x37\x7a\x58", 4)), "");  // too short for xz
}

// Each format round-trips, whatever the file is called, in reads of any size.
TEST_F(DecompressTest, EachFormatDecodesToTheOriginalBytes) {
  const std::string text = Text();
  for (const Format& f : Formats()) {
    const std::string path = Write("data-" + f.name + ".txt", f.compress(text));
    for (size_t chunk : {size_t{1} << 20, size_t{4096}, size_t{7}}) {
      if (chunk == 7 && f.name != "zstd") continue;  // byte-sized reads: slow, one format
      StatusOr<std::unique_ptr<DecompressingReader>> r = DecompressingReader::Open(path);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_NE(*r, nullptr) << f.name;
      EXPECT_EQ((*r)->format(), f.name);
      Status error;
      const std::string out = DecodeAll(**r, chunk, &error);
      EXPECT_TRUE(error.ok()) << error.ToString();
      EXPECT_TRUE(out == text) << f.name << " in reads of " << chunk << ": " << out.size()
                               << " bytes decoded, " << text.size() << " expected";
      EXPECT_EQ((*r)->decoded_bytes(), static_cast<int64_t>(text.size()));
    }
  }
}

// Members, streams and frames one after another decode as one stream (as gzip -d, xz -d and
// zstd -d do); compressed empty text decodes to nothing.
TEST_F(DecompressTest, ConcatenatedAndEmptyData) {
  for (const Format& f : Formats()) {
    const std::string path = Write("cat", f.compress("first part\n") + f.compress("second\n"));
    StatusOr<std::unique_ptr<DecompressingReader>> r = DecompressingReader::Open(path);
    ASSERT_TRUE(r.ok() && *r != nullptr) << f.name;
    Status error;
    EXPECT_EQ(DecodeAll(**r, 1 << 16, &error), "first part\nsecond\n") << f.name;
    EXPECT_TRUE(error.ok()) << f.name << ": " << error.ToString();

    const std::string empty = Write("empty", f.compress(""));
    r = DecompressingReader::Open(empty);
    ASSERT_TRUE(r.ok() && *r != nullptr) << f.name;
    EXPECT_EQ(DecodeAll(**r, 1 << 16, &error), "") << f.name;
    EXPECT_TRUE(error.ok()) << f.name << ": " << error.ToString();
  }
}

TEST_F(DecompressTest, PlainAndEmptyFilesAreNotCompressed) {
  for (const std::string& bytes : {std::string("plain text\n"), std::string()}) {
    StatusOr<std::unique_ptr<DecompressingReader>> r =
        DecompressingReader::Open(Write("plain.gz", bytes));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, nullptr);
  }
  StatusOr<std::unique_ptr<DecompressingReader>> missing =
      DecompressingReader::Open((dir_ / "missing.xz").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.xz"));
}

// A truncated file: Corruption naming the file, the format and "truncated"; the bytes returned
// before it are a prefix of the text.
TEST_F(DecompressTest, TruncatedDataIsAnErrorNamingTheFile) {
  const std::string text = Text();
  for (const Format& f : Formats()) {
    const std::string bytes = f.compress(text);
    const std::string path = Write("cut-" + f.name, bytes.substr(0, bytes.size() / 2));
    StatusOr<std::unique_ptr<DecompressingReader>> r = DecompressingReader::Open(path);
    ASSERT_TRUE(r.ok() && *r != nullptr) << f.name;
    Status error;
    const std::string out = DecodeAll(**r, 1 << 16, &error);
    ASSERT_FALSE(error.ok()) << f.name;
    EXPECT_EQ(error.code(), StatusCode::kCorruption);
    EXPECT_THAT(error.message(), HasSubstr(path));
    EXPECT_THAT(error.message(), HasSubstr("corrupt " + f.name + " data"));
    EXPECT_THAT(error.message(), HasSubstr("truncated"));
    EXPECT_EQ(text.compare(0, out.size(), out), 0) << f.name;
  }
}

// Flipped bytes in the middle: every format's check catches them (gzip's CRC-32 at the member's
// end at the latest).
TEST_F(DecompressTest, CorruptDataIsAnErrorNamingTheFile) {
  const std::string text = Text();
  for (const Format& f : Formats()) {
    std::string bytes = f.compress(text);
    for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] ^= 0x55;
    const std::string path = Write("bad-" + f.name, bytes);
    StatusOr<std::unique_ptr<DecompressingReader>> r = DecompressingReader::Open(path);
    ASSERT_TRUE(r.ok() && *r != nullptr) << f.name;
    Status error;
    DecodeAll(**r, 1 << 16, &error);
    ASSERT_FALSE(error.ok()) << f.name;
    EXPECT_EQ(error.code(), StatusCode::kCorruption);
    EXPECT_THAT(error.message(), HasSubstr(path + ": corrupt " + f.name + " data"));
  }
}

// Bytes after the data that are no further member/stream/frame are an error, not ignored.
TEST_F(DecompressTest, TrailingGarbageIsAnError) {
  for (const Format& f : Formats()) {
    const std::string path = Write("tail-" + f.name, f.compress("text\n") + "garbage!");
    StatusOr<std::unique_ptr<DecompressingReader>> r = DecompressingReader::Open(path);
    ASSERT_TRUE(r.ok() && *r != nullptr) << f.name;
    Status error;
    EXPECT_EQ(DecodeAll(**r, 1 << 16, &error), "text\n") << f.name;
    EXPECT_FALSE(error.ok()) << f.name;
    EXPECT_THAT(error.message(), HasSubstr(path)) << f.name;
  }
}

// The corpus `streamvec run` and scripts/demo ingest by default (data/run/): one compressed file
// that decodes without error to at least 15M words of text.
TEST(BundledRunDataTest, DecodesToAtLeast15MillionWords) {
  const fs::path run = fs::path(STREAMVEC_SOURCE_DIR) / "data" / "run";
  std::vector<fs::path> compressed;
  for (const fs::directory_entry& e : fs::directory_iterator(run)) {
    StatusOr<std::unique_ptr<DecompressingReader>> r = DecompressingReader::Open(e.path());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (*r != nullptr) compressed.push_back(e.path());
  }
  ASSERT_EQ(compressed.size(), 1u) << "data/run/ should hold one compressed corpus";
  StatusOr<std::unique_ptr<DecompressingReader>> r = DecompressingReader::Open(compressed[0]);
  ASSERT_TRUE(r.ok() && *r != nullptr);
  std::string buf(1 << 20, '\0');
  int64_t words = 0;
  bool in_word = false;
  while (true) {
    StatusOr<size_t> n = (*r)->Read(buf.data(), buf.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    if (*n == 0) break;
    for (size_t i = 0; i < *n; ++i) {
      const bool space = buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r';
      if (!space && !in_word) ++words;
      in_word = !space;
    }
  }
  std::printf("%s: %lld decoded bytes, %lld words\n", compressed[0].c_str(),
              static_cast<long long>((*r)->decoded_bytes()), static_cast<long long>(words));
  EXPECT_GE(words, 15000000);
}

}  // namespace
}  // namespace streamvec

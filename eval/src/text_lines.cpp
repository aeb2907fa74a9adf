#include "text_lines.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>

namespace streamvec::eval::internal {

StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& what) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    if (errno == ENOENT) return Status::NotFound(what + " not found: " + path);
    return Status::IoError("cannot open " + what + " " + path + ": " + std::strerror(errno));
  }
  std::string data;
  char chunk[1 << 16];
  while (true) {
    const size_t got = std::fread(chunk, 1, sizeof(chunk), f.get());
    data.append(chunk, got);
    if (got < sizeof(chunk)) break;
  }
  if (std::ferror(f.get())) {
    return Status::IoError("cannot read " + what + " " + path + ": " + std::strerror(errno));
  }
  return data;
}

std::vector<std::string_view> SplitLines(std::string_view data) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != '\n' && data[i] != '\r') continue;
    lines.push_back(data.substr(start, i - start));
    if (data[i] == '\r' && i + 1 < data.size() && data[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < data.size()) lines.push_back(data.substr(start));
  return lines;
}

std::string_view StripAscii(std::string_view s) {
  constexpr const char* kSpace = " \t\n\r\f\v";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

bool ParsePythonFloat(std::string_view s, double* value) {
  s = StripAscii(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+') return false;
  const std::from_chars_result r = std::from_chars(s.data(), s.data() + s.size(), *value);
  if (r.ptr != s.data() + s.size()) return false;
  if (r.ec == std::errc::result_out_of_range) {
    *value = std::strtod(std::string(s).c_str(), nullptr);  // +-inf or 0, as Python gives
    return true;
  }
  return r.ec == std::errc();
}

}  // namespace streamvec::eval::internal

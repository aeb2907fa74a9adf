#include "host_port.h"

#include <charconv>

namespace streamvec::app {

bool ParseHostPort(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return false;
  const std::string p = text.substr(colon + 1);
  int value = -1;
  const auto r = std::from_chars(p.data(), p.data() + p.size(), value);
  if (p.empty() || r.ec != std::errc() || r.ptr != p.data() + p.size() || value < 0 ||
      value > 65535) {
    return false;
  }
  *host = h;
  *port = value;
  return true;
}

}  // namespace streamvec::app

#include "streamvec/kafka/client_config.h"

#include <fstream>

namespace streamvec {

StatusOr<std::pair<std::string, std::string>> ParseKafkaProperty(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::InvalidArgument("--kafka-config must be name=value, not '" + text + "'");
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

StatusOr<std::string> ReadBootstrapFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read bootstrap file " + path);
  std::string line;
  std::getline(in, line);
  const size_t b = line.find_first_not_of(" \t\r");
  const size_t e = line.find_last_not_of(" \t\r");
  if (b == std::string::npos) return Status::InvalidArgument("bootstrap file " + path + " is empty");
  return line.substr(b, e - b + 1);
}

}  // namespace streamvec

// The `--device` flag's parsing (the same with or without a CUDA build).
#include <cctype>
#include <string>

#include "streamvec/kernels/cuda.h"

namespace streamvec {

Status ParseDeviceSpec(const std::string& text, DeviceSpec* out) {
  auto bad = [&] {
    return Status::InvalidArgument("--device must be cpu, cuda or cuda:N (N a device number), "
                                   "not '" + text + "'");
  };
  if (text == "cpu") {
    *out = DeviceSpec{};
    return Status::Ok();
  }
  if (text.rfind("cuda", 0) != 0) return bad();
  DeviceSpec spec;
  spec.cuda = true;
  if (text.size() > 4) {
    if (text[4] != ':' || text.size() == 5 || text.size() > 9) return bad();
    for (size_t i = 5; i < text.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) return bad();
    }
    spec.ordinal = std::stoi(text.substr(5));
  }
  *out = spec;
  return Status::Ok();
}

}  // namespace streamvec

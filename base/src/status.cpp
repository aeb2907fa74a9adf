#include "streamvec/base/status.h"

namespace streamvec {

std::string Status::ToString() const {
  const char* name = "OK";
  switch (code_) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      name = "invalid argument";
      break;
    case StatusCode::kNotFound:
      name = "not found";
      break;
    case StatusCode::kIoError:
      name = "I/O error";
      break;
    case StatusCode::kCorruption:
      name = "corruption";
      break;
    case StatusCode::kFailedPrecondition:
      name = "failed precondition";
      break;
    case StatusCode::kInternal:
      name = "internal";
      break;
  }
  return std::string(name) + ": " + message_;
}

}  // namespace streamvec

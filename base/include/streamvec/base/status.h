// Status and StatusOr<T>: the error type at every boundary that touches I/O or the network.
//
// Modelled on LevelDB's Status and abseil's StatusOr. A Status is either OK or carries a code and
// a human-readable message naming what is wrong (the flag, the file, the byte offset). Expected
// failures (bad input, a missing file, a full disk) are Status values; broken invariants abort
// through SV_CHECK. Thread safety: values are immutable after construction and safe to copy.
#ifndef STREAMVEC_BASE_STATUS_H_
#define STREAMVEC_BASE_STATUS_H_

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace streamvec {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad flag, malformed request or document
  kNotFound,         // missing file or word
  kIoError,          // read/write failure, full disk
  kCorruption,       // a file or state that is not what it claims to be
  kFailedPrecondition,
  kInternal,
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK" or "<code name>: <message>".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Holds either a T or a non-OK Status. Accessing value() of an error aborts (a broken invariant).
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) (void)(status_ = Status::Internal("StatusOr constructed from OK status"));
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    CheckOk();
    return *value_;
  }
  const T& value() const& {
    CheckOk();
    return *value_;
  }
  T&& value() && {
    CheckOk();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckOk() const {
    if (!status_.ok()) {
      std::fprintf(stderr, "StatusOr::value() on error: %s\n", status_.ToString().c_str());
      std::abort();
    }
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace streamvec

// Aborts with file:line when an invariant does not hold. Not for input validation.
#define SV_CHECK(cond)                                                                   \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

// Returns the status from the enclosing function when it is not OK.
#define SV_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::streamvec::Status _sv_status = (expr); \
    if (!_sv_status.ok()) return _sv_status; \
  } while (0)

#endif  // STREAMVEC_BASE_STATUS_H_

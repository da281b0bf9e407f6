// Status and StatusOr<T>: the error vocabulary of every layer in src/.
//
// Codes are chosen by what the caller should do (STYLE.md §3). A Status is
// cheap to copy when OK. The server turns failures into HTTP replies through
// one table, server/request_ending.h (EndingForStatus, TraitsOf).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kc {

enum class StatusCode {
  kOk,
  kInvalidArgument,    // fix the request
  kResourceExhausted,  // a limit was hit
  kUnavailable,        // retry soon
  kDeadlineExceeded,
  kCancelled,
  kNotFound,
  kFailedPrecondition,
  kPermissionDenied,  // the caller may not do this
  kInternal,          // our bug
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with where it happened: "seat cpu/w1: ...".
  Status WithContext(std::string_view context) const {
    if (ok()) return *this;
    return Status(code_, std::string(context) + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status ResourceExhaustedError(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status UnavailableError(std::string m) {
  return {StatusCode::kUnavailable, std::move(m)};
}
inline Status DeadlineExceededError(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status NotFoundError(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status PermissionDeniedError(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status InternalError(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}

namespace internal {
// A value taken from a StatusOr that holds an error: a bug, so it aborts naming the error.
[[noreturn]] void ValueOfError(const Status& status);
}  // namespace internal

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit like absl
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = InternalError("StatusOr built from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  // Each checks that there is a value, as Abseil's do: reading an error's value aborts rather
  // than running on with an empty optional.
  T& value() & { return Checked(); }
  const T& value() const& { return Checked(); }
  T&& value() && { return std::move(Checked()); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &Checked(); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return Checked(); }

 private:
  T& Checked() {
    if (!value_) internal::ValueOfError(status_);
    return *value_;
  }
  const T& Checked() const {
    if (!value_) internal::ValueOfError(status_);
    return *value_;
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace kc

#define KC_CONCAT_INNER_(a, b) a##b
#define KC_CONCAT_(a, b) KC_CONCAT_INNER_(a, b)

#define KC_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::kc::Status kc_status_ = (expr);        \
    if (!kc_status_.ok()) return kc_status_; \
  } while (false)

#define KC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define KC_ASSIGN_OR_RETURN(lhs, expr) \
  KC_ASSIGN_OR_RETURN_IMPL_(KC_CONCAT_(kc_statusor_, __LINE__), lhs, expr)

// Broken invariants are bugs, not a Status: abort with a message.
#define KC_CHECK(cond)                                        \
  do {                                                        \
    if (!(cond)) {                                            \
      ::kc::internal::CheckFailed(#cond, __FILE__, __LINE__); \
    }                                                         \
  } while (false)

namespace kc::internal {
[[noreturn]] void CheckFailed(const char* condition, const char* file, int line);
}  // namespace kc::internal

// Status and Result<T>: errors that come from the environment (files, user input, devices) are
// values, not exceptions. Broken invariants are not Status; they are COLO_CHECK failures (see
// check.h).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace colo {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is malformed (a bad trace line, an unknown policy)
  kNotFound,         // a named thing does not exist (file, job, GPU)
  kFailedPrecondition,
  kUnavailable,  // the environment cannot serve now (no driver, device busy)
  kInternal,
  kPermissionDenied,   // the caller may not do this
  kResourceExhausted,  // a limit was reached (connections, request size)
  kInfeasible,         // can never be satisfied here (a job no GPU of the server can hold)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>", for people.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) {
  return {StatusCode::kUnavailable, std::move(m)};
}
inline Status Internal(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status InfeasibleStatus(std::string m) {
  return {StatusCode::kInfeasible, std::move(m)};
}

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(data_);
  }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace colo

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define COLO_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::colo::Status colo_status_ = (expr);        \
    if (!colo_status_.ok()) return colo_status_; \
  } while (0)

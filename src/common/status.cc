#include "common/status.h"

namespace colo {

std::string Status::ToString() const {
  const char* name = "ok";
  switch (code_) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      name = "invalid argument";
      break;
    case StatusCode::kNotFound:
      name = "not found";
      break;
    case StatusCode::kFailedPrecondition:
      name = "failed precondition";
      break;
    case StatusCode::kUnavailable:
      name = "unavailable";
      break;
    case StatusCode::kInternal:
      name = "internal";
      break;
    case StatusCode::kPermissionDenied:
      name = "permission denied";
      break;
    case StatusCode::kResourceExhausted:
      name = "resource exhausted";
      break;
    case StatusCode::kInfeasible:
      name = "infeasible";
      break;
  }
  return std::string(name) + ": " + message_;
}

}  // namespace colo

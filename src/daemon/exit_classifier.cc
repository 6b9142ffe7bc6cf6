#include "daemon/exit_classifier.h"

#include <fmt/format.h>
#include <string.h>

#include <array>

#include "common/strings.h"

namespace colo {
namespace {

// Substrings, matched case-sensitively as the frameworks print them.
constexpr std::array<std::string_view, 12> kOutOfMemoryPatterns = {
    "torch.OutOfMemoryError",             // PyTorch >= 2.5
    "torch.cuda.OutOfMemoryError",        // PyTorch 1.13 - 2.4
    "CUDA out of memory",                 // PyTorch's message text
    "RESOURCE_EXHAUSTED: Out of memory",  // JAX / XLA
    "OOM when allocating",                // TensorFlow
    "ResourceExhaustedError",             // TensorFlow's exception type
    "CUBLAS_STATUS_ALLOC_FAILED",         // cuBLAS
    "CUDNN_STATUS_ALLOC_FAILED",          // cuDNN
    "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",  // cuDNN with no room for its workspace
    "cudaErrorMemoryAllocation",          // CUDA runtime
    "CUDA_ERROR_OUT_OF_MEMORY",           // CUDA driver API
    "out of memory (CUDA error 2)",       // CUDA runtime error strings in C++ programs
};

// TensorFlow prints RESOURCE_EXHAUSTED for other quotas too; it counts only next to "OOM".
bool IsTensorFlowQuota(std::string_view line) {
  return line.find("RESOURCE_EXHAUSTED") != std::string_view::npos &&
         line.find("OOM") == std::string_view::npos &&
         line.find("Out of memory") == std::string_view::npos;
}

std::string LastNonEmptyLine(std::string_view text) {
  std::string last;
  for (const std::string& line : Split(text, '\n')) {
    const std::string trimmed(Trim(line));
    if (!trimmed.empty()) last = trimmed;
  }
  return last;
}

}  // namespace

std::string FindOutOfMemoryLine(std::string_view text) {
  std::string found;
  for (const std::string& line : Split(text, '\n')) {
    for (std::string_view pattern : kOutOfMemoryPatterns) {
      if (line.find(pattern) != std::string::npos) {
        found =
            std::string(Trim(line));  // keep the last one: the final error, not a warning before it
        break;
      }
    }
    if (line.find("RESOURCE_EXHAUSTED") != std::string::npos && !IsTensorFlowQuota(line))
      found = std::string(Trim(line));
  }
  return found;
}

std::string DescribeEnd(const ProcessEnd& end) {
  if (!end.known) return "ended while colod was down; no exit status was recorded";
  if (end.exited) return fmt::format("exit code {}", end.code);
  return fmt::format("killed by signal {} ({})", end.code, strsignal(end.code));
}

JobExit ClassifyExit(const ProcessEnd& end, bool cancel_requested, std::string_view stderr_tail) {
  if (cancel_requested) return {ExitKind::kCancelled, "cancelled: " + DescribeEnd(end)};
  if (!end.known) return {ExitKind::kLost, DescribeEnd(end)};
  if (end.exited && end.code == 0) return {ExitKind::kSuccess, ""};
  const std::string oom = FindOutOfMemoryLine(stderr_tail);
  if (!oom.empty()) return {ExitKind::kOutOfMemory, oom.substr(0, 300)};
  std::string detail = DescribeEnd(end);
  const std::string last = LastNonEmptyLine(stderr_tail);
  if (!last.empty()) detail += ": " + last.substr(0, 300);
  return {ExitKind::kFailure, detail};
}

}  // namespace colo

#include "core/model.h"

#include <fmt/format.h>

namespace colo {

std::string_view ToString(MemorySource s) {
  switch (s) {
    case MemorySource::kUnknown:
      return "unknown";
    case MemorySource::kDeclared:
      return "declared";
    case MemorySource::kEstimated:
      return "estimated";
    case MemorySource::kLearned:
      return "learned";
  }
  return "?";
}

std::string_view ToString(SharingPreference p) {
  switch (p) {
    case SharingPreference::kAny:
      return "any";
    case SharingPreference::kMps:
      return "mps";
    case SharingPreference::kPlain:
      return "plain";
    case SharingPreference::kExclusive:
      return "exclusive";
  }
  return "?";
}

std::string_view ToString(SharingMode m) {
  switch (m) {
    case SharingMode::kMps:
      return "mps";
    case SharingMode::kPlain:
      return "plain";
    case SharingMode::kExclusive:
      return "exclusive";
  }
  return "?";
}

Result<SharingPreference> ParseSharingPreference(std::string_view text) {
  if (text == "any" || text.empty()) return SharingPreference::kAny;
  if (text == "mps") return SharingPreference::kMps;
  if (text == "plain") return SharingPreference::kPlain;
  if (text == "exclusive") return SharingPreference::kExclusive;
  return InvalidArgument(
      fmt::format("unknown sharing '{}' (use any, mps, plain, exclusive)", text));
}

std::string_view ToString(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRecovering:
      return "recovering";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
    case JobState::kLost:
      return "lost";
    case JobState::kRequeued:
      return "requeued";
    case JobState::kTimeout:
      return "timeout";
  }
  return "?";
}

std::string_view ToString(ExitKind k) {
  switch (k) {
    case ExitKind::kSuccess:
      return "success";
    case ExitKind::kFailure:
      return "failure";
    case ExitKind::kOutOfMemory:
      return "out-of-memory";
    case ExitKind::kCancelled:
      return "cancelled";
    case ExitKind::kLost:
      return "lost";
    case ExitKind::kTimeout:
      return "timeout";
    case ExitKind::kPreempted:
      return "preempted";
  }
  return "?";
}

namespace {
// The value whose ToString is `text`, for enums whose values run from 0 to `last`.
template <typename Enum>
Result<Enum> ParseByName(std::string_view text, Enum last, std::string_view what) {
  std::string names;
  for (int i = 0; i <= static_cast<int>(last); ++i) {
    const auto value = static_cast<Enum>(i);
    if (ToString(value) == text) return value;
    names += (names.empty() ? "" : ", ") + std::string(ToString(value));
  }
  return InvalidArgument(fmt::format("unknown {} '{}' (one of {})", what, text, names));
}
}  // namespace

Result<MemorySource> ParseMemorySource(std::string_view text) {
  return ParseByName(text, MemorySource::kLearned, "memory source");
}
Result<SharingMode> ParseSharingMode(std::string_view text) {
  return ParseByName(text, SharingMode::kExclusive, "sharing mode");
}
Result<JobState> ParseJobState(std::string_view text) {
  return ParseByName(text, JobState::kTimeout, "job state");
}
Result<ExitKind> ParseExitKind(std::string_view text) {
  return ParseByName(text, ExitKind::kPreempted, "exit kind");
}

}  // namespace colo

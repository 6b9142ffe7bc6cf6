#include "api/codec.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api/field_json.h"
#include "api/output_pattern.h"
#include "common/job_signals.h"
#include "common/resource_limits.h"

namespace colo::api {

using nlohmann::json;

namespace {

template <typename Enum, size_t N>
Result<Enum> ParseNamed(std::string_view text, const Enum (&all)[N], std::string_view what) {
  std::string names;
  for (Enum value : all) {
    if (ToString(value) == text) return value;
    names += (names.empty() ? "" : ", ") + std::string(ToString(value));
  }
  return InvalidArgument(
      fmt::format("unknown {} '{}' (one of {})", what, text.substr(0, 64), names));
}

std::string Line(json j) {
  j["ok"] = true;
  // Every string colod sends was made valid UTF-8 where it entered; replacing here is the last
  // guard, so a reply can always be encoded.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

template <typename Reply>
std::string EncodeAnyReply(const Reply& reply) {
  json j = json::object();
  WriteFields(reply, j);
  return Line(std::move(j));
}

// The op of each alternative of Request, in its order.
constexpr std::string_view kOpNames[] = {
    "hello",   "submit",       "queue",     "show",      "cancel",  "explain", "logs",   "gpus",
    "history", "slurm_attach", "slurm_end", "slurm_run", "control", "report",  "events", "share"};
static_assert(std::size(kOpNames) == std::variant_size_v<Request>);

// The alternative of Request whose op is `op`, read from `j`; nullopt for an unknown op.
template <size_t I = 0>
std::optional<Request> ReadOp(std::string_view op, const json& j, Status& status) {
  if constexpr (I == std::variant_size_v<Request>) {
    return std::nullopt;
  } else {
    if (op != kOpNames[I]) return ReadOp<I + 1>(op, j, status);
    std::variant_alternative_t<I, Request> request;
    ReadRequestFields(j, request, status, {"api", "op"});
    return Request(std::move(request));
  }
}

}  // namespace

// Rules no one field states.

void CheckFields(JobEstimate& e, field_json::Reader& r) {
  if (!r.Has("lower")) e.lower = e.peak;
  if (!r.Has("upper")) e.upper = e.peak;
  if (!(e.lower <= e.peak && e.peak <= e.upper)) r.Fail("upper", "needs lower <= peak <= upper");
}

void CheckFields(ArraySpec& array, field_json::Reader& r) {
  bool ascending = !array.tasks.empty();
  for (size_t i = 1; i < array.tasks.size(); ++i) ascending &= array.tasks[i - 1] < array.tasks[i];
  if (!ascending)
    r.Fail("tasks",
           fmt::format("must be distinct ascending task ids from 0 to {} (1 to {} of them)",
                       kMaxArrayTaskId, kMaxArrayTasks));
}

void CheckFields(SubmitRequest& s, field_json::Reader& r) {
  if (s.command.empty()) return r.Fail("command", "is required (a non-empty list of strings)");
  if (s.command.front().empty()) return r.Fail("command", "starts with an empty word");
  if (s.context.workdir.empty()) return r.Fail("workdir", "is required (an absolute path)");
  size_t command_bytes = 0, env_bytes = 0;
  for (const std::string& word : s.command) {
    command_bytes += word.size() + 1;
    if (word.find('\0') != std::string::npos) return r.Fail("command", "contains a NUL byte");
  }
  for (const std::string& entry : s.env) {
    env_bytes += entry.size() + 1;
    if (entry.find('=') == std::string::npos || entry.front() == '=' ||
        entry.find('\0') != std::string::npos)
      return r.Fail("env", "entries must be NAME=value");
  }
  if (command_bytes > kMaxCommandBytes)
    return r.Fail("command", fmt::format("is longer than {} bytes in all", kMaxCommandBytes));
  if (env_bytes > kMaxEnvBytes)
    return r.Fail("env", fmt::format("is larger than {} bytes in all", kMaxEnvBytes));
  for (auto [key, pattern] : {std::pair{"output", &s.output}, std::pair{"error", &s.error}}) {
    if (!r.Has(key)) continue;
    if (Status checked = CheckOutputPattern(*pattern); !checked.ok())
      return r.Fail(key, checked.message());
  }
}

void CheckFields(ResourceLimit& limit, field_json::Reader& r) {
  if (!ResourceNamed(limit.name)) {
    std::string names;
    for (const ResourceKind& kind : kResourceKinds)
      names += (names.empty() ? "" : ", ") + std::string(kind.name);
    return r.Fail("name", fmt::format("unknown resource '{}' (one of {})", limit.name, names));
  }
  const auto value = [](int64_t v) {
    return v < 0 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(v);
  };
  if (value(limit.soft) > value(limit.hard)) r.Fail("soft", "must be at most hard");
}

void CheckFields(JobSignal& signal, field_json::Reader& r) {
  if (!IsJobSignal(signal.number))
    r.Fail("number",
           "must be one of HUP, INT, QUIT, USR1, USR2, ALRM, TERM, URG, WINCH (1, 2, "
           "3, 10, 12, 14, 15, 23, 28)");
}

void CheckFields(ControlRequest& c, field_json::Reader& r) {
  if (c.jobs.empty())
    r.Fail("jobs", fmt::format("must be a list of 1 to {} job ids", kMaxControlJobs));
}

std::string_view ToString(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kInfeasible:
      return "infeasible";
    case ErrorCode::kFailedPrecondition:
      return "failed_precondition";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kBusy:
      return "busy";
    case ErrorCode::kTooLarge:
      return "too_large";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

std::optional<ErrorCode> ParseErrorCode(std::string_view text) {
  for (int i = 0; i <= static_cast<int>(ErrorCode::kInternal); ++i) {
    if (ToString(static_cast<ErrorCode>(i)) == text) return static_cast<ErrorCode>(i);
  }
  return std::nullopt;
}

Result<ErrorCode> ParseName(std::string_view text, Of<ErrorCode>) {
  if (auto code = ParseErrorCode(text)) return *code;
  return InvalidArgument(fmt::format("unknown error code '{}'", text.substr(0, 64)));
}

Status ToStatus(ErrorCode code, std::string message) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return InvalidArgument(std::move(message));
    case ErrorCode::kNotFound:
      return NotFound(std::move(message));
    case ErrorCode::kPermissionDenied:
      return PermissionDenied(std::move(message));
    case ErrorCode::kInfeasible:
      return InfeasibleStatus(std::move(message));
    case ErrorCode::kFailedPrecondition:
      return FailedPrecondition(std::move(message));
    case ErrorCode::kUnavailable:
      return Unavailable(std::move(message));
    case ErrorCode::kBusy:
    case ErrorCode::kTooLarge:
      return ResourceExhausted(std::move(message));
    case ErrorCode::kInternal:
      break;
  }
  return Internal(std::move(message));
}

ErrorCode CodeOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return ErrorCode::kInvalidArgument;
    case StatusCode::kNotFound:
      return ErrorCode::kNotFound;
    case StatusCode::kPermissionDenied:
      return ErrorCode::kPermissionDenied;
    case StatusCode::kInfeasible:
      return ErrorCode::kInfeasible;
    case StatusCode::kFailedPrecondition:
      return ErrorCode::kFailedPrecondition;
    case StatusCode::kUnavailable:
      return ErrorCode::kUnavailable;
    case StatusCode::kResourceExhausted:
      return ErrorCode::kBusy;
    case StatusCode::kOk:
    case StatusCode::kInternal:
      break;
  }
  return ErrorCode::kInternal;
}

std::string_view ToString(SlurmPlacement p) {
  switch (p) {
    case SlurmPlacement::kPlaced:
      return "placed";
    case SlurmPlacement::kWaiting:
      return "waiting";
    case SlurmPlacement::kRequeue:
      return "requeue";
    case SlurmPlacement::kFailed:
      break;
  }
  return "failed";
}
Result<SlurmPlacement> ParseSlurmPlacement(std::string_view text) {
  for (SlurmPlacement p : {SlurmPlacement::kPlaced, SlurmPlacement::kWaiting,
                           SlurmPlacement::kRequeue, SlurmPlacement::kFailed}) {
    if (text == ToString(p)) return p;
  }
  return InvalidArgument(fmt::format("unknown placement state '{}'", text.substr(0, 64)));
}

std::string_view ToString(DependencyKind kind) {
  switch (kind) {
    case DependencyKind::kAfterOk:
      return "afterok";
    case DependencyKind::kAfterAny:
      return "afterany";
    case DependencyKind::kAfterNotOk:
      break;
  }
  return "afternotok";
}
Result<DependencyKind> ParseDependencyKind(std::string_view text) {
  static constexpr DependencyKind kAll[] = {DependencyKind::kAfterOk, DependencyKind::kAfterAny,
                                            DependencyKind::kAfterNotOk};
  return ParseNamed(text, kAll, "dependency kind");
}
std::string_view ToString(JobAction action) {
  switch (action) {
    case JobAction::kHold:
      return "hold";
    case JobAction::kRelease:
      return "release";
    case JobAction::kRequeue:
      return "requeue";
    case JobAction::kCancel:
      break;
  }
  return "cancel";
}
Result<JobAction> ParseJobAction(std::string_view text) {
  static constexpr JobAction kAll[] = {JobAction::kHold, JobAction::kRelease, JobAction::kRequeue,
                                       JobAction::kCancel};
  return ParseNamed(text, kAll, "action");
}

std::string_view OpName(const Request& request) {
  return kOpNames[request.index()];
}

std::string EncodeRequest(const Request& request) {
  json j = json::object();
  std::visit([&](const auto& r) { WriteFields(r, j); }, request);
  j["op"] = OpName(request);
  j["api"] = kVersion;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Request> DecodeRequest(std::string_view line) {
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("request is not a JSON object");
  const auto api = j.find("api");
  if (api == j.end() || !api->is_number_integer() || api->get<int64_t>() != kVersion) {
    return FailedPrecondition(
        fmt::format("unsupported API version {} (colod speaks {}; \"api\" must be the number {})",
                    // Named by its type, never printed: a client's value can be nested deep
                    // enough to overflow any recursive printer.
                    api == j.end()             ? "(none)"
                    : api->is_number_integer() ? std::to_string(api->get<int64_t>())
                                               : std::string("of type ") + api->type_name(),
                    kVersion, kVersion));
  }
  const auto op = j.find("op");
  if (op == j.end() || op->is_null()) return InvalidArgument("request has no \"op\"");
  if (!op->is_string()) return InvalidArgument("op: must be a string");
  const std::string& name = op->get_ref<const std::string&>();
  Status status;
  std::optional<Request> request = ReadOp(name, j, status);
  if (!request)
    return InvalidArgument(name.empty() ? "request has no \"op\""
                                        : fmt::format("unknown op '{}'", name.substr(0, 64)));
  if (!status.ok()) return status;
  return *std::move(request);
}

std::string EncodeReply(const HelloReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const SubmitReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const QueueReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const ShowReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const CancelReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const ExplainReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const LogsReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const GpusReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const ShareReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const HistoryReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const SlurmAttachReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const SlurmEndReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const SlurmRunReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const ControlReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const RunReportReply& reply) {
  return EncodeAnyReply(reply);
}
std::string EncodeReply(const EventsReply& reply) {
  return EncodeAnyReply(reply);
}

std::string EncodeError(ErrorCode code, std::string_view message) {
  const json j{
      {"ok", false}, {"error", std::string(message)}, {"code", std::string(ToString(code))}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}
std::string EncodeError(const Status& error) {
  return EncodeError(CodeOf(error), error.message());
}

template <typename T>
Result<T> DecodeReply(std::string_view line) {
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Internal("colod sent a reply that is not JSON");
  const auto ok = j.find("ok");
  if (ok == j.end() || !ok->is_boolean()) return Internal("colod sent a reply without \"ok\"");
  if (!ok->get<bool>()) {
    const auto error = j.find("error");
    const auto code = j.find("code");
    const std::string message = error != j.end() && error->is_string()
                                    ? error->get<std::string>().substr(0, 1 << 20)
                                    : std::string("failed");
    const std::optional<ErrorCode> parsed = code != j.end() && code->is_string()
                                                ? ParseErrorCode(code->get<std::string>())
                                                : std::nullopt;
    return ToStatus(parsed.value_or(ErrorCode::kInternal), message);
  }
  Status status;
  T reply;
  ReadFields(j, "", reply, status);
  if (!status.ok()) return Internal("colod sent a malformed reply: " + status.message());
  return reply;
}

template Result<HelloReply> DecodeReply<HelloReply>(std::string_view);
template Result<SubmitReply> DecodeReply<SubmitReply>(std::string_view);
template Result<QueueReply> DecodeReply<QueueReply>(std::string_view);
template Result<ShowReply> DecodeReply<ShowReply>(std::string_view);
template Result<CancelReply> DecodeReply<CancelReply>(std::string_view);
template Result<ExplainReply> DecodeReply<ExplainReply>(std::string_view);
template Result<LogsReply> DecodeReply<LogsReply>(std::string_view);
template Result<GpusReply> DecodeReply<GpusReply>(std::string_view);
template Result<ShareReply> DecodeReply<ShareReply>(std::string_view);
template Result<HistoryReply> DecodeReply<HistoryReply>(std::string_view);
template Result<SlurmAttachReply> DecodeReply<SlurmAttachReply>(std::string_view);
template Result<SlurmEndReply> DecodeReply<SlurmEndReply>(std::string_view);
template Result<SlurmRunReply> DecodeReply<SlurmRunReply>(std::string_view);
template Result<ControlReply> DecodeReply<ControlReply>(std::string_view);
template Result<RunReportReply> DecodeReply<RunReportReply>(std::string_view);
template Result<EventsReply> DecodeReply<EventsReply>(std::string_view);

}  // namespace colo::api

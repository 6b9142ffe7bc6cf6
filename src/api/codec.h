// The wire format of colod's API: the only code that turns requests and replies into JSON lines
// and back, by walking each struct's description (types.h, fields.h). Decoding is strict and
// total: any bytes give either a typed value or an error that names the field (never an
// exception), so colod can answer every line it receives.
#pragma once

#include <string>
#include <string_view>

#include "api/types.h"
#include "common/status.h"

namespace colo::api {

// Requests: one line of JSON without the newline.
std::string EncodeRequest(const Request& request);
// InvalidArgument naming the field for anything malformed; an API version other than kVersion is
// FailedPrecondition (the wire code kUnsupportedVersion).
Result<Request> DecodeRequest(std::string_view line);

// Replies: {"ok": true, ...fields} or {"ok": false, "error": MESSAGE, "code": CODE}.
std::string EncodeReply(const HelloReply& reply);
std::string EncodeReply(const SubmitReply& reply);
std::string EncodeReply(const QueueReply& reply);
std::string EncodeReply(const ShowReply& reply);
std::string EncodeReply(const CancelReply& reply);
std::string EncodeReply(const ExplainReply& reply);
std::string EncodeReply(const LogsReply& reply);
std::string EncodeReply(const GpusReply& reply);
std::string EncodeReply(const ShareReply& reply);
std::string EncodeReply(const HistoryReply& reply);
std::string EncodeReply(const SlurmAttachReply& reply);
std::string EncodeReply(const SlurmEndReply& reply);
std::string EncodeReply(const SlurmRunReply& reply);
std::string EncodeReply(const ControlReply& reply);
std::string EncodeReply(const RunReportReply& reply);
std::string EncodeReply(const EventsReply& reply);
std::string EncodeError(const Status& error);
std::string EncodeError(ErrorCode code, std::string_view message);

// Decodes a reply line into T, or the error it carries (with its code).
template <typename T>
Result<T> DecodeReply(std::string_view line);

}  // namespace colo::api

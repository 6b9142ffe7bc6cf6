// colod's API as types: one struct per request and per reply, shared by colod, `colo` and every
// other client (the Slurm plugin, scripts). Each struct is followed by its description (fields.h):
// the key of every field on the wire and what a decoder accepts. codec.h turns the structs into
// the wire format and back by walking those descriptions; nothing else writes the schema.
//
// The wire: one JSON object per line over a Unix stream socket. A request names the API version
// and the operation ({"api": 1, "op": "submit", ...}); a reply has "ok" and either the result's
// fields or "error" (a message) with "code" (an ErrorCode, as text). The caller's identity is the
// socket's peer credentials, never a field.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api/fields.h"
#include "api/output_pattern.h"
#include "common/status.h"
#include "common/units.h"
#include "core/model.h"

namespace colo::api {

constexpr int kVersion = 1;

// Limits on what one request may carry; a field beyond them is an error naming it.
constexpr size_t kMaxCommandWords = 4096;
constexpr size_t kMaxEnvEntries = 4096;
constexpr size_t kMaxFieldBytes = 128 * 1024;  // one argument or environment entry
// A job's whole command, and its whole environment: records stay small enough that a page of
// history is read in milliseconds.
constexpr size_t kMaxCommandBytes = 32 * 1024;
constexpr size_t kMaxEnvBytes = 256 * 1024;
constexpr int kMaxGpusPerJob = 64;
constexpr int64_t kMaxMemoryBytes = int64_t{1} << 50;  // 1 PiB
constexpr int64_t kMaxJobId = int64_t{1} << 53;        // exact in a JSON double
constexpr int64_t kMaxSlurmJobId = 0xfffffff0;  // Slurm's ids are 32 bits; the top few are steps'
// Times on the wire are seconds since the epoch; colod's clocks count nanoseconds in 64 bits.
constexpr double kMaxEpochSeconds = 1e12;

// Rules of a struct that no single field states (one field against another, a list's order):
// checked after its fields are read, by the codec.
namespace field_json {
class Reader;
}

// Why a request failed, kept on the wire so that clients can act on it without reading prose.
enum class ErrorCode {
  kInvalidArgument,   // not a JSON object, an unknown op, or a field missing, of the wrong type or
                      // out of range: the message names it
  kNotFound,          // no such job
  kPermissionDenied,  // not the job's owner, or not this personal colod's owner
  kInfeasible,        // can never run on this server (the message says why)
  kFailedPrecondition,  // the job is not in a state for this (already ended), or the request
                        // speaks another API version
  kUnavailable,         // colod cannot do it now: storage failed, shutting down
  kBusy,                // too many connections from this user, or in all; try again
  kTooLarge,            // the request is larger than colod accepts
  kInternal,
};
std::string_view ToString(ErrorCode code);
std::optional<ErrorCode> ParseErrorCode(std::string_view text);

// Errors travel as Status inside colo; these map the codes both ways.
Status ToStatus(ErrorCode code, std::string message);
ErrorCode CodeOf(const Status& status);

// Every enum on the wire is its ToString name; these read one back, for the codec.
Result<ErrorCode> ParseName(std::string_view text, Of<ErrorCode>);
inline Result<SharingPreference> ParseName(std::string_view text, Of<SharingPreference>) {
  return ParseSharingPreference(text);
}
inline Result<JobState> ParseName(std::string_view text, Of<JobState>) {
  return ParseJobState(text);
}

// A memory estimate made by the client from the user's model summary (colo submit
// --estimate-from), and what colod learned for it from earlier runs of the same model.
struct JobEstimate {
  std::string estimator;
  Bytes peak, lower, upper;
  std::string detail;
  // Links runs of the same model, batch, optimizer and precision (the history estimator's key).
  std::string signature;
  // SM activity alone on a GPU the client predicted from the profile's FLOPs (negative: none);
  // the job plans with it when it was submitted without --smact and no earlier run measured one.
  double predicted_smact = -1;
  struct Learned {
    int runs = 0;
    Bytes peak, upper;
    // SM activity its earlier runs showed alone on a GPU (negative: none); the job plans with
    // it when it was submitted without --smact.
    double solo_smact = -1;
  };
  std::optional<Learned> learned;
};
constexpr auto Fields(Of<JobEstimate::Learned>) {
  using L = JobEstimate::Learned;
  return std::tuple{Field("runs", &L::runs).Range(0, 1 << 30),
                    Field("peak", &L::peak).Range(0, kMaxMemoryBytes),
                    Field("upper", &L::upper).Range(0, kMaxMemoryBytes),
                    Field("solo_smact", &L::solo_smact).Range(-1, 1)};
}
// lower and upper default to the peak; lower <= peak <= upper.
constexpr auto Fields(Of<JobEstimate>) {
  using E = JobEstimate;
  return std::tuple{Field("estimator", &E::estimator).MaxBytes(64),
                    Field("peak", &E::peak).Range(1, kMaxMemoryBytes).Required("bytes"),
                    Field("lower", &E::lower).Range(0, kMaxMemoryBytes),
                    Field("upper", &E::upper).Range(1, kMaxMemoryBytes),
                    Field("detail", &E::detail).MaxBytes(1024),
                    Field("signature", &E::signature).MaxBytes(256),
                    Field("predicted_smact", &E::predicted_smact).Range(-1, 1).OmitDefault(),
                    Field("history", &E::learned)};
}
void CheckFields(JobEstimate& estimate, field_json::Reader& fields);

// A job waits until another one has ended (Slurm's --dependency): afterok when it succeeded,
// afternotok when it did not (failed, cancelled, timed out, lost), afterany either way.
enum class DependencyKind { kAfterOk, kAfterAny, kAfterNotOk };
std::string_view ToString(DependencyKind kind);
Result<DependencyKind> ParseDependencyKind(std::string_view text);
inline Result<DependencyKind> ParseName(std::string_view text, Of<DependencyKind>) {
  return ParseDependencyKind(text);
}
struct Dependency {
  DependencyKind kind = DependencyKind::kAfterAny;
  JobId job = 0;
  bool operator==(const Dependency&) const = default;
};
constexpr auto Fields(Of<Dependency>) {
  return std::tuple{Field("kind", &Dependency::kind),
                    Field("job", &Dependency::job).Range(1, kMaxJobId).Required("a job id")};
}
constexpr size_t kMaxDependencies = 64;
// The longest --time: a year.
constexpr int64_t kMaxTimeLimitSeconds = int64_t{366} * 86400;
// --priority (and -nice) order one user's own waiting jobs.
constexpr int kMaxPriority = 10000;

// sbatch's --array: one job per task id, each with COLO_ARRAY_JOB_ID (the first task's job id,
// which names the array) and COLO_ARRAY_TASK_ID; `limit` (%N) caps how many run at once (0: no
// cap). colod's limits.max_array_size bounds the tasks of one array.
constexpr size_t kMaxArrayTasks = 100000;
constexpr int kMaxArrayTaskId = 10000000;
struct ArraySpec {
  std::vector<int> tasks;  // distinct, ascending
  int limit = 0;
  bool operator==(const ArraySpec&) const = default;
};
constexpr auto Fields(Of<ArraySpec>) {
  return std::tuple{Field("tasks", &ArraySpec::tasks)
                        .MaxItems(kMaxArrayTasks)
                        .Range(0, kMaxArrayTaskId)
                        .Required("a list of task ids"),
                    Field("limit", &ArraySpec::limit).Range(0, kMaxArrayTasks)};
}
void CheckFields(ArraySpec& array, field_json::Reader& fields);

// Where and how a job was submitted, which colod keeps as the submitter gave it: stored with the
// job, shown by `colo show`, and applied to every attempt. A setting colod only carries from the
// submitter to the job's processes belongs here: it is then stored, sent and shown with no other
// change (docs/architecture.md, "A new job field").
// One resource limit of the submitter's, as getrlimit gave it: its name (common/resource_limits.h:
// "nofile", "core", ...), soft and hard values, -1 for unlimited.
struct ResourceLimit {
  std::string name;
  int64_t soft = -1, hard = -1;
  bool operator==(const ResourceLimit&) const = default;
};
constexpr auto Fields(Of<ResourceLimit>) {
  using L = ResourceLimit;
  return std::tuple{Field("name", &L::name).MaxBytes(16).Required("a resource's name"),
                    Field("soft", &L::soft).Range(-1, std::numeric_limits<int64_t>::max()),
                    Field("hard", &L::hard).Range(-1, std::numeric_limits<int64_t>::max())};
}
void CheckFields(ResourceLimit& limit, field_json::Reader& fields);  // a known name, soft <= hard

// sbatch's --signal SIG[@SECONDS]: what a preemptible job is sent before it is stopped for
// another job, and how long before. SIGKILL follows when the lead is over.
struct JobSignal {
  int number = 15;  // SIGTERM
  int lead_s = 60;
  bool operator==(const JobSignal&) const = default;
};
constexpr int kMaxSignalLeadSeconds = 65535;  // Slurm's
constexpr auto Fields(Of<JobSignal>) {
  return std::tuple{Field("number", &JobSignal::number).Range(1, 64),
                    Field("lead_s", &JobSignal::lead_s).Range(0, kMaxSignalLeadSeconds)};
}
void CheckFields(JobSignal& signal, field_json::Reader& fields);  // one a job can catch

struct JobContext {
  std::string workdir;         // absolute
  std::string source = "cli";  // "cli", "script PATH", "rad PATH", "slurm ID"
  // The submitter's file mode creation mask, which the job's processes start with (absent: 022,
  // as a login shell's).
  std::optional<int> umask;
  // The submitter's resource limits, which the job's processes get, never above what they would
  // have without them (colod's own).
  std::vector<ResourceLimit> limits;
  // Submitted --requeue: it may be preempted (signalled, stopped, and queued again as its next
  // attempt, keeping its environment) so that a user under their share can start.
  bool requeue = false;
  // Its --signal; absent: SIGTERM 60 s before it is stopped.
  std::optional<JobSignal> signal;
  bool operator==(const JobContext&) const = default;
};
constexpr size_t kMaxSourceBytes = 4096;
constexpr auto Fields(Of<JobContext>) {
  return std::tuple{Field("workdir", &JobContext::workdir).MaxBytes(4096),
                    Field("source", &JobContext::source).MaxBytes(kMaxSourceBytes),
                    Field("umask", &JobContext::umask).Range(0, 0777),
                    Field("limits", &JobContext::limits).MaxItems(32).OmitDefault(),
                    Field("requeue", &JobContext::requeue).OmitDefault(),
                    Field("signal", &JobContext::signal)};
}

// Requests
struct HelloRequest {};
constexpr auto Fields(Of<HelloRequest>) {
  return std::tuple{};
}
struct SubmitRequest {
  std::vector<std::string> command;  // argv; the first word is run through PATH
  int gpus = 1;
  std::optional<Bytes> memory;  // declared peak per GPU: the limit the job runs under
  std::optional<JobEstimate> estimate;
  SharingPreference share = SharingPreference::kAny;
  std::optional<int> threads;            // MPS active-thread percentage, 1..100
  std::optional<double> expected_smact;  // SM activity alone, 0..1
  std::string name;                      // default: the command's first word
  JobContext context;                    // its workdir is required
  std::vector<std::string> env;          // NAME=value
  // Slurm habits. Each absent or zero by default, and then the request is what it always was.
  int64_t time_limit_s = 0;  // stopped (SIGTERM, then SIGKILL) this long after it started
  std::vector<Dependency> dependencies;
  bool hold = false;  // waits until released
  int priority = 0;   // among the submitter's own waiting jobs, higher first
  std::optional<ArraySpec> array;
  // Files the job's stdout and stderr are copied to (sbatch -o/-e; output_pattern.h); empty:
  // none. Only -o: both go there.
  std::string output, error;
  // Names this submit (a client picks it at random): sent again with the same token (its reply
  // was lost), the submit gets the job it stored the first time instead of a second one.
  std::string token;
};
constexpr size_t kMaxTokenBytes = 64;
constexpr auto Fields(Of<SubmitRequest>) {
  using S = SubmitRequest;
  return std::tuple{
      Field("command", &S::command).MaxItems(kMaxCommandWords).MaxBytes(kMaxFieldBytes),
      Field("gpus", &S::gpus).Range(1, kMaxGpusPerJob),
      Field("memory", &S::memory).Range(1, kMaxMemoryBytes),
      Field("estimate", &S::estimate),
      Field("share", &S::share),
      Field("threads", &S::threads).Range(1, 100),
      Field("expected_smact", &S::expected_smact).Range(0, 1),
      Field("name", &S::name).MaxBytes(1024).OmitDefault(),
      Embed(&S::context),
      Field("env", &S::env).MaxItems(kMaxEnvEntries).MaxBytes(kMaxFieldBytes),
      Field("time_limit_s", &S::time_limit_s).Range(0, kMaxTimeLimitSeconds).OmitDefault(),
      Field("dependencies", &S::dependencies).MaxItems(kMaxDependencies).OmitDefault(),
      Field("hold", &S::hold).OmitDefault(),
      Field("priority", &S::priority).Range(-kMaxPriority, kMaxPriority).OmitDefault(),
      Field("array", &S::array),
      Field("output", &S::output).MaxBytes(kMaxOutputPatternBytes).OmitDefault(),
      Field("error", &S::error).MaxBytes(kMaxOutputPatternBytes).OmitDefault(),
      Field("token", &S::token).MaxBytes(kMaxTokenBytes).OmitDefault()};
}
// The command and the environment are checked whole; a workdir is required; -o/-e are patterns.
void CheckFields(SubmitRequest& submit, field_json::Reader& fields);
// Acts on several jobs at once (scontrol hold/release/requeue, scancel): each job gets its own
// answer, so one that may not be touched does not stop the others.
enum class JobAction { kHold, kRelease, kRequeue, kCancel };
std::string_view ToString(JobAction action);
Result<JobAction> ParseJobAction(std::string_view text);
inline Result<JobAction> ParseName(std::string_view text, Of<JobAction>) {
  return ParseJobAction(text);
}
constexpr size_t kMaxControlJobs = 1000;
struct ControlRequest {
  JobAction action = JobAction::kCancel;
  std::vector<JobId> jobs;
  // An array's id names the array (scancel ARRAY_ID: cancel acts on every live task) unless
  // this is set: then each id is one job, an array's first task alone (ids named as
  // ARRAY_TASK, or chosen by filters).
  bool each_alone = false;
};
constexpr auto Fields(Of<ControlRequest>) {
  using C = ControlRequest;
  return std::tuple{Field("action", &C::action).Required("hold, release, requeue or cancel"),
                    Field("jobs", &C::jobs).MaxItems(kMaxControlJobs).Range(1, kMaxJobId),
                    Field("each_alone", &C::each_alone).OmitDefault()};
}
void CheckFields(ControlRequest& control, field_json::Reader& fields);  // at least one job
// The live jobs a page at a time, by id: one reply costs colod a bounded time whatever the queue
// holds (a page of 500 takes a few milliseconds).
constexpr int kMaxQueuePage = 500;
struct QueueRequest {
  std::string user;  // only this user's jobs; empty: everyone's
  int limit = kMaxQueuePage;
  std::optional<JobId> after;  // only jobs with a larger id (the previous page's `next`)
};
constexpr auto Fields(Of<QueueRequest>) {
  return std::tuple{Field("user", &QueueRequest::user).MaxBytes(256),
                    Field("limit", &QueueRequest::limit).Range(1, kMaxQueuePage),
                    Field("after", &QueueRequest::after).Range(0, kMaxJobId)};
}
// The requests that name one job.
template <typename R>
constexpr auto JobIdField() {
  return Field("job", &R::job).Range(1, kMaxJobId).Required("a job id");
}
struct ShowRequest {
  JobId job = 0;
};
constexpr auto Fields(Of<ShowRequest>) {
  return std::tuple{JobIdField<ShowRequest>()};
}
struct CancelRequest {
  JobId job = 0;
};
constexpr auto Fields(Of<CancelRequest>) {
  return std::tuple{JobIdField<CancelRequest>()};
}
struct ExplainRequest {
  JobId job = 0;
};
constexpr auto Fields(Of<ExplainRequest>) {
  return std::tuple{JobIdField<ExplainRequest>()};
}
struct LogsRequest {
  JobId job = 0;
  std::optional<int> attempt =
      std::nullopt;  // that attempt's files (from 1); absent: the latest attempt's
};
constexpr auto Fields(Of<LogsRequest>) {
  return std::tuple{JobIdField<LogsRequest>(),
                    Field("attempt", &LogsRequest::attempt).Range(1, 1 << 30)};
}
struct GpusRequest {};
constexpr auto Fields(Of<GpusRequest>) {
  return std::tuple{};
}
// Jobs that ended, newest first, one page at a time: a page is at most kMaxHistoryPage jobs and
// the reply's `next` continues it.
constexpr int kMaxHistoryPage = 200;
struct HistoryRequest {
  int limit = 50;
  std::optional<JobId> before;  // only jobs with a smaller id (the previous page's `next`)
  bool all = false;             // every user's jobs (their details stay private)
};
constexpr auto Fields(Of<HistoryRequest>) {
  return std::tuple{Field("limit", &HistoryRequest::limit).Range(1, kMaxHistoryPage),
                    Field("before", &HistoryRequest::before).Range(1, kMaxJobId),
                    Field("all", &HistoryRequest::all)};
}
// The newest events of every job, newest first (colo top): at most kMaxRecentEvents. Another
// user's event has its detail left out; colod's own events (job 0) are root's only.
constexpr int kMaxRecentEvents = 200;
struct EventsRequest {
  int limit = 50;
};
constexpr auto Fields(Of<EventsRequest>) {
  return std::tuple{Field("limit", &EventsRequest::limit).Range(1, kMaxRecentEvents)};
}
// Every user who counts for fair share now: their share, usage and limits (colo share).
struct ShareRequest {};
constexpr auto Fields(Of<ShareRequest>) {
  return std::tuple{};
}

// Slurm: the node's half of a Slurm job (the SPANK plugin in slurmstepd and slurmd, as root).
// Only root may send these: the uid they carry is Slurm's word, which a user cannot give.
template <typename R>
constexpr auto SlurmJobIdField() {
  return Field("job", &R::job).Range(1, kMaxSlurmJobId).Required("a Slurm job id");
}
// A Slurm job on this node asks for its GPUs. Asking again (every step, and while it waits) gets
// the same answer: one Slurm job is one tenant, however many steps it runs.
struct SlurmAttachRequest {
  uint32_t job = 0;  // Slurm's job id
  unsigned uid = 0;  // the job's user
  std::string name;  // Slurm's job name
  int gpus = 1;
  // Planned peak per GPU; absent: whole GPUs (a job Slurm gave GPUs without colo's options).
  std::optional<Bytes> memory;
  SharingPreference share = SharingPreference::kAny;
  // SLURM_RESTART_COUNT: above 0, an earlier run (on any node) may have raised the job's need.
  // Slurm 22.05 does not give it to the batch step; slurm_run (the prolog) tells colod then.
  int restarts = 0;
};
constexpr auto Fields(Of<SlurmAttachRequest>) {
  using A = SlurmAttachRequest;
  return std::tuple{SlurmJobIdField<A>(),
                    Field("uid", &A::uid).Range(0, 0xfffffffe).Required("the job's user"),
                    Field("name", &A::name).MaxBytes(1024),
                    Field("gpus", &A::gpus).Range(1, kMaxGpusPerJob),
                    Field("memory", &A::memory).Range(1, kMaxMemoryBytes),
                    Field("share", &A::share),
                    Field("restarts", &A::restarts).Range(0, 1 << 20)};
}
// slurmd's prolog: run number `restarts` (runs before it) of a Slurm job begins on this node,
// with what Slurm booked for it: the job-control environment colo's plugin set at submission
// (from which job_submit/lua planned its gpumem) and the GPUs Slurm gave it. colod plans with
// this, not with what a step says: a job's owner controls its steps' environment.
struct SlurmRunRequest {
  uint32_t job = 0;
  int restarts = 0;
  std::optional<SharingPreference> share;  // COLO_SHARE: set for a colo job only
  std::optional<Bytes> memory;             // COLO_MEM per GPU (absent: whole GPUs)
  int gpus = 0;  // COLO_GPUS for a colo job, else the GPUs Slurm gave (0: none)
  // The GPUs Slurm gave the job on this node (SLURM_JOB_GPUS): their indexes among the node's
  // GPUs in gres.conf. colod runs the job on these.
  std::vector<int> slurm_gpus = {};
};
constexpr auto Fields(Of<SlurmRunRequest>) {
  using R = SlurmRunRequest;
  return std::tuple{SlurmJobIdField<R>(),
                    Field("restarts", &R::restarts).Range(0, 1 << 20),
                    Field("share", &R::share),
                    Field("memory", &R::memory).Range(1, kMaxMemoryBytes),
                    Field("gpus", &R::gpus).Range(0, kMaxGpusPerJob),
                    Field("slurm_gpus", &R::slurm_gpus).MaxItems(kMaxGpusPerJob).Range(0, 1023)};
}
// The job's batch script ended with this wait status, or (no status) Slurm's epilog says the
// whole job ended on this node.
struct SlurmEndRequest {
  uint32_t job = 0;
  std::optional<int> wait_status;
};
constexpr auto Fields(Of<SlurmEndRequest>) {
  return std::tuple{SlurmJobIdField<SlurmEndRequest>(),
                    Field("wait_status", &SlurmEndRequest::wait_status).Range(0, 0xffff)};
}

// What colod recorded over a time range (colo report): every GPU's samples, the memory of every
// job on its GPUs, the queue's length, and the jobs live in the range. Everyone sees every GPU's
// series; other users' jobs come without their details, as in the queue.
constexpr int kMaxReportPoints = 20000;
struct RunReportRequest {
  double since = 0;       // seconds since the epoch
  double until = 0;       // 0: now
  int max_points = 2000;  // per series; longer ranges come as means over equal buckets
};
constexpr auto Fields(Of<RunReportRequest>) {
  using R = RunReportRequest;
  // Seconds since the epoch up to 2096: colod's clocks count nanoseconds in 64 bits.
  return std::tuple{Field("since", &R::since).Range(0, 4e9),
                    Field("until", &R::until).Range(0, 4e9),
                    Field("max_points", &R::max_points).Range(10, kMaxReportPoints)};
}

using Request = std::variant<HelloRequest, SubmitRequest, QueueRequest, ShowRequest, CancelRequest,
                             ExplainRequest, LogsRequest, GpusRequest, HistoryRequest,
                             SlurmAttachRequest, SlurmEndRequest, SlurmRunRequest, ControlRequest,
                             RunReportRequest, EventsRequest, ShareRequest>;
std::string_view OpName(const Request& request);

// Replies
struct HelloReply {
  std::string server = "colod";
  int api = kVersion;
  std::string gpu_backend;
  std::string user;  // who colod thinks the caller is
  bool personal = false;
};
constexpr auto Fields(Of<HelloReply>) {
  using H = HelloReply;
  return std::tuple{Field("server", &H::server).MaxBytes(256),
                    Field("api", &H::api).Range(0, 1 << 20),
                    Field("gpus", &H::gpu_backend).MaxBytes(256),
                    Field("user", &H::user).MaxBytes(256), Field("personal", &H::personal)};
}
struct SubmitReply {
  JobId job = 0;
};
constexpr auto Fields(Of<SubmitReply>) {
  return std::tuple{Field("job", &SubmitReply::job).Range(0, kMaxJobId)};
}

struct AttemptInfo {
  int number = 0;
  int pid = 0;
  std::vector<int> gpus;  // colod's GPU indices
  std::vector<std::string> gpu_uuids;
  std::string mode;  // mps | plain | exclusive
  int thread_percent = 100;
  Bytes memory_limit;
  double started = 0, ended = 0;  // seconds since the epoch; 0: not yet
  std::string exit_kind;          // empty while it runs
  std::string detail;
  Bytes peak;
  bool over_plan = false;  // used more than its plan while sharing without an MPS limit
  double solo_smact = -1;  // SM activity alone on its GPU; negative: not measured
  // How its process ended (absent while it runs, or when colod could not learn it).
  std::optional<int> exit_code = std::nullopt, exit_signal = std::nullopt;
};
constexpr auto Fields(Of<AttemptInfo>) {
  using A = AttemptInfo;
  return std::tuple{Field("number", &A::number).Range(0, 1 << 30),
                    Field("pid", &A::pid).Range(0, 1 << 30),
                    Field("gpus", &A::gpus).Range(0, 1 << 20),
                    Field("gpu_uuids", &A::gpu_uuids),
                    Field("mode", &A::mode).MaxBytes(64),
                    Field("thread_percent", &A::thread_percent).Range(0, 100),
                    Field("memory_limit", &A::memory_limit).Range(0, kMaxMemoryBytes),
                    Field("started", &A::started).Range(0, kMaxEpochSeconds),
                    Field("ended", &A::ended).Range(0, kMaxEpochSeconds),
                    Field("exit_kind", &A::exit_kind).MaxBytes(64),
                    Field("detail", &A::detail),
                    Field("peak", &A::peak).Range(0, kMaxMemoryBytes),
                    Field("over_plan", &A::over_plan),
                    Field("solo_smact", &A::solo_smact).Range(-1, 1),
                    Field("exit_code", &A::exit_code).Range(0, 255),
                    Field("exit_signal", &A::exit_signal).Range(1, 128)};
}
struct EventInfo {
  double time = 0;
  std::string kind, detail;
};
constexpr auto Fields(Of<EventInfo>) {
  return std::tuple{Field("time", &EventInfo::time).Range(0, kMaxEpochSeconds),
                    Field("kind", &EventInfo::kind),
                    Field("detail", &EventInfo::detail).MaxBytes(1 << 24)};
}

// A job as the queue and history list it. Fields a caller may not see (another user's job,
// without root) are left empty and `redacted` is set.
struct JobSummary {
  JobId id = 0;
  std::string name, user;
  JobState state = JobState::kQueued;
  int gpus = 1;
  double submitted = 0, started = 0, finished = 0;
  std::string reason;
  int attempts = 0;
  std::optional<Bytes> memory;
  SharingPreference share = SharingPreference::kAny;
  std::vector<std::string> gpu_uuids;
  std::string mode;
  Bytes peak;
  std::optional<uint32_t> slurm_job;  // the Slurm job it is the node's half of
  bool redacted = false;
  std::vector<int> gpu_indices = {};  // colod's indices of gpu_uuids
  // How the latest attempt's process ended (absent while it runs or when unknown).
  std::optional<int> exit_code = std::nullopt, exit_signal = std::nullopt;
  int64_t time_limit_s = 0;  // 0: none
  int priority = 0;
  std::optional<JobId> array_job;  // a task of this array (the queue shows ARRAY_TASK)
  int array_task = 0;
};
constexpr auto Fields(Of<JobSummary>) {
  using S = JobSummary;
  return std::tuple{
      Field("id", &S::id).Range(0, kMaxJobId),
      Field("name", &S::name),
      Field("user", &S::user),
      Field("state", &S::state),
      Field("gpus", &S::gpus).Range(0, kMaxGpusPerJob),
      Field("submitted", &S::submitted).Range(0, kMaxEpochSeconds),
      Field("started", &S::started).Range(0, kMaxEpochSeconds),
      Field("finished", &S::finished).Range(0, kMaxEpochSeconds),
      Field("reason", &S::reason),
      Field("attempts", &S::attempts).Range(0, 1 << 30),
      Field("memory", &S::memory).Range(0, kMaxMemoryBytes),
      Field("share", &S::share),
      Field("gpu_uuids", &S::gpu_uuids),
      Field("mode", &S::mode).MaxBytes(64),
      Field("peak", &S::peak).Range(0, kMaxMemoryBytes),
      Field("slurm_job", &S::slurm_job).Range(0, kMaxSlurmJobId),
      Field("redacted", &S::redacted).OmitDefault(),
      Field("gpu_indices", &S::gpu_indices).Range(0, 1 << 20),
      Field("exit_code", &S::exit_code).Range(0, 255),
      Field("exit_signal", &S::exit_signal).Range(1, 128),
      Field("time_limit_s", &S::time_limit_s).Range(0, kMaxTimeLimitSeconds).OmitDefault(),
      Field("priority", &S::priority).Range(-kMaxPriority, kMaxPriority).OmitDefault(),
      Field("array_job", &S::array_job).Range(0, kMaxJobId),
      Field("array_task", &S::array_task).Range(0, kMaxArrayTaskId)};
}
// Everything about one job (colo show).
struct JobDetail {
  JobSummary summary;
  std::vector<std::string> command;
  JobContext context;
  std::optional<JobEstimate> estimate;
  std::vector<AttemptInfo> attempt_list;
  std::optional<Bytes> need;  // what placement plans with now (live jobs)
  std::string need_source;
  std::optional<Bytes> reservation;
  // The SM activity alone the job plans with (its MPS thread share, the utilization gate):
  // the user's --smact, what earlier runs measured, or the client's prediction.
  std::optional<double> smact;
  int oom_count = 0;
  std::vector<EventInfo> events;
  // The files -o/-e name, as the latest attempt (or, before one, the first) writes them.
  std::string output_file, error_file;
};
constexpr auto Fields(Of<JobDetail>) {
  using D = JobDetail;
  return std::tuple{Embed(&D::summary),
                    Field("command", &D::command),
                    Embed(&D::context),
                    Field("estimate", &D::estimate),
                    Field("attempt_list", &D::attempt_list),
                    Field("need", &D::need).Range(0, kMaxMemoryBytes),
                    Field("need_source", &D::need_source).MaxBytes(64),
                    Field("reservation", &D::reservation).Range(0, kMaxMemoryBytes),
                    Field("smact", &D::smact).Range(0, 1),
                    Field("oom_count", &D::oom_count).Range(0, 1 << 30),
                    Field("events", &D::events),
                    Field("output_file", &D::output_file).OmitDefault(),
                    Field("error_file", &D::error_file).OmitDefault()};
}

struct QueueReply {
  std::vector<JobSummary> jobs;
  int main_queue = 0, recovery_queue = 0;
  std::optional<JobId> next;  // pass as `after` for the next page; absent on the last page
  // Of every page together (the jobs of the user asked for, or everyone's): those running and
  // those waiting (queued, held or recovering).
  int running = 0, waiting = 0;
};
constexpr auto Fields(Of<QueueReply>) {
  return std::tuple{Field("jobs", &QueueReply::jobs),
                    Field("main_queue", &QueueReply::main_queue).Range(0, 1 << 30),
                    Field("recovery_queue", &QueueReply::recovery_queue).Range(0, 1 << 30),
                    Field("next", &QueueReply::next).Range(0, kMaxJobId),
                    Field("running", &QueueReply::running).Range(0, 1 << 30),
                    Field("waiting", &QueueReply::waiting).Range(0, 1 << 30)};
}
struct ShowReply {
  JobDetail job;
};
constexpr auto Fields(Of<ShowReply>) {
  return std::tuple{Field("job", &ShowReply::job)};
}
struct ControlResult {
  JobId job = 0;
  bool ok = false;
  std::string state;              // ok: what the job is now ("held", "queued", "cancelling", ...)
  std::string error;              // not ok: why
  std::optional<ErrorCode> code;  // not ok: its kind
};
constexpr auto Fields(Of<ControlResult>) {
  using R = ControlResult;
  return std::tuple{Field("job", &R::job).Range(0, kMaxJobId), Field("ok", &R::ok),
                    Field("state", &R::state).MaxBytes(64).OmitDefault(),
                    Field("error", &R::error).MaxBytes(1 << 16).OmitDefault(),
                    Field("code", &R::code)};
}
struct ControlReply {
  std::vector<ControlResult> results;  // one per job asked for, in its order
};
constexpr auto Fields(Of<ControlReply>) {
  return std::tuple{Field("results", &ControlReply::results)};
}
struct CancelReply {
  JobId job = 0;
  std::string state;  // "cancelling" or the job's new state
};
constexpr auto Fields(Of<CancelReply>) {
  return std::tuple{Field("job", &CancelReply::job).Range(0, kMaxJobId),
                    Field("state", &CancelReply::state).MaxBytes(64)};
}
struct GateInfo {
  int gpu = 0;
  std::string gate, detail;
};
constexpr auto Fields(Of<GateInfo>) {
  return std::tuple{Field("gpu", &GateInfo::gpu).Range(0, 1 << 20),
                    Field("gate", &GateInfo::gate).MaxBytes(64),
                    Field("detail", &GateInfo::detail).MaxBytes(1 << 16)};
}
struct ExplainReply {
  JobId job = 0;
  JobState state = JobState::kQueued;
  std::string summary;
  int position = 0;   // in its queue, from 1; 0 when not queued
  std::string queue;  // "main" or "recovery"
  std::vector<GateInfo> gpus;
  int waiting = 0;  // jobs in its queue
  // Its owner's standing and how its priority is made (fair share), for people; empty: FIFO.
  std::string standing;
  double priority = 0;
  // The head of the main queue: what backfill keeps for it, for people; else empty.
  std::string reservation;
  // What its owner's limits hold back, for people; else empty.
  std::string limit;
};
constexpr auto Fields(Of<ExplainReply>) {
  using E = ExplainReply;
  return std::tuple{Field("job", &E::job).Range(0, kMaxJobId),
                    Field("state", &E::state),
                    Field("summary", &E::summary),
                    Field("position", &E::position).Range(0, 1 << 30).OmitDefault(),
                    Field("queue", &E::queue).MaxBytes(64).OmitDefault(),
                    Field("gpus", &E::gpus),
                    Field("waiting", &E::waiting).Range(0, 1 << 30).OmitDefault(),
                    Field("standing", &E::standing).MaxBytes(4096).OmitDefault(),
                    Field("priority", &E::priority).Range(0, 1e12).OmitDefault(),
                    Field("reservation", &E::reservation).MaxBytes(4096).OmitDefault(),
                    Field("limit", &E::limit).MaxBytes(4096).OmitDefault()};
}
struct LogsReply {
  JobId job = 0;
  JobState state = JobState::kQueued;
  int attempt = 0;                       // 0: not started yet
  std::string stdout_path, stderr_path;  // readable by the job's owner only
};
constexpr auto Fields(Of<LogsReply>) {
  using L = LogsReply;
  return std::tuple{Field("job", &L::job).Range(0, kMaxJobId), Field("state", &L::state),
                    Field("attempt", &L::attempt).Range(0, 1 << 30),
                    Field("stdout", &L::stdout_path).MaxBytes(1 << 16),
                    Field("stderr", &L::stderr_path).MaxBytes(1 << 16)};
}
struct GpuJobInfo {
  JobId id = 0;
  std::string name, user, mode;
  Bytes peak;
  Bytes used;         // on this GPU, in the latest sample
  Bytes reservation;  // what placement holds for it on this GPU (used or not)
};
constexpr auto Fields(Of<GpuJobInfo>) {
  using G = GpuJobInfo;
  return std::tuple{Field("id", &G::id).Range(0, kMaxJobId),
                    Field("name", &G::name),
                    Field("user", &G::user).MaxBytes(256),
                    Field("mode", &G::mode).MaxBytes(64),
                    Field("peak", &G::peak).Range(0, kMaxMemoryBytes),
                    Field("used", &G::used).Range(0, kMaxMemoryBytes),
                    Field("reservation", &G::reservation).Range(0, kMaxMemoryBytes)};
}
struct GpuInfoReply {
  int index = 0;
  std::string uuid, name, mode;
  Bytes memory_total, free_for_placement;
  double smact_risk = -1;
  // The latest sample; absent before the first.
  std::optional<Bytes> memory_used;
  double smact = -1, smocc = -1, utilization = -1, power_watts = -1, energy_joules = -1;
  // Where smact and smocc come from: gpm, dcgm, fake; "utilization" when neither GPM nor DCGM
  // serves the GPU (smact is then NVML's coarse utilization, as placement uses it), with
  // activity_note saying why.
  std::string activity_source;
  std::string activity_note;
  double sample_age_s = -1;
  std::string sample_error;
  std::vector<GpuJobInfo> jobs;
};
// The sample's figures are left off while they are unknown (-1).
constexpr auto Fields(Of<GpuInfoReply>) {
  using G = GpuInfoReply;
  constexpr double kMeasure = 1e9;
  return std::tuple{
      Field("index", &G::index).Range(0, 1 << 20),
      Field("uuid", &G::uuid).MaxBytes(256),
      Field("name", &G::name).MaxBytes(256),
      Field("mode", &G::mode).MaxBytes(64),
      Field("memory_total", &G::memory_total).Range(0, kMaxMemoryBytes),
      Field("free_for_placement", &G::free_for_placement).Range(-kMaxMemoryBytes, kMaxMemoryBytes),
      Field("smact_risk", &G::smact_risk).Range(-1, kMeasure),
      Field("memory_used", &G::memory_used).Range(0, kMaxMemoryBytes),
      Field("smact", &G::smact).Range(-1, kMeasure).OmitDefault(),
      Field("smocc", &G::smocc).Range(-1, kMeasure).OmitDefault(),
      Field("utilization", &G::utilization).Range(-1, kMeasure).OmitDefault(),
      Field("power_watts", &G::power_watts).Range(-1, kMeasure).OmitDefault(),
      Field("energy_joules", &G::energy_joules).Range(-1, 1e18).OmitDefault(),
      Field("activity_source", &G::activity_source).MaxBytes(64).OmitDefault(),
      Field("activity_note", &G::activity_note).MaxBytes(1 << 12).OmitDefault(),
      Field("sample_age_s", &G::sample_age_s).Range(-1e12, 1e12).OmitDefault(),
      Field("sample_error", &G::sample_error).MaxBytes(1 << 16).OmitDefault(),
      Field("jobs", &G::jobs)};
}
struct GpusReply {
  std::string backend;
  std::vector<GpuInfoReply> gpus;
};
constexpr auto Fields(Of<GpusReply>) {
  return std::tuple{Field("backend", &GpusReply::backend).MaxBytes(256),
                    Field("gpus", &GpusReply::gpus)};
}
struct HistoryReply {
  std::vector<JobSummary> jobs;
  std::optional<JobId> next;  // pass as `before` for the next page; absent on the last page
};
constexpr auto Fields(Of<HistoryReply>) {
  return std::tuple{Field("jobs", &HistoryReply::jobs),
                    Field("next", &HistoryReply::next).Range(0, kMaxJobId)};
}
struct RecentEvent {
  JobId job = 0;  // 0: about colod itself
  std::string user, name;
  double time = 0;
  std::string kind, detail;
  bool redacted = false;  // another user's: `detail` left out
};
constexpr auto Fields(Of<RecentEvent>) {
  using E = RecentEvent;
  return std::tuple{Field("job", &E::job).Range(0, kMaxJobId),
                    Field("user", &E::user).MaxBytes(256),
                    Field("name", &E::name).MaxBytes(1 << 16),
                    Field("time", &E::time).Range(0, kMaxEpochSeconds),
                    Field("kind", &E::kind).MaxBytes(256),
                    Field("detail", &E::detail).MaxBytes(1 << 16),
                    Field("redacted", &E::redacted).OmitDefault()};
}
struct EventsReply {
  std::vector<RecentEvent> events;  // newest first
};
constexpr auto Fields(Of<EventsReply>) {
  return std::tuple{Field("events", &EventsReply::events)};
}

// One user's standing for fair share (core/fair_share.h's UserStanding) and what they hold.
struct ShareUser {
  std::string user;
  double share = 1;              // as granted
  double share_fraction = 0;     // of the shares of every user listed
  double usage_gpu_hours = 0;    // decayed
  double usage_fraction = 0;     // of every user's usage
  double factor = 1;             // fair-share factor: 2^-(usage_fraction / share_fraction)
  int running = 0, waiting = 0;  // jobs
  int gpus = 0;                  // held by their running jobs
  Bytes gpu_memory;              // planned by their running jobs
  // Their limits, as "gpus 4, gpu memory 80.0 GiB"; empty: none.
  std::string limits;
};
constexpr auto Fields(Of<ShareUser>) {
  using U = ShareUser;
  return std::tuple{Field("user", &U::user).MaxBytes(256),
                    Field("share", &U::share).Range(0, 1e9),
                    Field("share_fraction", &U::share_fraction).Range(0, 1),
                    Field("usage_gpu_hours", &U::usage_gpu_hours).Range(0, 1e15),
                    Field("usage_fraction", &U::usage_fraction).Range(0, 1),
                    Field("factor", &U::factor).Range(0, 1),
                    Field("running", &U::running).Range(0, 1 << 30),
                    Field("waiting", &U::waiting).Range(0, 1 << 30),
                    Field("gpus", &U::gpus).Range(0, 1 << 20),
                    Field("gpu_memory", &U::gpu_memory).Range(0, kMaxMemoryBytes),
                    Field("limits", &U::limits).MaxBytes(1024).OmitDefault()};
}
struct ShareReply {
  std::string order;  // "fair-share" or "fifo"
  double half_life_s = 0;
  std::vector<ShareUser> users;  // highest fair-share factor first: who goes first
};
constexpr auto Fields(Of<ShareReply>) {
  return std::tuple{Field("order", &ShareReply::order).MaxBytes(64),
                    Field("half_life_s", &ShareReply::half_life_s).Range(0, 1e12),
                    Field("users", &ShareReply::users)};
}

struct RunGpu {
  int index = 0;
  std::string uuid, name;
  Bytes memory_total;
};
constexpr auto Fields(Of<RunGpu>) {
  return std::tuple{Field("index", &RunGpu::index).Range(0, 1 << 20),
                    Field("uuid", &RunGpu::uuid).MaxBytes(256),
                    Field("name", &RunGpu::name).MaxBytes(256),
                    Field("memory_total", &RunGpu::memory_total).Range(0, kMaxMemoryBytes)};
}
// One GPU at one time; absent: not reported by the GPU (never a number standing for it).
struct RunGpuPoint {
  double time = 0;
  int gpu = 0;
  std::optional<double> memory_used;  // bytes
  std::optional<double> smact, smocc, drama, power_watts, energy_joules;
};
constexpr auto Fields(Of<RunGpuPoint>) {
  using P = RunGpuPoint;
  return std::tuple{Field("time", &P::time).Range(0, kMaxEpochSeconds),
                    Field("gpu", &P::gpu).Range(0, 1 << 20),
                    Field("memory_used", &P::memory_used).Range(0, 1e18),
                    Field("smact", &P::smact).Range(0, 1e9),
                    Field("smocc", &P::smocc).Range(0, 1e9),
                    Field("drama", &P::drama).Range(0, 1e9),
                    Field("power_watts", &P::power_watts).Range(0, 1e6),
                    Field("energy_joules", &P::energy_joules).Range(0, 1e18)};
}
struct RunJobPoint {
  double time = 0;
  JobId job = 0;
  int gpu = 0;
  double memory = 0;  // bytes
};
constexpr auto Fields(Of<RunJobPoint>) {
  using P = RunJobPoint;
  return std::tuple{
      Field("time", &P::time).Range(0, kMaxEpochSeconds), Field("job", &P::job).Range(0, kMaxJobId),
      Field("gpu", &P::gpu).Range(0, 1 << 20), Field("memory", &P::memory).Range(0, 1e18)};
}
struct RunQueuePoint {
  double time = 0;
  double queued = 0, running = 0;
};
constexpr auto Fields(Of<RunQueuePoint>) {
  using P = RunQueuePoint;
  return std::tuple{Field("time", &P::time).Range(0, kMaxEpochSeconds),
                    Field("queued", &P::queued).Range(0, 1e9),
                    Field("running", &P::running).Range(0, 1e9)};
}
// A job of the range with its attempts (their `detail` and `pid` empty when redacted).
struct RunJob {
  JobSummary summary;
  std::vector<AttemptInfo> attempts;
};
constexpr auto Fields(Of<RunJob>) {
  return std::tuple{Embed(&RunJob::summary), Field("attempt_list", &RunJob::attempts)};
}
struct RunReportReply {
  double since = 0, until = 0;
  std::string backend;
  std::string policy;  // colod's policy with its gates, as `colo sim --policy` takes it
  std::vector<RunGpu> gpus;
  std::vector<RunGpuPoint> gpu_points;
  std::vector<RunJobPoint> job_points;
  std::vector<RunQueuePoint> queue_points;
  double bucket_seconds = 0;  // 0: samples as stored
  std::vector<RunJob> jobs;
  bool jobs_truncated = false;  // more jobs in the range than one reply holds
  // What writing the history costs colod.
  int64_t history_points = 0, history_flushes = 0;
  double history_write_seconds = 0;
  std::string history_error;  // the history cannot be read or written (why)
};
constexpr auto Fields(Of<RunReportReply>) {
  using R = RunReportReply;
  return std::tuple{
      Field("since", &R::since).Range(0, kMaxEpochSeconds),
      Field("until", &R::until).Range(0, kMaxEpochSeconds),
      Field("backend", &R::backend).MaxBytes(256),
      Field("policy", &R::policy).MaxBytes(4096),
      Field("gpus", &R::gpus),
      Field("gpu_points", &R::gpu_points),
      Field("job_points", &R::job_points),
      Field("queue_points", &R::queue_points),
      Field("bucket_seconds", &R::bucket_seconds).Range(0, kMaxEpochSeconds),
      Field("jobs", &R::jobs),
      Field("jobs_truncated", &R::jobs_truncated),
      Field("history_points", &R::history_points).Range(0, INT64_MAX),
      Field("history_flushes", &R::history_flushes).Range(0, INT64_MAX),
      Field("history_write_seconds", &R::history_write_seconds).Range(0, kMaxEpochSeconds),
      Field("history_error", &R::history_error).MaxBytes(1 << 16).OmitDefault()};
}

// placed: run with `env`; waiting: ask again soon; requeue: colo handed the job back to Slurm
// (`reason` says why), so the step must not run here; failed: it cannot run (`reason`).
enum class SlurmPlacement { kPlaced, kWaiting, kRequeue, kFailed };
std::string_view ToString(SlurmPlacement p);
Result<SlurmPlacement> ParseSlurmPlacement(std::string_view text);
inline Result<SlurmPlacement> ParseName(std::string_view text, Of<SlurmPlacement>) {
  return ParseSlurmPlacement(text);
}
struct SlurmAttachReply {
  SlurmPlacement state = SlurmPlacement::kWaiting;
  JobId job = 0;                 // colo's id of the tenant
  std::vector<std::string> env;  // placed: NAME=value for every task of every step
  // placed: NAME=value for every task where the step does not set NAME itself (the frameworks'
  // sharing settings, which a user may choose otherwise).
  std::vector<std::string> env_defaults;
  std::string reason;
};
constexpr auto Fields(Of<SlurmAttachReply>) {
  using A = SlurmAttachReply;
  return std::tuple{Field("state", &A::state), Field("job", &A::job).Range(0, kMaxJobId),
                    Field("env", &A::env).MaxItems(256).MaxBytes(64 * 1024),
                    Field("env_defaults", &A::env_defaults).MaxItems(64).MaxBytes(16 * 1024),
                    Field("reason", &A::reason)};
}
struct SlurmRunReply {
  uint32_t job = 0;
  int restarts = 0;  // the run colod now expects
};
constexpr auto Fields(Of<SlurmRunReply>) {
  return std::tuple{Field("job", &SlurmRunReply::job).Range(0, kMaxSlurmJobId),
                    Field("restarts", &SlurmRunReply::restarts).Range(0, 1 << 20)};
}
struct SlurmEndReply {
  JobId job = 0;  // 0: colod had no tenant for it
  // "ended"; "ending" (its output is being read, or its requeue is on its way: ask again, and
  // keep the batch step until it is not — a job Slurm saw fail would release its dependents);
  // "requeued" (given back to Slurm, which runs it again); "unknown" (no tenant for it).
  std::string state;
};
constexpr auto Fields(Of<SlurmEndReply>) {
  return std::tuple{Field("job", &SlurmEndReply::job).Range(0, kMaxJobId),
                    Field("state", &SlurmEndReply::state).MaxBytes(64)};
}

// The reply type of each request, for typed calls.
template <typename Req>
struct ReplyOf;
template <>
struct ReplyOf<HelloRequest> {
  using type = HelloReply;
};
template <>
struct ReplyOf<SubmitRequest> {
  using type = SubmitReply;
};
template <>
struct ReplyOf<QueueRequest> {
  using type = QueueReply;
};
template <>
struct ReplyOf<ShowRequest> {
  using type = ShowReply;
};
template <>
struct ReplyOf<CancelRequest> {
  using type = CancelReply;
};
template <>
struct ReplyOf<ExplainRequest> {
  using type = ExplainReply;
};
template <>
struct ReplyOf<LogsRequest> {
  using type = LogsReply;
};
template <>
struct ReplyOf<GpusRequest> {
  using type = GpusReply;
};
template <>
struct ReplyOf<HistoryRequest> {
  using type = HistoryReply;
};
template <>
struct ReplyOf<EventsRequest> {
  using type = EventsReply;
};
template <>
struct ReplyOf<ShareRequest> {
  using type = ShareReply;
};
template <>
struct ReplyOf<SlurmAttachRequest> {
  using type = SlurmAttachReply;
};
template <>
struct ReplyOf<SlurmEndRequest> {
  using type = SlurmEndReply;
};
template <>
struct ReplyOf<SlurmRunRequest> {
  using type = SlurmRunReply;
};
template <>
struct ReplyOf<ControlRequest> {
  using type = ControlReply;
};
template <>
struct ReplyOf<RunReportRequest> {
  using type = RunReportReply;
};

}  // namespace colo::api

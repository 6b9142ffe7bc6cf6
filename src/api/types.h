// colod's API as types: one struct per request and per reply, shared by colod, `colo` and every
// other client (the Slurm plugin, scripts). codec.h turns them into the wire format and back;
// nothing else writes the schema.
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

#include "common/status.h"
#include "common/units.h"
#include "core/model.h"

namespace colo::api {

constexpr int kVersion = 1;

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

// A job waits until another one has ended (Slurm's --dependency): afterok when it succeeded,
// afternotok when it did not (failed, cancelled, timed out, lost), afterany either way.
enum class DependencyKind { kAfterOk, kAfterAny, kAfterNotOk };
std::string_view ToString(DependencyKind kind);
Result<DependencyKind> ParseDependencyKind(std::string_view text);
struct Dependency {
  DependencyKind kind = DependencyKind::kAfterAny;
  JobId job = 0;
  bool operator==(const Dependency&) const = default;
};
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

// --- Requests ---
struct HelloRequest {};
struct SubmitRequest {
  std::vector<std::string> command;  // argv; the first word is run through PATH
  int gpus = 1;
  std::optional<Bytes> memory;  // declared peak per GPU: the limit the job runs under
  std::optional<JobEstimate> estimate;
  SharingPreference share = SharingPreference::kAny;
  std::optional<int> threads;            // MPS active-thread percentage, 1..100
  std::optional<double> expected_smact;  // SM activity alone, 0..1
  std::string name;                      // default: the command's first word
  std::string workdir;                   // absolute
  std::vector<std::string> env;          // NAME=value
  std::string source = "cli";            // "cli", "script PATH", "rad PATH"
  // Slurm habits. Each absent or zero by default, and then the request is what it always was.
  int64_t time_limit_s = 0;  // stopped (SIGTERM, then SIGKILL) this long after it started
  std::vector<Dependency> dependencies;
  bool hold = false;  // waits until released
  int priority = 0;   // among the submitter's own waiting jobs, higher first
  std::optional<ArraySpec> array;
  // Files the job's stdout and stderr are copied to (sbatch -o/-e; output_pattern.h); empty:
  // none. Only -o: both go there.
  std::string output, error;
};
// Acts on several jobs at once (scontrol hold/release/requeue, scancel): each job gets its own
// answer, so one that may not be touched does not stop the others.
enum class JobAction { kHold, kRelease, kRequeue, kCancel };
std::string_view ToString(JobAction action);
Result<JobAction> ParseJobAction(std::string_view text);
constexpr size_t kMaxControlJobs = 1000;
struct ControlRequest {
  JobAction action = JobAction::kCancel;
  std::vector<JobId> jobs;
  // An array's id names the array (scancel ARRAY_ID: cancel acts on every live task) unless
  // this is set: then each id is one job, an array's first task alone (ids named as
  // ARRAY_TASK, or chosen by filters).
  bool each_alone = false;
};
struct QueueRequest {
  std::string user;  // only this user's jobs; empty: everyone's
};
struct ShowRequest {
  JobId job = 0;
};
struct CancelRequest {
  JobId job = 0;
};
struct ExplainRequest {
  JobId job = 0;
};
struct LogsRequest {
  JobId job = 0;
  std::optional<int> attempt =
      std::nullopt;  // that attempt's files (from 1); absent: the latest attempt's
};
struct GpusRequest {};
// Jobs that ended, newest first, one page at a time: a page is at most kMaxHistoryPage jobs and
// the reply's `next` continues it.
constexpr int kMaxHistoryPage = 200;
struct HistoryRequest {
  int limit = 50;
  std::optional<JobId> before;  // only jobs with a smaller id (the previous page's `next`)
  bool all = false;             // every user's jobs (their details stay private)
};
// The newest events of every job, newest first (colo top): at most kMaxRecentEvents. Another
// user's event has its detail left out; colod's own events (job 0) are root's only.
constexpr int kMaxRecentEvents = 200;
struct EventsRequest {
  int limit = 50;
};

// --- Slurm: the node's half of a Slurm job (the SPANK plugin in slurmstepd and slurmd, as root).
// Only root may send these: the uid they carry is Slurm's word, which a user cannot give. ---
constexpr int64_t kMaxSlurmJobId = 0xfffffff0;  // Slurm's ids are 32 bits; the top few are steps'
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
// slurmd's prolog: run number `restarts` (runs before it) of a Slurm job begins on this node,
// with what Slurm booked for it: the job-control environment colo's plugin set at submission
// (from which job_submit/lua planned its gpumem) and the GPUs Slurm gave it. colod plans with
// this, not with what a step says: a job's owner controls its steps' environment.
struct SlurmRunRequest {
  uint32_t job = 0;
  int restarts = 0;
  std::optional<SharingPreference> share;  // COLO_SHARE: set for a colo job only
  std::optional<Bytes> memory;             // COLO_MEM per GPU (absent: whole GPUs)
  int gpus = 0;  // COLO_GPUS for a colo job, else the whole GPUs Slurm gave (0: none)
};
// The job's batch script ended with this wait status, or (no status) Slurm's epilog says the
// whole job ended on this node.
struct SlurmEndRequest {
  uint32_t job = 0;
  std::optional<int> wait_status;
};

// What colod recorded over a time range (colo report): every GPU's samples, the memory of every
// job on its GPUs, the queue's length, and the jobs live in the range. Everyone sees every GPU's
// series; other users' jobs come without their details, as in the queue.
constexpr int kMaxReportPoints = 20000;
struct RunReportRequest {
  double since = 0;       // seconds since the epoch
  double until = 0;       // 0: now
  int max_points = 2000;  // per series; longer ranges come as means over equal buckets
};

using Request =
    std::variant<HelloRequest, SubmitRequest, QueueRequest, ShowRequest, CancelRequest,
                 ExplainRequest, LogsRequest, GpusRequest, HistoryRequest, SlurmAttachRequest,
                 SlurmEndRequest, SlurmRunRequest, ControlRequest, RunReportRequest, EventsRequest>;
std::string_view OpName(const Request& request);

// --- Replies ---
struct HelloReply {
  std::string server = "colod";
  int api = kVersion;
  std::string gpu_backend;
  std::string user;  // who colod thinks the caller is
  bool personal = false;
};
struct SubmitReply {
  JobId job = 0;
};

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
struct EventInfo {
  double time = 0;
  std::string kind, detail;
};

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
// Everything about one job (colo show).
struct JobDetail {
  JobSummary summary;
  std::vector<std::string> command;
  std::string workdir, source;
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

struct QueueReply {
  std::vector<JobSummary> jobs;
  int main_queue = 0, recovery_queue = 0;
};
struct ShowReply {
  JobDetail job;
};
struct ControlResult {
  JobId job = 0;
  bool ok = false;
  std::string state;  // ok: what the job is now ("held", "queued", "cancelling", ...)
  std::string error;  // not ok: why
  ErrorCode code = ErrorCode::kInternal;
};
struct ControlReply {
  std::vector<ControlResult> results;  // one per job asked for, in its order
};
struct CancelReply {
  JobId job = 0;
  std::string state;  // "cancelling" or the job's new state
};
struct GateInfo {
  int gpu = 0;
  std::string gate, detail;
};
struct ExplainReply {
  JobId job = 0;
  JobState state = JobState::kQueued;
  std::string summary;
  int position = 0;   // in its queue, from 1; 0 when not queued
  std::string queue;  // "main" or "recovery"
  std::vector<GateInfo> gpus;
};
struct LogsReply {
  JobId job = 0;
  JobState state = JobState::kQueued;
  int attempt = 0;                       // 0: not started yet
  std::string stdout_path, stderr_path;  // readable by the job's owner only
};
struct GpuJobInfo {
  JobId id = 0;
  std::string name, user, mode;
  Bytes peak;
  Bytes used;         // on this GPU, in the latest sample
  Bytes reservation;  // what placement holds for it on this GPU (used or not)
};
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
struct GpusReply {
  std::string backend;
  std::vector<GpuInfoReply> gpus;
};
struct HistoryReply {
  std::vector<JobSummary> jobs;
  std::optional<JobId> next;  // pass as `before` for the next page; absent on the last page
};
struct RecentEvent {
  JobId job = 0;  // 0: about colod itself
  std::string user, name;
  double time = 0;
  std::string kind, detail;
  bool redacted = false;  // another user's: `detail` left out
};
struct EventsReply {
  std::vector<RecentEvent> events;  // newest first
};

struct RunGpu {
  int index = 0;
  std::string uuid, name;
  Bytes memory_total;
};
// One GPU at one time; absent: not reported by the GPU (never a number standing for it).
struct RunGpuPoint {
  double time = 0;
  int gpu = 0;
  std::optional<double> memory_used;  // bytes
  std::optional<double> smact, smocc, drama, power_watts, energy_joules;
};
struct RunJobPoint {
  double time = 0;
  JobId job = 0;
  int gpu = 0;
  double memory = 0;  // bytes
};
struct RunQueuePoint {
  double time = 0;
  double queued = 0, running = 0;
};
// A job of the range with its attempts (their `detail` and `pid` empty when redacted).
struct RunJob {
  JobSummary summary;
  std::vector<AttemptInfo> attempts;
};
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

// placed: run with `env`; waiting: ask again soon; requeue: colo handed the job back to Slurm
// (`reason` says why), so the step must not run here; failed: it cannot run (`reason`).
enum class SlurmPlacement { kPlaced, kWaiting, kRequeue, kFailed };
std::string_view ToString(SlurmPlacement p);
Result<SlurmPlacement> ParseSlurmPlacement(std::string_view text);
struct SlurmAttachReply {
  SlurmPlacement state = SlurmPlacement::kWaiting;
  JobId job = 0;                 // colo's id of the tenant
  std::vector<std::string> env;  // placed: NAME=value for every task of every step
  // placed: NAME=value for every task where the step does not set NAME itself (the frameworks'
  // sharing settings, which a user may choose otherwise).
  std::vector<std::string> env_defaults;
  std::string reason;
};
struct SlurmRunReply {
  uint32_t job = 0;
  int restarts = 0;  // the run colod now expects
};
struct SlurmEndReply {
  JobId job = 0;  // 0: colod had no tenant for it
  // "ended"; "ending" (its output is being read, or its requeue is on its way: ask again, and
  // keep the batch step until it is not — a job Slurm saw fail would release its dependents);
  // "requeued" (given back to Slurm, which runs it again); "unknown" (no tenant for it).
  std::string state;
};

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

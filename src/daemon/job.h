// The one record of a job that colod keeps: what the controller works on and what the store
// saves. Typed throughout (enums, Bytes, times); the store's encoding is in job_codec.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/types.h"
#include "common/clock.h"
#include "core/model.h"
#include "core/run_learning.h"

namespace colo {

// Who a job belongs to and runs as: from the socket's peer credentials and the passwd/group
// database, never from anything the client says.
struct Identity {
  unsigned uid = 0;
  unsigned gid = 0;
  std::string user;  // the passwd name (supplementary groups come from it)
};

// One try at running a job.
struct Attempt {
  enum class Phase {
    kLaunching,  // recorded before the process is started: after a crash, evidence decides
    kRunning,
    kEnded,
  };
  int number = 0;
  Phase phase = Phase::kLaunching;
  int pid = 0;             // the shim: leader of the attempt's session and process group
  uint64_t pid_start = 0;  // its start time in clock ticks since boot, to recognise it again
  std::vector<std::string> gpu_uuids;
  SharingMode mode = SharingMode::kPlain;
  int thread_percent = 100;
  Bytes memory_limit;  // per GPU given to MPS; 0: none
  WallTime started, ended;
  std::optional<ExitKind> exit;  // set when it ended
  std::string detail;            // the error line, or how it ended
  Bytes peak;                    // highest per-GPU memory its processes were seen to use
  // Its use went above its plan while it shared a GPU without an MPS memory limit (the
  // reservation it was placed with is memory_limit).
  bool over_plan = false;
  // Its GPU's mean SM activity (GPM) while it ran alone there and computed; negative: unknown.
  double solo_smact = -1;
  // How its process ended, when known: its exit code, or the signal that killed it.
  std::optional<int> exit_code = std::nullopt, exit_signal = std::nullopt;
};
std::string_view ToString(Attempt::Phase phase);

// A run an outside engine started on this node (a Slurm job: slurmstepd runs its processes, as
// the user); colod chose its GPUs and learns of its end when the engine says so (Slurm's SPANK
// plugin). Its attempts are a TenantRunner's (attempt_runner.h).
struct ExternalRun {
  std::string engine = "slurm";
  uint32_t id = 0;   // the engine's id of the job
  int restarts = 0;  // the engine's restart count of the run this record is
  // Out-of-memory crashes of its earlier runs (on any node): the retry cap counts them too.
  int earlier_ooms = 0;
  // The GPUs the engine booked for this run here (colod runs it on these); empty: colod chose.
  std::vector<std::string> gpu_uuids;
};

// A task of a job array (submit --array).
struct ArrayMembership {
  JobId job = 0;  // the array's id: its first task's job id
  int task = 0;   // COLO_ARRAY_TASK_ID
  int limit = 0;  // tasks of the array that may be queued or run at once (0: all)
};

// A running job being preempted: stored before it is signalled, so that a restart finishes the
// preemption (SIGKILL when its notice is over, then queued again) rather than forgets it.
struct PreemptionNotice {
  JobId for_job = 0;   // the waiting job it makes room for
  WallTime kill_at;    // its notice ends
  std::string reason;  // who waited, and how both users stand against their shares
};

struct Job {
  JobSpec spec;  // id, name, owner (the user name), command, GPUs, memory need, sharing, SMACT
  Identity owner;
  api::JobContext context;  // its working directory, where it came from
  SharedStrings env;  // NAME=value, shared by the tasks of an array; dropped when the job ends
  JobState state = JobState::kQueued;
  std::string reason;  // why it failed or waits for good
  WallTime submitted, finished;
  bool cancel_requested = false;
  std::vector<Attempt> attempts;
  std::optional<api::JobEstimate> estimate;
  std::optional<ExternalRun> external;  // set: an engine's run, not a process colod started
  // Slurm habits. A job held or with dependencies not yet met waits outside the scheduler's
  // queues (state queued, the reason says why).
  int64_t time_limit_s = 0;  // 0: none; counted from its attempt's start
  bool timed_out = false;    // its limit passed: signalled, and it ends as timeout
  bool held = false;
  std::vector<api::Dependency> dependencies;   // still to be met (met ones are dropped)
  bool requeue_requested = false;              // stopped to be queued again
  std::optional<PreemptionNotice> preemption;  // being stopped for another job
  std::optional<ArrayMembership> array;
  // sbatch -o/-e: where the job's user's copies of its output go (api/output_pattern.h); empty:
  // none. Only an output pattern: stderr goes there too.
  std::string output_pattern, error_pattern;

  JobId id() const { return spec.id; }
  const Attempt* current() const { return attempts.empty() ? nullptr : &attempts.back(); }
  Attempt* current() { return attempts.empty() ? nullptr : &attempts.back(); }
  bool live() const { return !IsTerminal(state); }
};

// The file a -o/-e pattern of the job names, absolute (a relative pattern is taken from its
// working directory); empty for an empty pattern.
std::string OutputFileOf(const Job& job, std::string_view pattern);

// How many of the job's attempts crashed out of memory (its retry cap counts them).
int OutOfMemoryAttempts(const Job& job);
// How many times it was started again other than after an out-of-memory crash: preempted,
// requeued (COLO_RESTART_COUNT, as Slurm's SLURM_RESTART_COUNT).
int Restarts(const Job& job);
// What a preemptible job is sent before it is stopped (its --signal, else SIGTERM 60 s before).
api::JobSignal SignalOf(const Job& job);

// What the attempt measured, for its model's later runs (core/run_learning.h).
RunEvidence EvidenceOf(const Attempt& attempt);
// Adds what an ended job's attempts measured, newest first, up to `limit` of each kind
// (core's AddRun). Both stores select with it.
void CollectRuns(const Job& job, size_t limit, ModelRuns& runs);
// The states of jobs whose runs count.
inline bool RunsCount(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed;
}

// Something that happened to a job, for `colo show` and the log.
struct JobEvent {
  JobId job = 0;  // 0: about colod itself
  WallTime time;
  std::string kind, detail;
};

// Limits on what a job record may hold, so one record can always be stored and sent.
constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxDetailBytes = 1024;  // an attempt's error line, a reason
constexpr size_t kMaxEventDetailBytes = 2048;

}  // namespace colo

// The job and GPU model shared by the scheduler, the policies, the simulator and the daemon.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/shared_strings.h"
#include "common/units.h"

namespace colo {

using JobId = int64_t;
using GpuIndex = int;  // dense index 0..n-1 over every placement target the scheduler knows

// Where a job's memory number comes from; later sources are more trustworthy.
enum class MemorySource { kUnknown, kDeclared, kEstimated, kLearned };
std::string_view ToString(MemorySource s);
Result<MemorySource> ParseMemorySource(std::string_view text);

// A job's peak GPU memory need per GPU, with a relative uncertainty (0.1 = may be 10% higher).
struct MemoryNeed {
  Bytes peak;
  MemorySource source = MemorySource::kUnknown;
  double uncertainty = 0.0;

  bool known() const { return source != MemorySource::kUnknown; }
  // What the scheduler plans with: the peak plus its uncertainty.
  Bytes Upper() const { return known() ? peak.Scaled(1.0 + uncertainty) : Bytes(0); }
};

// How a job may share a GPU, as the user asked.
enum class SharingPreference { kAny, kMps, kPlain, kExclusive };
// How a placement actually shares the GPU.
enum class SharingMode { kMps, kPlain, kExclusive };
std::string_view ToString(SharingPreference p);
std::string_view ToString(SharingMode m);
Result<SharingPreference> ParseSharingPreference(std::string_view text);
Result<SharingMode> ParseSharingMode(std::string_view text);

struct JobSpec {
  JobId id = 0;
  std::string name;
  std::string owner;
  SharedStrings command;  // the tasks of an array share one
  int gpus = 1;           // all on one server
  MemoryNeed memory;
  SharingPreference sharing = SharingPreference::kAny;
  // Orders one owner's waiting jobs (higher first); never moves a job past another owner's.
  int priority = 0;
  // Expected SM activity alone (0..1) if known; sizes the MPS thread share. Negative means unknown.
  double expected_smact = -1.0;
  // The MPS active-thread percentage the user asked for (1..100); 0: from its SM activity.
  int threads = 0;
  // Its time limit (--time; 0: none): an attempt is stopped this long after it starts, so it
  // ends by then. What backfill's reservations count on first.
  Duration time_limit{0};
  // How long its runs take, learned from earlier runs of its model (0: not known): what
  // reservations count on where there is no time limit.
  Duration expected_run{0};
  // Submitted --requeue: it may be stopped with notice and run again as its next attempt.
  bool requeue = false;
  // The notice it gets before it is stopped for another job (its --signal's lead).
  Duration preempt_notice = Seconds(60);
  // The GPUs an outside scheduler (Slurm) chose and booked for the job, by the scheduler's index:
  // it runs on exactly these, and waits behind no other job. Empty: colo chooses its GPUs.
  std::vector<GpuIndex> booked_gpus;
};

// kRequeued: a Slurm job this node handed back to Slurm's queue (to run again here or elsewhere).
// kTimeout: it ran past its time limit and was stopped.
enum class JobState {
  kQueued,
  kRecovering,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kLost,
  kRequeued,
  kTimeout
};
std::string_view ToString(JobState s);
Result<JobState> ParseJobState(std::string_view text);
inline bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled ||
         s == JobState::kLost || s == JobState::kRequeued || s == JobState::kTimeout;
}

// kPreempted: stopped with notice so that another job could start; it waits again.
enum class ExitKind { kSuccess, kFailure, kOutOfMemory, kCancelled, kLost, kTimeout, kPreempted };
std::string_view ToString(ExitKind k);
Result<ExitKind> ParseExitKind(std::string_view text);

// What is known about an out-of-memory failure besides the peak colod saw: the figures the
// framework printed (absent when its message has none) and the job's profile.
struct OutOfMemoryEvidence {
  std::string framework;           // whose message gave the figures ("PyTorch", "JAX/XLA", ...)
  std::optional<Bytes> in_use;     // what the process held when the allocation failed
  std::optional<Bytes> requested;  // the allocation that failed
  Bytes profile_upper;             // the upper bound of the job's profiled estimate; 0: none
};

struct JobExit {
  JobExit() = default;
  JobExit(ExitKind k, std::string d, OutOfMemoryEvidence o = {})
      : kind(k), detail(std::move(d)), oom(std::move(o)) {}
  ExitKind kind = ExitKind::kSuccess;
  std::string detail;       // e.g. the matched error line
  OutOfMemoryEvidence oom;  // for kOutOfMemory
};

// A placement target: a whole GPU or an existing MIG instance (which colo never repartitions).
struct GpuInfo {
  std::string uuid;
  std::string model;
  Bytes capacity;
  int node = 0;  // server the GPU belongs to; multi-GPU jobs stay within one node
  bool mig_instance = false;
  SharingMode default_mode = SharingMode::kMps;
  // What one process's CUDA context takes on this GPU (calibrated); plans include it.
  Bytes cuda_context;
  // What NVML leaves out of an MPS client's memory: part of its context lives in the MPS server
  // (measured by colo-calibrate --mps: on an H100, driver 580, 758 MiB of context without MPS
  // and 610 MiB in the client's own entry under MPS). A job's use under MPS, in the terms of its
  // plan, is its processes' use plus this.
  Bytes mps_uncounted_context;
};

// One monitoring sample of a GPU. Utilizations are fractions in [0, 1]; negative means not
// measured.
struct GpuSample {
  GpuIndex gpu = 0;
  TimePoint time;
  Bytes used;
  double smact = -1;
  double smocc = -1;
  double drama = -1;
  bool healthy = true;
};

}  // namespace colo

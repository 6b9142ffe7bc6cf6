// How colod starts, watches, signals and recognises the processes of job attempts. The
// controller talks only to this interface: PosixProcessLauncher is the real one (colo-shim as the
// job's user, a cgroup v2 per attempt where colod may create one, otherwise the attempt's session
// plus a scan of its descendants); tests use a fake that runs nothing.
//
// Everything in a job's directory is written by the job's user and is hostile to colod: it is
// read without following links, without blocking, only if it is a regular file the user owns, and
// only a bounded tail of it.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "daemon/exit_classifier.h"
#include "daemon/job.h"

namespace colo {

struct LaunchSpec {
  JobId job = 0;
  int attempt = 0;
  Identity owner;
  std::vector<std::string> argv;  // the job's command
  std::vector<std::string> env;   // its whole environment, NAME=value
  api::JobContext context;        // its working directory
  // The user's copies of the output (sbatch -o/-e), absolute; empty: none. Written by the job's
  // user, never by colod; only output_file: stderr goes there too.
  std::string output_file, error_file;
  bool append_output = false;  // add to the files rather than start them afresh
};

// The shim of a started attempt, as the job record keeps it.
struct ProcessHandle {
  int pid = 0;
  uint64_t start_ticks = 0;  // to tell it from a later process with a recycled pid
};

struct AttemptRef {
  JobId job = 0;
  int attempt = 0;
  Identity owner;
  ProcessHandle process;  // pid 0: none is known
};

// How an attempt ended, with what the classifier needs.
struct AttemptEnd {
  ProcessEnd end;  // the shim's record; else the shim's wait status; else unknown
  std::string stderr_tail, stdout_tail;  // the last kTailBytes of each, valid UTF-8
};
constexpr size_t kTailBytes = 256 * 1024;

struct AttemptFiles {
  std::string stdout_path, stderr_path;
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;

  // Checks, as `owner` (not as root), that `workdir` is a directory the user may enter.
  virtual Status CheckWorkdir(const Identity& owner, const std::string& workdir) = 0;

  // Starts the attempt: its directory (owned by the user), its cgroup where possible, and the shim
  // as the user in a session of its own, with `argv` in `workdir`. Errors before the job's command
  // could run (bad workdir, no permission) are a Status naming the step.
  virtual Result<ProcessHandle> Start(const LaunchSpec& spec) = 0;

  // nullopt while any process of the attempt runs; how it ended once none does. An attempt ends
  // when its shim has ended and no process of it is left: what a killed shim leaves behind is
  // killed here first, so its GPU memory is never handed to another job while it still runs.
  virtual std::optional<AttemptEnd> Check(const AttemptRef& attempt) = 0;

  // Sends `signal` to every process of the attempt, descendants that left its session included.
  virtual void Signal(const AttemptRef& attempt, int signal) = 0;

  // For an attempt recorded as launching whose process was never recorded (colod stopped between
  // the two): its shim, if one runs; otherwise whether the attempt may have started its command
  // (then Check says how it ended), or certainly did not (then it may be started again).
  struct Found {
    std::optional<ProcessHandle> running;
    bool may_have_started = false;
  };
  virtual Found FindLaunched(const AttemptRef& attempt) = 0;

  // The attempt a process belongs to (for per-job GPU memory), if any.
  virtual std::optional<std::pair<JobId, int>> AttemptOf(int pid) = 0;

  // Once per loop turn: reaps children and refreshes what it tracks of running attempts.
  virtual void Refresh() = 0;

  // After an ended attempt was recorded: what the launcher kept for it (its cgroup) goes.
  virtual void Release(const AttemptRef& attempt) = 0;

  // Where the attempt's output goes; readable by the job's owner (and root) only.
  virtual AttemptFiles Files(JobId job, int attempt) const = 0;
};

}  // namespace colo

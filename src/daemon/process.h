// Starting job attempts as real processes, and recognising them again.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/exit_classifier.h"

namespace colo {

struct LaunchPlan {
  std::string shim;               // path of colo-shim
  std::vector<std::string> argv;  // the job's command
  std::vector<std::string> env;   // its whole environment, NAME=value
  std::string workdir;
  bool switch_user = false;  // colod runs as root: become uid/gid (with their groups)
  unsigned uid = 0, gid = 0;
  std::string user;  // for the supplementary groups
  std::string stdout_path, stderr_path, exit_path;
};

struct StartedProcess {
  int pid = 0;  // the shim, leader of the attempt's session and process group
  uint64_t start_ticks = 0;
};

// Forks the shim in a new session. Errors before exec (bad workdir, no permission, missing
// command) come back as a Status naming the step, not as a mysterious exit code.
Result<StartedProcess> StartAttempt(const LaunchPlan& plan);

// Fields of /proc/PID/stat; nullopt when the process does not exist.
std::optional<uint64_t> ProcessStartTicks(int pid);
std::optional<int> SessionOf(int pid);
// True if `pid` exists and started at `start_ticks` (not a recycled pid).
bool SameProcess(int pid, uint64_t start_ticks);

// The shim's record of how the job ended; nullopt if it wrote none.
std::optional<ProcessEnd> ReadExitFile(const std::string& path);
// The last `max_bytes` of a file (empty if unreadable).
std::string ReadTail(const std::string& path, size_t max_bytes);

}  // namespace colo

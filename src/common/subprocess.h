// Runs a helper program (scontrol, setpriv) and collects its output, bounded in time and size.
// Safe to call from any thread of a process that reaps its children with waitpid(-1): its child
// sends no SIGCHLD, never execs and is waited for through its pidfd only, so no other reaper
// takes its status; the command runs as that child's child.
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace colo {

struct CommandResult {
  int exit_code = -1;  // -1: killed (by a signal, or at the deadline); 127: could not be run
  bool timed_out = false;
  std::string output;  // stdout and stderr together, at most `max_output` bytes (the first ones)
};

// Runs `argv` (argv[0] an absolute path; no PATH search) with exactly `env`, stdin from
// /dev/null, in a session of its own; kills it at `timeout`. An error only when it could not
// be started at all.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, Duration timeout,
                                 size_t max_output = 1 << 20);

}  // namespace colo

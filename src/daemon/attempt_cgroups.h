// cgroup v2 for the launcher: where colod's own cgroup is, whether attempts' cgroups can be made
// below it, what an attempt's cgroup is called and which processes are in one. Internal to the
// PosixProcessLauncher.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace colo {

// Where colod's own cgroup v2 is in the filesystem, or why there is none.
Result<std::pair<std::string, std::string>> FindOwnCgroup();
// Makes a cgroup below `base`, moves a child into it and removes it again: what every attempt
// will need. Ok with whether cgroup.kill exists.
Result<bool> ProbeCgroups(const std::string& base);
// Pids in a cgroup and (to a bounded depth) the cgroups below it.
void CollectCgroupPids(const std::string& path, size_t depth, std::vector<pid_t>& out);
// Whether any live process is in the cgroup or below it; false when it does not exist.
bool CgroupPopulated(const std::string& path);
// The cgroup v2 path of a process ("0::PATH" in /proc/PID/cgroup).
std::optional<std::string> CgroupOf(pid_t pid);
// The start of every attempt cgroup's name of the colod whose jobs live in `jobs_dir`: colods on
// other state directories may share the parent cgroup (two started from one shell), and neither
// may take, fail on or kill the other's "job 1, attempt 1". A restart on the same state directory
// finds the same names again.
std::string CgroupPrefix(std::string_view jobs_dir);

}  // namespace colo

// Which processes are an attempt's, as PosixProcessLauncher tells: its cgroup, or without one its
// shim's session and every process seen below one of its processes (one /proc scan for all
// attempts); how they are signalled, found again after a restart, and reaped. See
// posix_launcher.h.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "daemon/attempt_cgroups.h"
#include "daemon/posix_launcher.h"
#include "daemon/proc_files.h"

namespace colo {
namespace {

constexpr int kSignalPasses = 3;  // SIGKILL again for processes forked while it was sent
constexpr size_t kMaxParentChain = 64;

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

PosixProcessLauncher::Tracked& PosixProcessLauncher::Track(const AttemptRef& ref) {
  const Key key{ref.job, ref.attempt};
  auto it = attempts_.find(key);
  if (it == attempts_.end()) {
    // Started by an earlier colod: taken up as the record has it.
    Tracked tracked;
    tracked.owner = ref.owner;
    tracked.shim = ref.process;
    tracked.in_cgroup = uses_cgroups() && IsDirectory(CgroupPath(ref.job, ref.attempt));
    if (ref.process.pid > 0 && IsAlive(ref.process.pid, ref.process.start_ticks))
      tracked.output_pipes = ShimPipes(ref.process.pid);
    it = attempts_.emplace(key, std::move(tracked)).first;
  } else if (ref.process.pid != 0 && (ref.process.pid != it->second.shim.pid ||
                                      ref.process.start_ticks != it->second.shim.start_ticks)) {
    it->second.shim = ref.process;
    it->second.own_child = false;
    it->second.wait_status.reset();
  }
  return it->second;
}

bool PosixProcessLauncher::ShimRuns(Tracked& tracked) {
  const ProcessHandle& shim = tracked.shim;
  if (shim.pid <= 0) return false;
  if (tracked.own_child && !tracked.wait_status) {
    int status = 0;
    pid_t reaped;
    do {
      reaped = waitpid(shim.pid, &status, WNOHANG);
    } while (reaped < 0 && errno == EINTR);
    if (reaped == shim.pid) {
      tracked.wait_status = status;
      return false;
    }
    if (reaped == 0) return true;
    tracked.own_child = false;  // reaped elsewhere: its status is lost
  }
  if (tracked.wait_status) return false;
  // A zombie has ended: its status went to whoever reaps it.
  return IsAlive(shim.pid, shim.start_ticks);
}

void PosixProcessLauncher::UpdateMembers(Tracked& tracked, const ProcTable& table,
                                         const ChildTable& children,
                                         const std::vector<pid_t>& orphans) {
  auto& members = tracked.members;
  const auto current = [&](pid_t pid, uint64_t ticks) {
    const auto it = table.find(pid);
    return it != table.end() && it->second.start_ticks == ticks && it->second.alive();
  };
  std::erase_if(members, [&](const auto& m) { return !current(m.first, m.second); });
  const ProcessHandle& shim = tracked.shim;
  std::vector<pid_t> roots(orphans);
  if (shim.pid > 0 && current(shim.pid, shim.start_ticks)) roots.push_back(shim.pid);
  for (const auto& [pid, ticks] : members) roots.push_back(pid);
  // The shim's session, while that session is known to last: its shim runs, or a process already
  // counted to the attempt is still in it (a session id is a pid, not reused while the session
  // lasts). Once it may have ended, its id may name another user's new session.
  bool session_lasts = shim.pid > 0 && current(shim.pid, shim.start_ticks);
  for (const auto& [pid, ticks] : members) {
    const auto it = table.find(pid);
    session_lasts |= shim.pid > 0 && it != table.end() && it->second.sid == shim.pid;
  }
  if (session_lasts) {
    for (const auto& [pid, info] : table) {
      if (info.sid == shim.pid && info.alive() && info.start_ticks >= shim.start_ticks)
        roots.push_back(pid);
    }
  }
  std::set<pid_t> seen;
  while (!roots.empty()) {
    const pid_t pid = roots.back();
    roots.pop_back();
    const auto it = table.find(pid);
    if (it == table.end() || !it->second.alive() || !seen.insert(pid).second) continue;
    members[pid] = it->second.start_ticks;
    if (const auto c = children.find(pid); c != children.end())
      roots.insert(roots.end(), c->second.begin(), c->second.end());
  }
}

void PosixProcessLauncher::UpdateAllMembers(const ProcTable& table) {
  // Orphans that came to colod (a job's shim was killed): an attempt's by the log they write to.
  std::map<std::string, Key> by_log;
  std::set<pid_t> shims;
  for (const auto& [key, tracked] : attempts_) {
    if (tracked.shim.pid > 0) shims.insert(tracked.shim.pid);
    if (tracked.in_cgroup) continue;
    const AttemptFiles files = Files(key.first, key.second);
    by_log[files.stdout_path] = key;
    by_log[files.stderr_path] = key;
    for (const std::string& pipe : tracked.output_pipes) by_log[pipe] = key;
  }
  std::map<Key, std::vector<pid_t>> orphans;
  std::map<std::pair<pid_t, uint64_t>, std::optional<Key>> owners;
  const pid_t self = getpid();
  for (const auto& [pid, info] : table) {
    if (info.ppid != self || !info.alive() || shims.count(pid)) continue;
    const std::pair<pid_t, uint64_t> id{pid, info.start_ticks};
    std::optional<Key> owner;
    if (const auto known = orphan_owners_.find(id); known != orphan_owners_.end()) {
      owner = known->second;
    } else {
      for (int fd : {1, 2}) {
        const auto it = by_log.find(DescriptorPath(pid, fd));
        if (it != by_log.end()) owner = it->second;
      }
    }
    owners[id] = owner;
    if (owner) orphans[*owner].push_back(pid);
  }
  orphan_owners_ = std::move(owners);
  ChildTable children;
  for (const auto& [pid, info] : table) {
    if (info.alive()) children[info.ppid].push_back(pid);
  }
  for (auto& [key, tracked] : attempts_) {
    if (!tracked.in_cgroup) UpdateMembers(tracked, table, children, orphans[key]);
  }
}

std::vector<std::pair<pid_t, uint64_t>> PosixProcessLauncher::LiveProcesses(Tracked& tracked,
                                                                            JobId job,
                                                                            int attempt) {
  std::vector<std::pair<pid_t, uint64_t>> live;
  if (tracked.in_cgroup) {
    std::vector<pid_t> pids;
    CollectCgroupPids(CgroupPath(job, attempt), 0, pids);
    for (pid_t pid : pids) {
      if (const auto info = ReadProcInfo(pid); info && info->alive())
        live.emplace_back(pid, info->start_ticks);
    }
    return live;
  }
  UpdateAllMembers(ScanProcesses());
  live.assign(tracked.members.begin(), tracked.members.end());
  return live;
}

void PosixProcessLauncher::SignalCgroup(const std::string& path, int signal) const {
  std::vector<pid_t> pids;
  CollectCgroupPids(path, 0, pids);
  const std::string own = cgroup_own_path_ + path.substr(cgroup_base_.size());
  for (pid_t pid : pids) {
    if (!Signallable(pid)) continue;
    // Pinned by the pidfd, then still in the cgroup: not a recycled pid.
    UniqueFd pid_fd(OpenPidFd(pid));
    if (!pid_fd.valid() && errno != ENOSYS) continue;
    const auto now_in = CgroupOf(pid);
    if (!now_in || !(*now_in == own || now_in->starts_with(own + "/"))) continue;
    if (pid_fd.valid()) {
      SendSignal(pid_fd.get(), signal);
    } else {
      kill(pid, signal);
    }
  }
}

void PosixProcessLauncher::SignalOnce(Tracked& tracked, JobId job, int attempt, int signal) {
  if (tracked.in_cgroup) {
    SignalCgroup(CgroupPath(job, attempt), signal);
    return;
  }
  const bool shim_runs = ShimRuns(tracked);
  for (const auto& [pid, ticks] : LiveProcesses(tracked, job, attempt))
    SignalVerified(pid, ticks, signal);
  // The shim leads the attempt's process group: what forked while the scan ran is in it too.
  if (shim_runs && Signallable(tracked.shim.pid)) kill(-tracked.shim.pid, signal);
}

void PosixProcessLauncher::Signal(const AttemptRef& ref, int signal) {
  Tracked& tracked = Track(ref);
  if (signal == SIGKILL && tracked.in_cgroup && has_cgroup_kill_) {
    UniqueFd kill_fd(
        open((CgroupPath(ref.job, ref.attempt) + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC));
    if (kill_fd.valid() && write(kill_fd.get(), "1", 1) == 1) return;
  }
  const int passes = signal == SIGKILL ? kSignalPasses : 1;
  for (int pass = 0; pass < passes; ++pass) {
    SignalOnce(tracked, ref.job, ref.attempt, signal);
    if (signal == SIGKILL && LiveProcesses(tracked, ref.job, ref.attempt).empty()) break;
  }
}

PosixProcessLauncher::Found PosixProcessLauncher::FindLaunched(const AttemptRef& ref) {
  Tracked& tracked = Track(ref);
  Found found;
  // The shim is the oldest session leader of the user whose stdout is the attempt's log: both
  // are the kernel's word (the log is in a directory only the user and root can enter).
  const std::string log = Files(ref.job, ref.attempt).stdout_path;
  std::vector<ProcInfo> candidates;
  if (tracked.in_cgroup) {
    std::vector<pid_t> pids;
    CollectCgroupPids(CgroupPath(ref.job, ref.attempt), 0, pids);
    for (pid_t pid : pids) {
      if (auto info = ReadProcInfo(pid)) candidates.push_back(*info);
    }
  } else {
    for (const auto& [pid, info] : ScanProcesses()) candidates.push_back(info);
  }
  std::optional<ProcInfo> shim;
  for (const ProcInfo& info : candidates) {
    if (info.pid != info.sid || !info.alive()) continue;
    if (shim && shim->start_ticks <= info.start_ticks) continue;
    if (ProcessOwner(info.pid) != std::optional<uid_t>(ref.owner.uid)) continue;
    if (DescriptorPath(info.pid, 1) != log) continue;
    shim = info;
  }
  if (shim) {
    found.running = ProcessHandle{shim->pid, shim->start_ticks};
    found.may_have_started = true;
    tracked.shim = *found.running;
    tracked.output_pipes = ShimPipes(shim->pid);
    tracked.own_child = false;
    tracked.wait_status.reset();
    return found;
  }
  found.may_have_started = ExistsInJobDir(ref.job, AttemptFileName(ref.attempt, "out")) ||
                           ExistsInJobDir(ref.job, AttemptFileName(ref.attempt, "exit"));
  return found;
}

std::optional<std::pair<JobId, int>> PosixProcessLauncher::AttemptOf(int pid) {
  if (pid <= 0) return std::nullopt;
  if (uses_cgroups()) {
    const auto path = CgroupOf(pid);
    const std::string prefix = cgroup_own_path_ + "/" + cgroup_prefix_;
    if (path && path->starts_with(prefix)) {
      const std::string_view rest = std::string_view(*path).substr(prefix.size());
      const auto name = rest.substr(0, rest.find('/'));
      const size_t dash = name.find('-');
      if (dash != std::string_view::npos) {
        const auto job = ParseNumber<JobId>(name.substr(0, dash));
        const auto attempt = ParseNumber<int>(name.substr(dash + 1));
        if (job && attempt) return std::pair{*job, *attempt};
      }
    }
  }
  // Without a cgroup: a member seen by the last scan, the shim's session, or below a member.
  auto info = ReadProcInfo(pid);
  for (size_t depth = 0; info && depth < kMaxParentChain; ++depth) {
    for (const auto& [key, tracked] : attempts_) {
      if (tracked.in_cgroup) continue;
      const auto member = tracked.members.find(info->pid);
      if (member != tracked.members.end() && member->second == info->start_ticks) return key;
      const ProcessHandle& shim = tracked.shim;
      // The shim's session only while the shim runs (after that its id may be another's).
      if (shim.pid > 0 && info->sid == shim.pid && info->start_ticks >= shim.start_ticks) {
        const auto leader = ReadProcInfo(shim.pid);
        if (leader && leader->start_ticks == shim.start_ticks) return key;
      }
      if (info->pid == shim.pid && info->start_ticks == shim.start_ticks) return key;
    }
    if (info->ppid <= 1) break;
    info = ReadProcInfo(info->ppid);
  }
  return std::nullopt;
}

void PosixProcessLauncher::Refresh() {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) break;
    for (auto& [key, tracked] : attempts_) {
      if (tracked.own_child && tracked.shim.pid == pid && !tracked.wait_status)
        tracked.wait_status = status;
    }
  }
  std::erase_if(cgroups_to_remove_, [this](const std::string& path) { return RemoveCgroup(path); });
  // Only while an attempt without a cgroup has a shim or processes to follow.
  const bool scan = std::any_of(attempts_.begin(), attempts_.end(), [](const auto& entry) {
    const Tracked& tracked = entry.second;
    return !tracked.in_cgroup &&
           ((tracked.shim.pid > 0 && !tracked.wait_status) || !tracked.members.empty());
  });
  if (scan) UpdateAllMembers(ScanProcesses());
}

bool PosixProcessLauncher::RemoveCgroup(const std::string& path) {
  if (rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
  if (errno != EBUSY) return true;  // nothing more can be done about it
  // Processes still in it: they go, and the next Refresh() removes it.
  if (has_cgroup_kill_) {
    UniqueFd kill_fd(open((path + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC));
    // Should the kill not take, the cgroup is still there at the next Refresh(), which tries again.
    if (kill_fd.valid()) (void)!write(kill_fd.get(), "1", 1);
  } else {
    SignalCgroup(path, SIGKILL);
  }
  return false;
}

}  // namespace colo

// The child's steps between fork and exec. See launch_child.h.
#include "daemon/launch_child.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <algorithm>

namespace colo {

UserSwitch PrepareUserSwitch(const Identity& owner) {
  UserSwitch change;
  if (geteuid() != 0 || owner.uid == 0) return change;
  change.active = true;
  change.uid = owner.uid;
  change.gid = owner.gid;
  change.groups.resize(64);
  int count = static_cast<int>(change.groups.size());
  if (!owner.user.empty() &&
      getgrouplist(owner.user.c_str(), owner.gid, change.groups.data(), &count) < 0) {
    change.groups.resize(static_cast<size_t>(std::max(count, 1)));
    count = static_cast<int>(change.groups.size());
    if (getgrouplist(owner.user.c_str(), owner.gid, change.groups.data(), &count) < 0) count = 0;
  }
  if (owner.user.empty() || count <= 0) {
    change.groups = {owner.gid};
  } else {
    change.groups.resize(static_cast<size_t>(count));
  }
  return change;
}

// Async-signal-safe from here to the end of the child helpers: they run between fork and exec.
[[noreturn]] void ReportAndExit(int report_fd, ChildStep step, int error) {
  const ChildReport report{step, error};
  // Nothing more can be done should this fail: the pipe closes at the exit as at an exec, and the
  // attempt ends as a shim that left no record would (status 127).
  (void)!write(report_fd, &report, sizeof report);
  _exit(127);
}

void ResetSignals() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // colod blocks signals for its signalfd
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  for (int s = 1; s < NSIG; ++s) {
    if (s != SIGKILL && s != SIGSTOP) sigaction(s, &fallback, nullptr);
  }
}

int MoveAboveStandard(int fd) {
  return fd > 2 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

namespace {

void CloseRange(unsigned first, unsigned last) {
  if (first > last) return;
  if (syscall(SYS_close_range, first, last, 0U) == 0) return;
  // Kernels before 5.9: one by one, up to the most this process may have open.
  rlimit limit{};
  const unsigned most = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < (1u << 20)
                            ? static_cast<unsigned>(limit.rlim_cur)
                            : (1u << 20);
  for (unsigned fd = first; fd <= last && fd < most; ++fd) close(static_cast<int>(fd));
}

}  // namespace

void DetachFromColod(const int* keep, int count, int report_fd) {
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) ReportAndExit(report_fd, ChildStep::kOpenDevNull, errno);
  for (int standard = 0; standard <= 2; ++standard) {
    if (null_fd != standard && dup2(null_fd, standard) < 0)
      ReportAndExit(report_fd, ChildStep::kRedirect, errno);
  }
  // The gaps between the kept ones, lowest first (no allocation between fork and exec).
  unsigned first = 3;
  for (;;) {
    int next = -1;
    for (int i = 0; i < count; ++i) {
      if (keep[i] >= static_cast<int>(first) && (next < 0 || keep[i] < next)) next = keep[i];
    }
    if (next < 0) break;
    if (static_cast<unsigned>(next) > first) CloseRange(first, static_cast<unsigned>(next) - 1);
    first = static_cast<unsigned>(next) + 1;
  }
  CloseRange(first, ~0U);
}

int MoveAbove(int fd, int floor, int report_fd) {
  if (fd > floor) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, floor + 1);
  if (moved < 0) ReportAndExit(report_fd, ChildStep::kRedirect, errno);
  return moved;
}

void DropPrivileges(const UserSwitch& change, int report_fd) {
  if (!change.active) return;
  if (setgroups(change.groups.size(), change.groups.data()) != 0)
    ReportAndExit(report_fd, ChildStep::kSetgroups, errno);
  if (setgid(change.gid) != 0) ReportAndExit(report_fd, ChildStep::kSetgid, errno);
  if (setuid(change.uid) != 0) ReportAndExit(report_fd, ChildStep::kSetuid, errno);
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (getresuid(&ruid, &euid, &suid) != 0 || getresgid(&rgid, &egid, &sgid) != 0 ||
      ruid != change.uid || euid != change.uid || suid != change.uid || rgid != change.gid ||
      egid != change.gid || sgid != change.gid) {
    ReportAndExit(report_fd, ChildStep::kUserDidNotTake, EPERM);
  }
}

void ApplyLimits(const std::vector<LimitToApply>& limits, int report_fd) {
  for (const LimitToApply& wanted : limits) {
    rlimit now{};
    if (getrlimit(wanted.resource, &now) != 0) ReportAndExit(report_fd, ChildStep::kLimit, errno);
    rlimit next{};
    next.rlim_max = std::min(wanted.hard, now.rlim_max);
    next.rlim_cur = std::min(wanted.soft, next.rlim_max);
    if (setrlimit(wanted.resource, &next) != 0) ReportAndExit(report_fd, ChildStep::kLimit, errno);
  }
}

void BecomeUserForChecks(const UserSwitch& change, int report_fd) {
  if (!change.active) return;
  if (setgroups(change.groups.size(), change.groups.data()) != 0)
    ReportAndExit(report_fd, ChildStep::kSetgroups, errno);
  if (setresgid(static_cast<gid_t>(-1), change.gid, static_cast<gid_t>(-1)) != 0)
    ReportAndExit(report_fd, ChildStep::kSetgid, errno);
  if (setresuid(static_cast<uid_t>(-1), change.uid, static_cast<uid_t>(-1)) != 0)
    ReportAndExit(report_fd, ChildStep::kSetuid, errno);
  if (geteuid() != change.uid || getegid() != change.gid)
    ReportAndExit(report_fd, ChildStep::kUserDidNotTake, EPERM);
}

int OpenLog(int dir_fd, const char* name, int report_fd, ChildStep open_step, ChildStep type_step) {
  const int fd =
      openat(dir_fd, name,
             O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0) ReportAndExit(report_fd, open_step, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) ReportAndExit(report_fd, type_step, EINVAL);
  fcntl(fd, F_SETFL, O_APPEND);  // O_NONBLOCK was for the open only
  // Above 2, so that putting one in place never overwrites another.
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (high < 0) ReportAndExit(report_fd, ChildStep::kRedirect, errno);
  return high;
}
// End of the async-signal-safe child helpers.

}  // namespace colo

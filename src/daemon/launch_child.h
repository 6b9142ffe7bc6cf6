// The steps of colod's child between fork and exec, for a job's start and for a check made as the
// job's user. Everything the child needs is prepared before the fork (colod has other threads),
// and what runs after it is async-signal-safe: no allocation, no locks. A step that fails is
// reported to colod through a pipe as {step, errno}, and the child exits. Internal to the
// PosixProcessLauncher.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "daemon/process_launcher.h"

namespace colo {

// Reads one fixed-size report from a child; false if it closed the pipe without one.
template <typename T>
bool ReadReport(int fd, T* report) {
  ssize_t got;
  do {
    got = read(fd, report, sizeof *report);
  } while (got < 0 && errno == EINTR);
  return got == static_cast<ssize_t>(sizeof *report);
}

// The user switch a child makes, prepared before fork (getgrouplist is not async-signal-safe).
struct UserSwitch {
  bool active = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

UserSwitch PrepareUserSwitch(const Identity& owner);

// The steps of a child before exec; a failed one is reported as {step, errno}.
enum class ChildStep : int {
  kJoinCgroup,
  kSetsid,
  kSetgroups,
  kSetgid,
  kSetuid,
  kUserDidNotTake,
  kOpenDevNull,
  kOpenStdout,
  kStdoutNotRegular,
  kOpenStderr,
  kStderrNotRegular,
  kRedirect,
  kChdir,
  kExec,
  kStat,
  kNotDirectory,
  kAccess,
  kLimit,
  kDone,
};
struct ChildReport {
  ChildStep step;
  int error;
};

// Async-signal-safe, every one of these: they run between fork and exec.
[[noreturn]] void ReportAndExit(int report_fd, ChildStep step, int error);
void ResetSignals();
// A descriptor the child keeps, moved above the standard three if it is one of them (colod may
// have been started with one of them closed), so that /dev/null put there never replaces it.
int MoveAboveStandard(int fd);
// Cuts the child off from colod: /dev/null for stdin, stdout and stderr, and every other
// descriptor closed (not only marked close-on-exec) but the `count` in `keep`, which must be above
// 2. Done while the child is still root's, before the user may signal it: a child the user stops
// from then on holds nothing of colod's (its socket, its database, its log).
void DetachFromColod(const int* keep, int count, int report_fd);
// Moves `fd` above `floor` (keeping it close-on-exec), out of the way of descriptors about to
// be put below it.
int MoveAbove(int fd, int floor, int report_fd);
// Becomes the user for good, or reports which step failed.
void DropPrivileges(const UserSwitch& change, int report_fd);

// A resource limit of the submitter's, as the child applies it.
struct LimitToApply {
  int resource;
  rlim_t soft, hard;
};

// The submitter's limits, as the user (who can lower a hard limit, never raise one): never above
// what the child has now, which is colod's own.
void ApplyLimits(const std::vector<LimitToApply>& limits, int report_fd);
// For a check made as the user: only the effective ids (and so the filesystem ids) become the
// user's, while the real and saved ones stay root's, so the user cannot signal (stop) the child
// and hold colod up while it waits for the answer.
void BecomeUserForChecks(const UserSwitch& change, int report_fd);
// Opens an attempt's log as the user: never through a link, never waiting on a FIFO.
int OpenLog(int dir_fd, const char* name, int report_fd, ChildStep open_step, ChildStep type_step);

}  // namespace colo

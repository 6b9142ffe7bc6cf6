// PosixProcessLauncher: job attempts as colo-shim processes, tracked by cgroup v2 or by session
// and descendant scans. See posix_launcher.h for the layout and the trust model.
//
// One concern, kept whole on purpose: how root starts, finds and stops a user's processes. The
// child's steps between fork and exec (async-signal-safe), the cgroup and /proc reads that say
// which processes are an attempt's, and the checks of paths the user controls share one set of
// rules about what may be trusted and when, and reading them apart is how such rules drift.
#include "daemon/posix_launcher.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <linux/close_range.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <set>
#include <thread>

#include "common/resource_limits.h"
#include "common/text.h"

namespace colo {
namespace {

// A hung filesystem under a workdir must not stall colod.
constexpr std::chrono::seconds kWorkdirCheckTimeout{2};
// From fork to the shim's exec: the child opens the logs and enters the workdir as the user.
constexpr std::chrono::seconds kStartTimeout{10};
constexpr size_t kMaxStatBytes = 2048;
constexpr size_t kMaxProcCgroupBytes = 8192;
constexpr size_t kMaxCgroupProcsBytes = 8 << 20;
constexpr size_t kMaxExitRecordBytes = 64;
constexpr size_t kMaxCgroupDepth = 8;  // nested cgroups a job could make below its own
constexpr int kSignalPasses = 3;       // SIGKILL again for processes forked while it was sent
constexpr size_t kMaxParentChain = 64;
// The name (comm) of colod's child from fork to the shim's exec.
constexpr char kStartName[] = "colo-start";

std::string ErrorText(int error) {
  return strerrordesc_np(error) != nullptr ? strerrordesc_np(error)
                                           : fmt::format("errno {}", error);
}

// At most `max_bytes` from `fd`, from the current offset.
std::string ReadBounded(int fd, size_t max_bytes) {
  std::string out;
  char buffer[4096];
  while (out.size() < max_bytes) {
    const ssize_t n = read(fd, buffer, std::min(sizeof buffer, max_bytes - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// A small kernel-made file (/proc, cgroupfs); nullopt if it cannot be opened.
std::optional<std::string> ReadKernelFile(const std::string& path, size_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return std::nullopt;
  return ReadBounded(fd.get(), max_bytes);
}

template <typename T>
std::optional<T> ParseNumber(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::vector<std::string_view> SplitFields(std::string_view text, char separator) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(separator, start), text.size());
    fields.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return fields;
}

// Waits for `fd` to become readable (or hang up) for at most `timeout`; false on timeout.
bool WaitReadable(int fd, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // let the read say what is wrong
  }
}

// Reads one fixed-size report from a child; false if it closed the pipe without one.
template <typename T>
bool ReadReport(int fd, T* report) {
  ssize_t got;
  do {
    got = read(fd, report, sizeof *report);
  } while (got < 0 && errno == EINTR);
  return got == static_cast<ssize_t>(sizeof *report);
}

int OpenPidFd(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}
int SendSignal(int pid_fd, int signal) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pid_fd, signal, nullptr, 0));
}

bool Signallable(pid_t pid) {
  return pid > 1 && pid != getpid();
}

// The user switch a child makes, prepared before fork (getgrouplist is not async-signal-safe).
struct UserSwitch {
  bool active = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

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

// The steps of a child before exec; a failed one is reported as {step, errno}.
enum class Step : int {
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
  Step step;
  int error;
};

// Async-signal-safe from here to the end of the child helpers: they run between fork and exec.
[[noreturn]] void ReportAndExit(int report_fd, Step step, int error) {
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

// A descriptor the child keeps, moved above the standard three if it is one of them (colod may
// have been started with one of them closed), so that /dev/null put there never replaces it.
int AboveStandard(int fd) {
  return fd > 2 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

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

// Cuts the child off from colod: /dev/null for stdin, stdout and stderr, and every other
// descriptor closed (not only marked close-on-exec) but the `count` in `keep`, which must be above
// 2. Done while the child is still root's, before the user may signal it: a child the user stops
// from then on holds nothing of colod's (its socket, its database, its log).
void DetachFromColod(const int* keep, int count, int report_fd) {
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) ReportAndExit(report_fd, Step::kOpenDevNull, errno);
  for (int standard = 0; standard <= 2; ++standard) {
    if (null_fd != standard && dup2(null_fd, standard) < 0)
      ReportAndExit(report_fd, Step::kRedirect, errno);
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

// Moves `fd` above `floor` (keeping it close-on-exec), out of the way of descriptors about to
// be put below it.
int Above(int fd, int floor, int report_fd) {
  if (fd > floor) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, floor + 1);
  if (moved < 0) ReportAndExit(report_fd, Step::kRedirect, errno);
  return moved;
}

// Becomes the user for good, or reports which step failed.
void DropPrivileges(const UserSwitch& change, int report_fd) {
  if (!change.active) return;
  if (setgroups(change.groups.size(), change.groups.data()) != 0)
    ReportAndExit(report_fd, Step::kSetgroups, errno);
  if (setgid(change.gid) != 0) ReportAndExit(report_fd, Step::kSetgid, errno);
  if (setuid(change.uid) != 0) ReportAndExit(report_fd, Step::kSetuid, errno);
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (getresuid(&ruid, &euid, &suid) != 0 || getresgid(&rgid, &egid, &sgid) != 0 ||
      ruid != change.uid || euid != change.uid || suid != change.uid || rgid != change.gid ||
      egid != change.gid || sgid != change.gid) {
    ReportAndExit(report_fd, Step::kUserDidNotTake, EPERM);
  }
}

// A resource limit of the submitter's, as the child applies it.
struct LimitToApply {
  int resource;
  rlim_t soft, hard;
};

// The submitter's limits, as the user (who can lower a hard limit, never raise one): never above
// what the child has now, which is colod's own.
void ApplyLimits(const std::vector<LimitToApply>& limits, int report_fd) {
  for (const LimitToApply& wanted : limits) {
    rlimit now{};
    if (getrlimit(wanted.resource, &now) != 0) ReportAndExit(report_fd, Step::kLimit, errno);
    rlimit next{};
    next.rlim_max = std::min(wanted.hard, now.rlim_max);
    next.rlim_cur = std::min(wanted.soft, next.rlim_max);
    if (setrlimit(wanted.resource, &next) != 0) ReportAndExit(report_fd, Step::kLimit, errno);
  }
}

// For a check made as the user: only the effective ids (and so the filesystem ids) become the
// user's, while the real and saved ones stay root's, so the user cannot signal (stop) the child
// and hold colod up while it waits for the answer.
void BecomeUserForChecks(const UserSwitch& change, int report_fd) {
  if (!change.active) return;
  if (setgroups(change.groups.size(), change.groups.data()) != 0)
    ReportAndExit(report_fd, Step::kSetgroups, errno);
  if (setresgid(static_cast<gid_t>(-1), change.gid, static_cast<gid_t>(-1)) != 0)
    ReportAndExit(report_fd, Step::kSetgid, errno);
  if (setresuid(static_cast<uid_t>(-1), change.uid, static_cast<uid_t>(-1)) != 0)
    ReportAndExit(report_fd, Step::kSetuid, errno);
  if (geteuid() != change.uid || getegid() != change.gid)
    ReportAndExit(report_fd, Step::kUserDidNotTake, EPERM);
}

// Opens an attempt's log as the user: never through a link, never waiting on a FIFO.
int OpenLog(int dir_fd, const char* name, int report_fd, Step open_step, Step type_step) {
  const int fd =
      openat(dir_fd, name,
             O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0) ReportAndExit(report_fd, open_step, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) ReportAndExit(report_fd, type_step, EINVAL);
  fcntl(fd, F_SETFL, O_APPEND);  // O_NONBLOCK was for the open only
  // Above 2, so that putting one in place never overwrites another.
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (high < 0) ReportAndExit(report_fd, Step::kRedirect, errno);
  return high;
}
// End of the async-signal-safe child helpers.

}  // namespace

// One process as /proc/PID/stat shows it.
struct PosixProcessLauncher::ProcInfo {
  pid_t pid = 0, ppid = 0, pgid = 0, sid = 0;
  char state = '?';
  uint64_t start_ticks = 0;
  bool alive() const { return state != 'Z' && state != 'X'; }
};

namespace {

using ProcInfo = PosixProcessLauncher::ProcInfo;

std::optional<ProcInfo> ReadProcInfo(pid_t pid) {
  const auto text = ReadKernelFile(fmt::format("/proc/{}/stat", pid), kMaxStatBytes);
  if (!text) return std::nullopt;
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const size_t close_paren = text->rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= text->size()) return std::nullopt;
  const auto fields = SplitFields(std::string_view(*text).substr(close_paren + 2), ' ');
  // state ppid pgrp session ... starttime is the 20th after the name (field 22 of stat).
  if (fields.size() < 20 || fields[0].size() != 1) return std::nullopt;
  const auto ppid = ParseNumber<pid_t>(fields[1]), pgid = ParseNumber<pid_t>(fields[2]),
             sid = ParseNumber<pid_t>(fields[3]);
  const auto ticks = ParseNumber<uint64_t>(fields[19]);
  if (!ppid || !pgid || !sid || !ticks) return std::nullopt;
  ProcInfo info;
  info.pid = pid;
  info.ppid = *ppid;
  info.pgid = *pgid;
  info.sid = *sid;
  info.state = fields[0][0];
  info.start_ticks = *ticks;
  return info;
}

bool IsAlive(pid_t pid, uint64_t start_ticks) {
  const auto info = ReadProcInfo(pid);
  return info && info->start_ticks == start_ticks && info->alive();
}

// Sends `signal` to `pid` only if it is still the process that started at `start_ticks`: the
// pidfd pins the process, the check after it tells a recycled pid apart.
void SignalVerified(pid_t pid, uint64_t start_ticks, int signal) {
  if (!Signallable(pid)) return;
  UniqueFd pid_fd(OpenPidFd(pid));
  if (!pid_fd.valid() && errno != ENOSYS) return;  // gone
  if (!IsAlive(pid, start_ticks)) return;
  if (pid_fd.valid()) {
    SendSignal(pid_fd.get(), signal);
  } else {
    kill(pid, signal);
  }
}

// One pass over /proc: every process, by pid.
std::map<pid_t, ProcInfo> ScanProcesses() {
  std::map<pid_t, ProcInfo> table;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return table;
  while (const dirent* entry = readdir(proc)) {
    const auto pid = ParseNumber<pid_t>(entry->d_name);
    if (!pid || *pid <= 0) continue;
    if (auto info = ReadProcInfo(*pid)) table.emplace(*pid, *info);
  }
  closedir(proc);
  return table;
}

// The target of a /proc magic link as the kernel names it (no access to the process's memory).
std::string ReadLink(const std::string& path) {
  char target[PATH_MAX];
  const ssize_t n = readlink(path.c_str(), target, sizeof target);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof target) return "";
  return std::string(target, static_cast<size_t>(n));
}

// The file a process's descriptor `fd` points to, as a path; a deleted file counts as itself.
std::string DescriptorPath(pid_t pid, int fd) {
  std::string path = ReadLink(fmt::format("/proc/{}/fd/{}", pid, fd));
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.size() > kDeleted.size() && path.ends_with(kDeleted))
    path.resize(path.size() - kDeleted.size());
  return path;
}

// How /proc names the pipe `fd` is an end of ("pipe:[INODE]").
std::string PipeName(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? fmt::format("pipe:[{}]", st.st_ino) : "";
}

// The job's output pipes a running shim reads (its descriptors 3 and 4).
std::vector<std::string> ShimPipes(pid_t shim) {
  std::vector<std::string> pipes;
  for (int fd : {3, 4}) {
    std::string name = DescriptorPath(shim, fd);
    if (name.starts_with("pipe:")) pipes.push_back(std::move(name));
  }
  return pipes;
}

// Who owns a process: /proc/PID belongs to its effective uid (to root if it is not dumpable, and
// a shim always is).
std::optional<uid_t> ProcessOwner(pid_t pid) {
  struct stat st {};
  if (stat(fmt::format("/proc/{}", pid).c_str(), &st) != 0) return std::nullopt;
  return st.st_uid;
}

// The program a process runs, without the " (deleted)" of a binary replaced since it started.
std::string ExecutableOf(pid_t pid) {
  std::string path = ReadLink(fmt::format("/proc/{}/exe", pid));
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
  return path;
}

// Ends every start (a child of colod that has not run the shim yet) whose colod is gone and which
// is stopped: its user stopped it, and resumed once a new colod had started the attempt again, it
// would run the job a second time. One that runs goes on to run the shim within moments, and is
// taken back like any attempt. It is recognised by its name and program (colod's), its parent
// not being a colod. The ones ended, by pid and start ticks.
std::set<std::pair<pid_t, uint64_t>> EndOrphanedStarts() {
  std::set<std::pair<pid_t, uint64_t>> ended;
  const std::string self = ExecutableOf(getpid());
  if (self.empty()) return ended;
  for (const auto& [pid, info] : ScanProcesses()) {
    if (pid == getpid() || (info.state != 'T' && info.state != 't')) continue;
    const auto comm = ReadKernelFile(fmt::format("/proc/{}/comm", pid), 64);
    if (!comm || *comm != std::string(kStartName) + "\n") continue;
    if (ExecutableOf(pid) != self || ExecutableOf(info.ppid) == self) continue;
    // Pinned, then looked at again: not a recycled pid.
    UniqueFd pid_fd(OpenPidFd(pid));
    const auto now = ReadProcInfo(pid);
    if (!pid_fd.valid() || !now || now->start_ticks != info.start_ticks) continue;
    if (SendSignal(pid_fd.get(), SIGKILL) == 0) ended.emplace(pid, info.start_ticks);
  }
  return ended;
}

// "\040" in mountinfo is a space, and so on.
std::string UnescapeMountField(std::string_view field) {
  const auto octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && octal(field[i + 1]) && octal(field[i + 2]) &&
        octal(field[i + 3])) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

// Where colod's own cgroup v2 is in the filesystem, or why there is none.
Result<std::pair<std::string, std::string>> FindOwnCgroup() {
  const auto mountinfo = ReadKernelFile("/proc/self/mountinfo", 1 << 20);
  if (!mountinfo) return Unavailable("cannot read /proc/self/mountinfo");
  std::optional<std::pair<std::string, std::string>> mount;  // mount point, root within cgroupfs
  for (std::string_view line : SplitFields(*mountinfo, '\n')) {
    const size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const auto after = SplitFields(line.substr(dash + 3), ' ');
    const auto before = SplitFields(line.substr(0, dash), ' ');
    if (after.empty() || after[0] != "cgroup2" || before.size() < 5) continue;
    mount = {UnescapeMountField(before[4]), UnescapeMountField(before[3])};
    break;
  }
  if (!mount) return Unavailable("no cgroup v2 hierarchy is mounted");
  const auto own = ReadKernelFile("/proc/self/cgroup", 1 << 16);
  if (!own) return Unavailable("cannot read /proc/self/cgroup");
  std::optional<std::string> own_path;
  for (std::string_view line : SplitFields(*own, '\n')) {
    if (line.starts_with("0::")) own_path = std::string(line.substr(3));
  }
  if (!own_path || own_path->empty() || (*own_path)[0] != '/')
    return Unavailable("colod is in no cgroup v2");
  const std::string& root = mount->second;
  std::string relative;
  if (root == "/") {
    relative = *own_path;
  } else if (own_path->starts_with(root + "/") || *own_path == root) {
    relative = own_path->substr(root.size());
  } else {
    return Unavailable(fmt::format("colod's cgroup {} is outside the cgroup v2 mount at {}",
                                   *own_path, mount->first));
  }
  if (relative == "/") relative.clear();
  return std::pair{mount->first + relative, *own_path == "/" ? std::string() : *own_path};
}

// Makes a cgroup below `base`, moves a child into it and removes it again: what every attempt
// will need. Ok with whether cgroup.kill exists.
Result<bool> ProbeCgroups(const std::string& base) {
  const std::string probe = fmt::format("{}/colo-probe-{}", base, getpid());
  const auto make = [&] { return mkdir(probe.c_str(), 0755) == 0; };
  // One left by an earlier colod with this pid goes first.
  if (!make() && !(errno == EEXIST && rmdir(probe.c_str()) == 0 && make()))
    return Unavailable(fmt::format("cannot create a cgroup in {}: {}", base, ErrorText(errno)));
  const bool has_kill = access((probe + "/cgroup.kill").c_str(), W_OK) == 0;
  UniqueFd procs(open((probe + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  int join_error = procs.valid() ? 0 : errno;
  if (procs.valid()) {
    const pid_t pid = fork();
    if (pid == 0) _exit(write(procs.get(), "0", 1) == 1 ? 0 : (errno & 0x7f));
    int status = 0;
    if (pid < 0) {
      join_error = errno;
    } else {
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      join_error = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
    }
  }
  // The child's cgroup empties as it is reaped; removal may lag behind a moment.
  for (int tries = 0; tries < 100 && rmdir(probe.c_str()) != 0 && errno == EBUSY; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (join_error != 0) {
    return Unavailable(
        fmt::format("cannot move a process into a cgroup in {}: {}", base, ErrorText(join_error)));
  }
  return has_kill;
}

// Pids in a cgroup and (to a bounded depth) the cgroups below it.
void CollectCgroupPids(const std::string& path, size_t depth, std::vector<pid_t>& out) {
  if (const auto procs = ReadKernelFile(path + "/cgroup.procs", kMaxCgroupProcsBytes)) {
    for (std::string_view line : SplitFields(*procs, '\n')) {
      if (const auto pid = ParseNumber<pid_t>(line)) out.push_back(*pid);
    }
  }
  if (depth >= kMaxCgroupDepth) return;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> children;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_type == DT_DIR && entry->d_name[0] != '.') children.push_back(entry->d_name);
  }
  closedir(dir);
  for (const auto& child : children) CollectCgroupPids(path + "/" + child, depth + 1, out);
}

// Whether any live process is in the cgroup or below it; false when it does not exist.
bool CgroupPopulated(const std::string& path) {
  const auto events = ReadKernelFile(path + "/cgroup.events", 4096);
  if (!events) return false;
  for (std::string_view line : SplitFields(*events, '\n')) {
    if (line.starts_with("populated ")) return line != "populated 0";
  }
  return true;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The cgroup v2 path of a process ("0::PATH" in /proc/PID/cgroup).
std::optional<std::string> CgroupOf(pid_t pid) {
  const auto text = ReadKernelFile(fmt::format("/proc/{}/cgroup", pid), kMaxProcCgroupBytes);
  if (!text) return std::nullopt;
  for (std::string_view line : SplitFields(*text, '\n')) {
    if (line.starts_with("0::")) return std::string(line.substr(3));
  }
  return std::nullopt;
}

// The start of every attempt cgroup's name of the colod whose jobs live in `jobs_dir`: colods on
// other state directories may share the parent cgroup (two started from one shell), and neither
// may take, fail on or kill the other's "job 1, attempt 1". A restart on the same state directory
// finds the same names again.
std::string CgroupPrefix(std::string_view jobs_dir) {
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a
  for (const char c : jobs_dir) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return fmt::format("colo-{:016x}-job-", hash);
}

std::string AttemptFileName(int attempt, std::string_view suffix) {
  return fmt::format("attempt-{}.{}", attempt, suffix);
}

// Whether `path` is one a workdir may be: absolute, no NUL, components and the whole bounded.
Status CheckWorkdirSyntax(const std::string& path) {
  if (path.empty() || path[0] != '/')
    return InvalidArgument(fmt::format("workdir '{}' is not an absolute path", Printable(path)));
  if (path.find('\0') != std::string::npos) return InvalidArgument("workdir contains a NUL byte");
  if (path.size() >= PATH_MAX) {
    return InvalidArgument(
        fmt::format("workdir is {} bytes long (at most {})", path.size(), PATH_MAX - 1));
  }
  for (std::string_view component : SplitFields(path, '/')) {
    if (component.size() > NAME_MAX) {
      return InvalidArgument(
          fmt::format("workdir has a component of {} bytes (at most {}): '{}...'", component.size(),
                      NAME_MAX, Printable(TruncateUtf8(component, 40))));
    }
  }
  return Status::Ok();
}

int OpenBeneath(int dir_fd, const std::string& path, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  const int fd = static_cast<int>(syscall(SYS_openat2, dir_fd, path.c_str(), &how, sizeof how));
  if (fd >= 0 || errno != ENOSYS) return fd;
  // Kernels before 5.6: no symlink anywhere (the first component is colod's own directory).
  const size_t slash = path.find('/');
  if (slash == std::string::npos) {
    return openat(dir_fd, path.c_str(), static_cast<int>(flags) | O_NOFOLLOW | O_CLOEXEC);
  }
  UniqueFd parent(
      openat(dir_fd, path.substr(0, slash).c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!parent.valid()) return -1;
  return openat(parent.get(), path.substr(slash + 1).c_str(),
                static_cast<int>(flags) | O_NOFOLLOW | O_CLOEXEC);
}

}  // namespace

PosixProcessLauncher::PosixProcessLauncher(Options options, int jobs_dir_fd)
    : options_(std::move(options)), jobs_dir_fd_(jobs_dir_fd) {}

PosixProcessLauncher::~PosixProcessLauncher() {
  // One last try; a cgroup still busy stays (a later colod removes it on Release).
  for (const std::string& path : cgroups_to_remove_) RemoveCgroup(path);
  if (jobs_dir_fd_ >= 0) close(jobs_dir_fd_);
}

Result<std::unique_ptr<PosixProcessLauncher>> PosixProcessLauncher::Create(const Options& options) {
  if (options.shim.empty() || options.shim[0] != '/')
    return InvalidArgument(fmt::format("colo-shim path '{}' is not absolute", options.shim));
  if (access(options.shim.c_str(), X_OK) != 0) {
    return FailedPrecondition(
        fmt::format("colo-shim {} cannot be run: {}", options.shim, ErrorText(errno)));
  }
  if (options.leftover_grace < Duration(0) || options.leftover_grace > Seconds(3600))
    return InvalidArgument("leftover_grace must be between 0 and 3600 s");
  UniqueFd dir(open(options.jobs_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) {
    return FailedPrecondition(
        fmt::format("jobs directory {}: {}", options.jobs_dir, ErrorText(errno)));
  }
  struct stat st {};
  if (fstat(dir.get(), &st) != 0) return Internal(fmt::format("fstat: {}", ErrorText(errno)));
  // Nobody else may rename or replace a job's directory.
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return FailedPrecondition(fmt::format(
        "jobs directory {} must belong to uid {} and be writable by it alone (mode 0711)",
        options.jobs_dir, geteuid()));
  }
  // Every user reaches their own job's directory through it (the shim writes the exit record).
  if (geteuid() == 0 && (st.st_mode & S_IXOTH) == 0) {
    return FailedPrecondition(fmt::format(
        "jobs directory {} must be searchable by every user (mode 0711)", options.jobs_dir));
  }
  std::string canonical = ReadLink(fmt::format("/proc/self/fd/{}", dir.get()));
  if (canonical.empty()) canonical = options.jobs_dir;

  std::unique_ptr<PosixProcessLauncher> launcher(new PosixProcessLauncher(options, dir.release()));
  launcher->options_.jobs_dir = canonical;
  launcher->ended_starts_ = EndOrphanedStarts();
  launcher->cgroup_prefix_ = CgroupPrefix(canonical);
  constexpr std::string_view kWithout =
      "each attempt is its session plus every process seen below it";
  if (options.cgroups == Cgroups::kOff) {
    launcher->tracking_ = fmt::format("no cgroups (turned off): {}", kWithout);
    return launcher;
  }
  auto own = FindOwnCgroup();
  if (!own.ok()) {
    launcher->tracking_ = fmt::format("no cgroups ({}): {}", own.status().message(), kWithout);
    return launcher;
  }
  auto has_kill = ProbeCgroups(own->first);
  if (!has_kill.ok()) {
    launcher->tracking_ = fmt::format("no cgroups ({}): {}", has_kill.status().message(), kWithout);
    return launcher;
  }
  launcher->cgroup_base_ = own->first;
  launcher->cgroup_own_path_ = own->second;
  launcher->has_cgroup_kill_ = *has_kill;
  launcher->tracking_ = fmt::format("cgroup v2: each attempt in {}/{}<job>-<attempt>{}", own->first,
                                    launcher->cgroup_prefix_,
                                    *has_kill ? "" : " (no cgroup.kill: SIGKILL per process)");
  return launcher;
}

std::string PosixProcessLauncher::CgroupPath(JobId job, int attempt) const {
  if (cgroup_base_.empty()) return "";
  return fmt::format("{}/{}{}-{}", cgroup_base_, cgroup_prefix_, job, attempt);
}

AttemptFiles PosixProcessLauncher::Files(JobId job, int attempt) const {
  return {fmt::format("{}/{}/{}", options_.jobs_dir, job, AttemptFileName(attempt, "out")),
          fmt::format("{}/{}/{}", options_.jobs_dir, job, AttemptFileName(attempt, "err"))};
}

Status PosixProcessLauncher::CheckWorkdir(const Identity& owner, const std::string& workdir) {
  COLO_RETURN_IF_ERROR(CheckWorkdirSyntax(workdir));
  if (geteuid() != 0 && owner.uid != geteuid()) {
    return FailedPrecondition(
        fmt::format("colod runs as uid {} and cannot act as uid {}", geteuid(), owner.uid));
  }
  if (owner.uid == geteuid() && owner.gid == getegid()) {
    // colod's own user (root's own jobs, a personal colod's owner): nothing to switch to, so no
    // child either; only that user can point colod at a hung filesystem.
    struct stat st {};
    if (stat(workdir.c_str(), &st) != 0)
      return FailedPrecondition(fmt::format("workdir {}: {}", workdir, ErrorText(errno)));
    if (!S_ISDIR(st.st_mode))
      return FailedPrecondition(fmt::format("workdir {}: {}", workdir, ErrorText(ENOTDIR)));
    if (access(workdir.c_str(), X_OK) != 0)
      return FailedPrecondition(fmt::format("workdir {}: {}", workdir, ErrorText(errno)));
    return Status::Ok();
  }
  // Another user's: in a child that has become that user, so the kernel answers for them, and
  // a stat on a hung network filesystem stalls the child, never colod.
  const UserSwitch change = PrepareUserSwitch(owner);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(fmt::format("pipe: {}", ErrorText(errno)));
  UniqueFd report_read(pipe_fds[0]), report_write(pipe_fds[1]);
  const char* path = workdir.c_str();
  const pid_t pid = fork();
  if (pid < 0) return Unavailable(fmt::format("fork: {}", ErrorText(errno)));
  if (pid == 0) {
    const int report = AboveStandard(report_write.get());
    ResetSignals();
    DetachFromColod(&report, 1, report);
    BecomeUserForChecks(change, report);
    struct stat st {};
    if (stat(path, &st) != 0) ReportAndExit(report, Step::kStat, errno);
    if (!S_ISDIR(st.st_mode)) ReportAndExit(report, Step::kNotDirectory, ENOTDIR);
    // With the effective ids, which are the user's (access() would ask for the real ones).
    if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) != 0)
      ReportAndExit(report, Step::kAccess, errno);
    ReportAndExit(report, Step::kDone, 0);
  }
  report_write.reset();
  ChildReport report{Step::kDone, 0};
  const bool answered = WaitReadable(report_read.get(), kWorkdirCheckTimeout);
  const bool got = answered && ReadReport(report_read.get(), &report);
  if (!answered) {
    // Stuck in the filesystem: it dies when the call returns; Refresh() reaps it then.
    kill(pid, SIGKILL);
    return Unavailable(fmt::format("workdir {}: no answer within {} s (a hung filesystem?)",
                                   workdir, kWorkdirCheckTimeout.count()));
  }
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (!got) return Internal(fmt::format("workdir {}: the check ended without an answer", workdir));
  switch (report.step) {
    case Step::kDone:
      return Status::Ok();
    case Step::kStat:
    case Step::kNotDirectory:
    case Step::kAccess:
      return FailedPrecondition(fmt::format("workdir {}: {}", workdir, ErrorText(report.error)));
    default:
      return Internal(fmt::format("workdir {}: cannot act as uid {}: {}", workdir, owner.uid,
                                  ErrorText(report.error)));
  }
}

Result<int> PosixProcessLauncher::OpenJobDirForStart(JobId job, const Identity& owner) {
  const std::string name = std::to_string(job);
  if (mkdirat(jobs_dir_fd_, name.c_str(), 0700) != 0 && errno != EEXIST) {
    return Unavailable(
        fmt::format("cannot create {}/{}: {}", options_.jobs_dir, name, ErrorText(errno)));
  }
  // Only the directory itself, on colod's filesystem: never a link, never a mount the user made.
  UniqueFd dir(OpenBeneath(jobs_dir_fd_, name, O_RDONLY | O_DIRECTORY));
  if (!dir.valid()) {
    return FailedPrecondition(fmt::format("job directory {}/{} is not a plain directory: {}",
                                          options_.jobs_dir, name, ErrorText(errno)));
  }
  struct stat st {};
  if (fstat(dir.get(), &st) != 0)
    return Internal(fmt::format("fstat {}/{}: {}", options_.jobs_dir, name, ErrorText(errno)));
  if (geteuid() == 0 && st.st_uid != owner.uid && st.st_uid != 0) {
    // Left by another user's job of the same id (a state database started afresh): its files are
    // that user's. It is set aside, never handed to the new owner.
    const std::string aside = fmt::format("{}.left-by-uid{}-{}", name, st.st_uid, st.st_ino);
    dir.reset();
    if (renameat(jobs_dir_fd_, name.c_str(), jobs_dir_fd_, aside.c_str()) != 0)
      return Unavailable(
          fmt::format("job directory {}/{} belongs to uid {} and cannot be set "
                      "aside: {}",
                      options_.jobs_dir, name, st.st_uid, ErrorText(errno)));
    return OpenJobDirForStart(job, owner);
  }
  if (geteuid() == 0 && fchown(dir.get(), owner.uid, owner.gid) != 0)
    return Internal(fmt::format("fchown {}/{}: {}", options_.jobs_dir, name, ErrorText(errno)));
  if (fchmod(dir.get(), 0700) != 0)
    return Internal(fmt::format("fchmod {}/{}: {}", options_.jobs_dir, name, ErrorText(errno)));
  return dir.release();
}

std::string PosixProcessLauncher::StartFailure(JobId job, int attempt, const Tracked& tracked,
                                               int step, int error_number) const {
  const ChildReport report{static_cast<Step>(step), error_number};
  const std::string dir_path = fmt::format("{}/{}", options_.jobs_dir, job);
  const std::string out_name = AttemptFileName(attempt, "out");
  const std::string err_name = AttemptFileName(attempt, "err");
  const std::string error = ErrorText(report.error);
  switch (report.step) {
    case Step::kJoinCgroup:
      return fmt::format("joining cgroup {} failed: {}", CgroupPath(job, attempt), error);
    case Step::kSetsid:
      return fmt::format("setsid failed: {}", error);
    case Step::kSetgroups:
      return fmt::format("setgroups for {} failed: {}", tracked.owner.user, error);
    case Step::kSetgid:
      return fmt::format("setgid {} failed: {}", tracked.owner.gid, error);
    case Step::kSetuid:
      return fmt::format("setuid {} failed: {}", tracked.owner.uid, error);
    case Step::kUserDidNotTake:
      return fmt::format("switching to uid {} did not take", tracked.owner.uid);
    case Step::kOpenDevNull:
      return fmt::format("open /dev/null failed: {}", error);
    case Step::kOpenStdout:
      return fmt::format("open {}/{} failed: {}", dir_path, out_name, error);
    case Step::kOpenStderr:
      return fmt::format("open {}/{} failed: {}", dir_path, err_name, error);
    case Step::kStdoutNotRegular:
      return fmt::format("{}/{} is not a regular file", dir_path, out_name);
    case Step::kStderrNotRegular:
      return fmt::format("{}/{} is not a regular file", dir_path, err_name);
    case Step::kRedirect:
      return fmt::format("redirecting stdin, stdout and stderr failed: {}", error);
    case Step::kChdir:
      return fmt::format("chdir {} failed: {}", tracked.workdir, error);
    case Step::kLimit:
      return fmt::format("setting the submitter's resource limits failed: {}", error);
    case Step::kExec:
      return fmt::format("exec {} failed: {}", options_.shim, error);
    default:
      return fmt::format("starting the job failed: {}", error);
  }
}

std::optional<AttemptEnd> PosixProcessLauncher::CheckStarting(Tracked& tracked, JobId job,
                                                              int attempt) {
  ChildReport report{Step::kDone, 0};
  std::string failure;
  pollfd ready{tracked.start_report.get(), POLLIN, 0};
  if (poll(&ready, 1, 0) != 0) {  // a report, the end of the pipe (exec), or an error to read
    if (!ReadReport(tracked.start_report.get(), &report)) {
      tracked.start_report.reset();  // closed by the exec: the shim runs
      return std::nullopt;
    }
    failure = StartFailure(job, attempt, tracked, static_cast<int>(report.step), report.error);
  } else if (std::chrono::steady_clock::now() >= tracked.start_deadline) {
    failure = fmt::format(
        "starting the job did not finish within {} s (a hung workdir or job "
        "directory, or a stopped start)",
        kStartTimeout.count());
  } else {
    return std::nullopt;  // still starting
  }
  // The child never ran the shim: it is reaped here, and the attempt ends with the reason.
  tracked.start_report.reset();
  if (!tracked.wait_status) {
    // Not reaped yet (Refresh() records what it reaps), so the pid is still this child's.
    kill(tracked.shim.pid, SIGKILL);
    int status = 0;
    while (waitpid(tracked.shim.pid, &status, 0) < 0 && errno == EINTR) {
    }
    tracked.wait_status = status;
  }
  const std::string cgroup = CgroupPath(job, attempt);
  if (tracked.in_cgroup && !RemoveCgroup(cgroup)) cgroups_to_remove_.push_back(cgroup);
  tracked.in_cgroup = false;
  return AttemptEnd{ProcessEnd{true, 127, true}, "colo: cannot start the job: " + failure + "\n",
                    ""};
}

Result<ProcessHandle> PosixProcessLauncher::Start(const LaunchSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("empty command");
  if (spec.job <= 0 || spec.attempt <= 0) return InvalidArgument("no job id or attempt number");
  COLO_RETURN_IF_ERROR(CheckWorkdirSyntax(spec.context.workdir));
  // execve would silently cut such a word short.
  const auto has_nul = [](const std::string& word) { return word.find('\0') != std::string::npos; };
  if (std::any_of(spec.argv.begin(), spec.argv.end(), has_nul))
    return InvalidArgument("the command contains a NUL byte");
  if (std::any_of(spec.env.begin(), spec.env.end(), has_nul))
    return InvalidArgument("the environment contains a NUL byte");
  if (has_nul(spec.output_file) || has_nul(spec.error_file))
    return InvalidArgument("an output file name contains a NUL byte");
  if (geteuid() != 0 && spec.owner.uid != geteuid()) {
    return FailedPrecondition(fmt::format("colod runs as uid {} and cannot start jobs of uid {}",
                                          geteuid(), spec.owner.uid));
  }
  const Key key{spec.job, spec.attempt};
  if (auto it = attempts_.find(key); it != attempts_.end() && ShimRuns(it->second))
    return FailedPrecondition(fmt::format("attempt {} of job {} runs", spec.attempt, spec.job));
  auto dir = OpenJobDirForStart(spec.job, spec.owner);
  if (!dir.ok()) return dir.status();
  UniqueFd dir_fd(*dir);

  // Everything the child needs is prepared here: between fork and exec only async-signal-safe
  // calls are allowed (colod has other threads).
  const UserSwitch change = PrepareUserSwitch(spec.owner);
  const std::string out_name = AttemptFileName(spec.attempt, "out");
  const std::string err_name = AttemptFileName(spec.attempt, "err");
  const std::string exit_name = AttemptFileName(spec.attempt, "exit");
  const std::string exit_path = fmt::format("{}/{}/{}", options_.jobs_dir, spec.job, exit_name);
  std::vector<std::string> args = {
      "colo-shim",
      fmt::format(
          "--leftover-grace-ms={}",
          std::chrono::duration_cast<std::chrono::milliseconds>(options_.leftover_grace).count()),
  };
  if (!spec.output_file.empty()) args.push_back("--output=" + spec.output_file);
  if (!spec.error_file.empty()) args.push_back("--error=" + spec.error_file);
  if (spec.append_output) args.push_back("--append");
  if (options_.log_limit > Bytes(0))
    args.push_back(fmt::format("--log-limit={}", options_.log_limit.count()));
  args.push_back(exit_path);
  args.push_back("--");
  args.insert(args.end(), spec.argv.begin(), spec.argv.end());
  // The attempt's names first, so that they are always there and found at once.
  std::vector<std::string> env = {fmt::format("COLO_JOB_ID={}", spec.job),
                                  fmt::format("COLO_ATTEMPT={}", spec.attempt)};
  for (const auto& e : spec.env) {
    if (!e.starts_with("COLO_JOB_ID=") && !e.starts_with("COLO_ATTEMPT=")) env.push_back(e);
  }
  std::vector<char*> argv_ptrs, env_ptrs;
  for (auto& a : args) argv_ptrs.push_back(a.data());
  argv_ptrs.push_back(nullptr);
  for (auto& e : env) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);

  std::vector<LimitToApply> limits;
  for (const api::ResourceLimit& limit : spec.context.limits) {
    const auto resource = ResourceNamed(limit.name);
    if (!resource || !options_.propagated_limits.count(*resource)) continue;
    const auto value = [](int64_t v) { return v < 0 ? RLIM_INFINITY : static_cast<rlim_t>(v); };
    limits.push_back({*resource, value(limit.soft), value(limit.hard)});
  }

  // A cgroup of its own where possible; without one the attempt is tracked by its session.
  std::string cgroup;
  UniqueFd cgroup_procs;
  if (uses_cgroups()) {
    cgroup = CgroupPath(spec.job, spec.attempt);
    if (mkdir(cgroup.c_str(), 0755) != 0 && errno == EEXIST && CgroupPopulated(cgroup)) {
      return FailedPrecondition(
          fmt::format("cgroup {} still has processes of an earlier start", cgroup));
    }
    cgroup_procs.reset(open((cgroup + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!cgroup_procs.valid()) {
      rmdir(cgroup.c_str());
      cgroup.clear();
    }
  }

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(fmt::format("pipe: {}", ErrorText(errno)));
  UniqueFd report_read(pipe_fds[0]), report_write(pipe_fds[1]);
  // The job's stdout and stderr: pipes the shim reads (src/shim/shim.cc), read ends first.
  UniqueFd output_pipes[4];
  std::vector<std::string> pipe_names;
  for (int stream = 0; stream < 2; ++stream) {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(fmt::format("pipe: {}", ErrorText(errno)));
    output_pipes[stream].reset(pipe_fds[0]);
    output_pipes[stream + 2].reset(pipe_fds[1]);
    pipe_names.push_back(PipeName(pipe_fds[0]));
  }
  const char* shim = options_.shim.c_str();
  const char* workdir = spec.context.workdir.c_str();
  // The job's files as its submitter would make them (a login shell's 022 where the submitter
  // did not say), never with colod's 077.
  const mode_t job_umask = static_cast<mode_t>(spec.context.umask.value_or(022) & 0777);
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    if (!cgroup.empty()) rmdir(cgroup.c_str());
    return Unavailable(fmt::format("fork: {}", ErrorText(error)));
  }
  if (pid == 0) {
    // Named for a restarted colod, which ends a start its predecessor left behind.
    prctl(PR_SET_NAME, kStartName);
    int report = AboveStandard(report_write.get());
    const int job_dir = AboveStandard(dir_fd.get());
    int pipes[4];
    for (int i = 0; i < 4; ++i) pipes[i] = AboveStandard(output_pipes[i].get());
    ResetSignals();
    if (cgroup_procs.valid() && write(cgroup_procs.get(), "0", 1) != 1)
      ReportAndExit(report, Step::kJoinCgroup, errno);
    if (setsid() < 0) ReportAndExit(report, Step::kSetsid, errno);
    // Nothing of colod's may reach the user or the job, not even while the child is stopped.
    const int keep[] = {report, job_dir, pipes[0], pipes[1], pipes[2], pipes[3]};
    DetachFromColod(keep, 6, report);
    umask(job_umask);  // the submitter's, not colod's 077
    // Become the user before touching anything of theirs: nothing after this runs as root.
    DropPrivileges(change, report);
    ApplyLimits(limits, report);
    const int out =
        OpenLog(job_dir, out_name.c_str(), report, Step::kOpenStdout, Step::kStdoutNotRegular);
    const int err =
        OpenLog(job_dir, err_name.c_str(), report, Step::kOpenStderr, Step::kStderrNotRegular);
    if (dup2(out, 1) < 0 || dup2(err, 2) < 0) ReportAndExit(report, Step::kRedirect, errno);
    // A record from before this start is not this start's end.
    unlinkat(job_dir, exit_name.c_str(), 0);
    if (chdir(workdir) != 0) ReportAndExit(report, Step::kChdir, errno);
    // The pipes at 3 to 6 for the shim (kept open by the exec), everything else above them.
    report = Above(report, 6, report);
    for (int& fd : pipes) fd = Above(fd, 6, report);
    for (int i = 0; i < 4; ++i) {
      if (dup2(pipes[i], 3 + i) < 0) ReportAndExit(report, Step::kRedirect, errno);
    }
    execve(shim, argv_ptrs.data(), env_ptrs.data());
    ReportAndExit(report, Step::kExec, errno);
  }
  report_write.reset();
  // The child is ours and unreaped, so its pid cannot be taken by another process meanwhile.
  const auto info = ReadProcInfo(pid);
  const uint64_t start_ticks = info ? info->start_ticks : 0;

  // Not waited for here: once the child has become the user, the user may stop it, and colod
  // must not stop with it. Check() reads its report (a failed step, or the exec that closed it).
  Tracked tracked;
  tracked.owner = spec.owner;
  tracked.shim = {pid, start_ticks};
  tracked.own_child = true;
  tracked.in_cgroup = !cgroup.empty();
  tracked.start_report = std::move(report_read);
  tracked.start_deadline = std::chrono::steady_clock::now() + kStartTimeout;
  tracked.workdir = spec.context.workdir;
  tracked.output_pipes = std::move(pipe_names);
  attempts_[key] = std::move(tracked);
  return ProcessHandle{pid, start_ticks};
}

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

int PosixProcessLauncher::OpenBeneathJobDir(JobId job, const std::string& name, int flags) const {
  return OpenBeneath(jobs_dir_fd_, fmt::format("{}/{}", job, name), static_cast<uint64_t>(flags));
}

bool PosixProcessLauncher::ExistsInJobDir(JobId job, const std::string& name) const {
  UniqueFd fd(OpenBeneathJobDir(job, name, O_PATH));
  // Something there that cannot be looked at (a link, a mount) counts: it may have started.
  return fd.valid() || errno != ENOENT;
}

// A file of the job's directory opened for reading, only if it is a regular file that `uid`
// owns: looked at through an O_PATH descriptor first, so that opening never blocks (a FIFO) nor
// has effects (a device); -1 otherwise.
int PosixProcessLauncher::OpenUserFile(JobId job, const std::string& name, unsigned uid,
                                       off_t* size) const {
  UniqueFd path_fd(OpenBeneathJobDir(job, name, O_PATH));
  if (!path_fd.valid()) return -1;
  struct stat st {};
  if (fstat(path_fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid) return -1;
  UniqueFd fd(open(fmt::format("/proc/self/fd/{}", path_fd.get()).c_str(),
                   O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat opened {};
  if (!fd.valid() || fstat(fd.get(), &opened) != 0 || opened.st_dev != st.st_dev ||
      opened.st_ino != st.st_ino || !S_ISREG(opened.st_mode))
    return -1;
  *size = opened.st_size;
  return fd.release();
}

std::string PosixProcessLauncher::ReadTail(JobId job, const std::string& name, unsigned uid) const {
  off_t size = 0;
  UniqueFd fd(OpenUserFile(job, name, uid, &size));
  if (!fd.valid() || size <= 0) return "";
  const auto length = static_cast<size_t>(std::min<off_t>(size, kTailBytes));
  std::string data(length, '\0');
  size_t done = 0;
  while (done < length) {
    const ssize_t n = pread(fd.get(), data.data() + done, length - done,
                            size - static_cast<off_t>(length) + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return TailUtf8(data, kTailBytes);
}

std::optional<ProcessEnd> PosixProcessLauncher::ReadExitRecord(JobId job, int attempt,
                                                               unsigned uid) const {
  off_t size = 0;
  UniqueFd fd(OpenUserFile(job, AttemptFileName(attempt, "exit"), uid, &size));
  if (!fd.valid()) return std::nullopt;
  const std::string content = ReadBounded(fd.get(), kMaxExitRecordBytes);
  std::string_view text = content;
  if (!text.ends_with('\n')) return std::nullopt;
  text.remove_suffix(1);
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto code = ParseNumber<int>(text.substr(space + 1));
  if (!code) return std::nullopt;
  const std::string_view how = text.substr(0, space);
  if (how == "exited" && *code >= 0 && *code <= 255) return ProcessEnd{true, *code, true};
  if (how == "signaled" && *code > 0 && *code < NSIG) return ProcessEnd{false, *code, true};
  return std::nullopt;
}

std::optional<AttemptEnd> PosixProcessLauncher::Check(const AttemptRef& ref) {
  Tracked& tracked = Track(ref);
  if (tracked.start_report.valid()) {
    auto failed = CheckStarting(tracked, ref.job, ref.attempt);
    if (failed || tracked.start_report.valid()) return failed;
  }
  if (ShimRuns(tracked)) return std::nullopt;
  if (ended_starts_.count({tracked.shim.pid, tracked.shim.start_ticks})) {
    return AttemptEnd{ProcessEnd{true, 127, true},
                      "colo: cannot start the job: its start was stopped before it ran the job, "
                      "and ended when colod started again\n",
                      ""};
  }
  // The shim is gone; what it left (it was killed, or a process ignored it) goes before the
  // attempt counts as ended.
  const auto live = LiveProcesses(tracked, ref.job, ref.attempt);
  if (!live.empty()) {
    Signal(ref, SIGKILL);
    return std::nullopt;
  }
  AttemptEnd end;
  if (auto record = ReadExitRecord(ref.job, ref.attempt, tracked.owner.uid)) {
    end.end = *record;
  } else if (tracked.wait_status && WIFEXITED(*tracked.wait_status)) {
    // The shim ended by itself without a record (it could not write it): its code stands.
    end.end = ProcessEnd{true, WEXITSTATUS(*tracked.wait_status), true};
  } else {
    // Killed with the job still under it, or ended while nobody waited: the job's status is
    // unknown.
    const int signal = tracked.wait_status && WIFSIGNALED(*tracked.wait_status)
                           ? WTERMSIG(*tracked.wait_status)
                           : 0;
    end.end = ProcessEnd{false, signal, false};
  }
  end.stderr_tail = ReadTail(ref.job, AttemptFileName(ref.attempt, "err"), tracked.owner.uid);
  end.stdout_tail = ReadTail(ref.job, AttemptFileName(ref.attempt, "out"), tracked.owner.uid);
  return end;
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

void PosixProcessLauncher::Release(const AttemptRef& ref) {
  const Key key{ref.job, ref.attempt};
  const auto it = attempts_.find(key);
  if (it == attempts_.end()) {
    // An attempt this launcher never started nor looked at (a Start refused because its cgroup
    // was busy): whatever runs in that cgroup is not its to kill. An empty one may go.
    if (uses_cgroups()) rmdir(CgroupPath(ref.job, ref.attempt).c_str());
    return;
  }
  const bool in_cgroup = it->second.in_cgroup;
  attempts_.erase(it);
  if (!in_cgroup) return;
  const std::string path = CgroupPath(ref.job, ref.attempt);
  if (!RemoveCgroup(path)) cgroups_to_remove_.push_back(path);
}

}  // namespace colo

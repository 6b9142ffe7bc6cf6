// The paths a user controls, as PosixProcessLauncher opens them: the workdir (checked as its
// user), the job's directory (beneath colod's jobs directory, never through a link or into a
// mount) and the files in it (only regular files the user owns, and only a bounded tail). See
// posix_launcher.h for the trust model.
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/text.h"
#include "daemon/launch_child.h"
#include "daemon/posix_launcher.h"
#include "daemon/proc_files.h"

namespace colo {
namespace {

// A hung filesystem under a workdir must not stall colod.
constexpr std::chrono::seconds kWorkdirCheckTimeout{2};
constexpr size_t kMaxExitRecordBytes = 64;

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

Status PosixProcessLauncher::CheckWorkdirSyntax(const std::string& path) {
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
    const int report = MoveAboveStandard(report_write.get());
    ResetSignals();
    DetachFromColod(&report, 1, report);
    BecomeUserForChecks(change, report);
    struct stat st {};
    if (stat(path, &st) != 0) ReportAndExit(report, ChildStep::kStat, errno);
    if (!S_ISDIR(st.st_mode)) ReportAndExit(report, ChildStep::kNotDirectory, ENOTDIR);
    // With the effective ids, which are the user's (access() would ask for the real ones).
    if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) != 0)
      ReportAndExit(report, ChildStep::kAccess, errno);
    ReportAndExit(report, ChildStep::kDone, 0);
  }
  report_write.reset();
  ChildReport report{ChildStep::kDone, 0};
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
    case ChildStep::kDone:
      return Status::Ok();
    case ChildStep::kStat:
    case ChildStep::kNotDirectory:
    case ChildStep::kAccess:
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

}  // namespace colo

// /proc and the kernel's other small files, read for the launcher. See proc_files.h.
#include "daemon/proc_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "daemon/posix_launcher.h"

namespace colo {
namespace {

constexpr size_t kMaxStatBytes = 2048;

}  // namespace

std::string ErrorText(int error) {
  return strerrordesc_np(error) != nullptr ? strerrordesc_np(error)
                                           : fmt::format("errno {}", error);
}

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

std::optional<std::string> ReadKernelFile(const std::string& path, size_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return std::nullopt;
  return ReadBounded(fd.get(), max_bytes);
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

int OpenPidFd(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}
int SendSignal(int pid_fd, int signal) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pid_fd, signal, nullptr, 0));
}

bool Signallable(pid_t pid) {
  return pid > 1 && pid != getpid();
}

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

std::string ReadLink(const std::string& path) {
  char target[PATH_MAX];
  const ssize_t n = readlink(path.c_str(), target, sizeof target);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof target) return "";
  return std::string(target, static_cast<size_t>(n));
}

std::string DescriptorPath(pid_t pid, int fd) {
  std::string path = ReadLink(fmt::format("/proc/{}/fd/{}", pid, fd));
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.size() > kDeleted.size() && path.ends_with(kDeleted))
    path.resize(path.size() - kDeleted.size());
  return path;
}

std::string PipeName(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? fmt::format("pipe:[{}]", st.st_ino) : "";
}

std::vector<std::string> ShimPipes(pid_t shim) {
  std::vector<std::string> pipes;
  for (int fd : {3, 4}) {
    std::string name = DescriptorPath(shim, fd);
    if (name.starts_with("pipe:")) pipes.push_back(std::move(name));
  }
  return pipes;
}

std::optional<uid_t> ProcessOwner(pid_t pid) {
  struct stat st {};
  if (stat(fmt::format("/proc/{}", pid).c_str(), &st) != 0) return std::nullopt;
  return st.st_uid;
}

std::string ExecutableOf(pid_t pid) {
  std::string path = ReadLink(fmt::format("/proc/{}/exe", pid));
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
  return path;
}

}  // namespace colo

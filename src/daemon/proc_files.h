// What the launcher reads of the kernel's files about processes (/proc, and the other small files
// the kernel makes, cgroupfs's too): bounded, never through a link. A pid alone may have been
// recycled, so a process is known by its pid and start ticks, and signalled through a pidfd that
// pins it. Internal to the PosixProcessLauncher.
#pragma once

#include <sys/types.h>

#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace colo {

// An errno's description, for messages.
std::string ErrorText(int error);

// At most `max_bytes` from `fd`, from the current offset.
std::string ReadBounded(int fd, size_t max_bytes);

// A small kernel-made file (/proc, cgroupfs); nullopt if it cannot be opened.
std::optional<std::string> ReadKernelFile(const std::string& path, size_t max_bytes);

template <typename T>
std::optional<T> ParseNumber(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::vector<std::string_view> SplitFields(std::string_view text, char separator);

int OpenPidFd(pid_t pid);
int SendSignal(int pid_fd, int signal);
bool Signallable(pid_t pid);

// One process as /proc/PID/stat shows it.
struct ProcInfo {
  pid_t pid = 0, ppid = 0, pgid = 0, sid = 0;
  char state = '?';
  uint64_t start_ticks = 0;
  bool alive() const { return state != 'Z' && state != 'X'; }
};

std::optional<ProcInfo> ReadProcInfo(pid_t pid);
bool IsAlive(pid_t pid, uint64_t start_ticks);
// Sends `signal` to `pid` only if it is still the process that started at `start_ticks`: the
// pidfd pins the process, the check after it tells a recycled pid apart.
void SignalVerified(pid_t pid, uint64_t start_ticks, int signal);
// One pass over /proc: every process, by pid.
std::map<pid_t, ProcInfo> ScanProcesses();

// The target of a /proc magic link as the kernel names it (no access to the process's memory).
std::string ReadLink(const std::string& path);
// The file a process's descriptor `fd` points to, as a path; a deleted file counts as itself.
std::string DescriptorPath(pid_t pid, int fd);
// How /proc names the pipe `fd` is an end of ("pipe:[INODE]").
std::string PipeName(int fd);
// The job's output pipes a running shim reads (its descriptors 3 and 4).
std::vector<std::string> ShimPipes(pid_t shim);
// Who owns a process: /proc/PID belongs to its effective uid (to root if it is not dumpable, and
// a shim always is).
std::optional<uid_t> ProcessOwner(pid_t pid);
// The program a process runs, without the " (deleted)" of a binary replaced since it started.
std::string ExecutableOf(pid_t pid);

}  // namespace colo

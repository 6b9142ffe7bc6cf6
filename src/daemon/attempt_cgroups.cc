// cgroup v2 for the launcher. See attempt_cgroups.h.
#include "daemon/attempt_cgroups.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "daemon/posix_launcher.h"
#include "daemon/proc_files.h"

namespace colo {
namespace {

constexpr size_t kMaxProcCgroupBytes = 8192;
constexpr size_t kMaxCgroupProcsBytes = 8 << 20;
constexpr size_t kMaxCgroupDepth = 8;  // nested cgroups a job could make below its own

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

}  // namespace

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

bool CgroupPopulated(const std::string& path) {
  const auto events = ReadKernelFile(path + "/cgroup.events", 4096);
  if (!events) return false;
  for (std::string_view line : SplitFields(*events, '\n')) {
    if (line.starts_with("populated ")) return line != "populated 0";
  }
  return true;
}

std::optional<std::string> CgroupOf(pid_t pid) {
  const auto text = ReadKernelFile(fmt::format("/proc/{}/cgroup", pid), kMaxProcCgroupBytes);
  if (!text) return std::nullopt;
  for (std::string_view line : SplitFields(*text, '\n')) {
    if (line.starts_with("0::")) return std::string(line.substr(3));
  }
  return std::nullopt;
}

std::string CgroupPrefix(std::string_view jobs_dir) {
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a
  for (const char c : jobs_dir) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return fmt::format("colo-{:016x}-job-", hash);
}

}  // namespace colo

#include "daemon/process.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/strings.h"

namespace colo {
namespace {

// What the child reports through the pipe when a step before exec fails.
struct ChildFailure {
  int step;
  int error;
};
constexpr const char* kSteps[] = {"setsid",      "setgroups",   "setgid", "setuid",
                                  "open stdout", "open stderr", "chdir",  "exec colo-shim"};

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

Result<StartedProcess> StartAttempt(const LaunchPlan& plan) {
  if (plan.argv.empty()) return InvalidArgument("empty command");
  // Everything the child needs is prepared here: between fork and exec only async-signal-safe
  // calls are allowed (colod has other threads).
  std::vector<std::string> args = {"colo-shim", plan.exit_path, "--"};
  args.insert(args.end(), plan.argv.begin(), plan.argv.end());
  std::vector<std::string> env = plan.env;
  std::vector<char*> argv = Pointers(args), envp = Pointers(env);
  std::vector<gid_t> groups(64);
  if (plan.switch_user) {
    int count = static_cast<int>(groups.size());
    if (getgrouplist(plan.user.c_str(), plan.gid, groups.data(), &count) < 0) {
      groups.resize(static_cast<size_t>(count));
      getgrouplist(plan.user.c_str(), plan.gid, groups.data(), &count);
    }
    groups.resize(static_cast<size_t>(std::max(count, 0)));
  }
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return Internal(fmt::format("pipe: {}", strerror(errno)));

  const pid_t pid = fork();
  if (pid < 0) {
    close(report[0]);
    close(report[1]);
    return Unavailable(fmt::format("fork: {}", strerror(errno)));
  }
  if (pid == 0) {
    auto fail = [&](int step) {
      ChildFailure f{step, errno};
      (void)!write(report[1], &f, sizeof f);
      _exit(127);
    };
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // colod blocks signals for its signalfd
    if (setsid() < 0) fail(0);
    // Become the user first: the logs are theirs, and nothing after this runs as root.
    if (plan.switch_user) {
      if (setgroups(groups.size(), groups.data()) != 0) fail(1);
      if (setgid(plan.gid) != 0) fail(2);
      if (setuid(plan.uid) != 0) fail(3);
    }
    const int out = open(plan.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0640);
    if (out < 0) fail(4);
    const int err = open(plan.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0640);
    if (err < 0) fail(5);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (chdir(plan.workdir.c_str()) != 0) fail(6);
    execve(plan.shim.c_str(), argv.data(), envp.data());
    fail(7);
  }
  close(report[1]);
  ChildFailure failure{};
  ssize_t got;
  do {
    got = read(report[0], &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof failure)) {
    // The child is gone already; its zombie is reaped by colod's SIGCHLD handling.
    return FailedPrecondition(fmt::format("cannot start the job: {} failed: {}",
                                          kSteps[failure.step], strerror(failure.error)));
  }
  StartedProcess started;
  started.pid = pid;
  started.start_ticks = ProcessStartTicks(pid).value_or(0);
  return started;
}

namespace {
// The fields after the command name (which may contain spaces and parentheses).
std::optional<std::vector<std::string>> StatFields(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> fields;
  std::istringstream rest(line.substr(close + 2));
  std::string f;
  while (rest >> f) fields.push_back(f);
  return fields;
}
}  // namespace

std::optional<uint64_t> ProcessStartTicks(int pid) {
  auto fields = StatFields(pid);
  // Field 22 of stat is starttime; after "pid (comm)" it is the 20th.
  if (!fields || fields->size() < 20) return std::nullopt;
  if ((*fields)[0] == "Z") return std::nullopt;  // a zombie has ended
  return std::stoull((*fields)[19]);
}

std::optional<int> SessionOf(int pid) {
  auto fields = StatFields(pid);
  if (!fields || fields->size() < 4) return std::nullopt;
  return std::stoi((*fields)[3]);  // field 6: session id
}

bool SameProcess(int pid, uint64_t start_ticks) {
  auto ticks = ProcessStartTicks(pid);
  return ticks && *ticks == start_ticks;
}

std::optional<ProcessEnd> ReadExitFile(const std::string& path) {
  std::ifstream in(path);
  std::string how;
  int code = 0;
  if (!(in >> how >> code)) return std::nullopt;
  if (how == "exited") return ProcessEnd{true, code, true};
  if (how == "signaled") return ProcessEnd{false, code, true};
  return std::nullopt;
}

std::string ReadTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const auto size = static_cast<size_t>(in.tellg());
  const size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string out(size - start, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  return out;
}

}  // namespace colo

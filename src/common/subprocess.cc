#include "common/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace colo {
namespace {

// How the intermediate process says that the command was killed by a signal.
constexpr int kKilledBySignal = 255;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

std::vector<char*> Pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, Duration timeout,
                                 size_t max_output) {
  if (argv.empty() || argv.front().empty() || argv.front()[0] != '/')
    return InvalidArgument("a command needs an absolute program path");
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + strerror(errno));
  Fd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) return Internal(std::string("/dev/null: ") + strerror(errno));
  Fd devnull(null_fd);
  // Everything the child needs is made before it exists: it only calls async-signal-safe
  // functions (this process has other threads).
  std::vector<char*> args = Pointers(argv), envp = Pointers(env);

  // Two processes: the one colod waits for through its pidfd sends no SIGCHLD and never calls
  // exec, so it stays invisible to waitpid(-1) (exec would make a child an ordinary one again);
  // it runs the command as its own child and exits with its status.
  int pidfd = -1;
  clone_args outer{};
  outer.flags = CLONE_PIDFD;
  outer.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  outer.exit_signal = 0;
  const long pid = syscall(SYS_clone3, &outer, sizeof outer);
  if (pid < 0) return Internal(std::string("clone3: ") + strerror(errno));
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    setsid();  // a process group of its own: a timeout kills the command with it
    if (dup2(devnull.get(), 0) < 0 || dup2(write_end.get(), 1) < 0 || dup2(write_end.get(), 2) < 0)
      _exit(126);
    // It never execs, so close-on-exec does not apply: nothing of the parent's stays open here
    // (another command's pipe held open would keep that one from ending).
    syscall(SYS_close_range, 3U, ~0U, 0U);
    clone_args inner{};
    inner.exit_signal = SIGCHLD;
    const long command = syscall(SYS_clone3, &inner, sizeof inner);
    if (command < 0) _exit(126);
    if (command == 0) {
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    int status = 0;
    while (waitpid(static_cast<pid_t>(command), &status, 0) < 0) {
      if (errno != EINTR) _exit(126);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : kKilledBySignal);
  }
  Fd process(pidfd);
  close(write_end.release());

  CommandResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[16384];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline is checked above
    const ssize_t n = read(read_end.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every writer closed: it has ended or closed its output
    const size_t room = max_output - std::min(max_output, result.output.size());
    result.output.append(buffer, std::min(room, static_cast<size_t>(n)));
  }
  auto kill_all = [&] {
    kill(-static_cast<pid_t>(pid), SIGKILL);  // not reaped yet: the group is still its own
    syscall(SYS_pidfd_send_signal, process.get(), SIGKILL, nullptr, 0);
  };
  if (result.timed_out) kill_all();
  siginfo_t info{};
  // What it left running in its session is its own business; it is waited for with a bound too.
  for (;;) {
    pollfd p{process.get(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (poll(&p, 1, std::max<int>(0, static_cast<int>(left.count()))) == 0) {
      result.timed_out = true;
      kill_all();
    }
    if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(process.get()), &info,
               WEXITED | __WCLONE) == 0)
      break;
    if (errno != EINTR) return Internal(std::string("waitid: ") + strerror(errno));
  }
  result.exit_code =
      info.si_code == CLD_EXITED && info.si_status != kKilledBySignal ? info.si_status : -1;
  return result;
}

}  // namespace colo

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

  int pidfd = -1;
  clone_args clone{};
  clone.flags = CLONE_PIDFD;
  clone.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  clone.exit_signal = 0;  // no SIGCHLD: only this pidfd waits for it
  const long pid = syscall(SYS_clone3, &clone, sizeof clone);
  if (pid < 0) return Internal(std::string("clone3: ") + strerror(errno));
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    setsid();
    if (dup2(devnull.get(), 0) < 0 || dup2(write_end.get(), 1) < 0 || dup2(write_end.get(), 2) < 0)
      _exit(126);
    execve(args[0], args.data(), envp.data());
    _exit(127);
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
  if (result.timed_out) syscall(SYS_pidfd_send_signal, process.get(), SIGKILL, nullptr, 0);
  siginfo_t info{};
  // What it left running in its session is its own business; it is waited for with a bound too.
  for (;;) {
    pollfd p{process.get(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (poll(&p, 1, std::max<int>(0, static_cast<int>(left.count()))) == 0) {
      result.timed_out = true;
      syscall(SYS_pidfd_send_signal, process.get(), SIGKILL, nullptr, 0);
    }
    if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(process.get()), &info,
               WEXITED | __WCLONE) == 0)
      break;
    if (errno != EINTR) return Internal(std::string("waitid: ") + strerror(errno));
  }
  result.exit_code = info.si_code == CLD_EXITED ? info.si_status : -1;
  return result;
}

}  // namespace colo

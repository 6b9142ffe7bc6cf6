#include "daemon/mps.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>

namespace colo {
namespace {

// Runs `program args...` with the MPS directories in its environment, feeding `input` on stdin;
// returns stdout. Bounded by `timeout_ms` so a wedged control daemon cannot stall colod.
Result<std::string> RunControl(const MpsSettings& s, const std::vector<std::string>& args,
                               const std::string& input, int timeout_ms) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
    return Internal(fmt::format("pipe: {}", strerror(errno)));
  std::vector<std::string> env_strings = {"CUDA_MPS_PIPE_DIRECTORY=" + s.pipe_dir,
                                          "CUDA_MPS_LOG_DIRECTORY=" + s.log_dir};
  if (const char* path = getenv("PATH")) env_strings.push_back(std::string("PATH=") + path);
  if (const char* ld = getenv("LD_LIBRARY_PATH"))
    env_strings.push_back(std::string("LD_LIBRARY_PATH=") + ld);
  std::vector<char*> env, argv;
  for (auto& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  std::vector<std::string> arg_strings = args;
  for (auto& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Unavailable(fmt::format("fork: {}", strerror(errno)));
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    execvpe(argv[0], argv.data(), env.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  // A command (a line for nvidia-cuda-mps-control) far below a pipe's buffer: a control that
  // exited before reading it answers with its exit status and output, which the caller reads.
  if (!input.empty()) (void)!write(in[1], input.data(), input.size());
  close(in[1]);
  std::string output;
  char buffer[4096];
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long elapsed =
        (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (elapsed >= timeout_ms) {
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout_ms - elapsed)) <= 0) continue;
    const ssize_t n = read(out[0], buffer, sizeof buffer);
    if (n <= 0) break;
    output.append(buffer, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = 0;
  // The control binary with -d forks its daemon and returns at once; its child is not ours to
  // wait for (colod's SIGCHLD loop reaps whatever is left).
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Unavailable(
        fmt::format("{} {} failed ({}): {}", args[0], args.size() > 1 ? args[1] : "",
                    WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status)) : "killed",
                    output.empty() ? "no output" : output));
  }
  return output;
}

}  // namespace

MpsDaemon::~MpsDaemon() {
  Stop();
}

Result<std::string> MpsDaemon::Command(const std::string& command) {
  return RunControl(settings_, {settings_.control}, command + "\n", 5000);
}

bool MpsDaemon::Healthy() {
  // The control daemon answers on its pipe; without it the command fails or hangs (bounded).
  if (!std::filesystem::exists(settings_.pipe_dir + "/control")) return false;
  return Command("get_server_list").ok();
}

Status MpsDaemon::EnsureRunning() {
  if (Healthy()) {
    // Ours, or one a previous colod started in the same pipe directory before it was killed:
    // either way colod owns it now and stops it when it stops.
    started_ = true;
    return Status::Ok();
  }
  std::error_code ec;
  std::filesystem::create_directories(settings_.pipe_dir, ec);
  std::filesystem::create_directories(settings_.log_dir, ec);
  if (ec) return Unavailable(fmt::format("cannot create the MPS directories: {}", ec.message()));
  // The pipe directory is shared with the jobs of every user.
  chmod(settings_.pipe_dir.c_str(), 0755);
  auto started = RunControl(settings_, {settings_.control, "-d"}, "", 10000);
  if (!started.ok()) return started.status();
  for (int i = 0; i < 50; ++i) {  // it creates its control pipe shortly after forking
    if (Healthy()) {
      started_ = true;
      return Status::Ok();
    }
    usleep(100 * 1000);
  }
  return Unavailable("the MPS control daemon started but does not answer on " + settings_.pipe_dir);
}

void MpsDaemon::Stop() {
  if (!started_) return;
  // A control daemon that does not answer is left as it is: its clients are colod's jobs, which
  // end or were ended before this, and the next start finds its pipe directory again.
  if (Result<std::string> quit = Command("quit"); !quit.ok())
    fmt::print(stderr, "colod: the MPS control daemon did not take 'quit': {}\n",
               quit.status().message());
  started_ = false;
}

std::vector<std::string> MpsDaemon::ClientEnv(int thread_percent, Bytes memory_limit,
                                              int gpus) const {
  std::vector<std::string> env = {
      "CUDA_MPS_PIPE_DIRECTORY=" + settings_.pipe_dir,
      "CUDA_MPS_LOG_DIRECTORY=" + settings_.log_dir,
      fmt::format("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={}", thread_percent)};
  if (memory_limit > Bytes(0)) {
    std::string limits;
    const int64_t mib = std::max<int64_t>(1, memory_limit.count() >> 20);
    for (int i = 0; i < gpus; ++i) limits += fmt::format("{}{}={}M", i ? "," : "", i, mib);
    env.push_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=" + limits);
  }
  return env;
}

}  // namespace colo

// colo-shim: the parent of every job attempt. colod starts it as a session leader; it starts the
// job, waits for it and writes how it ended to a file, so the outcome is known even when colod
// was not running at that moment (colod re-adopts running jobs after a restart).
//
//   colo-shim EXIT_FILE -- COMMAND [ARGS...]
//
// The exit file holds one line: "exited CODE" or "signaled SIGNAL". The shim ignores the
// termination signals colod sends to the whole process group on cancel, so it outlives the job
// long enough to record the end; SIGKILL still ends it.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace {

int WriteExitFile(const char* path, const std::string& line) {
  const std::string tmp = std::string(path) + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  fsync(fd);
  close(fd);
  if (!written) return -1;
  return rename(tmp.c_str(), path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: colo-shim EXIT_FILE -- COMMAND [ARGS...]\n");
    return 2;
  }
  const char* exit_file = argv[1];
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  const pid_t child = fork();
  if (child < 0) {
    perror("colo-shim: fork");
    WriteExitFile(exit_file, "exited 127\n");
    return 127;
  }
  if (child == 0) {
    // Ignored signals survive exec: give the job the defaults back.
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    execvp(argv[3], argv + 3);
    fprintf(stderr, "colo: cannot run %s: %s\n", argv[3], strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      perror("colo-shim: waitpid");
      return 127;
    }
  }
  if (WIFSIGNALED(status)) {
    WriteExitFile(exit_file, "signaled " + std::to_string(WTERMSIG(status)) + "\n");
    return 128 + WTERMSIG(status);
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  WriteExitFile(exit_file, "exited " + std::to_string(code) + "\n");
  return code;
}

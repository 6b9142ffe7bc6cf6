// colo-shim: the parent of every job attempt. colod starts it as a session leader (as the job's
// user, in the attempt's cgroup where there is one); it starts the job, waits for it and writes
// how it ended to a file, so the outcome is known even when colod was not running at that moment
// (colod re-adopts running jobs after a restart).
//
//   colo-shim [--leftover-grace-ms=N] [--log-limit=BYTES] [--output=FILE] [--error=FILE]
//             [--append] EXIT_FILE -- COMMAND [ARGS...]
//
// The shim is a child subreaper: a process the job starts stays below the shim even when it
// leaves the job's session and its parent exits. When the job's command has ended, whatever it
// left behind gets SIGTERM, N milliseconds (default 5000) to end, then SIGKILL; only then is the
// end recorded, so a recorded end means that no process of the job runs on (and holds GPU memory
// that the next job is promised).
//
// The exit file holds one line: "exited CODE" or "signaled SIGNAL". The shim ignores the
// termination signals colod sends to every process of the attempt on cancel, so it outlives the
// job long enough to record the end; SIGKILL still ends it.
//
// The job writes to pipes, not to colod's logs: colod starts the shim with the logs as its
// stdout and stderr and the two pipes at descriptors 3 and 4 (their read ends, stdout's first)
// and 5 and 6 (their write ends, which become the job's stdout and stderr). The shim writes what
// comes through them to the logs, at most --log-limit bytes in all: once the job's output reaches
// it, the job is told on stderr (a last line saying so), and it and everything it started get
// SIGTERM, then SIGKILL after N milliseconds; what it writes meanwhile is dropped. A shim the user
// stops stops the job's output with it, never a log that goes on growing.
//
// --output and --error name the user's copies of the job's stdout and stderr (sbatch -o/-e),
// written by the shim (which runs as the user) beside the logs, so a recorded end means complete
// copies. Only --output: stderr goes there too. A file that cannot be opened (or is not a
// regular file, or is colod's log itself) ends the attempt before the command runs, with the
// reason on stderr, as Slurm does. --append adds to the files (a retry's output after its
// predecessor's) instead of starting them afresh.
//
// Kept free of every library but the C and C++ runtimes: it sits between colod and each job for
// the job's whole life.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/job_signals.h"

namespace {

constexpr long kDefaultGraceMs = 5000;
constexpr long kMaxGraceMs = 3600 * 1000;
// How long SIGKILL passes go on for descendants that survive them (a set-uid program the user may
// not signal): colod, which may, ends those once the shim is gone.
constexpr long kKillPassesMs = 5000;
constexpr long kPollMs = 20;
// The longest wait for output: a child's end also ends it (SIGCHLD).
constexpr long kOutputWaitMs = 200;
// At most this much per output and pass, so that one output cannot hold up the other.
constexpr size_t kPassBytes = 16 << 20;

long NowMs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// Parent and state of `pid` from /proc/PID/stat; false if it is gone.
bool ReadParent(pid_t pid, pid_t* parent, char* state) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[1024];
  const ssize_t n = read(fd, buffer, sizeof buffer - 1);
  close(fd);
  if (n <= 0) return false;
  buffer[n] = '\0';
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const char* close_paren = strrchr(buffer, ')');
  if (close_paren == nullptr) return false;
  int parent_pid = 0;
  if (sscanf(close_paren + 1, " %c %d", state, &parent_pid) != 2) return false;
  *parent = parent_pid;
  return true;
}

// Every live process below the shim, from one pass over /proc.
std::vector<pid_t> Descendants() {
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {};
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    pid_t parent = 0;
    char state = '?';
    // A zombie has ended already; its parent (or the shim, once it is an orphan) reaps it.
    if (!ReadParent(static_cast<pid_t>(pid), &parent, &state) || state == 'Z' || state == 'X')
      continue;
    children[parent].push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  std::vector<pid_t> found;
  std::vector<pid_t> pending = {getpid()};
  while (!pending.empty()) {
    const pid_t pid = pending.back();
    pending.pop_back();
    const auto it = children.find(pid);
    if (it == children.end()) continue;
    for (pid_t child : it->second) {
      found.push_back(child);
      pending.push_back(child);
    }
  }
  return found;
}

// The job's command: the shim's one child of its own.
struct JobChild {
  pid_t pid = -1;
  int status = 0;
  bool ended = false;
};

// Reaps every child that has ended (the job's own status is kept); false once the shim has no
// child left. As a subreaper the shim inherits every orphan below it, so no child means no
// process of the job is left.
bool ChildrenRemain(JobChild& job) {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      if (pid == job.pid) {
        job.status = status;
        job.ended = true;
      }
      continue;
    }
    if (pid == 0) return true;
    if (errno == EINTR) continue;
    return false;
  }
}

bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Written whole or not at all: a temporary file, synced, then renamed over the record. The
// directory is the user's own, so the temporary name is created afresh, never followed.
bool WriteExitFile(const char* path, const std::string& line) {
  const std::string tmp = std::string(path) + ".tmp";
  int fd = -1;
  for (int tries = 0; tries < 2 && fd < 0; ++tries) {
    fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    // Left by an earlier shim killed while writing: remove it and try once more.
    if (fd < 0 && errno == EEXIST) unlink(tmp.c_str());
  }
  if (fd < 0) return false;
  const bool written = WriteAll(fd, line) && fsync(fd) == 0;
  close(fd);
  if (!written || rename(tmp.c_str(), path) != 0) {
    unlink(tmp.c_str());
    return false;
  }
  // The rename itself survives a crash only once the directory is synced.
  std::string dir(path);
  const size_t slash = dir.rfind('/');
  dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  return true;
}

// One of the job's outputs: the pipe it writes to, colod's log of it, and the user's copy.
struct Output {
  int pipe = -1;  // the read end; -1 once the job's last writer has closed it
  int log = -1;   // colod's log (the shim's stdout or stderr)
  int copy = -1;  // the user's file (shared by both outputs when they name one file); -1: none
  const char* path = "";
  bool copy_broken = false;  // a write failed: the copy stops, the log goes on
};

// What the logs may still take before the job is stopped, and whether it was.
struct LogBudget {
  long long limit = 0;  // 0: none
  long long written = 0;
  bool exceeded = false;
};

// Opens the user's FILE as the user (the shim is the user): created if missing, a regular file
// (a FIFO without a reader fails at once rather than blocking), or "/dev/null" for no copy (-1
// with an empty error). `logs` are colod's logs, which FILE must not be.
int OpenCopyFile(const char* path, bool append, const struct stat logs[2], std::string* error) {
  if (strcmp(path, "/dev/null") == 0) return -1;
  const int fd = open(
      path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (append ? O_APPEND : 0), 0666);
  if (fd < 0) {
    *error = strerror(errno);
    return -1;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    *error = "not a regular file";
    return -1;
  }
  for (int i = 0; i < 2; ++i) {
    if (st.st_dev == logs[i].st_dev && st.st_ino == logs[i].st_ino) {
      close(fd);
      *error = "it is colo's own log of the job";
      return -1;
    }
  }
  if (!append && ftruncate(fd, 0) != 0) {
    *error = strerror(errno);
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// `size` bytes the job wrote to `out`, into its log and the user's copy, as far as the budget
// allows; false once the budget is spent.
bool Deliver(Output& out, const char* data, size_t size, LogBudget& budget) {
  if (budget.exceeded) return false;
  size_t allowed = size;
  if (budget.limit > 0 && budget.written + static_cast<long long>(size) > budget.limit) {
    allowed = static_cast<size_t>(budget.limit - budget.written);
    budget.exceeded = true;
  }
  budget.written += static_cast<long long>(allowed);
  const std::string text(data, allowed);
  // A log that cannot be written (a full disk, the user's file size limit) loses this part.
  WriteAll(out.log, text);
  if (out.copy >= 0 && !out.copy_broken && !WriteAll(out.copy, text)) {
    fprintf(stderr, "colo-shim: cannot write %s: %s; the copy stops here (colo logs has all)\n",
            out.path, strerror(errno));
    out.copy_broken = true;
  }
  return !budget.exceeded;
}

// SIGCHLD, blocked and read here, so that a wait for output ends when a child does.
int child_signals = -1;

// Reads what the job's outputs hold now (waiting up to `wait_ms` for something, or a child's
// end) and delivers it; past the budget it is read and dropped. True if anything was read.
bool Pump(Output outputs[2], LogBudget& budget, long wait_ms) {
  pollfd fds[3];
  int count = 0;
  for (int i = 0; i < 2; ++i) {
    if (outputs[i].pipe >= 0) fds[count++] = {outputs[i].pipe, POLLIN, 0};
  }
  if (child_signals >= 0) fds[count++] = {child_signals, POLLIN, 0};
  if (poll(fds, static_cast<nfds_t>(count), static_cast<int>(wait_ms)) <= 0) return false;
  if (child_signals >= 0 && fds[count - 1].revents) {
    signalfd_siginfo info{};
    while (read(child_signals, &info, sizeof info) == sizeof info) {
    }
  }
  bool any = false;
  for (Output& out : std::span(outputs, 2)) {
    if (out.pipe < 0) continue;
    char buffer[65536];
    size_t got = 0;
    // A bounded amount per pass, so that one busy output cannot hold up the other.
    while (got < kPassBytes) {
      const ssize_t n = read(out.pipe, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) {  // every writer has closed it
        close(out.pipe);
        out.pipe = -1;
        break;
      }
      if (n < 0) break;  // EAGAIN: nothing more now
      any = true;
      got += static_cast<size_t>(n);
      Deliver(out, buffer, static_cast<size_t>(n), budget);
    }
  }
  return any;
}

// The job's outputs: pipes at fds 3 and 4 (stdout, stderr) whose write ends are 5 and 6, colod's
// logs at 1 and 2; the user's copies opened. False (the reason on stderr) if a copy cannot be
// opened.
bool OpenOutputs(const char* output, const char* error, bool append, Output outputs[2]) {
  struct stat logs[2] = {};
  for (int i = 0; i < 2; ++i) {
    outputs[i].log = i + 1;
    outputs[i].pipe = i + 3;
    fcntl(outputs[i].pipe, F_SETFD, FD_CLOEXEC);
    fcntl(outputs[i].pipe, F_SETFL, fcntl(outputs[i].pipe, F_GETFL) | O_NONBLOCK);
    if (fstat(i + 1, &logs[i]) != 0 || !S_ISREG(logs[i].st_mode)) logs[i] = {};
  }
  const char* paths[2] = {output, error != nullptr ? error : output};
  for (int i = 0; i < 2; ++i) {
    if (paths[i] == nullptr) continue;
    outputs[i].path = paths[i];
    if (i == 1 && paths[1] == paths[0]) {
      outputs[1].copy = outputs[0].copy;
      continue;
    }
    std::string why;
    outputs[i].copy = OpenCopyFile(paths[i], append, logs, &why);
    if (outputs[i].copy < 0 && !why.empty()) {
      fprintf(stderr, "colo: cannot open %s file %s: %s\n", i == 0 ? "output" : "error", paths[i],
              why.c_str());
      return false;
    }
    // -o and -e naming one file share one descriptor, or each would overwrite the other.
    struct stat a {
    }, b{};
    if (i == 1 && outputs[0].copy >= 0 && outputs[1].copy >= 0 && fstat(outputs[0].copy, &a) == 0 &&
        fstat(outputs[1].copy, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
      close(outputs[1].copy);
      outputs[1].copy = outputs[0].copy;
    }
  }
  return true;
}

void RecordEnd(const char* path, const std::string& line) {
  if (!WriteExitFile(path, line)) {
    fprintf(stderr, "colo-shim: cannot write %s: %s\n", path, strerror(errno));
  }
}

int Usage() {
  fprintf(stderr,
          "usage: colo-shim [--leftover-grace-ms=N] [--log-limit=BYTES] [--output=FILE] "
          "[--error=FILE] [--append] EXIT_FILE -- COMMAND [ARGS...]\n");
  return 2;
}

// The value of `--flag=VALUE` in `arg`, or nullptr.
const char* FlagValue(const char* arg, const char* flag) {
  const size_t length = strlen(flag);
  return strncmp(arg, flag, length) == 0 && arg[length] == '=' ? arg + length + 1 : nullptr;
}

// A whole number of `text`, in [0, max]; -1 if it is not one.
long long ParseCount(const char* text, long long max) {
  char* end = nullptr;
  errno = 0;
  const long long value = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0 || value > max) return -1;
  return value;
}

// Whatever of the job still runs gets SIGTERM, `grace_ms` to end, then SIGKILL; its outputs are
// read on meanwhile, so that nothing blocks writing to them.
void EndLeftovers(long grace_ms, JobChild& job, Output outputs[2], LogBudget& budget) {
  if (!ChildrenRemain(job)) return;
  for (pid_t pid : Descendants()) kill(pid, SIGTERM);
  const long term_until = NowMs() + grace_ms;
  while (NowMs() < term_until) {
    if (!ChildrenRemain(job)) return;
    Pump(outputs, budget, kPollMs);
  }
  // Repeated passes: a process may fork between the scan and the signal.
  const long kill_until = NowMs() + kKillPassesMs;
  while (ChildrenRemain(job) && NowMs() < kill_until) {
    for (pid_t pid : Descendants()) kill(pid, SIGKILL);
    Pump(outputs, budget, kPollMs);
  }
}

// The job's output passed the limit: it is told on stderr (its log and copy), then it and
// everything it started get SIGTERM, and SIGKILL after the grace.
void StopForOutput(JobChild& job, Output outputs[2], LogBudget& budget, long grace_ms) {
  char line[256];
  snprintf(line, sizeof line,
           "\ncolo: the job's output reached its limit of %lld bytes (jobs.log_limit of colod's "
           "config); the job was stopped\n",
           budget.limit);
  WriteAll(outputs[1].log, line);
  if (outputs[1].copy >= 0 && !outputs[1].copy_broken) WriteAll(outputs[1].copy, line);
  EndLeftovers(grace_ms, job, outputs, budget);
}

}  // namespace

int main(int argc, char** argv) {
  int next = 1;
  long grace_ms = kDefaultGraceMs;
  LogBudget budget;
  const char* output = nullptr;
  const char* error = nullptr;
  bool append = false;
  for (; next < argc && strncmp(argv[next], "--", 2) == 0 && argv[next][2] != '\0'; ++next) {
    if (const char* value = FlagValue(argv[next], "--leftover-grace-ms")) {
      grace_ms = static_cast<long>(ParseCount(value, kMaxGraceMs));
      if (grace_ms < 0) return Usage();
    } else if (const char* limit = FlagValue(argv[next], "--log-limit")) {
      budget.limit = ParseCount(limit, std::numeric_limits<long long>::max());
      if (budget.limit < 0) return Usage();
    } else if (const char* out_value = FlagValue(argv[next], "--output")) {
      output = out_value;
    } else if (const char* err_value = FlagValue(argv[next], "--error")) {
      error = err_value;
    } else if (strcmp(argv[next], "--append") == 0) {
      append = true;
    } else {
      return Usage();
    }
    if ((output != nullptr && *output == '\0') || (error != nullptr && *error == '\0'))
      return Usage();
  }
  if (argc - next < 3 || strcmp(argv[next + 1], "--") != 0) return Usage();
  const char* exit_file = argv[next];
  char** command = argv + next + 2;
  for (int fd = 3; fd <= 6; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) {
      fprintf(stderr, "colo-shim: descriptors 3 to 6 must be the job's output pipes\n");
      return Usage();
    }
  }

  // Orphans below the shim become its children instead of leaving the job.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) perror("colo-shim: PR_SET_CHILD_SUBREAPER");
  // colod's signals to the job (cancel, time limit, --signal) reach the shim too: it outlives
  // the job to record its end.
  for (int number : colo::kJobSignals) signal(number, SIG_IGN);
  // A full disk or a file size limit fails a log's write instead of ending the shim.
  signal(SIGXFSZ, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  // An ignored SIGCHLD would reap children unasked and lose the job's status; blocked, it wakes
  // the wait for output instead.
  signal(SIGCHLD, SIG_DFL);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  child_signals = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  Output outputs[2];
  if (!OpenOutputs(output, error, append, outputs)) {
    RecordEnd(exit_file, "exited 1\n");
    return 1;
  }
  JobChild job;
  job.pid = fork();
  if (job.pid < 0) {
    perror("colo-shim: fork");
    RecordEnd(exit_file, "exited 127\n");
    return 127;
  }
  if (job.pid == 0) {
    // The job writes to the pipes, never to colod's logs themselves.
    if (dup2(5, 1) < 0 || dup2(6, 2) < 0) _exit(127);
    for (int fd = 3; fd <= 6; ++fd) close(fd);
    // Ignored and blocked signals survive exec: give the job the defaults back.
    sigprocmask(SIG_UNBLOCK, &chld, nullptr);
    for (int number : colo::kJobSignals) signal(number, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    execvp(command[0], command);
    fprintf(stderr, "colo: cannot run %s: %s\n", command[0], strerror(errno));
    _exit(127);
  }
  // Only the job holds the write ends now: once it and all it started are gone, the pipes end.
  close(5);
  close(6);
  while (ChildrenRemain(job) && !job.ended) {
    Pump(outputs, budget, kOutputWaitMs);
    if (budget.exceeded) {
      StopForOutput(job, outputs, budget, grace_ms);
      break;
    }
  }
  EndLeftovers(grace_ms, job, outputs, budget);
  // What the pipes still hold, and its end (every writer gone); a little more should a process
  // that could not be ended hold one open.
  for (int pass = 0; pass < 64 && (outputs[0].pipe >= 0 || outputs[1].pipe >= 0); ++pass) {
    if (!Pump(outputs, budget, pass == 0 ? 0 : kPollMs) && !ChildrenRemain(job) &&
        outputs[0].pipe < 0 && outputs[1].pipe < 0)
      break;
  }
  if (!job.ended) {
    // Reaped elsewhere (it cannot be) or never: the job's status is unknown.
    RecordEnd(exit_file, "exited 1\n");
    return 1;
  }
  const int status = job.status;
  if (WIFSIGNALED(status)) {
    RecordEnd(exit_file, "signaled " + std::to_string(WTERMSIG(status)) + "\n");
    return 128 + WTERMSIG(status);
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  RecordEnd(exit_file, "exited " + std::to_string(code) + "\n");
  return code;
}

// colo-shim: the parent of every job attempt. colod starts it as a session leader (as the job's
// user, in the attempt's cgroup where there is one); it starts the job, waits for it and writes
// how it ended to a file, so the outcome is known even when colod was not running at that moment
// (colod re-adopts running jobs after a restart).
//
//   colo-shim [--leftover-grace-ms=N] [--output=FILE] [--error=FILE] [--append]
//             EXIT_FILE -- COMMAND [ARGS...]
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
// --output and --error name the user's copies of the job's stdout and stderr (sbatch -o/-e): the
// job writes to colod's logs (its stdout and stderr as the shim got them), and the shim, which
// runs as the user, copies what they gain to these files every kCopyPollMs and once more before
// it records the end, so a recorded end means complete copies. Only --output: stderr goes there
// too. A file that cannot be opened (or is not a regular file, or is colod's log itself) ends the
// attempt before the command runs, with the reason on stderr, as Slurm does. --append adds to the
// files (a retry's output after its predecessor's) instead of starting them afresh.
//
// Kept free of every library but the C and C++ runtimes: it sits between colod and each job for
// the job's whole life.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr long kDefaultGraceMs = 5000;
constexpr long kMaxGraceMs = 3600 * 1000;
// How long SIGKILL passes go on for descendants that survive them (a set-uid program the user may
// not signal): colod, which may, ends those once the shim is gone.
constexpr long kKillPassesMs = 5000;
constexpr long kPollMs = 20;
constexpr long kCopyPollMs = 200;
// At most this much per stream and pass, so that a job that writes fast is still reaped.
constexpr size_t kCopyPassBytes = 16 << 20;

long NowMs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

void SleepMs(long ms) {
  timespec pause{ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&pause, nullptr);
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

// Reaps every child that has ended; false once the shim has no child left. As a subreaper the
// shim inherits every orphan below it, so no child means no process of the job is left.
bool ChildrenRemain() {
  for (;;) {
    const pid_t pid = waitpid(-1, nullptr, WNOHANG);
    if (pid > 0) continue;
    if (pid == 0) return true;
    if (errno == EINTR) continue;
    return false;
  }
}

void EndLeftovers(long grace_ms) {
  if (!ChildrenRemain()) return;
  for (pid_t pid : Descendants()) kill(pid, SIGTERM);
  const long term_until = NowMs() + grace_ms;
  while (NowMs() < term_until) {
    if (!ChildrenRemain()) return;
    SleepMs(kPollMs);
  }
  // Repeated passes: a process may fork between the scan and the signal.
  const long kill_until = NowMs() + kKillPassesMs;
  while (ChildrenRemain() && NowMs() < kill_until) {
    for (pid_t pid : Descendants()) kill(pid, SIGKILL);
    SleepMs(kPollMs);
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

// One of the job's outputs and the user's copy of it.
struct Copy {
  int from = -1;  // colod's log, read from where the last pass stopped
  int to = -1;    // the user's file (shared by both copies when they name one file)
  const char* path = "";
  bool broken = false;  // a write failed: the copy stops, the log goes on
  // The last bytes copied, to see whether the log still holds them where they were read.
  char tail[64] = {};
  size_t tail_size = 0;
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

// Copies what the log gained since the last pass; true if anything was copied.
bool CopyNew(Copy& copy) {
  if (copy.from < 0 || copy.to < 0 || copy.broken) return false;
  // The job emptied its log (`echo x > /dev/stderr` opens it with O_TRUNC) and may have written
  // past the old length since: if the log no longer holds what was copied last where it was
  // read, it is read from its start again, or what it wrote after emptying it would be skipped.
  struct stat st {};
  const off_t at = lseek(copy.from, 0, SEEK_CUR);
  bool rewritten = fstat(copy.from, &st) == 0 && at > st.st_size;
  if (!rewritten && copy.tail_size > 0) {
    char now[sizeof copy.tail];
    const off_t from = at - static_cast<off_t>(copy.tail_size);
    rewritten =
        pread(copy.from, now, copy.tail_size, from) != static_cast<ssize_t>(copy.tail_size) ||
        memcmp(now, copy.tail, copy.tail_size) != 0;
  }
  if (rewritten) {
    lseek(copy.from, 0, SEEK_SET);
    copy.tail_size = 0;
  }
  char buffer[65536];
  size_t copied = 0;
  while (copied < kCopyPassBytes) {
    const ssize_t n = read(copy.from, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (!WriteAll(copy.to, std::string(buffer, static_cast<size_t>(n)))) {
      fprintf(stderr, "colo-shim: cannot write %s: %s; the copy stops here (colo logs has all)\n",
              copy.path, strerror(errno));
      copy.broken = true;
      break;
    }
    copied += static_cast<size_t>(n);
    // Keep the last sizeof tail bytes copied.
    const size_t got = static_cast<size_t>(n);
    if (got >= sizeof copy.tail) {
      memcpy(copy.tail, buffer + got - sizeof copy.tail, sizeof copy.tail);
      copy.tail_size = sizeof copy.tail;
    } else {
      const size_t keep = std::min(copy.tail_size, sizeof copy.tail - got);
      memmove(copy.tail, copy.tail + copy.tail_size - keep, keep);
      memcpy(copy.tail + keep, buffer, got);
      copy.tail_size = keep + got;
    }
  }
  return copied > 0;
}

bool CopyAll(Copy copies[2]) {
  const bool out = CopyNew(copies[0]);
  const bool err = CopyNew(copies[1]);
  return out || err;
}

void RecordEnd(const char* path, const std::string& line) {
  if (!WriteExitFile(path, line)) {
    fprintf(stderr, "colo-shim: cannot write %s: %s\n", path, strerror(errno));
  }
}

int Usage() {
  fprintf(stderr,
          "usage: colo-shim [--leftover-grace-ms=N] [--output=FILE] [--error=FILE] [--append] "
          "EXIT_FILE -- COMMAND [ARGS...]\n");
  return 2;
}

// The value of `--flag=VALUE` in `arg`, or nullptr.
const char* FlagValue(const char* arg, const char* flag) {
  const size_t length = strlen(flag);
  return strncmp(arg, flag, length) == 0 && arg[length] == '=' ? arg + length + 1 : nullptr;
}

// Opens the user's copies; false (the reason on stderr) if one cannot be opened.
bool OpenCopies(const char* output, const char* error, bool append, Copy copies[2]) {
  struct stat logs[2] = {};
  for (int i = 0; i < 2; ++i) {
    if (fstat(i + 1, &logs[i]) != 0 || !S_ISREG(logs[i].st_mode)) logs[i] = {};
  }
  const char* paths[2] = {output, error != nullptr ? error : output};
  for (int i = 0; i < 2; ++i) {
    if (paths[i] == nullptr) continue;
    copies[i].path = paths[i];
    if (i == 1 && paths[1] == paths[0]) {
      copies[1].to = copies[0].to;
    } else {
      std::string why;
      copies[i].to = OpenCopyFile(paths[i], append, logs, &why);
      if (copies[i].to < 0 && !why.empty()) {
        fprintf(stderr, "colo: cannot open %s file %s: %s\n", i == 0 ? "output" : "error", paths[i],
                why.c_str());
        return false;
      }
      // -o and -e naming one file share one descriptor, or each would overwrite the other.
      struct stat a {
      }, b{};
      if (i == 1 && copies[0].to >= 0 && copies[1].to >= 0 && fstat(copies[0].to, &a) == 0 &&
          fstat(copies[1].to, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        close(copies[1].to);
        copies[1].to = copies[0].to;
      }
    }
    if (copies[i].to < 0) continue;
    // colod's log, read from its start through a descriptor of the shim's own.
    char self[32];
    snprintf(self, sizeof self, "/proc/self/fd/%d", i + 1);
    copies[i].from = logs[i].st_ino != 0 ? open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int next = 1;
  long grace_ms = kDefaultGraceMs;
  const char* output = nullptr;
  const char* error = nullptr;
  bool append = false;
  for (; next < argc && strncmp(argv[next], "--", 2) == 0 && argv[next][2] != '\0'; ++next) {
    if (const char* value = FlagValue(argv[next], "--leftover-grace-ms")) {
      char* end = nullptr;
      errno = 0;
      grace_ms = strtol(value, &end, 10);
      if (errno != 0 || end == value || *end != '\0' || grace_ms < 0 || grace_ms > kMaxGraceMs)
        return Usage();
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

  // Orphans below the shim become its children instead of leaving the job.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) perror("colo-shim: PR_SET_CHILD_SUBREAPER");
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  // A full disk or a file size limit fails a copy's write instead of ending the shim.
  signal(SIGXFSZ, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  // An ignored SIGCHLD would reap children unasked and lose the job's status.
  signal(SIGCHLD, SIG_DFL);
  Copy copies[2];
  if (!OpenCopies(output, error, append, copies)) {
    RecordEnd(exit_file, "exited 1\n");
    return 1;
  }
  const bool copying = copies[0].to >= 0 || copies[1].to >= 0;
  const pid_t child = fork();
  if (child < 0) {
    perror("colo-shim: fork");
    RecordEnd(exit_file, "exited 127\n");
    return 127;
  }
  if (child == 0) {
    // Ignored signals survive exec: give the job the defaults back.
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    execvp(command[0], command);
    fprintf(stderr, "colo: cannot run %s: %s\n", command[0], strerror(errno));
    _exit(127);
  }
  int status = 0;
  for (;;) {
    int reaped_status = 0;
    const pid_t pid = waitpid(-1, &reaped_status, copying ? WNOHANG : 0);
    if (pid == child) {
      status = reaped_status;
      break;
    }
    // Orphans the shim inherited end too; they are reaped on the way.
    if (pid < 0 && errno != EINTR) {
      perror("colo-shim: waitpid");
      return 127;
    }
    if (pid == 0 && !CopyAll(copies)) SleepMs(kCopyPollMs);
  }
  CopyAll(copies);
  EndLeftovers(grace_ms);
  // Everything the logs hold now, however much (the processes that wrote it have ended), and
  // a little more should one that could not be ended write on.
  off_t unread = 0;
  for (const Copy& copy : copies) {
    struct stat st {};
    if (copy.from >= 0 && fstat(copy.from, &st) == 0)
      unread = std::max(unread, st.st_size - lseek(copy.from, 0, SEEK_CUR));
  }
  const off_t passes = unread / static_cast<off_t>(kCopyPassBytes) + 64;
  for (off_t pass = 0; pass < passes && CopyAll(copies); ++pass) {
  }
  if (WIFSIGNALED(status)) {
    RecordEnd(exit_file, "signaled " + std::to_string(WTERMSIG(status)) + "\n");
    return 128 + WTERMSIG(status);
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  RecordEnd(exit_file, "exited " + std::to_string(code) + "\n");
  return code;
}

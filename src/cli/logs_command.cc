#include "cli/logs_command.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/client.h"
#include "common/text.h"

namespace colo {

namespace fs = std::filesystem;

namespace {

// Printable, keeping line breaks (and carriage returns, which progress bars use) as they are.
std::string PrintableLines(std::string_view text) {
  std::string out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find_first_of("\r\n", start);
    const size_t stop = end == std::string_view::npos ? text.size() : end;
    out += Printable(text.substr(start, stop - start));
    if (end == std::string_view::npos) break;
    out += text[end];
    start = end + 1;
  }
  return out;
}

// A job's log, opened as the user running colo (the kernel decides whether they may), and only
// as colod made it: a regular file that belongs to the owner of the job's directory. Everything
// in that directory is the job's to replace: a link (to /etc/shadow, for root reading it) is not
// followed, a FIFO is not waited on, a hard link to another user's file is not read.
Result<int> OpenJobLog(const std::string& path) {
  const fs::path p(path);
  const int dir = open(p.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return NotFound(fmt::format("cannot read {}: {}", path, strerror(errno)));
  struct stat dir_st {};
  const bool dir_ok = fstat(dir, &dir_st) == 0;
  const int fd =
      openat(dir, p.filename().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  const int open_error = errno;
  close(dir);
  if (fd < 0) {
    if (open_error == ELOOP)
      return FailedPrecondition(fmt::format("{} is a symbolic link; not following it", path));
    return NotFound(fmt::format("cannot read {}: {}", path, strerror(open_error)));
  }
  struct stat st {};
  if (!dir_ok || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != dir_st.st_uid) {
    close(fd);
    return FailedPrecondition(
        fmt::format("{} is not a regular file of the job's owner; not reading it", path));
  }
  return fd;
}

// One of a job's output files, printed as it grows. To a terminal, what the job wrote cannot
// move the cursor or change colours; to a pipe it goes as it is.
class LogPrinter {
 public:
  LogPrinter(int fd, FILE* out) : fd_(fd), out_(out), terminal_(isatty(fileno(out))) {}
  LogPrinter(const LogPrinter&) = delete;
  LogPrinter& operator=(const LogPrinter&) = delete;
  ~LogPrinter() {
    if (!pending_.empty()) fputs(Printable(pending_).c_str(), out_);
    fflush(out_);
    close(fd_);
  }

  // Prints what was written since the last call.
  void Drain() {
    char buffer[8192];
    for (;;) {
      const ssize_t n = read(fd_, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (!terminal_) {
        fwrite(buffer, 1, static_cast<size_t>(n), out_);
        continue;
      }
      pending_.append(buffer, static_cast<size_t>(n));
      size_t cut = pending_.size();
      for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
        const auto byte = static_cast<unsigned char>(pending_[pending_.size() - back]);
        if ((byte & 0xC0) == 0xC0) {  // a lead byte: its character may continue in the next read
          cut = pending_.size() - back;
          break;
        }
        if ((byte & 0xC0) != 0x80) break;
      }
      fputs(PrintableLines(std::string_view(pending_).substr(0, cut)).c_str(), out_);
      pending_.erase(0, cut);
    }
    fflush(out_);
  }

 private:
  int fd_;
  FILE* out_;
  bool terminal_;
  std::string pending_;  // the start of a character cut by the end of a read
};

// The files of one attempt that `colo logs` shows: stdout, stderr, or both (each to its own
// stream). A file not there yet (the attempt is starting) is opened at a later Drain.
class AttemptLogs {
 public:
  AttemptLogs(const ClientOptions& o, const api::LogsReply& reply) {
    if (!o.stderr_log || o.both_logs) wanted_.push_back({reply.stdout_path, stdout, nullptr});
    // Alone, the job's stderr is colo's output; beside its stdout it goes to colo's stderr.
    if (o.stderr_log || o.both_logs)
      wanted_.push_back({reply.stderr_path, o.both_logs ? stderr : stdout, nullptr});
  }

  // Opens what it can and prints what is new. Missing files are an error only with `final`.
  Status Drain(bool final) {
    for (Wanted& w : wanted_) {
      if (!w.printer) {
        auto fd = OpenJobLog(w.path);
        if (!fd.ok()) {
          if (fd.status().code() == StatusCode::kNotFound && !final) continue;
          return fd.status();
        }
        w.printer = std::make_unique<LogPrinter>(*fd, w.out);
      }
      w.printer->Drain();
    }
    return Status::Ok();
  }

 private:
  struct Wanted {
    std::string path;
    FILE* out;
    std::unique_ptr<LogPrinter> printer;
  };
  std::vector<Wanted> wanted_;
};

constexpr auto kFollowInterval = std::chrono::milliseconds(500);

// colo logs -f: waits for the job to start, prints each attempt's output as it is written
// (an out-of-memory retry's after a header line on stderr), and returns the job's exit status.
int FollowLogs(const ClientOptions& o) {
  auto latest = Call(o, api::LogsRequest{o.job, std::nullopt});
  if (!latest.ok()) return Fail(o, latest.status());
  bool said_waiting = false;
  while (latest->attempt == 0 && !IsTerminal(latest->state)) {
    if (!said_waiting) fmt::print(stderr, "colo: job {} has not started yet; waiting\n", o.job_ref);
    said_waiting = true;
    std::this_thread::sleep_for(kFollowInterval);
    latest = Call(o, api::LogsRequest{o.job, std::nullopt});
    if (!latest.ok()) return Fail(o, latest.status());
  }
  for (int attempt = o.attempt > 0 ? o.attempt : 1; attempt <= latest->attempt; ++attempt) {
    auto files = Call(o, api::LogsRequest{o.job, attempt});
    if (!files.ok()) return Fail(o, files.status());
    if (latest->attempt > 1) fmt::print(stderr, "==> job {} attempt {} <==\n", o.job_ref, attempt);
    AttemptLogs logs(o, *files);
    for (;;) {
      if (Status s = logs.Drain(false); !s.ok()) return Fail(o, s);
      latest = Call(o, api::LogsRequest{o.job, std::nullopt});
      if (!latest.ok()) return Fail(o, latest.status());
      // Its last words: the attempt ended (the job ended, or a retry started).
      if (latest->attempt != attempt || IsTerminal(latest->state) ||
          latest->state == JobState::kRecovering) {
        if (Status s = logs.Drain(true); !s.ok()) return Fail(o, s);
        if (latest->attempt != attempt || IsTerminal(latest->state)) break;
        // Recovering: wait for the next attempt (or for the job to end) without re-reading.
        while (latest->attempt == attempt && !IsTerminal(latest->state)) {
          std::this_thread::sleep_for(kFollowInterval);
          latest = Call(o, api::LogsRequest{o.job, std::nullopt});
          if (!latest.ok()) return Fail(o, latest.status());
        }
        break;
      }
      std::this_thread::sleep_for(kFollowInterval);
    }
  }
  if (latest->state == JobState::kSucceeded) return kExitOk;
  fmt::print(stderr, "colo: job {} {}\n", o.job_ref, ToString(latest->state));
  return kExitError;
}

}  // namespace

int RunLogsCommand(const ClientOptions& o) {
  if (o.follow && !o.json) return FollowLogs(o);
  std::optional<int> attempt;
  if (o.attempt > 0) attempt = o.attempt;
  auto reply = Call(o, api::LogsRequest{o.job, attempt});
  if (!reply.ok()) return Fail(o, reply.status());
  if (o.json) {
    fmt::print("{}\n", api::EncodeReply(*reply));
    return kExitOk;
  }
  if (reply->attempt == 0 && !IsTerminal(reply->state)) {
    fmt::print(stderr, "colo: job {} has not started yet (colo logs -f waits for it)\n", o.job_ref);
    return kExitOk;
  }
  if (reply->attempt > 0) {
    AttemptLogs logs(o, *reply);
    if (Status s = logs.Drain(true); !s.ok()) return Fail(o, s);
  }
  // Like -f: a job that ended other than well makes the exit code say so.
  if (!IsTerminal(reply->state) || reply->state == JobState::kSucceeded) return kExitOk;
  fmt::print(stderr, "colo: job {} {}{}\n", o.job_ref, ToString(reply->state),
             reply->attempt == 0 ? " before it started" : "");
  return kExitError;
}

}  // namespace colo

#include "cli/client_commands.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>

#include "api/client.h"
#include "api/output_pattern.h"
#include "cli/conda.h"
#include "cli/control_commands.h"
#include "cli/eff_command.h"
#include "cli/estimate_command.h"
#include "cli/job_table.h"
#include "cli/report_command.h"
#include "common/resource_limits.h"
#include "common/signals.h"
#include "common/strings.h"
#include "common/text.h"
#include "common/units.h"
#include "core/fair_share.h"
#include "formats/job_script.h"
#include "formats/rad.h"
#include "formats/slurm_options.h"

extern char** environ;

namespace colo {

namespace fs = std::filesystem;

namespace {

int Fail(const ClientOptions& o, const Status& s) {
  return ReportError(s, o.json);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Escaped for the terminal and cut to `n` columns on a character boundary ('+' marks the cut).
std::string Cell(const std::string& s, size_t n) {
  return FitColumns(s, n);
}

std::string Gib(Bytes bytes) {
  return fmt::format("{:.1f}", bytes.count() / double(1LL << 30));
}
std::string Pct(double v) {
  return v < 0 ? "-" : fmt::format("{:.0f}%", 100 * v);
}

int PrintJobs(const ClientOptions& o, const std::vector<api::JobSummary>& jobs, bool history) {
  // On a Slurm node, each job's Slurm id too ("-" for a job submitted to colo itself).
  const bool slurm = std::any_of(jobs.begin(), jobs.end(),
                                 [](const api::JobSummary& j) { return j.slurm_job.has_value(); });
  auto format = JobFormat::Parse(!o.format.empty() ? o.format
                                 : history         ? DefaultHistoryFormat(slurm)
                                                   : DefaultQueueFormat(slurm));
  if (!format.ok()) return ReportError(format.status(), o.json, kExitUsage);
  if (!o.no_header) fmt::print("{}\n", format->Header());
  const double now = Now();
  for (const api::JobSummary& j : jobs) fmt::print("{}\n", format->Row(j, now));
  return kExitOk;
}

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

bool IsExecutableFile(const fs::path& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Where execvp finds `program` on `path` (colon-separated; an empty or relative entry is taken
// from `dir`, the directory the program starts in), checked as the user running colo.
std::optional<std::string> FindOnPath(const std::string& program, std::string_view path,
                                      const fs::path& dir) {
  for (const std::string& entry : Split(path, ':')) {
    const fs::path candidate = (entry.empty() ? dir : dir / entry) / program;
    if (IsExecutableFile(candidate)) return candidate.string();
  }
  return std::nullopt;
}

// The job's command can start: its program is a file the submitter may run (a path taken from
// the working directory), or a command on the PATH the job gets (execvp's own when it gets none).
// Checked here, as the user, since colod never looks at a user's files as root; sbatch refuses
// a script it cannot open the same way.
Status CheckRunnable(const api::SubmitRequest& r) {
  const std::string& program = r.command.front();
  const fs::path workdir(r.context.workdir);
  if (program.find('/') != std::string::npos) {
    const fs::path file = workdir / program;  // an absolute `program` replaces the workdir
    struct stat st {};
    if (stat(file.c_str(), &st) != 0)
      return InvalidArgument(fmt::format(
          "cannot run {}: {}{}", Printable(program), strerror(errno),
          fs::path(program).is_absolute() ? "" : " (in " + Printable(r.context.workdir) + ")"));
    if (S_ISDIR(st.st_mode))
      return InvalidArgument(fmt::format("cannot run {}: it is a directory", Printable(program)));
    if (!IsExecutableFile(file))
      return InvalidArgument(
          fmt::format("cannot run {}: it is not executable (chmod +x it, or name what runs it: "
                      "colo submit -- sh {})",
                      Printable(program), Printable(program)));
    return Status::Ok();
  }
  std::string path = "/bin:/usr/bin";  // execvp's when the environment has no PATH
  for (const std::string& entry : r.env) {
    if (entry.starts_with("PATH=")) path = entry.substr(5);
  }
  if (FindOnPath(program, path, workdir)) return Status::Ok();
  return InvalidArgument(fmt::format(
      "cannot run {}: no file of that name in {}, and no command of that name on the job's PATH",
      Printable(program), Printable(r.context.workdir)));
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

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The job's command and settings from a CARMA task file.
Status ApplyRadTask(const std::string& path, const std::vector<std::string>& environment,
                    api::SubmitRequest& r, ClientOptions& o) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  auto task = ParseRad(*text, path);
  if (!task.ok()) return task.status();
  if (task->environment.empty()) {
    r.command = {"/bin/sh", "-c", task->command};
  } else {
    // `conda activate ENV` in the file: the command runs inside that environment.
    const char* conda_exe = std::getenv("CONDA_EXE");
    const char* search = std::getenv("PATH");
    std::optional<std::string> conda = conda_exe && *conda_exe
                                           ? std::optional<std::string>(conda_exe)
                                       : search ? FindOnPath("conda", search, fs::current_path())
                                                : std::nullopt;
    if (!conda) {
      return FailedPrecondition(fmt::format(
          "{} runs in the conda environment '{}', but conda is not on PATH (and CONDA_EXE is "
          "not set): activate conda before colo submit, or empty line 2 of the file",
          path, task->environment));
    }
    if (Status found = CheckCondaEnvironment(*conda, task->environment, environment); !found.ok())
      return Status(found.code(), path + ": " + found.message());
    r.command = {*conda,    "run", "--no-capture-output", "-n", task->environment,
                 "/bin/sh", "-c",  task->command};
  }
  if (o.gpus == 0) o.gpus = task->gpus;
  if (o.memory.empty()) {
    // The most trustworthy number the file has: measured, then the estimators CARMA ran.
    for (const auto& m : {task->measured_peak, task->gpumemnet, task->horus, task->faketensor}) {
      if (m) {
        o.memory = std::to_string(m->count()) + "B";
        break;
      }
    }
    // Every line 40000 ("not known") or missing: CARMA never collocates such a task (40000 MiB
    // plus its 2 GiB margin fits on no 40 GB GPU), so it asks for its GPUs alone.
    if (o.memory.empty() && o.share.empty()) o.share = "exclusive";
  }
  if (o.name.empty()) o.name = fs::path(path).stem().string();
  r.context.source = "rad " + fs::absolute(path).string();
  return Status::Ok();
}

// A job script: its #COLO lines fill what the command line did not say; it runs as itself
// when executable, else with its interpreter (its #! line, or /bin/sh).
Status ApplyJobScript(const std::vector<std::string>& words, api::SubmitRequest& r,
                      ClientOptions& o) {
  const std::string& path = words.front();
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  auto directives = ParseJobScript(*text, path);
  if (!directives.ok()) return directives.status();
  const ScriptDirectives& d = *directives;
  for (const std::string& warning : d.warnings) fmt::print(stderr, "colo: warning: {}\n", warning);
  if (o.gpus == 0 && d.gpus) o.gpus = *d.gpus;
  if (o.memory.empty() && d.memory) o.memory = *d.memory;
  if (o.share.empty() && d.share) o.share = *d.share;
  if (o.name.empty() && d.name) o.name = *d.name;
  if (o.threads == 0 && d.threads) o.threads = *d.threads;
  if (o.smact < 0 && d.smact) o.smact = *d.smact;
  if (o.output.empty() && d.output) o.output = *d.output;
  if (o.error.empty() && d.error) o.error = *d.error;
  if (o.time_limit.empty() && d.time_limit) o.time_limit = *d.time_limit;
  if (o.signal.empty() && d.signal) o.signal = *d.signal;
  if (!o.requeue && d.requeue) o.requeue = *d.requeue;
  if (o.array.empty() && d.array) o.array = *d.array;
  if (o.dependency.empty() && d.dependency) o.dependency = *d.dependency;
  const std::string absolute = fs::absolute(path).lexically_normal().string();
  if (access(path.c_str(), X_OK) == 0) {
    r.command = {absolute};
  } else {
    auto interpreter = ScriptInterpreter(*text, path);
    if (!interpreter.ok()) return interpreter.status();
    r.command = *interpreter;
    r.command.push_back(absolute);
  }
  r.command.insert(r.command.end(), words.begin() + 1, words.end());
  if (o.name.empty()) o.name = fs::path(path).filename().string();
  r.context.source = "script " + absolute;
  return Status::Ok();
}

Status ApplyEstimate(const ClientOptions& o, api::SubmitRequest& r) {
  // Estimated here, where the user's files are; colod stores the answer with the job, refines
  // it with earlier runs of the same model and plans with it unless --mem was given.
  EstimateCommandOptions eo;
  eo.summary = o.estimate_from;
  eo.batch = o.batch;
  eo.gpu = o.estimate_gpu;
  auto report = RunEstimates(eo);
  if (!report.ok()) return report.status();
  const NamedEstimate* best = BestEstimate(report->estimates);
  if (!best) {
    std::string why;
    for (const auto& e : report->estimates)
      why += fmt::format("\n  {}: {}", e.estimator, e.estimate.status().message());
    return InvalidArgument(
        fmt::format("no estimator could answer for {}:{}", o.estimate_from, why));
  }
  api::JobEstimate e;
  e.estimator = best->estimator;
  e.peak = best->estimate->peak;
  e.lower = best->estimate->lower;
  e.upper = best->estimate->upper;
  e.detail = best->estimate->detail;
  e.signature = fmt::format("{:016x}-b{}", report->summary->Signature(), report->batch);
  if (report->smact) e.predicted_smact = report->smact->smact;
  r.estimate = e;
  for (const auto& warning : report->warnings) fmt::print(stderr, "colo: warning: {}\n", warning);
  if (!o.json) {
    // Say why the better estimators could not answer (no trace for this batch, no calibration).
    for (const auto& named : report->estimates) {
      if (&named == best) break;
      if (!named.estimate.ok() && named.estimator != "history" && named.estimator != "declared")
        fmt::print(stderr, "colo: {}: {}\n", named.estimator, named.estimate.status().message());
    }
    fmt::print(stderr, "colo: {} estimates {} (plans with {})\n", best->estimator,
               FormatBytes(best->estimate->peak), FormatBytes(best->estimate->upper));
    if (report->smact && o.smact < 0)
      fmt::print(stderr, "colo: solo SM activity {:.2f} predicted from the profile\n",
                 report->smact->smact);
  }
  return Status::Ok();
}

int Submit(const ClientOptions& options) {
  std::vector<std::string> environment;
  for (char** e = environ; *e; ++e) environment.push_back(*e);
  // No command is a usage error; what a job file or an estimate says wrong is not.
  if (options.command.empty())
    return ReportError(InvalidArgument("nothing to submit: give a job file or -- COMMAND"),
                       options.json, kExitUsage);
  auto request = BuildSubmitRequest(options, environment);
  if (!request.ok()) return Fail(options, request.status());
  request->token = api::NewSubmitToken();
  auto reply =
      api::SubmitOnce(options.socket.empty() ? api::DefaultSocketPath() : options.socket, *request);
  if (!reply.ok()) return Fail(options, reply.status());
  if (options.json)
    fmt::print("{}\n", api::EncodeReply(*reply));
  else if (options.parsable)
    fmt::print("{}\n", reply->job);
  else if (request->array)
    fmt::print("Submitted array job {} ({} tasks)\n", reply->job, request->array->tasks.size());
  else
    fmt::print("Submitted job {}\n", reply->job);
  return 0;
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

int Logs(const ClientOptions& o) {
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

// sacct's selections, over ended jobs: -S (ended at or after), -E (submitted at or before),
// -s states, -u users, -j jobs (an array's id: all its tasks), --name names.
class HistoryFilter {
 public:
  static Result<HistoryFilter> Make(const ClientOptions& o) {
    HistoryFilter f;
    const double now = Now();
    if (!o.since.empty()) {
      auto t = ParseReportTime(o.since, now);
      if (!t.ok()) return InvalidArgument("--starttime: " + t.status().message());
      f.since_ = *t;
    }
    if (!o.until.empty()) {
      auto t = ParseReportTime(o.until, now);
      if (!t.ok()) return InvalidArgument("--endtime: " + t.status().message());
      f.until_ = *t;
    }
    for (const std::string& word : Words(o.state_filter)) {
      auto state = StateNamed(word);
      if (!state)
        return InvalidArgument(
            fmt::format("--state: '{}' is not a state (colo history --help "
                        "lists them)",
                        Printable(word)));
      f.states_.insert(*state);
    }
    for (const std::string& word : Words(o.jobs_filter)) {
      if (!IsJobRef(word))
        return InvalidArgument(fmt::format("--jobs: '{}' is not a job id", Printable(word)));
      f.jobs_.insert(word);
    }
    for (const std::string& word : Words(o.user)) f.users_.insert(word);
    for (const std::string& word : Words(o.name)) f.names_.insert(word);
    return f;
  }

  bool Matches(const api::JobSummary& j) const {
    if (since_ && j.finished < *since_) return false;
    if (until_ && j.submitted > *until_) return false;
    if (!states_.empty() && !states_.count(j.state)) return false;
    if (!users_.empty() && !users_.count(j.user)) return false;
    if (!names_.empty() && !names_.count(j.name)) return false;
    if (!jobs_.empty() && !jobs_.count(std::to_string(j.id)) && !jobs_.count(JobIdText(j)) &&
        !(j.array_job && jobs_.count(std::to_string(*j.array_job))))
      return false;
    return true;
  }
  bool others() const { return !users_.empty(); }

 private:
  static std::vector<std::string> Words(const std::string& list) {
    std::vector<std::string> words;
    for (const std::string& w : Split(list, ','))
      if (!Trim(w).empty()) words.emplace_back(Trim(w));
    return words;
  }
  std::optional<double> since_, until_;
  std::set<JobState> states_;
  std::set<std::string> users_, names_, jobs_;
};

int History(const ClientOptions& o) {
  auto filter = HistoryFilter::Make(o);
  if (!filter.ok()) return ReportError(filter.status(), o.json, kExitUsage);
  // Pages of at most kMaxHistoryPage, so a long history never holds colod up for others; with
  // filters, pages until --limit jobs matched or the history ends.
  std::vector<api::JobSummary> jobs;
  api::HistoryRequest request;
  request.all = o.all || filter->others();
  request.limit = api::kMaxHistoryPage;
  while (static_cast<int>(jobs.size()) < o.limit) {
    auto page = Call(o, request);
    if (!page.ok()) return Fail(o, page.status());
    for (const api::JobSummary& j : page->jobs) {
      if (filter->Matches(j) && static_cast<int>(jobs.size()) < o.limit) jobs.push_back(j);
    }
    if (!page->next) break;
    request.before = page->next;
  }
  if (o.json) {
    fmt::print("{}\n", api::EncodeReply(api::HistoryReply{jobs, std::nullopt}));
    return 0;
  }
  return PrintJobs(o, jobs, true);
}

void PrintShow(const api::JobDetail& j) {
  const api::JobSummary& s = j.summary;
  fmt::print(
      "JobId={}{}{} Name={} User={} State={} Attempts={}\n", s.id,
      s.array_job ? fmt::format(" ArrayJobId={} ArrayTaskId={}", *s.array_job, s.array_task) : "",
      s.slurm_job ? fmt::format(" SlurmJobId={}", *s.slurm_job) : "", Printable(s.name),
      Printable(s.user), StateWord(s.state), s.attempts);
  std::vector<std::string> words;
  for (const std::string& w : j.command) words.push_back(Printable(w));
  fmt::print("   Command={}\n   WorkDir={} Source={}{}\n", Join(words, " "),
             Printable(j.context.workdir), Printable(j.context.source),
             j.context.umask ? fmt::format(" Umask={:04o}", *j.context.umask) : "");
  if (j.context.requeue) {
    const api::JobSignal signal = j.context.signal.value_or(api::JobSignal{});
    fmt::print("   Requeue=1 Signal={}@{}\n", SignalName(signal.number), signal.lead_s);
  }
  if (!j.output_file.empty() || !j.error_file.empty()) {
    fmt::print("   StdOut={} StdErr={}\n", j.output_file.empty() ? "-" : Printable(j.output_file),
               j.error_file.empty() ? "-" : Printable(j.error_file));
  }
  // Once a job has ended colod plans nothing for it: its need is what its last attempt ran with.
  const api::AttemptInfo* last = j.attempt_list.empty() ? nullptr : &j.attempt_list.back();
  std::string need = "-";
  if (j.need)
    need =
        fmt::format("{} ({})", FormatBytes(*j.need), j.need_source.empty() ? "-" : j.need_source);
  else if (last && last->memory_limit > Bytes(0))
    need =
        fmt::format("{} (planned for attempt {})", FormatBytes(last->memory_limit), last->number);
  fmt::print("   Gpus={} Memory={} Need={} Share={}\n", s.gpus,
             s.memory ? FormatBytes(*s.memory) : "unknown", need, ToString(s.share));
  if (j.estimate) {
    const api::JobEstimate& e = *j.estimate;
    fmt::print("   Estimate={} peak={} GiB upper={} GiB ({})\n", Printable(e.estimator),
               Gib(e.peak), Gib(e.upper), Printable(e.detail));
    if (e.learned && e.learned->runs > 0) {
      fmt::print("   Learned from {} earlier run(s): peak={} GiB upper={} GiB\n", e.learned->runs,
                 Gib(e.learned->peak), Gib(e.learned->upper));
    }
  }
  if (j.smact) {
    // Where the number came from: colod plans with the user's, else what runs measured, else the
    // client's prediction; each is kept with the estimate.
    std::string_view source = "given with --smact";
    const auto same = [&](double v) { return v >= 0 && std::abs(v - *j.smact) < 1e-9; };
    if (j.estimate && j.estimate->learned && same(j.estimate->learned->solo_smact)) {
      source = "learned from earlier runs alone on a GPU";
    } else if (j.estimate && same(j.estimate->predicted_smact)) {
      source = "predicted from the profile's FLOPs and bytes per step";
    }
    fmt::print("   Smact={:.2f} ({})\n", *j.smact, source);
  }
  fmt::print("   TimeLimit={} SubmitTime={} StartTime={} EndTime={}\n",
             TimeLimitText(s.time_limit_s), WallTimeText(s.submitted), WallTimeText(s.started),
             WallTimeText(s.finished));
  if (!s.reason.empty()) fmt::print("   Reason={}\n", Printable(s.reason));
  for (const api::AttemptInfo& a : j.attempt_list) {
    std::vector<std::string> indices;
    for (int g : a.gpus) indices.push_back(std::to_string(g));
    const std::string exit_code =
        a.exit_code || a.exit_signal
            ? fmt::format(" ExitCode={}:{}", a.exit_code.value_or(0), a.exit_signal.value_or(0))
            : "";
    fmt::print("   Attempt {}: GPUs {} ({}) {} pid={} peak={} GiB {}{} {}\n", a.number,
               Join(indices, ","), Join(a.gpu_uuids, ","), a.mode, a.pid, Gib(a.peak),
               a.exit_kind.empty() ? "running" : a.exit_kind, exit_code, Printable(a.detail));
  }
  // The latest attempt that used more than its plan while sharing without an MPS limit.
  for (auto a = j.attempt_list.rbegin(); a != j.attempt_list.rend(); ++a) {
    if (!a->over_plan) continue;
    fmt::print("   OverPlan=peak {} GiB > plan {} GiB (attempt {}, sharing without an MPS limit)\n",
               Gib(a->peak), Gib(a->memory_limit), a->number);
    break;
  }
  for (const api::EventInfo& e : j.events)
    fmt::print("   {} {:<10} {}\n", WallTimeText(e.time), Printable(e.kind), Printable(e.detail));
}

// `name` for the job the command names: as typed when that was ARRAY_TASK, else as the queue
// knows it (a task of an array as ARRAY_TASK), else its id.
std::string JobNamed(const ClientOptions& o) {
  if (o.job_ref.find('_') != std::string::npos) return o.job_ref;
  const auto names = LiveJobIdTexts(o, {o.job});
  const auto it = names.find(o.job);
  return it != names.end() ? it->second : std::to_string(o.job);
}

void PrintShare(const api::ShareReply& r) {
  fmt::print("order {}, usage halves every {}\n", r.order, FormatDuration(SecondsF(r.half_life_s)));
  fmt::print("{:<16} {:>6} {:>7} {:>10} {:>7} {:>7} {:>8} {:>8} {:>5} {:>10}  {}\n", "USER",
             "SHARE", "SHARE%", "USAGE_GPUh", "USAGE%", "FACTOR", "RUNNING", "WAITING", "GPUS",
             "GPU_MEM", "LIMITS");
  for (const api::ShareUser& u : r.users) {
    fmt::print("{:<16} {:>6} {:>7} {:>10.2f} {:>7} {:>7.3f} {:>8} {:>8} {:>5} {:>10}  {}\n",
               Printable(u.user), fmt::format("{:g}", u.share), Percent(u.share_fraction),
               u.usage_gpu_hours, Percent(u.usage_fraction), u.factor, u.running, u.waiting, u.gpus,
               FormatBytes(u.gpu_memory), u.limits.empty() ? "-" : Printable(u.limits));
  }
  if (r.users.empty()) fmt::print("(no user has jobs or recent usage)\n");
}

void PrintGpus(const api::GpusReply& r, const std::map<JobId, std::string>& names) {
  fmt::print("{:>3} {:<24} {:>6} {:>6} {:>8} {:>6} {:>6} {:>7} {:>10} {:<9} {}\n", "GPU", "NAME",
             "USED", "TOTAL", "FREE4JOB", "SMACT", "SMOCC", "POWER", "ENERGY_kJ", "MODE", "JOBS");
  for (const api::GpuInfoReply& g : r.gpus) {
    std::string jobs;
    for (const api::GpuJobInfo& j : g.jobs)
      jobs += fmt::format("{}{}({},{})", jobs.empty() ? "" : " ",
                          names.count(j.id) ? names.at(j.id) : std::to_string(j.id),
                          Printable(j.user), j.mode);
    fmt::print("{:>3} {:<24} {:>6} {:>6} {:>8} {:>6} {:>6} {:>7} {:>10} {:<9} {}\n", g.index,
               Cell(g.name, 24), g.memory_used ? Gib(*g.memory_used) : "-", Gib(g.memory_total),
               Gib(g.free_for_placement), Pct(g.smact), Pct(g.smocc),
               g.power_watts < 0 ? "-" : fmt::format("{:.0f}W", g.power_watts),
               g.energy_joules < 0 ? "-" : fmt::format("{:.1f}", g.energy_joules / 1000), g.mode,
               jobs.empty() ? "-" : jobs);
  }
  for (const api::GpuInfoReply& g : r.gpus) {
    if (g.activity_source != "utilization") continue;
    fmt::print(stderr,
               "colo: warning: GPU {}'s SMACT is NVML's coarse utilization, not SM activity ({}); "
               "install DCGM for SM activity, occupancy and DRAM activity\n",
               g.index, Printable(g.activity_note.empty() ? "no GPM, no DCGM" : g.activity_note));
  }
}

}  // namespace

Result<api::SubmitRequest> BuildSubmitRequest(const ClientOptions& options,
                                              const std::vector<std::string>& environment) {
  ClientOptions o = options;  // the file's directives fill what the options left open
  if (o.command.empty()) return InvalidArgument("nothing to submit: give a job file or -- COMMAND");
  if (!o.gres.empty() && o.gpus == 0) {
    auto gpus = ParseGpuGres(o.gres);
    if (!gpus.ok()) return gpus.status();
    o.gpus = *gpus;
  }
  api::SubmitRequest r;
  r.command = o.command;
  // A copy: the command is rebuilt below, and this names what the user typed.
  const std::string first = o.command.front();
  if (o.command.size() == 1 && first.size() > 4 && first.substr(first.size() - 4) == ".rad" &&
      IsRegularFile(first)) {
    COLO_RETURN_IF_ERROR(ApplyRadTask(first, environment, r, o));
  } else if (IsRegularFile(first)) {
    COLO_RETURN_IF_ERROR(ApplyJobScript(o.command, r, o));
  }
  if (!o.estimate_from.empty()) COLO_RETURN_IF_ERROR(ApplyEstimate(o, r));
  r.gpus = o.gpus > 0 ? o.gpus : 1;
  if (!o.memory.empty()) {
    auto bytes = ParseBytes(o.memory);
    if (!bytes.ok()) return InvalidArgument("--mem: " + bytes.status().message());
    if (*bytes <= Bytes(0)) return InvalidArgument("--mem must be more than 0");
    r.memory = *bytes;
  }
  if (!o.share.empty()) {
    auto share = ParseSharingPreference(o.share);
    if (!share.ok()) return InvalidArgument("--share: " + share.status().message());
    r.share = *share;
  }
  if (o.threads != 0) {
    if (o.threads < 1 || o.threads > 100)
      return InvalidArgument(fmt::format("--threads takes 1..100, not {}", o.threads));
    r.threads = o.threads;
  }
  if (o.smact >= 0) r.expected_smact = o.smact;
  r.name = o.name;
  std::error_code ec;
  const fs::path workdir = o.workdir.empty() ? fs::current_path(ec) : fs::absolute(o.workdir, ec);
  if (ec) return InvalidArgument(fmt::format("--workdir: {}", ec.message()));
  struct stat st {};
  if (stat(workdir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return InvalidArgument(
        fmt::format("working directory {} is not a directory you can reach", workdir.string()));
  r.context.workdir = workdir.lexically_normal().string();
  // The job's files are made as the submitter's own would be (sbatch passes its umask too).
  const mode_t mask = umask(0);
  umask(mask);
  r.context.umask = static_cast<int>(mask);
  for (const ResourceKind& kind : kResourceKinds) {
    rlimit limit{};
    if (getrlimit(kind.resource, &limit) != 0) continue;
    const auto value = [](rlim_t v) {
      return v == RLIM_INFINITY ? int64_t{-1} : static_cast<int64_t>(v);
    };
    r.context.limits.push_back(
        {std::string(kind.name), value(limit.rlim_cur), value(limit.rlim_max)});
  }
  r.env = environment;
  if (!o.export_env.empty()) {
    auto env = ApplyExport(o.export_env, environment);
    if (!env.ok()) return env.status();
    r.env = *std::move(env);
  }
  if (!o.time_limit.empty()) {
    auto limit = ParseTimeLimit(o.time_limit);
    if (!limit.ok()) return limit.status();
    r.time_limit_s = *limit;
  }
  if (!o.dependency.empty()) {
    auto deps = ParseDependencyList(o.dependency);
    if (!deps.ok()) return deps.status();
    r.dependencies = *std::move(deps);
  }
  if (!o.after.empty()) {
    // --after A:B is afterany:A:B: after those jobs end, however they end.
    auto deps = ParseDependencyList("afterany:" + o.after);
    if (!deps.ok()) return InvalidArgument("--after: " + deps.status().message());
    r.dependencies.insert(r.dependencies.end(), deps->begin(), deps->end());
  }
  if (r.dependencies.size() > api::kMaxDependencies)
    return InvalidArgument(fmt::format("at most {} dependencies", api::kMaxDependencies));
  if (!o.array.empty()) {
    auto array = ParseArraySpec(o.array);
    if (!array.ok()) return array.status();
    r.array = *std::move(array);
  }
  for (auto [flag, pattern, field] :
       {std::tuple{"--output", &o.output, &r.output}, std::tuple{"--error", &o.error, &r.error}}) {
    if (pattern->empty()) continue;
    if (Status checked = api::CheckOutputPattern(*pattern); !checked.ok())
      return InvalidArgument(fmt::format("{}: {}", flag, checked.message()));
    // A directory that is named outright and missing would fail every attempt at its start.
    const fs::path file = fs::path(*pattern).is_absolute() ? fs::path(*pattern)
                                                           : fs::path(r.context.workdir) / *pattern;
    const std::string directory = file.parent_path().string();
    if (directory.find('%') == std::string::npos && !IsDirectory(directory))
      return InvalidArgument(
          fmt::format("{}: directory {} does not exist", flag, Printable(directory)));
    *field = *pattern;
  }
  COLO_RETURN_IF_ERROR(CheckRunnable(r));
  r.hold = o.hold;
  r.context.requeue = o.requeue;
  if (!o.signal.empty()) {
    auto signal = ParseSignalOption(o.signal);
    if (!signal.ok()) return signal.status();
    r.context.signal = *signal;
  }
  r.priority = o.priority - o.nice;
  if (r.priority < -api::kMaxPriority || r.priority > api::kMaxPriority)
    return InvalidArgument(fmt::format("--priority minus --nice must be between {} and {}",
                                       -api::kMaxPriority, api::kMaxPriority));
  return r;
}

void AddClientCommands(CLI::App& app, ClientOptions& o) {
  app.add_option("--socket", o.socket,
                 "colod's socket (default: $COLO_SOCKET, then a personal colod's, then the "
                 "system's)");
  auto* submit = app.add_subcommand(
      "submit",
      "submit a job (like sbatch): colo submit [options] -- CMD ARGS, a job script (job.sh "
      "[ARGS]) or a "
      "CARMA task (task.rad)");
  // Checked while parsing, so that a bad value is a usage error (exit 2) like any other. CLI11
  // names the option itself.
  auto parses = [](auto parse) {
    return CLI::Validator(
        [parse](std::string& text) {
          auto parsed = parse(text);
          if (parsed.ok()) return std::string();
          std::string message = parsed.status().message();
          if (message.starts_with("--") && message.find(": ") != std::string::npos)
            message.erase(0, message.find(": ") + 2);
          return message;
        },
        "");
  };
  auto* gpus_option =
      submit->add_option("-G,--gpus", o.gpus, "GPUs the job needs, all on one server (default 1)")
          ->check(CLI::Range(1, 64));
  submit
      ->add_option("--gres", o.gres,
                   "Slurm's form of --gpus: gpu:N (gpu:TYPE:N: the type is not chosen here)")
      ->check(parses([](const std::string& t) { return ParseGpuGres(t); }))
      ->excludes(gpus_option);
  submit->add_option("--mem", o.memory, "peak GPU memory per GPU, e.g. 12GiB")
      ->check(parses([](const std::string& t) { return ParseBytes(t); }));
  submit->add_option("--share", o.share, "mps, plain or exclusive (default: the GPU's mode)")
      ->check(parses([](const std::string& t) { return ParseSharingPreference(t); }));
  submit->add_option("--threads", o.threads, "MPS active-thread percentage (default: from --smact)")
      ->check(CLI::Range(1, 100));
  submit
      ->add_option("--smact", o.smact,
                   "the job's SM activity when alone, 0..1 (e.g. from a solo run): sets its MPS "
                   "thread share")
      ->check(CLI::Range(0.0, 1.0));
  submit->add_option("-J,--name,--job-name", o.name, "job name (default: the command)");
  submit->add_option("-D,--chdir,--workdir", o.workdir,
                     "working directory (default: the current one)");
  submit
      ->add_option("-t,--time", o.time_limit,
                   "time limit: MIN, MIN:SEC, H:MIN:SEC or D-H[:MIN[:SEC]]; then SIGTERM, "
                   "SIGKILL after the grace, state timeout")
      ->check(parses([](const std::string& t) { return ParseTimeLimit(t); }));
  submit
      ->add_option("-d,--dependency", o.dependency,
                   "start after other jobs end: afterok:ID[:ID],afterany:ID,afternotok:ID")
      ->check(parses([](const std::string& t) { return ParseDependencyList(t); }));
  submit->add_option("--after", o.after, "ID[:ID...]: start after these jobs end (afterany)")
      ->check(parses([](const std::string& t) { return ParseDependencyList("afterany:" + t); }));
  submit->add_flag("-H,--hold", o.hold, "submit held: it starts after colo release");
  submit->add_flag("--requeue", o.requeue,
                   "preemptible: it may be stopped for a user under their share (after its "
                   "--signal) and run again as its next attempt, with COLO_RESTART_COUNT");
  submit
      ->add_option("--signal", o.signal,
                   "[B:]SIG[@SECONDS]: what a --requeue job gets before it is stopped, and how "
                   "long before (default TERM@60); SIGKILL follows")
      ->check(parses([](const std::string& t) { return ParseSignalOption(t); }));
  submit
      ->add_option("--priority", o.priority,
                   "order among your own waiting jobs (higher first; never before other "
                   "users' jobs)")
      ->check(CLI::Range(-10000, 10000));
  submit->add_option("--nice", o.nice, "lowers --priority by this much")
      ->check(CLI::Range(-10000, 10000));
  submit
      ->add_option("-a,--array", o.array,
                   "a job array: 0-99, 1,3,5 or 0-15:4, with %N to run at most N at once; "
                   "each task gets COLO_ARRAY_JOB_ID and COLO_ARRAY_TASK_ID; %A and %a in "
                   "--name become them")
      ->check(parses([](const std::string& t) { return ParseArraySpec(t); }));
  const auto output_pattern = [](const std::string& t) -> Result<bool> {
    COLO_RETURN_IF_ERROR(api::CheckOutputPattern(t));
    return true;
  };
  submit
      ->add_option("-o,--output", o.output,
                   "also write the job's stdout (and its stderr, without -e) to this file: "
                   "%j job id, %A array id, %a task id, %u user, %x name, %N host, %% a "
                   "percent sign (relative to --chdir)")
      ->check(parses(output_pattern));
  submit->add_option("-e,--error", o.error, "also write the job's stderr to this file (as -o)")
      ->check(parses(output_pattern));
  submit
      ->add_option("--export", o.export_env,
                   "environment for the job: ALL (default), NONE, or NAME[=value],... (with "
                   "ALL: added to yours)")
      ->check(parses([](const std::string& t) { return ApplyExport(t, {}); }));
  submit->add_option("--estimate-from", o.estimate_from, "model summary to estimate memory from");
  submit->add_option("--batch", o.batch, "batch size, with --estimate-from")
      ->check(CLI::Range(1, 1 << 20));
  submit->add_option("--gpu-model", o.estimate_gpu,
                     "GPU model whose calibration the estimate uses (default: the first shipped)");
  submit->add_option("command", o.command, "the command, or a job file")->expected(-1);
  submit->add_flag("--parsable", o.parsable, "print only the job's id (an array's: its id)");
  submit->footer(
      "Words after the job's command or script are its own, as with sbatch; -- marks where a "
      "command starts. A job script's #SBATCH lines are read for -J, -G/--gpus, --gres, -t, -o, "
      "-e, -a and -d (every other option is named in a warning), its #COLO lines for colo's "
      "options (--mem, --share, ...); the command line wins over both, #COLO over #SBATCH. The "
      "command's first word must be a file you may run (a path from the working directory) or a "
      "command on the PATH the job gets.");
  submit->add_flag("--json", o.json, kJsonHelp);
  auto* queue = app.add_subcommand("queue", "jobs waiting and running (like squeue)");
  queue->add_option("-u,--user", o.user, "only this user's jobs");
  queue->add_flag("--json", o.json, kJsonHelp);
  queue->footer(StateLegend() + "\n" + FormatCodesHelp());
  for (auto [name, help] :
       {std::pair{"show", "everything about one of your jobs"},
        std::pair{"explain",
                  "why a job waits: its place in the queue and why (fair share, limits), the "
                  "GPUs kept for the queue's head, the gate that stopped it on each GPU"}}) {
    auto* sub = app.add_subcommand(name, help);
    sub->add_option("job", o.job_ref, "job id (ARRAY_TASK for a task of an array)")
        ->required()
        ->check(JobRefValidator());
    sub->add_flag("--json", o.json, kJsonHelp);
  }
  auto* logs = app.add_subcommand("logs", "a job's output (your own jobs)");
  logs->add_option("job", o.job_ref, "job id (ARRAY_TASK for a task of an array)")
      ->required()
      ->check(JobRefValidator());
  logs->add_flag("-f,--follow", o.follow, "keep printing while the job runs");
  auto* logs_stderr = logs->add_flag("--stderr", o.stderr_log, "show stderr instead of stdout");
  logs->add_flag("--both", o.both_logs, "show stdout and stderr (each on colo's own)")
      ->excludes(logs_stderr);
  logs->add_option("--attempt", o.attempt,
                   "this attempt's output (default: the latest; with -f: from this one on)")
      ->check(CLI::Range(1, 1 << 30));
  logs->add_flag("--json", o.json, "the files' paths and the job's state, as JSON");
  logs->footer(
      "With -f, colo logs waits for a job that has not started, prints every attempt's output "
      "(an out-of-memory retry's after a line '==> job N attempt K <==' on stderr) and exits "
      "like the job: 0 when it succeeded, 1 when it failed or was cancelled.");
  auto* gpus = app.add_subcommand("gpus", "live per-GPU memory, SMACT, power and jobs");
  gpus->add_flag("--json", o.json, kJsonHelp);
  auto* share = app.add_subcommand(
      "share", "every user's share of the server, recent usage and limits (like sshare)");
  share->add_flag("--json", o.json, kJsonHelp);
  share->footer(
      "USAGE is GPU-hours, each GPU weighted by the part of its memory the job planned, halving "
      "every half-life (colod's fairness.half_life); FACTOR is 2^-(USAGE% / SHARE%): a user who "
      "has had less than their share has a factor above 0.5 and their jobs go first.");
  auto* history = app.add_subcommand("history", "jobs that ended (like sacct)");
  history->add_option("--limit", o.limit, "how many")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  history->add_flag("-a,--all,--allusers", o.all,
                    "every user's jobs (details of others' stay private)");
  history->add_option("-S,--starttime", o.since,
                      "jobs that ended at or after: a duration ago (2h, 1d), seconds since the "
                      "epoch or a local time (2024-05-01T09:00)");
  history->add_option("-E,--endtime", o.until, "jobs submitted at or before (likewise)");
  history->add_option("-s,--state", o.state_filter,
                      "only these states, comma-separated: CD,F,CA,TO,LO,RQ (or COMPLETED, ...)");
  history->add_option("-u,--user", o.user, "only these users' jobs, comma-separated");
  history->add_option("-j,--jobs", o.jobs_filter,
                      "only these jobs, comma-separated (ID, ARRAY_TASK, or an array's id: all "
                      "its tasks)");
  history->add_option("--name", o.name, "only jobs with these names, comma-separated");
  history->add_flag("--json", o.json, kJsonHelp);
  history->footer(StateLegend() + "\n" + FormatCodesHelp());
  for (CLI::App* table : {queue, history}) {
    table
        ->add_option("-o,--format", o.format,
                     "columns: squeue's codes ('%.7i %20j %.3t %N') or sacct's names "
                     "(JobID,State,Elapsed%12); both below")
        ->check(parses([](const std::string& t) { return JobFormat::Parse(t); }));
    table->add_flag("--noheader", o.no_header, "no header line");
  }
  AddControlCommands(app, o);
  AddEffCommand(app, o);
}

int ReportError(const Status& error, bool json, int exit_code) {
  if (json) {
    const nlohmann::json out = {
        {"error",
         {{"code", std::string(api::ToString(api::CodeOf(error)))}, {"message", error.message()}}}};
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print(stderr, "colo: {}\n", Printable(error.message()));
  }
  return exit_code;
}

int RunClientCommand(CLI::App& app, const ClientOptions& options) {
  ClientOptions o = options;
  // Job arguments as typed become ids (an array task is looked up).
  if (!o.job_ref.empty()) {
    auto id = ResolveJobRef(o, o.job_ref);
    if (!id.ok()) return Fail(o, id.status());
    o.job = *id;
  }
  for (const std::string& ref : o.job_refs) {
    auto id = ResolveJobRef(o, ref);
    if (!id.ok()) return Fail(o, id.status());
    o.jobs.push_back(*id);
    if (ref.find('_') != std::string::npos) o.named_as_task.insert(*id);
  }
  if (app.got_subcommand("submit")) return Submit(o);
  if (app.got_subcommand("logs")) return Logs(o);
  if (app.got_subcommand("history")) return History(o);
  if (app.got_subcommand("eff")) return RunEffCommand(o);
  auto print = [&](const auto& reply, auto&& human) {
    if (!reply.ok()) return Fail(o, reply.status());
    if (o.json) {
      fmt::print("{}\n", api::EncodeReply(*reply));
      return kExitOk;
    }
    if constexpr (std::is_same_v<decltype(human(*reply)), int>) {
      return human(*reply);
    } else {
      human(*reply);
      return kExitOk;
    }
  };
  if (app.got_subcommand("queue"))
    return print(CallQueue(o, o.user),
                 [&](const api::QueueReply& r) { return PrintJobs(o, r.jobs, false); });
  if (app.got_subcommand("show"))
    return print(Call(o, api::ShowRequest{o.job}),
                 [](const api::ShowReply& r) { PrintShow(r.job); });
  if (int code = RunControlCommand(app, o); code >= 0) return code;
  if (app.got_subcommand("explain"))
    return print(Call(o, api::ExplainRequest{o.job}), [&](const api::ExplainReply& r) {
      fmt::print("job {} ({}): {}\n", JobNamed(o), StateWord(r.state), Printable(r.summary));
      if (r.position > 0)
        fmt::print("  position {} of {} in the {} queue\n", r.position, r.waiting, r.queue);
      if (!r.standing.empty()) fmt::print("  fair share: {}\n", Printable(r.standing));
      if (!r.limit.empty()) fmt::print("  limit: {}\n", Printable(r.limit));
      if (!r.reservation.empty()) fmt::print("  reservation: {}\n", Printable(r.reservation));
      for (const api::GateInfo& g : r.gpus)
        fmt::print("  GPU {:<3} {:<14} {}\n", g.gpu, g.gate, Printable(g.detail));
    });
  if (app.got_subcommand("share"))
    return print(Call(o, api::ShareRequest{}), [](const api::ShareReply& r) { PrintShare(r); });
  if (app.got_subcommand("gpus"))
    return print(Call(o, api::GpusRequest{}), [&](const api::GpusReply& r) {
      std::vector<JobId> running;
      for (const api::GpuInfoReply& g : r.gpus) {
        for (const api::GpuJobInfo& j : g.jobs) running.push_back(j.id);
      }
      PrintGpus(r, LiveJobIdTexts(o, running));
    });
  return -1;
}

}  // namespace colo

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
#include <thread>
#include <tuple>
#include <type_traits>

#include "api/client.h"
#include "api/output_pattern.h"
#include "cli/conda.h"
#include "cli/control_commands.h"
#include "cli/estimate_command.h"
#include "cli/job_table.h"
#include "common/resource_limits.h"
#include "common/strings.h"
#include "common/text.h"
#include "common/units.h"
#include "formats/job_script.h"
#include "formats/rad.h"

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

std::optional<std::string> FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (const std::string& dir : Split(path ? path : "", ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
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
    std::optional<std::string> conda =
        conda_exe && *conda_exe ? std::optional<std::string>(conda_exe) : FindOnPath("conda");
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
  if (o.gpus == 0 && d.gpus) o.gpus = *d.gpus;
  if (o.memory.empty() && d.memory) o.memory = *d.memory;
  if (o.share.empty() && d.share) o.share = *d.share;
  if (o.name.empty() && d.name) o.name = *d.name;
  if (o.threads == 0 && d.threads) o.threads = *d.threads;
  if (o.smact < 0 && d.smact) o.smact = *d.smact;
  if (o.output.empty() && d.output) o.output = *d.output;
  if (o.error.empty() && d.error) o.error = *d.error;
  if (o.time_limit.empty() && d.time_limit) o.time_limit = *d.time_limit;
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

bool Ended(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled || state == JobState::kLost || state == JobState::kRequeued;
}

constexpr auto kFollowInterval = std::chrono::milliseconds(500);

// colo logs -f: waits for the job to start, prints each attempt's output as it is written
// (an out-of-memory retry's after a header line on stderr), and returns the job's exit status.
int FollowLogs(const ClientOptions& o) {
  auto latest = Call(o, api::LogsRequest{o.job, std::nullopt});
  if (!latest.ok()) return Fail(o, latest.status());
  bool said_waiting = false;
  while (latest->attempt == 0 && !Ended(latest->state)) {
    if (!said_waiting) fmt::print(stderr, "colo: job {} has not started yet; waiting\n", o.job);
    said_waiting = true;
    std::this_thread::sleep_for(kFollowInterval);
    latest = Call(o, api::LogsRequest{o.job, std::nullopt});
    if (!latest.ok()) return Fail(o, latest.status());
  }
  for (int attempt = o.attempt > 0 ? o.attempt : 1; attempt <= latest->attempt; ++attempt) {
    auto files = Call(o, api::LogsRequest{o.job, attempt});
    if (!files.ok()) return Fail(o, files.status());
    if (latest->attempt > 1) fmt::print(stderr, "==> job {} attempt {} <==\n", o.job, attempt);
    AttemptLogs logs(o, *files);
    for (;;) {
      if (Status s = logs.Drain(false); !s.ok()) return Fail(o, s);
      latest = Call(o, api::LogsRequest{o.job, std::nullopt});
      if (!latest.ok()) return Fail(o, latest.status());
      // Its last words: the attempt ended (the job ended, or a retry started).
      if (latest->attempt != attempt || Ended(latest->state) ||
          latest->state == JobState::kRecovering) {
        if (Status s = logs.Drain(true); !s.ok()) return Fail(o, s);
        if (latest->attempt != attempt || Ended(latest->state)) break;
        // Recovering: wait for the next attempt (or for the job to end) without re-reading.
        while (latest->attempt == attempt && !Ended(latest->state)) {
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
  fmt::print(stderr, "colo: job {} {}\n", o.job, ToString(latest->state));
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
  if (reply->attempt == 0 && !Ended(reply->state)) {
    fmt::print(stderr, "colo: job {} has not started yet (colo logs -f waits for it)\n", o.job);
    return kExitOk;
  }
  if (reply->attempt > 0) {
    AttemptLogs logs(o, *reply);
    if (Status s = logs.Drain(true); !s.ok()) return Fail(o, s);
  }
  // Like -f: a job that ended other than well makes the exit code say so.
  if (!Ended(reply->state) || reply->state == JobState::kSucceeded) return kExitOk;
  fmt::print(stderr, "colo: job {} {}{}\n", o.job, ToString(reply->state),
             reply->attempt == 0 ? " before it started" : "");
  return kExitError;
}

int History(const ClientOptions& o) {
  // Pages of at most kMaxHistoryPage, so a long history never holds colod up for others.
  std::vector<api::JobSummary> jobs;
  api::HistoryRequest request;
  request.all = o.all;
  while (static_cast<int>(jobs.size()) < o.limit) {
    request.limit = std::min(api::kMaxHistoryPage, o.limit - static_cast<int>(jobs.size()));
    auto page = Call(o, request);
    if (!page.ok()) return Fail(o, page.status());
    jobs.insert(jobs.end(), page->jobs.begin(), page->jobs.end());
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
  fmt::print("JobId={}{} Name={} User={} State={} Attempts={}\n", s.id,
             s.slurm_job ? fmt::format(" SlurmJobId={}", *s.slurm_job) : "", Printable(s.name),
             Printable(s.user), ToString(s.state), s.attempts);
  std::vector<std::string> words;
  for (const std::string& w : j.command) words.push_back(Printable(w));
  fmt::print("   Command={}\n   WorkDir={} Source={}{}\n", Join(words, " "),
             Printable(j.context.workdir), Printable(j.context.source),
             j.context.umask ? fmt::format(" Umask={:04o}", *j.context.umask) : "");
  if (!j.output_file.empty() || !j.error_file.empty()) {
    fmt::print("   StdOut={} StdErr={}\n", j.output_file.empty() ? "-" : Printable(j.output_file),
               j.error_file.empty() ? "-" : Printable(j.error_file));
  }
  fmt::print("   Gpus={} Memory={} Need={} ({}) Share={}\n", s.gpus,
             s.memory ? FormatBytes(*s.memory) : "unknown", j.need ? FormatBytes(*j.need) : "-",
             j.need_source.empty() ? "-" : j.need_source, ToString(s.share));
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
  fmt::print("   SubmitTime={} EndTime={}\n", WallTimeText(s.submitted), WallTimeText(s.finished));
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

void PrintGpus(const api::GpusReply& r) {
  fmt::print("{:>3} {:<24} {:>6} {:>6} {:>8} {:>6} {:>6} {:>7} {:>10} {:<9} {}\n", "GPU", "NAME",
             "USED", "TOTAL", "FREE4JOB", "SMACT", "SMOCC", "POWER", "ENERGY_kJ", "MODE", "JOBS");
  for (const api::GpuInfoReply& g : r.gpus) {
    std::string jobs;
    for (const api::GpuJobInfo& j : g.jobs)
      jobs += fmt::format("{}{}({},{})", jobs.empty() ? "" : " ", j.id, Printable(j.user), j.mode);
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
  r.hold = o.hold;
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
  submit->add_option("--gpus", o.gpus, "GPUs the job needs, all on one server (default 1)")
      ->check(CLI::Range(1, 64));
  // Checked while parsing, so that a bad value is a usage error (exit 2) like any other.
  auto parses = [](auto parse) {
    return CLI::Validator(
        [parse](std::string& text) {
          auto parsed = parse(text);
          return parsed.ok() ? std::string() : parsed.status().message();
        },
        "");
  };
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
  submit->add_option("--name", o.name, "job name (default: the command)");
  submit->add_option("-D,--chdir,--workdir", o.workdir,
                     "working directory (default: the current one)");
  submit->add_option("-t,--time", o.time_limit,
                     "time limit: MIN, MIN:SEC, H:MIN:SEC or D-H[:MIN[:SEC]]; then SIGTERM, "
                     "SIGKILL after the grace, state timeout");
  submit->add_option("-d,--dependency", o.dependency,
                     "start after other jobs end: afterok:ID[:ID],afterany:ID,afternotok:ID");
  submit->add_option("--after", o.after, "ID[:ID...]: start after these jobs end (afterany)");
  submit->add_flag("-H,--hold", o.hold, "submit held: it starts after colo release");
  submit
      ->add_option("--priority", o.priority,
                   "order among your own waiting jobs (higher first; never before other "
                   "users' jobs)")
      ->check(CLI::Range(-10000, 10000));
  submit->add_option("--nice", o.nice, "lowers --priority by this much")
      ->check(CLI::Range(-10000, 10000));
  submit->add_option("-a,--array", o.array,
                     "a job array: 0-99, 1,3,5 or 0-15:4, with %N to run at most N at once; "
                     "each task gets COLO_ARRAY_JOB_ID and COLO_ARRAY_TASK_ID; %A and %a in "
                     "--name become them");
  submit->add_option("-o,--output", o.output,
                     "also write the job's stdout (and its stderr, without -e) to this file: "
                     "%j job id, %A array id, %a task id, %u user, %x name, %N host, %% a "
                     "percent sign (relative to --chdir)");
  submit->add_option("-e,--error", o.error, "also write the job's stderr to this file (as -o)");
  submit->add_option("--export", o.export_env,
                     "environment for the job: ALL (default), NONE, or NAME[=value],... (with "
                     "ALL: added to yours)");
  submit->add_option("--estimate-from", o.estimate_from, "model summary to estimate memory from");
  submit->add_option("--batch", o.batch, "batch size, with --estimate-from");
  submit->add_option("--gpu-model", o.estimate_gpu,
                     "GPU model whose calibration the estimate uses (default: the first shipped)");
  submit->add_option("command", o.command, "the command, or a job file")->expected(-1);
  submit->add_flag("--json", o.json);
  auto* queue = app.add_subcommand("queue", "jobs waiting and running (like squeue)");
  queue->add_option("--user", o.user, "only this user's jobs");
  queue->add_flag("--json", o.json);
  queue->footer(StateLegend() + "\n" + FormatCodesHelp());
  for (auto [name, help] :
       {std::pair{"show", "everything about one of your jobs"},
        std::pair{"explain", "why a job waits: the gate that stopped it on each GPU"}}) {
    auto* sub = app.add_subcommand(name, help);
    sub->add_option("job", o.job_ref, "job id (ARRAY_TASK for a task of an array)")
        ->required()
        ->check(JobRefValidator());
    sub->add_flag("--json", o.json);
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
  gpus->add_flag("--json", o.json);
  auto* history = app.add_subcommand("history", "jobs that ended (like sacct)");
  history->add_option("--limit", o.limit, "how many")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  history->add_flag("--all", o.all, "every user's jobs (details of others' stay private)");
  history->add_flag("--json", o.json);
  history->footer(StateLegend() + "\n" + FormatCodesHelp());
  for (CLI::App* table : {queue, history}) {
    table->add_option("-o,--format", o.format,
                      "columns as squeue's --format: e.g. '%.7i %20j %.3t %N' (codes below)");
    table->add_flag("--noheader", o.no_header, "no header line");
  }
  AddControlCommands(app, o);
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
    return print(Call(o, api::QueueRequest{o.user}),
                 [&](const api::QueueReply& r) { return PrintJobs(o, r.jobs, false); });
  if (app.got_subcommand("show"))
    return print(Call(o, api::ShowRequest{o.job}),
                 [](const api::ShowReply& r) { PrintShow(r.job); });
  if (int code = RunControlCommand(app, o); code >= 0) return code;
  if (app.got_subcommand("explain"))
    return print(Call(o, api::ExplainRequest{o.job}), [&](const api::ExplainReply& r) {
      fmt::print("job {} ({}): {}\n", r.job, ToString(r.state), Printable(r.summary));
      if (r.position > 0) fmt::print("  position {} in the {} queue\n", r.position, r.queue);
      for (const api::GateInfo& g : r.gpus)
        fmt::print("  GPU {:<3} {:<14} {}\n", g.gpu, g.gate, Printable(g.detail));
    });
  if (app.got_subcommand("gpus")) return print(Call(o, api::GpusRequest{}), PrintGpus);
  return -1;
}

}  // namespace colo

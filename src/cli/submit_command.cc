#include "cli/submit_command.h"

#include <errno.h>
#include <fmt/format.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <tuple>

#include "api/client.h"
#include "api/output_pattern.h"
#include "cli/conda.h"
#include "cli/control_commands.h"
#include "cli/estimate_command.h"
#include "common/resource_limits.h"
#include "common/strings.h"
#include "common/text.h"
#include "common/units.h"
#include "formats/job_script.h"
#include "formats/rad.h"
#include "formats/slurm_options.h"

extern char** environ;

namespace colo {

namespace fs = std::filesystem;

namespace {

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

int RunSubmitCommand(const ClientOptions& options) {
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

}  // namespace colo

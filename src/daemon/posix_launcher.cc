// PosixProcessLauncher: job attempts as colo-shim processes, tracked by cgroup v2 or by session
// and descendant scans. See posix_launcher.h for the layout and the trust model, which each of the
// launcher's files keeps: this one creates the launcher, starts an attempt and reads its end;
// posix_launcher_processes.cc says which processes are an attempt's, signals and reaps them;
// posix_launcher_job_dir.cc opens the paths a user controls (the workdir, the job's directory);
// the child's steps between fork and exec are launch_child.h's, and the kernel's files it reads
// are proc_files.h's and attempt_cgroups.h's.
#include "daemon/posix_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/resource_limits.h"
#include "daemon/attempt_cgroups.h"
#include "daemon/launch_child.h"
#include "daemon/proc_files.h"

namespace colo {
namespace {

// From fork to the shim's exec: the child opens the logs and enters the workdir as the user.
constexpr std::chrono::seconds kStartTimeout{10};
// The name (comm) of colod's child from fork to the shim's exec.
constexpr char kStartName[] = "colo-start";

// Ends every start (a child of colod that has not run the shim yet) whose colod is gone and which
// is stopped: its user stopped it, and resumed once a new colod had started the attempt again, it
// would run the job a second time. One that runs goes on to run the shim within moments, and is
// taken back like any attempt. It is recognised by its name and program (colod's), its parent
// not being a colod. The ones ended, by pid and start ticks.
std::set<std::pair<pid_t, uint64_t>> EndOrphanedStarts() {
  std::set<std::pair<pid_t, uint64_t>> ended;
  const std::string self = ExecutableOf(getpid());
  if (self.empty()) return ended;
  for (const auto& [pid, info] : ScanProcesses()) {
    if (pid == getpid() || (info.state != 'T' && info.state != 't')) continue;
    const auto comm = ReadKernelFile(fmt::format("/proc/{}/comm", pid), 64);
    if (!comm || *comm != std::string(kStartName) + "\n") continue;
    if (ExecutableOf(pid) != self || ExecutableOf(info.ppid) == self) continue;
    // Pinned, then looked at again: not a recycled pid.
    UniqueFd pid_fd(OpenPidFd(pid));
    const auto now = ReadProcInfo(pid);
    if (!pid_fd.valid() || !now || now->start_ticks != info.start_ticks) continue;
    if (SendSignal(pid_fd.get(), SIGKILL) == 0) ended.emplace(pid, info.start_ticks);
  }
  return ended;
}

}  // namespace

PosixProcessLauncher::PosixProcessLauncher(Options options, int jobs_dir_fd)
    : options_(std::move(options)), jobs_dir_fd_(jobs_dir_fd) {}

PosixProcessLauncher::~PosixProcessLauncher() {
  // One last try; a cgroup still busy stays (a later colod removes it on Release).
  for (const std::string& path : cgroups_to_remove_) RemoveCgroup(path);
  if (jobs_dir_fd_ >= 0) close(jobs_dir_fd_);
}

Result<std::unique_ptr<PosixProcessLauncher>> PosixProcessLauncher::Create(const Options& options) {
  if (options.shim.empty() || options.shim[0] != '/')
    return InvalidArgument(fmt::format("colo-shim path '{}' is not absolute", options.shim));
  if (access(options.shim.c_str(), X_OK) != 0) {
    return FailedPrecondition(
        fmt::format("colo-shim {} cannot be run: {}", options.shim, ErrorText(errno)));
  }
  if (options.leftover_grace < Duration(0) || options.leftover_grace > Seconds(3600))
    return InvalidArgument("leftover_grace must be between 0 and 3600 s");
  UniqueFd dir(open(options.jobs_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) {
    return FailedPrecondition(
        fmt::format("jobs directory {}: {}", options.jobs_dir, ErrorText(errno)));
  }
  struct stat st {};
  if (fstat(dir.get(), &st) != 0) return Internal(fmt::format("fstat: {}", ErrorText(errno)));
  // Nobody else may rename or replace a job's directory.
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return FailedPrecondition(fmt::format(
        "jobs directory {} must belong to uid {} and be writable by it alone (mode 0711)",
        options.jobs_dir, geteuid()));
  }
  // Every user reaches their own job's directory through it (the shim writes the exit record).
  if (geteuid() == 0 && (st.st_mode & S_IXOTH) == 0) {
    return FailedPrecondition(fmt::format(
        "jobs directory {} must be searchable by every user (mode 0711)", options.jobs_dir));
  }
  std::string canonical = ReadLink(fmt::format("/proc/self/fd/{}", dir.get()));
  if (canonical.empty()) canonical = options.jobs_dir;

  std::unique_ptr<PosixProcessLauncher> launcher(new PosixProcessLauncher(options, dir.release()));
  launcher->options_.jobs_dir = canonical;
  launcher->ended_starts_ = EndOrphanedStarts();
  launcher->cgroup_prefix_ = CgroupPrefix(canonical);
  constexpr std::string_view kWithout =
      "each attempt is its session plus every process seen below it";
  if (options.cgroups == Cgroups::kOff) {
    launcher->tracking_ = fmt::format("no cgroups (turned off): {}", kWithout);
    return launcher;
  }
  auto own = FindOwnCgroup();
  if (!own.ok()) {
    launcher->tracking_ = fmt::format("no cgroups ({}): {}", own.status().message(), kWithout);
    return launcher;
  }
  auto has_kill = ProbeCgroups(own->first);
  if (!has_kill.ok()) {
    launcher->tracking_ = fmt::format("no cgroups ({}): {}", has_kill.status().message(), kWithout);
    return launcher;
  }
  launcher->cgroup_base_ = own->first;
  launcher->cgroup_own_path_ = own->second;
  launcher->has_cgroup_kill_ = *has_kill;
  launcher->tracking_ = fmt::format("cgroup v2: each attempt in {}/{}<job>-<attempt>{}", own->first,
                                    launcher->cgroup_prefix_,
                                    *has_kill ? "" : " (no cgroup.kill: SIGKILL per process)");
  return launcher;
}

std::string PosixProcessLauncher::CgroupPath(JobId job, int attempt) const {
  if (cgroup_base_.empty()) return "";
  return fmt::format("{}/{}{}-{}", cgroup_base_, cgroup_prefix_, job, attempt);
}

AttemptFiles PosixProcessLauncher::Files(JobId job, int attempt) const {
  return {fmt::format("{}/{}/{}", options_.jobs_dir, job, AttemptFileName(attempt, "out")),
          fmt::format("{}/{}/{}", options_.jobs_dir, job, AttemptFileName(attempt, "err"))};
}

std::string PosixProcessLauncher::AttemptFileName(int attempt, std::string_view suffix) {
  return fmt::format("attempt-{}.{}", attempt, suffix);
}

std::string PosixProcessLauncher::StartFailure(JobId job, int attempt, const Tracked& tracked,
                                               int step, int error_number) const {
  const ChildReport report{static_cast<ChildStep>(step), error_number};
  const std::string dir_path = fmt::format("{}/{}", options_.jobs_dir, job);
  const std::string out_name = AttemptFileName(attempt, "out");
  const std::string err_name = AttemptFileName(attempt, "err");
  const std::string error = ErrorText(report.error);
  switch (report.step) {
    case ChildStep::kJoinCgroup:
      return fmt::format("joining cgroup {} failed: {}", CgroupPath(job, attempt), error);
    case ChildStep::kSetsid:
      return fmt::format("setsid failed: {}", error);
    case ChildStep::kSetgroups:
      return fmt::format("setgroups for {} failed: {}", tracked.owner.user, error);
    case ChildStep::kSetgid:
      return fmt::format("setgid {} failed: {}", tracked.owner.gid, error);
    case ChildStep::kSetuid:
      return fmt::format("setuid {} failed: {}", tracked.owner.uid, error);
    case ChildStep::kUserDidNotTake:
      return fmt::format("switching to uid {} did not take", tracked.owner.uid);
    case ChildStep::kOpenDevNull:
      return fmt::format("open /dev/null failed: {}", error);
    case ChildStep::kOpenStdout:
      return fmt::format("open {}/{} failed: {}", dir_path, out_name, error);
    case ChildStep::kOpenStderr:
      return fmt::format("open {}/{} failed: {}", dir_path, err_name, error);
    case ChildStep::kStdoutNotRegular:
      return fmt::format("{}/{} is not a regular file", dir_path, out_name);
    case ChildStep::kStderrNotRegular:
      return fmt::format("{}/{} is not a regular file", dir_path, err_name);
    case ChildStep::kRedirect:
      return fmt::format("redirecting stdin, stdout and stderr failed: {}", error);
    case ChildStep::kChdir:
      return fmt::format("chdir {} failed: {}", tracked.workdir, error);
    case ChildStep::kLimit:
      return fmt::format("setting the submitter's resource limits failed: {}", error);
    case ChildStep::kExec:
      return fmt::format("exec {} failed: {}", options_.shim, error);
    default:
      return fmt::format("starting the job failed: {}", error);
  }
}

std::optional<AttemptEnd> PosixProcessLauncher::CheckStarting(Tracked& tracked, JobId job,
                                                              int attempt) {
  ChildReport report{ChildStep::kDone, 0};
  std::string failure;
  pollfd ready{tracked.start_report.get(), POLLIN, 0};
  if (poll(&ready, 1, 0) != 0) {  // a report, the end of the pipe (exec), or an error to read
    if (!ReadReport(tracked.start_report.get(), &report)) {
      tracked.start_report.reset();  // closed by the exec: the shim runs
      return std::nullopt;
    }
    failure = StartFailure(job, attempt, tracked, static_cast<int>(report.step), report.error);
  } else if (std::chrono::steady_clock::now() >= tracked.start_deadline) {
    failure = fmt::format(
        "starting the job did not finish within {} s (a hung workdir or job "
        "directory, or a stopped start)",
        kStartTimeout.count());
  } else {
    return std::nullopt;  // still starting
  }
  // The child never ran the shim: it is reaped here, and the attempt ends with the reason.
  tracked.start_report.reset();
  if (!tracked.wait_status) {
    // Not reaped yet (Refresh() records what it reaps), so the pid is still this child's.
    kill(tracked.shim.pid, SIGKILL);
    int status = 0;
    while (waitpid(tracked.shim.pid, &status, 0) < 0 && errno == EINTR) {
    }
    tracked.wait_status = status;
  }
  const std::string cgroup = CgroupPath(job, attempt);
  if (tracked.in_cgroup && !RemoveCgroup(cgroup)) cgroups_to_remove_.push_back(cgroup);
  tracked.in_cgroup = false;
  return AttemptEnd{ProcessEnd{true, 127, true}, "colo: cannot start the job: " + failure + "\n",
                    ""};
}

Result<ProcessHandle> PosixProcessLauncher::Start(const LaunchSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("empty command");
  if (spec.job <= 0 || spec.attempt <= 0) return InvalidArgument("no job id or attempt number");
  COLO_RETURN_IF_ERROR(CheckWorkdirSyntax(spec.context.workdir));
  // execve would silently cut such a word short.
  const auto has_nul = [](const std::string& word) { return word.find('\0') != std::string::npos; };
  if (std::any_of(spec.argv.begin(), spec.argv.end(), has_nul))
    return InvalidArgument("the command contains a NUL byte");
  if (std::any_of(spec.env.begin(), spec.env.end(), has_nul))
    return InvalidArgument("the environment contains a NUL byte");
  if (has_nul(spec.output_file) || has_nul(spec.error_file))
    return InvalidArgument("an output file name contains a NUL byte");
  if (geteuid() != 0 && spec.owner.uid != geteuid()) {
    return FailedPrecondition(fmt::format("colod runs as uid {} and cannot start jobs of uid {}",
                                          geteuid(), spec.owner.uid));
  }
  const Key key{spec.job, spec.attempt};
  if (auto it = attempts_.find(key); it != attempts_.end() && ShimRuns(it->second))
    return FailedPrecondition(fmt::format("attempt {} of job {} runs", spec.attempt, spec.job));
  auto dir = OpenJobDirForStart(spec.job, spec.owner);
  if (!dir.ok()) return dir.status();
  UniqueFd dir_fd(*dir);

  // Everything the child needs is prepared here: between fork and exec only async-signal-safe
  // calls are allowed (colod has other threads).
  const UserSwitch change = PrepareUserSwitch(spec.owner);
  const std::string out_name = AttemptFileName(spec.attempt, "out");
  const std::string err_name = AttemptFileName(spec.attempt, "err");
  const std::string exit_name = AttemptFileName(spec.attempt, "exit");
  const std::string exit_path = fmt::format("{}/{}/{}", options_.jobs_dir, spec.job, exit_name);
  std::vector<std::string> args = {
      "colo-shim",
      fmt::format(
          "--leftover-grace-ms={}",
          std::chrono::duration_cast<std::chrono::milliseconds>(options_.leftover_grace).count()),
  };
  if (!spec.output_file.empty()) args.push_back("--output=" + spec.output_file);
  if (!spec.error_file.empty()) args.push_back("--error=" + spec.error_file);
  if (spec.append_output) args.push_back("--append");
  if (options_.log_limit > Bytes(0))
    args.push_back(fmt::format("--log-limit={}", options_.log_limit.count()));
  args.push_back(exit_path);
  args.push_back("--");
  args.insert(args.end(), spec.argv.begin(), spec.argv.end());
  // The attempt's names first, so that they are always there and found at once.
  std::vector<std::string> env = {fmt::format("COLO_JOB_ID={}", spec.job),
                                  fmt::format("COLO_ATTEMPT={}", spec.attempt)};
  for (const auto& e : spec.env) {
    if (!e.starts_with("COLO_JOB_ID=") && !e.starts_with("COLO_ATTEMPT=")) env.push_back(e);
  }
  std::vector<char*> argv_ptrs, env_ptrs;
  for (auto& a : args) argv_ptrs.push_back(a.data());
  argv_ptrs.push_back(nullptr);
  for (auto& e : env) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);

  std::vector<LimitToApply> limits;
  for (const api::ResourceLimit& limit : spec.context.limits) {
    const auto resource = ResourceNamed(limit.name);
    if (!resource || !options_.propagated_limits.count(*resource)) continue;
    const auto value = [](int64_t v) { return v < 0 ? RLIM_INFINITY : static_cast<rlim_t>(v); };
    limits.push_back({*resource, value(limit.soft), value(limit.hard)});
  }

  // A cgroup of its own where possible; without one the attempt is tracked by its session.
  std::string cgroup;
  UniqueFd cgroup_procs;
  if (uses_cgroups()) {
    cgroup = CgroupPath(spec.job, spec.attempt);
    if (mkdir(cgroup.c_str(), 0755) != 0 && errno == EEXIST && CgroupPopulated(cgroup)) {
      return FailedPrecondition(
          fmt::format("cgroup {} still has processes of an earlier start", cgroup));
    }
    cgroup_procs.reset(open((cgroup + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!cgroup_procs.valid()) {
      rmdir(cgroup.c_str());
      cgroup.clear();
    }
  }

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(fmt::format("pipe: {}", ErrorText(errno)));
  UniqueFd report_read(pipe_fds[0]), report_write(pipe_fds[1]);
  // The job's stdout and stderr: pipes the shim reads (src/shim/shim.cc), read ends first.
  UniqueFd output_pipes[4];
  std::vector<std::string> pipe_names;
  for (int stream = 0; stream < 2; ++stream) {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(fmt::format("pipe: {}", ErrorText(errno)));
    output_pipes[stream].reset(pipe_fds[0]);
    output_pipes[stream + 2].reset(pipe_fds[1]);
    pipe_names.push_back(PipeName(pipe_fds[0]));
  }
  const char* shim = options_.shim.c_str();
  const char* workdir = spec.context.workdir.c_str();
  // The job's files as its submitter would make them (a login shell's 022 where the submitter
  // did not say), never with colod's 077.
  const mode_t job_umask = static_cast<mode_t>(spec.context.umask.value_or(022) & 0777);
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    if (!cgroup.empty()) rmdir(cgroup.c_str());
    return Unavailable(fmt::format("fork: {}", ErrorText(error)));
  }
  if (pid == 0) {
    // Named for a restarted colod, which ends a start its predecessor left behind.
    prctl(PR_SET_NAME, kStartName);
    int report = MoveAboveStandard(report_write.get());
    const int job_dir = MoveAboveStandard(dir_fd.get());
    int pipes[4];
    for (int i = 0; i < 4; ++i) pipes[i] = MoveAboveStandard(output_pipes[i].get());
    ResetSignals();
    if (cgroup_procs.valid() && write(cgroup_procs.get(), "0", 1) != 1)
      ReportAndExit(report, ChildStep::kJoinCgroup, errno);
    if (setsid() < 0) ReportAndExit(report, ChildStep::kSetsid, errno);
    // Nothing of colod's may reach the user or the job, not even while the child is stopped.
    const int keep[] = {report, job_dir, pipes[0], pipes[1], pipes[2], pipes[3]};
    DetachFromColod(keep, 6, report);
    umask(job_umask);  // the submitter's, not colod's 077
    // Become the user before touching anything of theirs: nothing after this runs as root.
    DropPrivileges(change, report);
    ApplyLimits(limits, report);
    const int out = OpenLog(job_dir, out_name.c_str(), report, ChildStep::kOpenStdout,
                            ChildStep::kStdoutNotRegular);
    const int err = OpenLog(job_dir, err_name.c_str(), report, ChildStep::kOpenStderr,
                            ChildStep::kStderrNotRegular);
    if (dup2(out, 1) < 0 || dup2(err, 2) < 0) ReportAndExit(report, ChildStep::kRedirect, errno);
    // A record from before this start is not this start's end.
    unlinkat(job_dir, exit_name.c_str(), 0);
    if (chdir(workdir) != 0) ReportAndExit(report, ChildStep::kChdir, errno);
    // The pipes at 3 to 6 for the shim (kept open by the exec), everything else above them.
    report = MoveAbove(report, 6, report);
    for (int& fd : pipes) fd = MoveAbove(fd, 6, report);
    for (int i = 0; i < 4; ++i) {
      if (dup2(pipes[i], 3 + i) < 0) ReportAndExit(report, ChildStep::kRedirect, errno);
    }
    execve(shim, argv_ptrs.data(), env_ptrs.data());
    ReportAndExit(report, ChildStep::kExec, errno);
  }
  report_write.reset();
  // The child is ours and unreaped, so its pid cannot be taken by another process meanwhile.
  const auto info = ReadProcInfo(pid);
  const uint64_t start_ticks = info ? info->start_ticks : 0;

  // Not waited for here: once the child has become the user, the user may stop it, and colod
  // must not stop with it. Check() reads its report (a failed step, or the exec that closed it).
  Tracked tracked;
  tracked.owner = spec.owner;
  tracked.shim = {pid, start_ticks};
  tracked.own_child = true;
  tracked.in_cgroup = !cgroup.empty();
  tracked.start_report = std::move(report_read);
  tracked.start_deadline = std::chrono::steady_clock::now() + kStartTimeout;
  tracked.workdir = spec.context.workdir;
  tracked.output_pipes = std::move(pipe_names);
  attempts_[key] = std::move(tracked);
  return ProcessHandle{pid, start_ticks};
}

std::optional<AttemptEnd> PosixProcessLauncher::Check(const AttemptRef& ref) {
  Tracked& tracked = Track(ref);
  if (tracked.start_report.valid()) {
    auto failed = CheckStarting(tracked, ref.job, ref.attempt);
    if (failed || tracked.start_report.valid()) return failed;
  }
  if (ShimRuns(tracked)) return std::nullopt;
  if (ended_starts_.count({tracked.shim.pid, tracked.shim.start_ticks})) {
    return AttemptEnd{ProcessEnd{true, 127, true},
                      "colo: cannot start the job: its start was stopped before it ran the job, "
                      "and ended when colod started again\n",
                      ""};
  }
  // The shim is gone; what it left (it was killed, or a process ignored it) goes before the
  // attempt counts as ended.
  const auto live = LiveProcesses(tracked, ref.job, ref.attempt);
  if (!live.empty()) {
    Signal(ref, SIGKILL);
    return std::nullopt;
  }
  AttemptEnd end;
  if (auto record = ReadExitRecord(ref.job, ref.attempt, tracked.owner.uid)) {
    end.end = *record;
  } else if (tracked.wait_status && WIFEXITED(*tracked.wait_status)) {
    // The shim ended by itself without a record (it could not write it): its code stands.
    end.end = ProcessEnd{true, WEXITSTATUS(*tracked.wait_status), true};
  } else {
    // Killed with the job still under it, or ended while nobody waited: the job's status is
    // unknown.
    const int signal = tracked.wait_status && WIFSIGNALED(*tracked.wait_status)
                           ? WTERMSIG(*tracked.wait_status)
                           : 0;
    end.end = ProcessEnd{false, signal, false};
  }
  end.stderr_tail = ReadTail(ref.job, AttemptFileName(ref.attempt, "err"), tracked.owner.uid);
  end.stdout_tail = ReadTail(ref.job, AttemptFileName(ref.attempt, "out"), tracked.owner.uid);
  return end;
}

void PosixProcessLauncher::Release(const AttemptRef& ref) {
  const Key key{ref.job, ref.attempt};
  const auto it = attempts_.find(key);
  if (it == attempts_.end()) {
    // An attempt this launcher never started nor looked at (a Start refused because its cgroup
    // was busy): whatever runs in that cgroup is not its to kill. An empty one may go.
    if (uses_cgroups()) rmdir(CgroupPath(ref.job, ref.attempt).c_str());
    return;
  }
  const bool in_cgroup = it->second.in_cgroup;
  attempts_.erase(it);
  if (!in_cgroup) return;
  const std::string path = CgroupPath(ref.job, ref.attempt);
  if (!RemoveCgroup(path)) cgroups_to_remove_.push_back(path);
}

}  // namespace colo

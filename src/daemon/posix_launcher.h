// The real ProcessLauncher. Each attempt is colo-shim, started as the job's user in a session of
// its own, in a cgroup v2 of its own where colod may create one (below colod's own cgroup). The
// shim is a child subreaper and ends what the job leaves behind before it records the end.
// Without cgroups an attempt is its shim's session plus every process seen below one of its
// processes (one /proc scan per Refresh() for all attempts), remembered by pid and start ticks,
// so a process that left the session and lost its parent is still known; an orphan that came to
// colod after its shim was killed is recognised by its stdout or stderr being the attempt's log.
//
// Layout: JOBS_DIR/<job>/attempt-<n>.{out,err,exit}. JOBS_DIR belongs to colod and nobody else
// may write to it (colod makes it 0711); each job's directory belongs to the job's user, mode
// 0700, and everything in it is hostile to colod: it is reached with openat2 beneath JOBS_DIR (no
// symlinks, no mount crossing), looked at through an O_PATH descriptor, and read only if it is a
// regular file the user owns, and then only a bounded tail of it. What a user can forge there
// (an exit record, the evidence that an attempt started) concerns their own job only.
//
// Start() sets COLO_JOB_ID and COLO_ATTEMPT in the job's environment itself.
//
// Not thread-safe: colod calls it from its loop only. Refresh() reaps every child of colod
// (colod is a child subreaper, so orphans come to it): a helper that waits for a child of its
// own must do so with waitpid(pid) before the next Refresh().
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/units.h"
#include "daemon/process_launcher.h"

namespace colo {

// A file descriptor that closes on scope exit.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

struct ProcInfo;  // one process as /proc/PID/stat shows it (daemon/proc_files.h)

class PosixProcessLauncher final : public ProcessLauncher {
 public:
  enum class Cgroups {
    kAuto,  // a cgroup v2 per attempt when colod can create cgroups below its own
    kOff,   // sessions and descendant scans only
  };
  struct Options {
    // Exists, belongs to colod's user, writable by nobody else; searchable by every user when
    // colod runs as root (colod makes it 0711).
    std::string jobs_dir;
    std::string shim;  // colo-shim, an absolute path
    Cgroups cgroups = Cgroups::kAuto;
    // How long the shim lets what a job left behind take SIGTERM before SIGKILL.
    Duration leftover_grace = Seconds(5);
    // The resources (RLIMIT_*) whose limits a job takes from its submitter (LaunchSpec's
    // context); colod's own for the others.
    std::set<int> propagated_limits;
    // The most one attempt may write to its logs (the shim stops the job there); 0: no limit.
    Bytes log_limit = Bytes(0);
  };

  // Checks the options and, with Cgroups::kAuto, whether cgroups work here (a probe cgroup is
  // created, joined by a child and removed). tracking() says what came of it; no cgroups is not
  // an error.
  static Result<std::unique_ptr<PosixProcessLauncher>> Create(const Options& options);
  ~PosixProcessLauncher() override;

  // For colod's log: whether attempts get cgroups, where, and if not why not.
  const std::string& tracking() const { return tracking_; }
  bool uses_cgroups() const { return !cgroup_base_.empty(); }
  // Starts an earlier colod left behind stopped (before they ran the shim), ended by Create: an
  // attempt of one of them ends as a failed start.
  size_t orphaned_starts_ended() const { return ended_starts_.size(); }

  Status CheckWorkdir(const Identity& owner, const std::string& workdir) override;
  Result<ProcessHandle> Start(const LaunchSpec& spec) override;
  std::optional<AttemptEnd> Check(const AttemptRef& attempt) override;
  void Signal(const AttemptRef& attempt, int signal) override;
  Found FindLaunched(const AttemptRef& attempt) override;
  std::optional<std::pair<JobId, int>> AttemptOf(int pid) override;
  void Refresh() override;
  void Release(const AttemptRef& attempt) override;
  AttemptFiles Files(JobId job, int attempt) const override;

  // The cgroup an attempt gets (whether or not it exists); empty without cgroups.
  std::string CgroupPath(JobId job, int attempt) const;

 private:
  using Key = std::pair<JobId, int>;
  using ProcTable = std::map<pid_t, ProcInfo>;
  using ChildTable = std::map<pid_t, std::vector<pid_t>>;  // live processes by parent
  // What is known of one attempt: from Start, or taken up on first mention after a restart.
  struct Tracked {
    Identity owner;
    ProcessHandle shim;
    bool own_child = false;          // started by this object: its status comes to waitpid
    std::optional<int> wait_status;  // once reaped
    bool in_cgroup = false;
    // Without a cgroup: every process seen in the shim's session or below a process of the
    // attempt, by pid and start ticks (so a recycled pid is never taken for it).
    std::map<pid_t, uint64_t> members;
    // While the start is under way: the child's report pipe (closed by the exec of the shim) and
    // how long it may take.
    UniqueFd start_report;
    std::chrono::steady_clock::time_point start_deadline;
    std::string workdir;
    // The pipes the job writes its stdout and stderr to, as /proc names them (a process that
    // lost its shim is the attempt's if it writes to one); empty for an attempt taken up after a
    // restart until its shim's are read.
    std::vector<std::string> output_pipes;
  };

  PosixProcessLauncher(Options options, int jobs_dir_fd);

  // "attempt-N.SUFFIX": an attempt's file in its job's directory (out, err, exit).
  static std::string AttemptFileName(int attempt, std::string_view suffix);
  // Whether `path` is one a workdir may be: absolute, no NUL, components and the whole bounded.
  static Status CheckWorkdirSyntax(const std::string& path);

  Tracked& Track(const AttemptRef& ref);
  // A start under way: nullopt while the child has not exec'd the shim (or once it has), the
  // attempt's end when a step failed or the start took too long.
  std::optional<AttemptEnd> CheckStarting(Tracked& tracked, JobId job, int attempt);
  std::string StartFailure(JobId job, int attempt, const Tracked& tracked, int step,
                           int error_number) const;
  bool ShimRuns(Tracked& tracked);
  // Brings the members of every attempt without a cgroup up to date from one /proc scan.
  void UpdateAllMembers(const ProcTable& table);
  void UpdateMembers(Tracked& tracked, const ProcTable& table, const ChildTable& children,
                     const std::vector<pid_t>& orphans);
  // Processes of the attempt that run now, with their start ticks.
  std::vector<std::pair<pid_t, uint64_t>> LiveProcesses(Tracked& tracked, JobId job, int attempt);
  void SignalOnce(Tracked& tracked, JobId job, int attempt, int signal);
  // Every process in the cgroup (or below it) that is still in it when the signal goes.
  void SignalCgroup(const std::string& path, int signal) const;
  int OpenBeneathJobDir(JobId job, const std::string& name, int flags) const;
  int OpenUserFile(JobId job, const std::string& name, unsigned uid, off_t* size) const;
  std::string ReadTail(JobId job, const std::string& name, unsigned uid) const;
  std::optional<ProcessEnd> ReadExitRecord(JobId job, int attempt, unsigned uid) const;
  bool ExistsInJobDir(JobId job, const std::string& name) const;
  Result<int> OpenJobDirForStart(JobId job, const Identity& owner);
  // True once it is gone; otherwise its processes are killed and it is tried again later.
  bool RemoveCgroup(const std::string& path);

  Options options_;
  int jobs_dir_fd_ = -1;
  std::string cgroup_base_;      // colod's own cgroup, where attempts' cgroups go; empty: none
  std::string cgroup_own_path_;  // the same as /proc/PID/cgroup names it ("" for the root)
  bool has_cgroup_kill_ = false;
  std::string cgroup_prefix_;  // "colo-<tag of the state directory>-job-": this colod's alone
  std::string tracking_;
  std::set<std::pair<pid_t, uint64_t>> ended_starts_;
  std::map<Key, Tracked> attempts_;
  std::vector<std::string> cgroups_to_remove_;  // released while processes were still leaving
  // Orphans of colod already looked at (by pid and start ticks): the attempt of their log.
  std::map<std::pair<pid_t, uint64_t>, std::optional<Key>> orphan_owners_;
};

}  // namespace colo

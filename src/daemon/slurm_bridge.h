// colod as the node layer under Slurm. The SPANK plugin (src/slurm) asks, as root, for a Slurm
// job's GPUs and reports its end; this bridge turns those asks into JobController tenants, and
// carries out what only Slurm can do — requeue a job, tell where its output went — on a worker
// thread, so that a slow or absent slurmctld never holds up colod's loop.
//
// What an out-of-memory crash taught travels with the job in its AdminComment
// ("colo:need=BYTES,ooms=N"), which only Slurm's administrators (and this root daemon) can set:
// whichever node's colod runs the job next reads it there.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "api/types.h"
#include "common/clock.h"
#include "daemon/job_controller.h"

namespace colo {

// What colod needs of Slurm's record of a job.
struct SlurmJobInfo {
  std::string state;  // RUNNING, PENDING, COMPLETED, ...
  std::string nodes;  // the node list, as Slurm writes it
  std::string admin_comment;
  std::string std_out, std_err;
  int exit_code = 0;    // the batch script's exit code
  int exit_signal = 0;  // or the signal that ended it
  int restarts = 0;
  std::string tres_per_node;  // e.g. gres:gpu:1,gres:gpumem:4096
};

// colo's own note in a job's AdminComment.
struct SlurmNote {
  std::optional<Bytes> need;
  int ooms = 0;
};
SlurmNote ParseSlurmNote(std::string_view admin_comment);
std::string FormatSlurmNote(const SlurmNote& note);

// Slurm's commands, called on the bridge's worker thread (they block); a fake in tests.
class SlurmCommands {
 public:
  virtual ~SlurmCommands() = default;
  // nullopt: Slurm no longer knows the job.
  virtual Result<std::optional<SlurmJobInfo>> ShowJob(uint32_t job) = 0;
  // Puts the job back in Slurm's queue with `note` in its AdminComment and its gpumem GRES made
  // `gpumem_mib` per node (when it has one), kept off `avoid_node` (when not empty), eligible at
  // once.
  virtual Status Requeue(uint32_t job, const SlurmNote& note, int64_t gpumem_mib,
                         const std::string& avoid_node) = 0;
  // The last `max_bytes` of a file, read as `who` — never as root: the path is the user's.
  virtual Result<std::string> TailAsUser(const Identity& who, const std::string& path,
                                         size_t max_bytes) = 0;
};

// The real commands: scontrol and squeue of the node's Slurm, setpriv + tail for a user's file.
class ScontrolCommands : public SlurmCommands {
 public:
  // `bin_dir`: where scontrol and squeue are; `environment`: SLURM_CONF and such for them.
  ScontrolCommands(std::string bin_dir, std::vector<std::string> environment);
  Result<std::optional<SlurmJobInfo>> ShowJob(uint32_t job) override;
  Status Requeue(uint32_t job, const SlurmNote& note, int64_t gpumem_mib,
                 const std::string& avoid_node) override;
  Result<std::string> TailAsUser(const Identity& who, const std::string& path,
                                 size_t max_bytes) override;

 private:
  Result<std::string> Scontrol(std::vector<std::string> args);
  std::string bin_dir_;
  std::vector<std::string> env_;
};

// Parses `scontrol --json show job J`.
// `tres_per_node` with its gpumem count made `mib` (unchanged when it has none).
std::string WithGpumem(const std::string& tres_per_node, int64_t mib);
Result<SlurmJobInfo> ParseScontrolJob(std::string_view line);

struct SlurmBridgeOptions {
  std::string node;  // this node's Slurm name
  // How often running tenants are checked against Slurm (an end colod was not told of).
  Duration reconcile_interval = Seconds(30);
  // Work for Slurm waiting on the worker at most; more is refused (bounded memory).
  size_t max_pending = 4096;
};

class SlurmBridge {
 public:
  SlurmBridge(const Clock& clock, JobController& controller,
              std::unique_ptr<SlurmCommands> commands, SlurmBridgeOptions options,
              std::function<void()> wake);
  ~SlurmBridge();

  // From the API, after the caller was checked to be root.
  Result<api::SlurmAttachReply> Attach(const api::SlurmAttachRequest& request);
  Result<api::SlurmEndReply> End(const api::SlurmEndRequest& request);
  // The controller gives a tenant back to Slurm.
  void HandBack(const TenantHandback& handback);
  // On colod's loop: applies what the worker finished; checks running tenants now and then.
  void Tick();
  std::optional<TimePoint> NextWakeup() const;

 private:
  void Post(std::function<std::function<void()>()> work);
  void WorkerLoop();
  void FinishEnd(uint32_t slurm_job, JobId job, Identity owner, int wait_status);
  void Reconcile();

  const Clock& clock_;
  JobController& controller_;
  std::unique_ptr<SlurmCommands> commands_;
  SlurmBridgeOptions options_;
  std::function<void()> wake_;

  // Attaches of restarted jobs waiting for Slurm's record (their need may have been raised).
  struct Lookup {
    std::optional<SlurmNote> note;  // set when the record came back
    std::string error;
  };
  std::map<std::pair<uint32_t, int>, Lookup> lookups_;  // by (Slurm job, restarts)
  std::set<uint32_t> ending_;                           // ends whose output is being read
  TimePoint next_reconcile_;

  // The worker: work in, results (to run on colod's loop) out.
  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<std::function<std::function<void()>()>> work_;
  std::deque<std::function<void()>> done_;
  size_t in_flight_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace colo

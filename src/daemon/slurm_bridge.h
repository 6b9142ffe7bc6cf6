// colod as the node layer under Slurm. Slurm books each GPU job's GPUs (whole GPUs, or GPU memory
// as shards of one GPU: docs/slurm-design.md); the SPANK plugin (src/slurm) tells colod, as root,
// which GPUs slurmd gave a job and what it booked, asks for the job's placement at each step and
// reports its end. This bridge turns those asks into tenants of colod (TenantHost, which the job
// controller is) booked on exactly those GPUs (what a booking stands for: slurm_booking.h), and
// carries out what only Slurm can do — requeue a job, tell where its output went, drain and
// resume this node — on worker threads, so that a slow or absent slurmctld never holds up colod's
// loop.
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
#include "daemon/slurm_booking.h"
#include "daemon/slurm_gpus.h"
#include "daemon/tenant_runner.h"
#include "gpu/gpu.h"

namespace colo {

// What colod needs of Slurm's record of a job.
struct SlurmJobInfo {
  uint32_t job = 0;
  std::string state;  // RUNNING, PENDING, COMPLETED, ...
  std::string nodes;  // the node list, as Slurm writes it
  std::string admin_comment;
  std::string std_out, std_err;  // absolute paths, Slurm's filename pattern expanded
  std::string user, name, work_dir;
  std::string excluded_nodes, required_nodes;  // as the job's user asked
  uint32_t array_job = 0;                      // 0: not part of an array
  std::optional<uint32_t> array_task;
  int exit_code = 0;    // the batch script's exit code
  int exit_signal = 0;  // or the signal that ended it
  int restarts = 0;
  std::string tres_per_node;  // e.g. gres:gpu:1 or gres:shard:12
  std::string comment;        // the job's Comment (its user may write it)
  // The GPUs Slurm gave the job on each of its nodes, by their index in the node's gres.conf
  // (squeue --json's gres_detail, e.g. "shard:7(IDX:0)").
  std::map<std::string, std::vector<int>> gpus_by_node;
};

// A node as `scontrol show node` has it: drained or not, and why.
struct SlurmNodeState {
  bool drained = false;
  std::string reason;
};

// colo's own note in a job's AdminComment.
struct SlurmNote {
  std::optional<Bytes> need;
  int ooms = 0;
};
SlurmNote ParseSlurmNote(std::string_view admin_comment);
std::string FormatSlurmNote(const SlurmNote& note);
// `admin_comment` with its colo note (if any) replaced by `note`, the rest kept.
std::string WithNote(std::string_view admin_comment, const SlurmNote& note);

// Slurm's commands, called on the bridge's worker thread (they block); a fake in tests.
class SlurmCommands {
 public:
  virtual ~SlurmCommands() = default;
  // Slurm's records of those of `jobs` it still knows.
  virtual Result<std::map<uint32_t, SlurmJobInfo>> ShowJobs(const std::vector<uint32_t>& jobs) = 0;
  // One job's record; nullopt when Slurm no longer knows it.
  Result<std::optional<SlurmJobInfo>> ShowJob(uint32_t job);
  // What squeue says of `jobs` (state, restarts, nodes only: a cheap query), those it knows.
  virtual Result<std::map<uint32_t, SlurmJobInfo>> JobStates(const std::vector<uint32_t>& jobs) = 0;
  // Puts the job back in Slurm's queue (running or ended), with `note` in its AdminComment.
  virtual Status Requeue(uint32_t job, const SlurmNote& note) = 0;
  // Once the requeued job is pending: `note` in its AdminComment, its shards made `shards` per
  // node (when it books shards and `shards` > 0), kept off `avoid_node` too (when not empty),
  // eligible at once.
  // False (nothing done) while it is not pending yet.
  virtual Result<bool> PrepareRerun(uint32_t job, const SlurmNote& note, int64_t shards,
                                    const std::string& avoid_node) = 0;
  // What squeue says a job booked (restarts, tres_per_node, comment only: a cheap query of one
  // job); nullopt when Slurm no longer knows it.
  virtual Result<std::optional<SlurmJobInfo>> Booking(uint32_t job) = 0;
  // What `slurmd -G` prints of this node's GRES (each GPU's index, device file and shards).
  virtual Result<std::string> SlurmdGres(const std::string& node) = 0;
  virtual Result<SlurmNodeState> ShowNode(const std::string& node) = 0;
  // Drains the node with `reason`, or (drain false) resumes it.
  virtual Status UpdateNode(const std::string& node, bool drain, const std::string& reason) = 0;
  // The last `max_bytes` of a file, read as `who` — never as root: the path is the user's.
  virtual Result<std::string> TailAsUser(const Identity& who, const std::string& path,
                                         size_t max_bytes) = 0;
  // Appends `text` to a file as `who` (the job's output: what colo did, in the user's view).
  virtual Status AppendAsUser(const Identity& who, const std::string& path,
                              const std::string& text) = 0;
};

// The real commands: scontrol and squeue of the node's Slurm, setpriv + tail for a user's file.
class SlurmCliCommands : public SlurmCommands {
 public:
  // `bin_dir`: where scontrol and squeue are; `slurmd`: slurmd's path; `environment`:
  // SLURM_CONF and such for them.
  SlurmCliCommands(std::string bin_dir, std::string slurmd, std::vector<std::string> environment);
  Result<std::map<uint32_t, SlurmJobInfo>> ShowJobs(const std::vector<uint32_t>& jobs) override;
  Result<std::map<uint32_t, SlurmJobInfo>> JobStates(const std::vector<uint32_t>& jobs) override;
  Status Requeue(uint32_t job, const SlurmNote& note) override;
  Result<bool> PrepareRerun(uint32_t job, const SlurmNote& note, int64_t shards,
                            const std::string& avoid_node) override;
  Result<std::optional<SlurmJobInfo>> Booking(uint32_t job) override;
  Result<std::string> SlurmdGres(const std::string& node) override;
  Result<SlurmNodeState> ShowNode(const std::string& node) override;
  Status UpdateNode(const std::string& node, bool drain, const std::string& reason) override;
  Result<std::string> TailAsUser(const Identity& who, const std::string& path,
                                 size_t max_bytes) override;
  Status AppendAsUser(const Identity& who, const std::string& path,
                      const std::string& text) override;

 private:
  // squeue of `jobs`, with `args`; nullopt when Slurm knows none of them.
  Result<std::optional<std::string>> Squeue(const std::vector<uint32_t>& jobs,
                                            std::vector<std::string> args,
                                            size_t max_output = 1 << 20);
  // Runs `command` (scontrol, squeue) of `bin_dir`; an error unless it succeeds.
  Result<std::string> Run(const std::string& command, std::vector<std::string> args,
                          size_t max_output = 1 << 20);
  std::string bin_dir_;
  std::string slurmd_;
  std::vector<std::string> env_;
};

// Parses `squeue --noheader --Format=JobID:|,State:|,RestartCnt:|,NodeList:|`.
std::map<uint32_t, SlurmJobInfo> ParseSqueueStates(std::string_view text);
// Parses `squeue --noheader --Format=JobID:|,RestartCnt:|,tres-per-node:|,Comment:|` (the
// Comment last: its user may write a '|' into it).
std::map<uint32_t, SlurmJobInfo> ParseSqueueBookings(std::string_view text);
// Parses `squeue --json`: the jobs it lists, by Slurm job id.
Result<std::map<uint32_t, SlurmJobInfo>> ParseSqueueJobs(std::string_view text);

// What an attach waits for of Slurm's record of its job: the run it is, the need an earlier run
// raised, what Slurm booked, the GPUs it gave the job here.
struct Lookup {
  int restarts = 0;               // the run the attach asked for
  std::optional<SlurmNote> note;  // set when the record came back
  int slurm_restarts = 0;
  RecordedBooking booked;  // its GPUs here come with the full record only
  std::string error;
};

struct SlurmBridgeOptions {
  std::string node;  // this node's Slurm name
  // colod's GPUs, in the scheduler's order (their minor numbers name their /dev/nvidiaN).
  std::vector<DeviceInfo> devices;
  Bytes shard_size = GiB(1);  // the GPU memory of one shard (slurm.shard_size)
  Bytes margin = GiB(2);      // the policy's memory margin, which a GPU's shards leave free
  // How often running tenants are checked against Slurm (an end colod was not told of).
  Duration reconcile_interval = Seconds(30);
  // Work for Slurm waiting on the worker at most; more is refused (bounded memory).
  size_t max_pending = 4096;
  // How long a run's first attach waits for slurmd's prolog to say which run it is, before
  // Slurm's record is read instead.
  Duration prolog_grace = Seconds(2);
  // How long a requeued job may take to be pending again before colod stops preparing its
  // next run (it runs again as it is).
  Duration rerun_deadline = Seconds(60);
  // Threads running Slurm's commands (each blocks on slurmctld).
  int workers = 4;
};

class SlurmBridge {
 public:
  SlurmBridge(const Clock& clock, TenantHost& host, std::unique_ptr<SlurmCommands> commands,
              SlurmBridgeOptions options, std::function<void()> wake);
  ~SlurmBridge();

  // From the API, after the caller was checked to be root.
  Result<api::SlurmAttachReply> Attach(const api::SlurmAttachRequest& request);
  Result<api::SlurmEndReply> End(const api::SlurmEndRequest& request);
  // slurmd's prolog: which run of the job begins here (its steps cannot tell).
  Result<api::SlurmRunReply> BeginRun(const api::SlurmRunRequest& request);
  // The controller gives a tenant back to Slurm.
  void HandBack(const TenantHandback& handback);
  // On colod's loop: applies what the worker finished; checks running tenants now and then.
  void Tick();
  std::optional<TimePoint> NextWakeup() const;

 private:
  void Post(std::function<std::function<void()>()> work);
  void WorkerLoop();
  void FinishEnd(uint32_t slurm_job, JobId job, Identity owner, int wait_status);
  void PrepareRerun(uint32_t slurm_job, SlurmNote note, int64_t shards, std::string avoid,
                    std::string reason, TimePoint deadline);
  void Reconcile();
  void TellUser(uint32_t slurm_job, JobId job, const Identity& owner, const std::string& std_err);
  const Job* FindLiveTenant(uint32_t slurm_job) const;
  // At start: which of colod's GPUs each of Slurm's is (slurmd -G), whether gres.conf books
  // more of a GPU than it has (the node is drained then), and this node resumed from a drain of
  // colo's own once colod serves it again.
  void LearnNode();

  const Clock& clock_;
  TenantHost& host_;
  std::unique_ptr<SlurmCommands> commands_;
  SlurmBridgeOptions options_;
  std::function<void()> wake_;

  std::map<uint32_t, Lookup> lookups_;
  std::optional<SlurmGpuMap> gpus_;             // once LearnNode is through
  std::map<uint32_t, TimePoint> prolog_waits_;  // attaches waiting for the prolog's word, until
  // What slurmd's prolog said of each job's run beginning here, and in which order it came.
  std::map<uint32_t, api::SlurmRunRequest> runs_;
  std::deque<uint32_t> run_order_;
  std::set<uint32_t> ending_;      // ends whose output is being read
  std::set<uint32_t> requeuing_;   // given back, `scontrol requeue` not through yet
  std::deque<uint32_t> requeued_;  // the last ones given back (bounded)
  TimePoint next_reconcile_;
  bool reconciling_ = false;
  // Work to post later (a requeued job not pending yet is looked at again), by when.
  std::multimap<TimePoint, std::function<void()>> later_;

  // The worker: work in, results (to run on colod's loop) out.
  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<std::function<std::function<void()>()>> work_;
  std::deque<std::function<void()>> done_;
  size_t in_flight_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace colo

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
#include "daemon/slurm_commands.h"
#include "daemon/slurm_gpus.h"
#include "daemon/tenant_runner.h"
#include "gpu/gpu.h"

namespace colo {

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

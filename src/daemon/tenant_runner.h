// The runs an outside engine starts on this node (Slurm's jobs: slurmstepd runs their processes,
// as the user), as colod keeps them: an AttemptRunner that starts nothing, polls nothing and
// signals nothing (the engine does), and the bookkeeping of the engine's runs — which live job
// each of its ids is, what ended ones answered, how long a waiting one may wait here, and the runs
// to give back to the engine's queue. The engine's bridge (SlurmBridge) asks through TenantHost;
// nothing here calls the bridge: what it must carry out is taken from the controller
// (JobController::TakeHandbacks) by colod's loop.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/types.h"
#include "common/clock.h"
#include "daemon/attempt_runner.h"

namespace colo {

// A Slurm job asking for its GPUs on this node: api::SlurmAttachRequest with the owner's
// identity from the passwd database, and what earlier runs left in Slurm's record of the job.
struct TenantRequest {
  uint32_t slurm_job = 0;
  Identity owner;
  std::string name;
  int gpus = 1;
  std::optional<Bytes> memory;  // per GPU; absent: whole GPUs
  SharingPreference share = SharingPreference::kAny;
  int restarts = 0;
  std::optional<Bytes> raised_need;  // what an out-of-memory crash of an earlier run raised it to
  int earlier_ooms = 0;
  // The GPUs Slurm booked for it on this node, by the scheduler's index: it runs on these.
  // Empty: colod chooses.
  std::vector<GpuIndex> booked_gpus;
  int threads = 0;  // the MPS thread percentage it booked (an mps:P request); 0: colod's choice
};

// A tenant given back to Slurm's queue, and what its next run (on any node) needs.
struct TenantHandback {
  uint32_t slurm_job = 0;
  JobId job = 0;
  Bytes need;    // per GPU
  int ooms = 0;  // out-of-memory crashes over all its runs
  int gpus = 1;
  std::string reason;
  bool avoid_this_node = false;  // this node could not place it in time
  bool out_of_memory = false;    // it crashed out of memory (its user's output says so)
};

// What an engine's bridge asks of colod (JobController answers).
class TenantHost {
 public:
  virtual ~TenantHost() = default;
  // A run of the engine's job asks for its GPUs: the first ask queues it (and places it at once
  // if it fits); every later ask, by any of its steps, gets the same answer.
  virtual Result<api::SlurmAttachReply> AttachTenant(const TenantRequest& request) = 0;
  // A tenant's run ended (its batch script's end, or the engine's word that the job is over).
  // colo's id of it, or nullopt when no run of it is live here.
  virtual std::optional<JobId> EndTenant(uint32_t slurm_job, const AttemptEnd& end) = 0;
  virtual const Job* FindTenant(uint32_t slurm_job) const = 0;
  // Any job by colo's id, ended ones too: what became of a tenant's run once it ended.
  virtual Result<std::optional<Job>> Find(JobId id) const = 0;
  // Whether a tenant's give-back to the engine waits for its record to be stored.
  virtual bool HandBackUnsent(JobId id) const = 0;
  // Every live tenant, for reconciling with the engine's records.
  virtual std::vector<const Job*> Tenants() const = 0;
};

class TenantRunner final : public AttemptRunner {
 public:
  // Nothing runs here that colod starts, checks or stops.
  Result<std::optional<ProcessHandle>> Start(const Job&, const Attempt&,
                                             const AttemptEnv&) override {
    return std::optional<ProcessHandle>();
  }
  std::optional<AttemptEnd> Check(const Job&) override { return std::nullopt; }
  void Signal(const Job&, int) override {}
  void Release(const Job&) override {}
  // A run stored as placed is placed: its steps ask for their GPUs.
  Recovered Recover(const Job&) override { return Recovered{std::nullopt, true}; }
  Status MayControl(const Job& job, std::string_view what) const override;
  bool enforces_time_limit() const override { return false; }
  bool reruns_through_engine() const override { return true; }
  std::string Describe(const Job& job, const Attempt& attempt) const override;

  // The live job of each engine id.
  void Track(const Job& job);
  std::optional<JobId> Find(uint32_t slurm_job) const;
  // A run leaves memory: what it answered stays for the steps still asking (bounded: the
  // oldest ids go first). A later run of the same job may have taken its entry meanwhile.
  void Forget(const Job& job, api::SlurmAttachReply reply);
  // What an ended run answered, for a step of it (or of an older run) still asking.
  std::optional<api::SlurmAttachReply> EndedReply(uint32_t slurm_job, int restarts) const;
  std::vector<JobId> live() const;

  // How long a waiting run may wait here before it goes back to the engine (Slurm counts a
  // node's GPU memory, not how it is split between GPUs).
  void WaitUntil(JobId job, TimePoint deadline) { deadlines_[job] = deadline; }
  void StopWaiting(JobId job) { deadlines_.erase(job); }
  // The waiting runs past their deadline, which leave the list.
  std::vector<JobId> TakeOverdue(TimePoint now);
  std::optional<TimePoint> NextDeadline() const;

  // A run goes back to the engine's queue; the engine hears of it only once its record is
  // stored (a restart before then would queue it here again while the engine runs it
  // elsewhere).
  void HandBack(TenantHandback handback, bool stored);
  // The run's record is stored: its give-back may go.
  void Stored(JobId job);
  bool Unsent(JobId job) const { return unsent_.count(job) > 0; }
  std::vector<TenantHandback> TakeHandbacks();

 private:
  struct Ended {
    int restarts = 0;
    api::SlurmAttachReply reply;
  };
  std::map<uint32_t, JobId> live_;
  std::map<uint32_t, Ended> ended_;
  std::map<JobId, TimePoint> deadlines_;
  std::map<JobId, TenantHandback> unsent_;
  std::vector<TenantHandback> ready_;
};

}  // namespace colo

// The job lifecycle in one place: submit, launch, exit, out-of-memory recovery, cancel,
// re-adoption after a restart, and learning a model's need from its earlier runs. It is built on
// a Clock, a JobStore and a ProcessLauncher, and does no I/O of its own, so every step is tested
// with a manual clock and fakes (tests/daemon/job_controller_test.cc). It coordinates owners and
// keeps no rule of its own: the scheduler (core) owns each job's scheduling state and reports
// what it changes, Admission what may enter the queue, an AttemptRunner how an attempt runs.
// Its definitions: job_controller.cc (submit, samples, the turn, launch, exit),
// job_controller_control.cc (cancel, hold, release, requeue), job_controller_learning.cc (earlier
// runs), job_controller_restart.cc (after a restart), job_controller_tenants.cc (Slurm's runs).
//
// Durability rules it keeps:
// - a submit is acknowledged only once the job is stored;
// - an attempt's intent (attempt N launching, on which GPUs) is stored before its process starts,
//   and a restart reconciles it (re-adopts it, reads how it ended, or starts it again only when it
//   certainly never started): no job runs twice;
// - every later change is stored before colod acts on it where it can be (cancel), and otherwise
//   kept in memory and stored again until it succeeds (an exit seen while the disk is full).
#pragma once

#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/types.h"
#include "common/clock.h"
#include "core/scheduler.h"
#include "daemon/admission.h"
#include "daemon/framework_env.h"
#include "daemon/job.h"
#include "daemon/job_store.h"
#include "daemon/process_launcher.h"
#include "daemon/tenant_runner.h"
#include "gpu/gpu.h"

namespace colo {

struct ControllerOptions {
  // A cancelled job gets SIGTERM, then SIGKILL after this long.
  Duration cancel_grace = Seconds(10);
  // A job past its time limit likewise (Slurm's KillWait).
  Duration timeout_grace = Seconds(30);
  // How many earlier runs of a model its later jobs learn from (0: none; a policy's learn=off).
  int history_runs = static_cast<int>(kRunsLearnedFrom);
  // The policy plans without a memory number of its own for each job (est=none, as CARMA's OR-
  // names): only a need learned from the job's runs or an out-of-memory crash counts.
  bool plan_without_estimates = false;
  // Per-user limits and arrays (Admission).
  AdmissionOptions admission;
  // The environment a job needs to be an MPS client with these limits (it starts colod's MPS
  // daemon on demand); empty: MPS is off, and MPS placements share plainly.
  std::function<Result<std::vector<std::string>>(int thread_percent, Bytes memory_limit, int gpus)>
      mps_env;
  // How long a Slurm job may wait here for GPUs before it is given back to Slurm (to go to
  // another node): Slurm counts a node's GPU memory, not how it is split between GPUs.
  Duration tenant_wait_limit = Seconds(60);
  // Where events go besides the store (colod's log).
  std::function<void(const JobEvent&)> log;
};

// Counts for the metrics endpoint.
struct ControllerCounters {
  // Observations by upper bound (a Prometheus histogram: the last bucket is the rest).
  struct Histogram {
    explicit Histogram(std::vector<double> upper_bounds)
        : bounds(std::move(upper_bounds)), buckets(bounds.size() + 1, 0) {}
    void Observe(double value);
    std::vector<double> bounds;
    std::vector<int64_t> buckets;
    double sum = 0;
    int64_t count = 0;
  };
  int64_t placements = 0;
  int64_t oom_crashes = 0;
  int64_t oom_recoveries = 0;
  // By what the raised need came from: "framework" (the framework's own figures) or "observed".
  std::map<std::string, int64_t> oom_recoveries_by_reason;
  int64_t store_failures = 0;
  // Running jobs signalled to make room for a user under their share.
  int64_t preemptions = 0;
  // Attempts seen using more memory than planned while sharing without an MPS memory limit, by
  // GPU.
  std::map<GpuIndex, int64_t> over_plan;
  // Placement passes by how long they took, in seconds.
  Histogram pass{{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 1e-2, 1e-1}};
  // Seconds from submission to a job's first start, and to its end.
  Histogram wait{{1, 10, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 12 * 3600, 24 * 3600}};
  Histogram completion{
      {10, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 3 * 24 * 3600}};
};

class JobController final : public TenantHost {
 public:
  JobController(const Clock& clock, Scheduler& scheduler, JobStore& store,
                ProcessLauncher& launcher, ControllerOptions options);

  // At start: every live job the store has comes back — waiting ones to their queue, running
  // ones re-adopted, launches in flight reconciled. Unreadable rows are reported, not fatal.
  Status Recover();

  // Validates, stores and queues a job for `who`. Errors: InvalidArgument (a field),
  // Infeasible (can never run here), Unavailable (could not be stored: nothing was submitted).
  Result<JobId> Submit(const Identity& who, api::SubmitRequest request);
  // A running job is signalled ("cancelling"); a waiting one ends now ("cancelled"). Only its
  // owner or root may cancel it.
  Result<std::string> Cancel(const Identity& who, JobId id);
  // scontrol's hold, release and requeue, and cancel, on one job, by its owner or root. A held
  // job (and one whose dependencies are not met) waits outside the scheduler's queues; requeue
  // stops a running job and queues it again, and queues an ended one again. Returns what the
  // job is now.
  // `whole_array`: an array's id cancels every live task of it (scancel ARRAY_ID); otherwise the
  // id is its first task alone.
  Result<std::string> Control(const Identity& who, api::JobAction action, JobId id,
                              bool whole_array = true);
  // Control of many jobs, each answered as Control answers it; holds and releases are stored
  // together, one write for them all, and so are the cancels of the waiting jobs named.
  std::vector<Result<std::string>> ControlMany(const Identity& who, api::JobAction action,
                                               const std::vector<JobId>& ids, bool whole_array);
  // Why a job waits that the scheduler does not know of (held, dependencies, its array's cap);
  // empty otherwise.
  std::string HeldReason(const Job& job) const {
    return Admission::HeldReason(job, scheduler_.job(job.id()) != nullptr);
  }

  // TenantHost: the Slurm bridge's questions.
  Result<api::SlurmAttachReply> AttachTenant(const TenantRequest& request) override;
  std::optional<JobId> EndTenant(uint32_t slurm_job, const AttemptEnd& end) override;
  const Job* FindTenant(uint32_t slurm_job) const override;
  bool HandBackUnsent(JobId id) const override { return tenants_.Unsent(id); }
  std::vector<const Job*> Tenants() const override;
  // The runs to give back to Slurm's queue, each once its record is stored: colod's loop hands
  // them to the Slurm bridge (the controller never calls it).
  std::vector<TenantHandback> TakeHandbacks() { return tenants_.TakeHandbacks(); }

  // A sample of every GPU, in the scheduler's order, with the processes on each where they were
  // read. A GPU whose processes were not read keeps its jobs' last memory readings.
  void OnSample(TimePoint time, const std::vector<DeviceSample>& devices);
  // The GPUs (in the scheduler's order) where a job runs: the samples list their processes.
  std::vector<bool> GpusRunningJobs() const;
  // One turn of work: attempts that ended, cancels to escalate, records to store again, then a
  // placement pass and its launches.
  void Tick();
  // When Tick should run again even if nothing happens.
  std::optional<TimePoint> NextWakeup() const;

  // Reads, for the API.
  const Job* FindLive(JobId id) const;
  const std::map<JobId, Job>& live_jobs() const { return live_; }
  // A live job from memory, an ended one from the store.
  Result<std::optional<Job>> Find(JobId id) const override;
  const Scheduler& scheduler() const { return scheduler_; }
  WallTime now() const { return clock_.WallNow(); }
  const ControllerCounters& counters() const { return counters_; }
  // The peak the current attempt of a running job has reached so far.
  Bytes CurrentPeak(const Job& job) const;
  // True while any job's latest change could not be stored.
  bool has_unsaved() const { return !unsaved_.empty(); }

 private:
  struct Running {
    std::optional<TimePoint> kill_at;     // when a cancelled job gets SIGKILL
    std::optional<TimePoint> timeout_at;  // when its time limit passes
    std::optional<TimePoint> warn_at;     // when its --signal comes before its time limit
  };
  // When the job's time limit passes, and when its --signal (if it has one) comes before it.
  void SetTimeLimit(Job& job, Running& running, TimePoint started);

  Result<Job> NewJob(const Identity& who, api::SubmitRequest request);
  Result<std::string> CancelOne(const Identity& who, JobId id);
  // Stores every task of an array (the first task's id names it) and queues them; all or none.
  Result<JobId> SubmitArray(Job base, const api::ArraySpec& array, std::string_view token);
  // Queues a job that waited outside the scheduler; an array task under a cap waits its turn.
  void Enqueue(Job& job, std::string_view when);
  // Queues the tasks of capped arrays whose turn came.
  void AdmitArrayTasks();
  void Launch(const Launch& launch);
  // Placement pass and its launches; `bounded`: at most kPlacementsPerTurn, the rest at the
  // next turn (colod's loop), else every job that fits now.
  void PlacementPass(bool bounded = false);
  api::SlurmAttachReply TenantReply(const Job& job) const;
  // Why a queued job is not running: the gates that stopped it, else who is ahead of it.
  std::string WaitReason(const Job& job) const;
  void HandBack(Job& job, TenantHandback handback, std::vector<JobEvent> events);
  void AddLive(Job job);
  void FinishAttempt(Job& job, const AttemptEnd& end);
  void RecoverRunning(Job& job, const std::map<std::string, GpuIndex>& by_uuid);
  // A preemption under way when colod stopped: its notice runs on to its stored end.
  void ResumePreemption(Job& job);
  // Into the scheduler's queue it belongs in (recovery after out-of-memory crashes); a job the
  // scheduler refuses fails, the reason naming `when`.
  void Requeue(Job& job, std::string_view when = "after a restart");
  Status MayControl(const Identity& who, const Job& job, std::string_view what) const;
  // The job as the store has it, for an id that is not live: NotFound, PermissionDenied, or it.
  Result<Job> EndedJobFor(const Identity& who, JobId id, std::string_view what) const;
  // The live job `who` may cancel: an error saying why not, or the job.
  Result<Job*> CancelTarget(const Identity& who, JobId id);
  // Waiting jobs cancelled, stored in one write.
  std::vector<Result<std::string>> CancelWaiting(const Identity& who,
                                                 const std::vector<JobId>& ids);
  // The live, waiting job `who` may hold (or release): an error saying why not, or the job.
  Result<Job*> HoldTarget(const Identity& who, JobId id, bool hold);
  std::vector<Result<std::string>> SetHolds(const Identity& who, const std::vector<JobId>& ids,
                                            bool hold);
  JobEvent HoldEvent(JobId id, const Identity& who, bool hold) const;
  // What follows a hold or release once it is stored; returns what the job is now.
  Result<std::string> ApplyHold(Job& job, const Identity& who, bool hold);
  Result<std::string> RequeueJob(const Identity& who, JobId id);
  // A running job's attempt asked to stop, for a cancel (`asked`: &Job::cancel_requested) or a
  // requeue: stored first, then SIGTERM to every process of it, SIGKILL when the grace is over.
  // `then`: what follows, for the event.
  Status AskToStop(const Identity& who, Job& job, bool Job::*asked, std::string_view then);
  void CheckDependencies();
  void CheckTimeLimits(TimePoint now);
  // The running jobs the scheduler chose to stop for the queue's head: each stored as being
  // preempted, then sent its signal; SIGKILL when its notice is over.
  void StartPreemptions();
  void RefineQueuedJobs(const Job& finished);
  // Where the SM activity the job plans with came from (its estimate records what was learned).
  static SmactSource SmactSourceOf(const Job& job);
  // What the job plans with after a lesson of its model's runs, and what `colo show` says was
  // learned.
  static void TakeLesson(Job& job, const Lesson& lesson);
  ModelRuns RunsOf(const std::string& signature) const;
  JobEvent SmactEvent(JobId id, double smact) const;
  // A running job used more than it planned, and the scheduler raised its need: said once per
  // attempt, counted per GPU.
  void OverPlan(Job& job, const NeedRaised& raised);
  // Who runs the job's attempts: colod's own processes, or the engine whose run it is.
  AttemptRunner& RunnerFor(const Job& job) {
    return job.external ? static_cast<AttemptRunner&>(tenants_) : processes_;
  }
  const AttemptRunner& RunnerFor(const Job& job) const {
    return job.external ? static_cast<const AttemptRunner&>(tenants_) : processes_;
  }
  // What colod gives the attempt's processes (`mps`: its MPS client settings, if any).
  AttemptEnv EnvOf(const Job& job, const Attempt& attempt, std::vector<std::string> mps) const;
  // Records what the scheduler did with the job (JobEnded): its state, its need after an
  // out-of-memory crash, why it ended. Nothing of the scheduler's is read back.
  void Record(Job& job, const JobEnded& ended);
  // The job as the scheduler plans it (ControllerOptions::plan_without_estimates).
  JobSpec Planned(const Job& job) const;
  // Stores the job with these events; on failure keeps both to store again at the next turn.
  bool Persist(Job& job, std::vector<JobEvent> events);
  // Persist for many jobs, in one transaction.
  void PersistMany(std::vector<std::pair<Job*, std::vector<JobEvent>>> jobs);
  // The job's events not stored yet, these added (and logged).
  std::vector<JobEvent>& Pending(JobId id, std::vector<JobEvent> events);
  void Stored(JobId id);
  // The job's change could not be stored: Tick stores it again.
  void Unsaved(JobId id, const Status& error);
  // A live job that ended and is stored leaves memory.
  void ForgetIfDone(JobId id);
  JobEvent Event(JobId job, std::string kind, std::string detail) const;
  void Log(const JobEvent& event) const;

  const Clock& clock_;
  Scheduler& scheduler_;
  JobStore& store_;
  ProcessLauncher& launcher_;
  ControllerOptions options_;
  ProcessRunner processes_;  // colod's own attempts
  TenantRunner tenants_;     // Slurm's runs on this node
  std::map<JobId, Job> live_;
  std::map<JobId, Running> running_;
  std::set<JobId> unsaved_;
  bool more_work_ = false;  // this turn left ends or starts for the next (Tick)
  Admission admission_;     // what may enter the scheduler's queue, and when
  std::map<JobId, std::vector<JobEvent>> pending_events_;
  ControllerCounters counters_;
};

}  // namespace colo

// The scheduling core: queues, memory reservations, OOM recovery and the placement pass.
//
// It is fed events (Submit, OnGpuSample, OnJobMemory, OnJobExit) and returns decisions (Launch). It
// does no I/O, starts no threads and reads time only from the injected Clock, so the daemon and the
// simulator run the very same code.
#pragma once

#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "core/fair_share.h"
#include "core/model.h"
#include "core/placement.h"
#include "core/recovery.h"
#include "core/run_learning.h"
#include "core/window_stats.h"

namespace colo {

enum class RecoveryMode {
  kThesis,    // re-run an OOM-crashed job on an idle GPU
  kAdaptive,  // raise its need from the observed peak and re-place it anywhere it fits
};
Result<RecoveryMode> ParseRecoveryMode(std::string_view text);
std::string_view ToString(RecoveryMode mode);

struct SchedulerConfig {
  int window_samples = 30;
  Duration sample_interval = Seconds(1);
  // A GPU that just got a job takes no other for this long (the job has not allocated yet).
  Duration launch_grace = Seconds(30);
  // Under a policy that counts the grace from the job's first process on the GPU: a job whose
  // process has not appeared after this long (it does not use the GPU, or died starting) holds
  // the GPU no longer.
  Duration process_wait = Seconds(300);
  // A running job whose observed peak has not grown for this long, and has reached 90% of its
  // planned need (or has run for settle_timeout), is steady: its reservation shrinks from the
  // plan to what it was seen to use. A job still loading data must not give its memory away.
  Duration steady_after = Seconds(30);
  Duration settle_timeout = Seconds(600);
  RecoveryMode recovery = RecoveryMode::kAdaptive;
  int max_oom_retries = 3;
  // The need after an out-of-memory crash (core/recovery.h): x oom_growth + oom_extra from what
  // the job reached when it failed below its limit, x oom_limit_growth + oom_extra when it failed
  // at its limit.
  double oom_growth = 1.1;
  // Whether an MPS placement's memory limit is enforced (colod gives it to MPS): a crash under
  // one is then taken as reaching it even where no sample saw the peak.
  bool mps_limits_enforced = true;
  double oom_limit_growth = 2.4;
  Bytes oom_extra = MiB(512);
  // EASY backfill: when the head of the main queue waits, it gets a reservation (the GPUs it
  // would get first and, where running jobs' ends are known, when), and up to `backfill_depth`
  // later jobs may start now where they cannot delay it: on other GPUs, or on its GPUs if they end
  // before its time. Off here, as in the thesis (colo sim's default); colod turns it on.
  bool backfill = false;
  int backfill_depth = 16;
  // The main queue's order, usage and preemption (core/fair_share.h); FIFO here, as in the thesis.
  FairnessConfig fairness;
  // What each user may hold at once where SetUserTerms gave them nothing of their own.
  UserLimits user_limits;
  // A job whose GPUs an outside scheduler booked (JobSpec::booked_gpus) waits at most this long
  // for their utilization to fall below the policy's threshold, then starts anyway: its GPUs are
  // its own, and every second it waits counts against its time limit there.
  Duration booked_busy_wait = Seconds(10);
};

// A decision to start (an attempt of) a job.
// What a job went through before a daemon restart, so that it keeps its place and its retry count:
// attempts made, and how many of them ended out of memory.
struct PriorAttempts {
  int attempts = 0;
  int out_of_memory = 0;
  // Since when it has waited (its age under fair share); unset: from now.
  std::optional<TimePoint> waiting_since;
};

struct Launch {
  JobId job = 0;
  std::vector<GpuIndex> gpus;
  SharingMode mode = SharingMode::kMps;
  int thread_percent = 100;
  // Per GPU, 0 where unknown: what the placement reserves, and the limit the attempt runs under
  // (its MPS limit; core/recovery.h's AttemptLimit): the reservation, or more for a retry after
  // a crash at its own limit.
  Bytes reservation;
  Bytes memory_limit;
  int attempt = 1;
};

// What OnJobExit did with the job.
enum class ExitAction {
  kFinished,
  kRequeuedForRecovery,
  kFailedRetryCap,
  kRequeuedAfterPreemption,  // stopped for another job: it waits in the main queue again
  kIgnored
};

// A running job to stop so that the queue's head can start (Scheduler::Preempt). Its driver
// signals it (with its notice), stops it when the notice is over, and reports its end as
// ExitKind::kPreempted: it then waits again, keeping its attempts.
struct Preemption {
  JobId job = 0;
  JobId for_job = 0;   // the waiting job it makes room for
  Duration notice{0};  // from its signal to SIGKILL: its --signal's lead, at most max_notice
  std::string reason;  // for people: whose job, and why it may take the room
};

// What backfill keeps for the main queue's waiting head: the GPUs it would get first and, where
// the running jobs' ends are known (time limits, learned run times, preemptions), from when.
// Later jobs may start on other GPUs, or on these only if they end before `at`. A running job
// that has outlived its learned run time is expected to go on as long again as it has run, and
// at least kMinRemaining.
constexpr Duration kMinRemaining = Seconds(60);
struct HeadReservation {
  std::optional<TimePoint> at;  // unknown: no running job's end is known
  std::vector<GpuIndex> gpus;
  std::vector<JobId> waits_for;  // the running jobs whose ends make the room
};

// Where a waiting job of the main queue stands, for `colo explain`.
struct QueueStanding {
  int position = 0;  // from 1, in the order the next pass looks at the queue
  int waiting = 0;   // jobs in the main queue
  UserStanding owner;
  double age_factor = 0;
  double priority = 0;  // fair-share order only
};

// What the scheduler did with a job whose attempt ended, or that a pass found could never be
// placed: what the job is now and why, and what the attempt measured. The caller records it as
// it is, and keeps no copy of the scheduler's state to compare.
struct JobEnded {
  JobId job = 0;
  ExitAction action = ExitAction::kIgnored;
  JobState state = JobState::kQueued;
  // Why it failed or ended for good; empty when it succeeded or waits again.
  std::string reason;
  MemoryNeed need;         // what it plans with now (raised by an out-of-memory crash)
  std::string need_basis;  // why an out-of-memory crash raised its need as it did
  Bytes peak;              // the highest per-GPU use its attempt was seen to reach
  bool over_plan = false;  // its attempt used more than it planned (NeedRaised)
  double solo_smact = -1;  // its SM activity alone on its GPU; negative: not measured
};

// What one job's processes use on one GPU, as a sample of it found them.
struct JobUse {
  JobId job = 0;
  Bytes used;
};

// A running job used more than it planned on one of its GPUs while it shared it without a memory
// limit (nothing stops it at its plan, and what it takes was placed for others): it plans with its
// use and kOverPlanMargin for the rest of its run.
struct NeedRaised {
  JobId job = 0;
  GpuIndex gpu = 0;
  Bytes used;
  Bytes plan;          // the reservation its attempt was placed with
  MemoryNeed need;     // what it plans with now (at most the largest GPU)
  bool first = false;  // the first time in this attempt
};

// What one owner's running jobs hold here, counted for their limits, and their account in the
// usage ledger, which the jobs' charge goes to: found by name once while they hold anything.
struct OwnerHoldings {
  Holdings held;
  std::optional<UsageLedger::AccountRef> account;  // unset: not opened yet, or forgotten since
};

struct JobRecord {
  JobSpec spec;
  JobState state = JobState::kQueued;
  MemoryNeed need;  // what placement plans with; grows after an OOM
  int attempts = 0;
  int oom_count = 0;
  bool require_idle = false;
  // An attempt failed at its own memory limit: its retries run under the room of their GPUs.
  bool outgrew_limit = false;
  std::vector<GpuIndex> gpus;
  std::vector<Bytes> current_use;  // per entry of gpus
  // When this attempt's first process appeared on each of its GPUs (per entry of gpus).
  std::vector<std::optional<TimePoint>> process_seen;
  SharingMode mode = SharingMode::kMps;
  int thread_percent = 100;
  TimePoint submitted, first_started, started, finished;
  bool ever_started = false;
  Bytes placed_limit;      // the memory limit (MPS limit) this attempt runs under
  Bytes attempt_peak;      // highest per-GPU use seen in this attempt
  Bytes max_peak;          // over all attempts
  bool over_plan = false;  // this attempt used more than it planned (NeedRaised)
  // Its GPUs' SM activity while it ran alone there and computed, for its solo SM activity.
  double solo_smact_sum = 0;
  int solo_samples = 0;
  TimePoint last_growth;
  std::string end_reason;
  std::string need_basis;         // why an out-of-memory crash raised the need as it did
  std::optional<Wait> last_wait;  // why it waited at the last pass
  // Since when it waits: its submission, or when it was last requeued. Its age counts from here.
  TimePoint waiting_since;
  // Why its owner's limits held it at the last pass; empty when they did not.
  std::string limit_wait;
  // While it runs: what it counts against its owner's limits, and the GPU-equivalents its owner
  // is charged for it (each GPU weighted by the share of its memory the job plans with).
  Holdings holds;
  double charge = 0;
  OwnerHoldings* owner_holdings = nullptr;  // its owner's, found when it starts
  // The head of the main queue: what backfill keeps for it.
  std::optional<HeadReservation> reservation;
  // Being stopped for another job: when its notice ends, and for which job.
  std::optional<TimePoint> preempt_deadline;
  JobId preempted_for = 0;
  std::vector<JobId> preempting;  // the head: the jobs being stopped for it
};

class Scheduler : private WindowSource {
 public:
  Scheduler(const Clock& clock, const PlacementPolicy& policy, SchedulerConfig config = {});
  // Its pass view reads its windows through the scheduler itself (ClusterView::windows).
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  GpuIndex AddGpu(const GpuInfo& info);
  // Validates and enqueues. Rejects what can never run (more GPUs than a server has, a need larger
  // than any GPU, a duplicate id) with a reason. A job with out-of-memory attempts behind it goes
  // back to the recovery queue, as it was before the restart.
  Status Submit(const JobSpec& spec, PriorAttempts prior = {});
  // Submits the job and starts it where the policy placed it on PassView at this instant, with
  // nothing told the scheduler since: what Submit and Schedule would do with no other job waiting,
  // without the pass. Refused, keeping nothing, where that pass could decide otherwise (jobs
  // wait here, the job is booked, its owner's limits hold it, the view is not of this instant or
  // a GPU's view or a placement changed it since) or Submit would refuse it. The launch takes the
  // placement's GPU list.
  Result<Launch> StartPlaced(const JobSpec& spec, Placed placed);
  // Whether the job could ever be placed here: Submit's checks, and the policy's verdict for it on
  // this server with every GPU idle (so the memory margin counts). Infeasible, with the reason,
  // for a job that would otherwise wait at the head of the queue forever. `idle_used`: what an
  // idle GPU uses that no job of the scheduler's does (the simulator's driver and other tenants).
  Status CheckPlaceable(const JobSpec& spec, Bytes idle_used = Bytes(0)) const;
  // Undoes a launch that Schedule() returned but the caller could not carry out before starting
  // anything (it could not record it): the job goes back to the head of the queue it came from.
  Status AbortLaunch(JobId id);
  // Drops the record of a job that has ended: a long-running daemon keeps only live jobs.
  void Forget(JobId id);
  // The job leaves the scheduler, whatever it was: a waiting one leaves its queue, a running one
  // (ended by the caller, whose exit will not be reported) frees its GPUs. What it was; nullopt:
  // the scheduler had no record of it.
  std::optional<JobState> Drop(JobId id);
  // What an administrator grants a user (share, limits); a user never given any has share 1 and
  // the config's user_limits.
  void SetUserTerms(const std::string& user, const UserTerms& terms);
  // Where the terms of a user not given any come from (colod: its config's users and groups),
  // asked once per user; `any_limits`: whether some user may have a limit.
  using TermsSource = std::function<UserTerms(const std::string& user)>;
  void SetTermsSource(TermsSource source, bool any_limits);
  UserTerms TermsOf(const std::string& user) const;
  // A user's usage as it was read back after a restart, decayed to now.
  void RestoreUsage(const std::string& user, double usage);
  const UsageLedger& usage() const { return ledger_; }
  // Where every user who counts stands now: those with jobs waiting or running, and those with
  // usage that has not decayed away.
  std::map<std::string, UserStanding> Standings() const;
  // What a user's running jobs hold now, and how many of their jobs wait in the queues.
  Holdings HeldBy(const std::string& user) const;
  int WaitingOf(const std::string& user) const;
  // Why its owner's limits hold the job now (what a pass would say), or nullopt.
  std::optional<std::string> HeldByLimits(const JobRecord& job) const;
  // Replaces the memory need of a job waiting in the main queue by a better one (earlier runs of
  // the same model have finished since it was submitted). A running job keeps the need it was
  // placed with, and one waiting for recovery the need its crash set: both are refused.
  Status UpdateNeed(JobId id, const MemoryNeed& need);
  // Replaces the expected SM activity of a waiting job (learned from earlier runs of its model).
  Status UpdateExpectedSmact(JobId id, double smact);
  // A waiting or running job's learned run time (earlier runs of its model have ended since it
  // was submitted; core/run_learning.h's LearnRunTime): what reservations count on where it has
  // no time limit.
  Status UpdateExpectedRun(JobId id, Duration run);
  // Takes on a job that is already running on `gpus` (a daemon restarted while it ran). Its
  // reservation starts from the plan, as for a fresh launch.
  Status Adopt(const JobSpec& spec, const std::vector<GpuIndex>& gpus, SharingMode mode,
               int thread_percent, int attempt, TimePoint started,
               int prior_out_of_memory =
                   0);  // queued jobs end now; running ones end when their exit is reported
  void OnGpuSample(const GpuSample& sample);
  // Memory the job's processes use on one of its GPUs right now. A use above the plan of a job
  // that shares the GPU plainly raises its need (NeedRaised).
  std::optional<NeedRaised> OnJobMemory(JobId id, GpuIndex gpu, Bytes used);
  // A sample of one GPU as colod reads it: its figures (`sample.smact` the SM activity placement
  // uses, NVML's utilization where GPM is missing; `measured_smact` GPM's own, negative where
  // missing), and what each job's processes use there (JobUse; a job without an entry: nothing, no
  // process seen yet). Updates the GPU, every job running there (its use, with the MPS server's
  // part of an MPS client's context; its process seen) and the solo SM activity of a job alone
  // there and computing. The needs it raised (OnJobMemory).
  // `uses_read` false: the sample did not list the GPU's processes (none was asked for when it
  // began), and each job's use stays as last seen.
  std::vector<NeedRaised> OnDeviceSample(const GpuSample& sample, double measured_smact,
                                         bool uses_read, std::span<const JobUse> job_use);
  // The job was placed under MPS but runs without it (MPS is unavailable): it shares its GPUs
  // plainly, and its use is held to its plan as any plain sharer's (OnJobMemory).
  void SharesPlainly(JobId id);
  // A process of the job's current attempt is on one of its GPUs (the GPU's process list): the
  // first such report starts the launch grace of policies that count it from there.
  void OnJobProcessSeen(JobId id, GpuIndex gpu);
  JobEnded OnJobExit(JobId id, const JobExit& exit);
  // The jobs passes found could never be placed (the policy said Infeasible) since last asked.
  std::vector<JobEnded> TakeFailed();

  // One placement pass: jobs with booked GPUs first, each on its own (none waits behind another),
  // then the recovery queue (strict priority), then the main queue in its order (FIFO, or by
  // priority under fair share; one owner's jobs among themselves by JobSpec::priority, in the
  // places they hold), each job within its owner's limits (a job they hold is passed over, never
  // waited for); a waiting head gets its reservation and backfill. At most `max_launches`: a
  // pass cut short goes on at the next call (the daemon's next turn), which bounds what one pass
  // costs.
  std::vector<Launch> Schedule(size_t max_launches = std::numeric_limits<size_t>::max());
  // After Schedule: the running jobs to stop so that the main queue's head can start, when
  // preemption is on, the head's owner is under their share, it has waited preempt_after and no
  // room comes sooner. The fewest preemptible jobs of users over their share that make the room,
  // most over their share first, then the most recently started. Each is being preempted until
  // its end is reported.
  std::vector<Preemption> Preempt();
  // A preemption the driver could not carry out (it could not record it): the job runs on.
  void AbortPreemption(JobId id);
  // A job taken back after a restart was being preempted for `for_job`: its notice ends at
  // `deadline`, and the job it makes room for waits for it rather than preempts another.
  Status ResumePreemption(JobId id, JobId for_job, TimePoint deadline);
  // When the scheduler wants to run again even if no event arrives (grace ends, reservations
  // settle, utilization windows slide). nullopt: only events can change its mind.
  std::optional<TimePoint> NextWakeup() const;

  const JobRecord* job(JobId id) const;
  // What the policy would decide for this job now, as if it were at the head of its queue:
  // for `colo explain` (only the head's verdicts are recorded by a pass).
  std::optional<PlacementDecision> Explain(JobId id) const;
  // Where a job of the main queue stands in its order, and why.
  std::optional<QueueStanding> StandingOf(JobId id) const;
  // The main queue in the order the next pass looks at it.
  std::vector<JobId> QueueOrder() const;
  // The main queue's waiting head at the last pass (0: none), which holds the reservation.
  JobId head() const { return head_; }
  // The main queue in arrival order (QueueOrder: the order a pass takes).
  const std::deque<JobId>& main_queue() const { return main_queue_; }
  const std::deque<JobId>& recovery_queue() const { return recovery_queue_; }
  // Waiting jobs with booked GPUs, in arrival order.
  const std::deque<JobId>& booked_jobs() const { return booked_; }
  size_t gpu_count() const { return gpus_.size(); }
  const GpuInfo& gpu_info(GpuIndex g) const { return gpus_.at(g).info; }
  // The jobs running on a GPU.
  const std::vector<const JobRecord*>& jobs_on(GpuIndex g) const { return gpus_.at(g).jobs; }
  // The snapshot policies see, as of now, with the window statistics this scheduler's policy
  // reads; or with those `reads` asks for (what a display shows).
  ClusterView View() const;
  ClusterView View(const WindowReads& reads) const;
  // The view the next pass would decide `request` on, as of now: the pass's own, kept per GPU
  // between passes and made again only where an event touched a GPU (View() makes every GPU's
  // afresh), with the windows' summaries the policy may read for the request
  // (PlacementPolicy::NeedsWindows). For a caller that asks the policy itself whether a job would
  // start here (the simulator's cluster, choosing among servers), and starts it with
  // StartPlaced. Valid until the scheduler is next called.
  const ClusterView& PassView(const PlacementRequest& request);
  // The same view, its GPUs' windows summarized only as a policy reads them
  // (ClusterView::Summarized): for a caller that asks the policy at once.
  const ClusterView& PassView();
  // A GPU's view (one of View()'s) with its windows' summaries as of `at` instead: what a view
  // then would read of them, as long as no sample arrives.
  void SummarizeWindowsAt(GpuIndex g, TimePoint at, GpuView& v) const {
    SummarizeWindows(g, at, reads_, v);
  }
  // A GPU's view with the summaries no later view reads below (`low`) or above (`high`) as long
  // as no sample arrives (SignalWindow::Bounds).
  void BoundWindows(GpuIndex g, GpuView& low, GpuView& high) const;
  Bytes Reservation(const JobRecord& job) const { return Reservation(job, clock_.Now()); }
  const SchedulerConfig& config() const { return config_; }
  const PlacementPolicy& policy() const { return policy_; }

 private:
  struct GpuRecord {
    GpuRecord(GpuInfo i, int samples, Duration interval, QuantileMethod quantiles)
        : info(std::move(i)),
          smact(samples, interval, quantiles),
          smocc(samples, interval, quantiles),
          drama(samples, interval, quantiles) {}
    GpuInfo info;
    SignalWindow smact, smocc, drama;
    Bytes used;
    bool healthy = true;
    // Jobs running here. Records live in jobs_, whose nodes never move, and are never erased.
    std::vector<const JobRecord*> jobs;
    std::optional<TimePoint> last_placement;
  };

  // One owner's waiting jobs of the main queue, under fair share: in their order (their
  // --priority, then submission), and the times their places date from (the k-th oldest is the k-th
  // place's: a priority reorders an owner's jobs among their own places, never past others).
  struct OwnerQueue {
    // (-priority, id): by their --priority, then in the order they were submitted (a requeued
    // job keeps its place among them).
    std::set<std::pair<int, JobId>> jobs;
    std::multiset<TimePoint> places;
  };
  class Walk;  // the main queue in a pass's order

  std::vector<Launch> Pass(size_t max_launches);
  // What every pass forgets of the last one before it looks at the queues.
  void BeginPass();
  // Submit's checks of a job's spec.
  Status CheckSubmission(const JobSpec& spec) const;
  void OrderOwnersJobs(const std::string& owner);
  // Puts a waiting job in its queue (booked, recovery or main) and counts it for its owner.
  void QueueJob(JobRecord& job, bool front);
  void Enqueue(JobRecord& job, bool front = false);
  // Takes jobs that left the main queue (started, or failed) out of it after a pass.
  void RemoveFromMainQueue(const std::vector<JobId>& left);
  // Takes a job that leaves a queue out of the owner indexes (`main`: the main queue's).
  void Unindex(const JobRecord& job, bool main);
  bool OwnerAtLimit(const std::string& owner) const;
  // Whether its owner's limits hold the job in this pass (its limit_wait says why); a walk passes
  // over the rest of an owner's jobs once the owner can start nothing more.
  bool HeldBack(JobRecord& job, Walk* walk);
  // What the job holds and is charged while it runs, counted for its owner (or given back).
  void Hold(JobRecord& job, bool holding);
  // The owner's jobs are charged `delta` more GPU-equivalents from now on.
  void Charge(const std::string& owner, OwnerHoldings& holdings, double delta);
  std::map<std::string, double> CountedUsers() const;
  // Calls `visit` once with each user who counts in the standings (waiting, running or with usage
  // left), in name order, building nothing.
  template <typename Visit>
  void ForEachCountedUser(Visit visit) const;
  // Where one user stands now, as Standings() would say, at the cost of summing the totals only.
  UserStanding StandingOf(const std::string& user) const;
  // Whether `running` may be preempted for `head` as far as the jobs themselves go (the standings
  // of their owners aside), and whether any running job may.
  bool MayPreemptFor(const JobRecord& running, const JobRecord& head) const;
  bool AnyPreemptibleFor(const JobRecord& head) const;
  // When a running job is expected to end (its preemption's notice, its time limit or learned
  // run time, or as long again as it has run once past that run time), if known.
  std::optional<TimePoint> ExpectedEnd(const JobRecord& job) const;
  // Whether a job that starts now is expected to end by `at`.
  bool EndsBy(const JobRecord& job, TimePoint at) const;
  // When and where the waiting `head` is expected to start: the pass's `view` as the known ends of
  // running jobs will leave it (the windows of the GPUs in their grace read into the pass view).
  HeadReservation Reserve(const JobRecord& head, const ClusterView& view);
  // `view` with `leaving` gone from their GPUs: their graces over, and the windows of a GPU left
  // idle unread, those of one whose other jobs stay as `view` had them.
  void Release(ClusterView& view, const std::set<const JobRecord*>& leaving,
               const std::vector<GpuIndex>& gpus) const;
  // The `count` usable GPUs of one server a job is likeliest to get first when no known end makes
  // room for it: those with the most memory free for placement. None if no server has `count`.
  std::vector<GpuIndex> LikeliestGpus(const ClusterView& view, int count) const;
  // Every GPU's view, with the window summaries `reads` asks for.
  void FillView(ClusterView& view, const WindowReads& reads) const;
  bool AnyWaiting() const {
    return !main_queue_.empty() || !recovery_queue_.empty() || !booked_.empty();
  }
  std::optional<TimePoint> ComputeNextWakeup() const;
  // The wake-ups after `now` but for the utilization windows' looks.
  std::optional<TimePoint> NextWakeupBesidesWindows(TimePoint now) const;
  // While a waiting job is held by the utilization gate, the scheduler looks again each sample
  // interval while some GPU's windows may fall, or when the last of them settles: the first such
  // look after `after`, if any.
  std::optional<TimePoint> NextWindowLook(TimePoint after) const;
  // Whether a look at `now`, with nothing changed since the last pass, would decide as that pass
  // did: it is one the utilization windows called for, and they let in no GPU the gate held.
  bool DecidesAsTheLastPass(TimePoint now);
  // A GPU's view but for its windows' summaries (left empty); with `leaving` gone from it.
  // `until`: the time up to which time alone leaves it as it is (`now` where it holds a grace
  // still running out, which changes with every instant).
  void MakeView(GpuIndex g, TimePoint now, GpuView& v,
                const std::set<const JobRecord*>* leaving = nullptr,
                TimePoint* until = nullptr) const;
  // The pass's view of every GPU, as of now, without the windows' summaries: a GPU's view is
  // made again only where an event touched the GPU since or time changed it.
  void RefreshPassView();
  // Something a GPU's view reads changed: the pass makes it again.
  // (Inline: every sample of every GPU calls it.)
  void ViewChanged(GpuIndex g) {
    if (static_cast<size_t>(g) < kept_.size()) kept_[static_cast<size_t>(g)].current = false;
  }
  void ViewChanged(const std::vector<GpuIndex>& gpus) {
    for (GpuIndex g : gpus) ViewChanged(g);
  }
  void SummarizeWindows(GpuIndex g, TimePoint now, const WindowReads& reads, GpuView& v) const;
  // The pass's view summarizes a GPU's windows only once the policy may read them for a job.
  void SummarizeWhereNeeded(const PlacementRequest& request);
  // A GPU's windows' summaries, into the pass view unless they are there (WindowSource: the pass
  // view's). A copy of the pass view reads those it was made with.
  const GpuView& Summarized(const ClusterView& view, const GpuView& gpu) override;
  void TakeSummaries(size_t g);
  Bytes Reservation(const JobRecord& job, TimePoint now) const;
  PlacementRequest MakeRequest(const JobRecord& job) const;
  // Tries to place the queue's head; returns true if placed. Records the wait otherwise.
  enum class Outcome { kPlaced, kWaiting, kInfeasible };
  Outcome TryPlace(JobRecord& job, ClusterView& view, std::vector<Launch>& launches,
                   const std::vector<bool>* earmarked);
  // The policy's decision for a job on `view`, which a booked job sees only its GPUs of, and an
  // earmarked GPU (backfill) is hidden from.
  PlacementDecision Decide(const JobRecord& job, const PlacementRequest& request,
                           const ClusterView& view, const std::vector<bool>* earmarked) const;
  // The queue a waiting job is in.
  std::deque<JobId>& QueueOf(const JobRecord& job);
  // Whether a job's booked GPUs are as many as it asks for, distinct, and this server's.
  Status CheckBooking(const JobSpec& spec) const;
  // Starts the job as placed on `view`; the launch takes the placement's GPU list.
  // `view_read_again`: later decisions of this pass read the view, and its placed GPUs are made
  // again in it at once (otherwise by the next pass).
  Launch Apply(JobRecord& job, Placed placed, ClusterView& view, bool view_read_again = true);
  void Detach(JobRecord& job);
  // OnGpuSample: the sample's GPU, its figures taken, or null for a GPU this scheduler has not.
  const GpuRecord* TakeSample(const GpuSample& sample);
  // OnJobMemory and OnJobProcessSeen for a running job already found.
  std::optional<NeedRaised> UseOn(JobRecord& job, GpuIndex gpu, Bytes used);
  void SeenOn(JobRecord& job, GpuIndex gpu);
  // Ends the running job's attempt: finished, or back to the recovery queue after an
  // out-of-memory crash with a raised need.
  ExitAction EndAttempt(JobRecord& job, const JobExit& exit);
  JobEnded EndedOf(const JobRecord& job, ExitAction action) const;
  void Backfill(JobRecord& head, Walk& walk, ClusterView& view, std::vector<Launch>& launches,
                std::vector<JobId>& left);
  JobRecord& Get(JobId id);
  // The record of a new job of `spec`, submitted at `submitted`: a spare one where there is one.
  JobRecord& AddRecord(const JobSpec& spec, TimePoint submitted);
  // Takes a record out of jobs_, kept as a spare while there are few.
  void RemoveRecord(std::unordered_map<JobId, JobRecord>::iterator it);

  const Clock& clock_;
  const PlacementPolicy& policy_;
  const WindowReads reads_;  // what policy_ reads of the windows
  SchedulerConfig config_;
  std::vector<GpuRecord> gpus_;
  int max_gpus_per_node_ = 0;
  Bytes max_capacity_;
  std::unordered_map<JobId, JobRecord> jobs_;
  // Nodes of records removed, blank but for the buffers of their per-GPU lists and texts, for the
  // next jobs' records (at most kSpareRecords): as jobs come and go, a new job's record and its
  // start allocate nothing.
  static constexpr size_t kSpareRecords = 32;
  std::vector<std::unordered_map<JobId, JobRecord>::node_type> spare_records_;
  std::deque<JobId> main_queue_;
  std::deque<JobId> recovery_queue_;
  std::deque<JobId> booked_;
  GpuIndex last_placed_ = -1;
  JobId head_ = 0;
  bool preempt_due_ = false;  // a pass ran since Preempt last looked
  bool head_blocked_by_utilization_ = false;
  // Fair share and limits.
  UsageLedger ledger_;
  mutable std::map<std::string, UserTerms> terms_;  // given, or asked of the source
  TermsSource terms_source_;
  bool limits_used_ = false;                        // some user has a limit
  std::map<std::string, OwnerHoldings> holdings_;   // by owner, of running jobs
  std::map<std::string, int> waiting_owners_;       // waiting jobs (both queues) by owner
  std::map<std::string, OwnerQueue> owner_queues_;  // under fair share
  bool booked_blocked_by_utilization_ = false;      // a booked job waited for utilization last pass
  bool priorities_used_ = false;  // a job with a priority other than 0 was ever submitted
  // A pass whose inputs have not changed since the last one, before the time the last one said it
  // would change its mind, decides the same: it is skipped. Events set `changed_`.
  bool changed_ = true;
  std::optional<TimePoint> wake_at_;
  TimePoint last_pass_;
  // What DecidesAsTheLastPass keeps of the last pass, from the first look after it.
  struct HeldGpus {
    bool applies = false;  // the looks may be skipped at all
    // The GPUs the utilization gate held but may let in as their windows slide, summarized at
    // the last look (one it holds even at its windows' lowest is left out: it stays held).
    std::vector<GpuView> gpus;
    std::optional<TimePoint> until;  // the next wake-up of another kind
  };
  std::optional<HeldGpus> held_;
  ClusterView pass_view_;
  // Per GPU of pass_view_: whether its view there is still the GPU's as made at `made_at`, for
  // passes before `until` (or at `made_at` itself).
  struct KeptView {
    bool current = false;
    TimePoint made_at, until;
    TimePoint summarized_at;  // when its windows' summaries in it were taken
  };
  // Whether the summaries of a kept view, no sample having come since, hold at a later instant.
  bool SummariesHold(GpuIndex g) const;
  std::vector<KeptView> kept_;
  // Placements made, and their number when PassView was last asked (StartPlaced's check).
  uint64_t placements_ = 0, placements_at_view_ = 0;
  std::vector<JobEnded> failed_;     // found infeasible by passes, until taken
  std::vector<uint8_t> summarized_;  // per GPU of pass_view_: its windows' summaries are in it
};

}  // namespace colo

#include "daemon/job_controller.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>

#include "api/output_pattern.h"
#include "common/signals.h"
#include "common/strings.h"
#include "common/text.h"
#include "estimate/estimator.h"

namespace colo {
namespace {

// How soon a record that could not be stored is tried again.
constexpr Duration kStoreRetry = Seconds(1);
// The jobs whose dependencies changed that one turn of colod's loop takes (CheckDependencies).
constexpr size_t kDependencySlice = 256;
// How long one turn of colod's loop spends on attempts' ends (each a durable write) once one is
// done; the rest wait for the next turn, so that requests are served between (a busy server's
// job churn cannot hold every user's request).
constexpr Duration kJobWorkPerTurn = std::chrono::milliseconds(20);
// Jobs one placement pass of a turn places at most (each start a durable write and a fork, and
// what a pass costs grows with what it places); the rest start at the next turn.
constexpr size_t kPlacementsPerTurn = 4;

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// How an attempt colod stopped ended. Its shim killed after the grace leaves no record of the
// job's own status, but the signal is known.
std::string HowItEnded(const ProcessEnd& end) {
  if (!end.known && !end.exited && end.code > 0)
    return fmt::format("killed by signal {} after the grace", end.code);
  return DescribeEnd(end);
}

// A time limit as sbatch writes it: [D-]HH:MM:SS.
std::string FormatTimeLimit(int64_t seconds) {
  const int64_t days = seconds / 86400, rest = seconds % 86400;
  const std::string clock =
      fmt::format("{:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60);
  return days > 0 ? fmt::format("{}-{}", days, clock) : clock;
}

}  // namespace

JobController::JobController(const Clock& clock, Scheduler& scheduler, JobStore& store,
                             ProcessLauncher& launcher, ControllerOptions options)
    : clock_(clock),
      scheduler_(scheduler),
      store_(store),
      launcher_(launcher),
      options_(std::move(options)),
      processes_(launcher),
      admission_(store, options_.admission) {}

JobEvent JobController::Event(JobId job, std::string kind, std::string detail) const {
  return JobEvent{job, clock_.WallNow(), std::move(kind),
                  TruncateUtf8(detail, kMaxEventDetailBytes)};
}

void JobController::Log(const JobEvent& event) const {
  if (options_.log) options_.log(event);
}

bool JobController::Persist(Job& job, std::vector<JobEvent> events) {
  std::vector<JobEvent>& pending = Pending(job.id(), std::move(events));
  const Status stored = store_.Update(job, pending);
  if (stored.ok()) {
    Stored(job.id());
    return true;
  }
  Unsaved(job.id(), stored);
  return false;
}

void JobController::PersistMany(std::vector<std::pair<Job*, std::vector<JobEvent>>> jobs) {
  std::vector<JobChange> changes;
  for (auto& [job, events] : jobs)
    changes.push_back(JobChange{job, Pending(job->id(), std::move(events))});
  const Status stored = store_.UpdateMany(changes);
  for (auto& [job, events] : jobs) {
    if (stored.ok()) {
      Stored(job->id());
    } else {
      Unsaved(job->id(), stored);
    }
  }
}

std::vector<JobEvent>& JobController::Pending(JobId id, std::vector<JobEvent> events) {
  for (const JobEvent& e : events) Log(e);
  auto& pending = pending_events_[id];
  pending.insert(pending.end(), std::make_move_iterator(events.begin()),
                 std::make_move_iterator(events.end()));
  return pending;
}

void JobController::Stored(JobId id) {
  pending_events_.erase(id);
  unsaved_.erase(id);
}

void JobController::Unsaved(JobId id, const Status& error) {
  if (unsaved_.insert(id).second) {
    counters_.store_failures++;
    Log(Event(id, "store-error",
              fmt::format("could not store the job's latest change (kept in memory, tried "
                          "again): {}",
                          error.message())));
  }
}

void ControllerCounters::Histogram::Observe(double value) {
  size_t bucket = 0;
  while (bucket < bounds.size() && value > bounds[bucket]) ++bucket;
  buckets[bucket]++;
  sum += value;
  count++;
}

void JobController::ForgetIfDone(JobId id) {
  auto it = live_.find(id);
  if (it == live_.end() || it->second.live() || unsaved_.count(id)) return;
  if (it->second.finished >= it->second.submitted) {
    counters_.completion.Observe(
        std::chrono::duration<double>(it->second.finished - it->second.submitted).count());
  }
  // Whatever ended it, it no longer waits for GPUs (a queued record left behind would hold the
  // head of the queue for a job nobody runs) nor holds any.
  if (scheduler_.Drop(id) == JobState::kRunning) {
    Log(Event(id, "lost",
              "ended while the scheduler still counted it as running; its GPUs are free again"));
  }
  running_.erase(id);
  if (it->second.external) tenants_.Forget(it->second, TenantReply(it->second));
  admission_.Uncount(it->second);
  live_.erase(it);
}

const Job* JobController::FindLive(JobId id) const {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second;
}

Result<std::optional<Job>> JobController::Find(JobId id) const {
  if (const Job* job = FindLive(id)) return std::optional<Job>(*job);
  return store_.Find(id);
}

Bytes JobController::CurrentPeak(const Job& job) const {
  const Attempt* a = job.current();
  if (!a) return Bytes(0);
  if (a->phase == Attempt::Phase::kEnded) return a->peak;
  // A running attempt's peak is the scheduler's to keep (OnJobExit gives it to the record).
  const JobRecord* r = scheduler_.job(job.id());
  return r ? r->attempt_peak : Bytes(0);
}

JobSpec JobController::Planned(const Job& job) const {
  JobSpec spec = job.spec;
  // Backfill's reservations count on it.
  spec.time_limit = Seconds(job.time_limit_s);
  spec.requeue = job.context.requeue;
  spec.preempt_notice = Seconds(SignalOf(job).lead_s);
  if (options_.plan_without_estimates && spec.memory.source != MemorySource::kLearned)
    spec.memory = MemoryNeed{};
  return spec;
}

Result<Job> JobController::NewJob(const Identity& who, api::SubmitRequest r) {
  if (who.user.empty()) {
    // Jobs run as a named user, with that user's groups from the group database.
    return PermissionDenied(fmt::format(
        "uid {} has no entry in the passwd database; colod runs jobs only for users it can name",
        who.uid));
  }
  Job job;
  job.owner = who;
  job.spec.owner = who.user;
  job.spec.command = std::move(r.command);
  job.spec.gpus = r.gpus;
  job.spec.sharing = r.share;
  job.spec.expected_smact = r.expected_smact.value_or(-1.0);
  job.spec.threads = r.threads.value_or(0);
  job.spec.name =
      TruncateUtf8(r.name.empty() ? BaseName(job.spec.command.front()) : r.name, kMaxNameBytes);
  job.context = std::move(r.context);
  job.context.source = TruncateUtf8(job.context.source, api::kMaxSourceBytes);
  job.env = std::move(r.env);
  COLO_RETURN_IF_ERROR(launcher_.CheckWorkdir(who, job.context.workdir));
  if (r.memory) job.spec.memory = MemoryNeed{*r.memory, MemorySource::kDeclared, 0.0};
  if (r.time_limit_s < 0 || r.time_limit_s > api::kMaxTimeLimitSeconds)
    return InvalidArgument(
        fmt::format("time limit: must be between 0 and {} seconds", api::kMaxTimeLimitSeconds));
  job.time_limit_s = r.time_limit_s;
  if (r.priority < -api::kMaxPriority || r.priority > api::kMaxPriority)
    return InvalidArgument(
        fmt::format("priority: must be between {} and {}", -api::kMaxPriority, api::kMaxPriority));
  job.spec.priority = r.priority;
  job.held = r.hold;
  for (const std::string* pattern : {&r.output, &r.error}) {
    if (!pattern->empty()) COLO_RETURN_IF_ERROR(api::CheckOutputPattern(*pattern));
  }
  job.output_pattern = std::move(r.output);
  job.error_pattern = std::move(r.error);
  auto dependencies = admission_.DependenciesOf(r.dependencies, live_);
  if (!dependencies.ok()) return dependencies.status();
  job.dependencies = *std::move(dependencies);
  if (r.estimate) {
    job.estimate = std::move(r.estimate);
    job.estimate->learned.reset();  // what colod learned is colod's to say
    job.estimate->detail = TruncateUtf8(job.estimate->detail, kMaxDetailBytes);
    // Runs teach only the same user's later runs of the model (core/run_learning.h).
    job.estimate->signature = ModelSignature::OfUid(job.estimate->signature, who.uid).text();
    // The user's --smact stands; the prediction only fills its place.
    if (job.spec.expected_smact >= 0) job.estimate->predicted_smact = -1;
    // A declared need is the limit the job runs under; otherwise earlier runs of the same model
    // are the best evidence there is, then the client's estimate. The same order for SM activity:
    // the user's, then what earlier runs measured, then the client's prediction.
    TakeLesson(job, Learn(RunsOf(job.estimate->signature), job.spec.memory, job.spec.expected_smact,
                          SmactSourceOf(job)));
    if (job.spec.expected_smact < 0 && job.estimate->predicted_smact >= 0)
      job.spec.expected_smact = job.estimate->predicted_smact;
    if (!job.spec.memory.known()) {
      const api::JobEstimate& e = *job.estimate;
      job.spec.memory = MemoryEstimate{e.peak, e.lower, e.upper, "client"}.AsNeed();
    }
  }
  return job;
}

Result<JobId> JobController::Submit(const Identity& who, api::SubmitRequest request) {
  const std::string token = std::move(request.token);
  if (!token.empty()) {
    // Sent again (its reply was lost): the job it stored the first time is the answer.
    auto stored = store_.SubmittedWith(who.uid, token, clock_.WallNow() - kSubmitTokenLifetime);
    if (!stored.ok())
      return Unavailable("the submit's token could not be looked up: " + stored.status().message());
    if (*stored) return **stored;
  }
  COLO_RETURN_IF_ERROR(admission_.MayAdd(who, 1));
  std::optional<api::ArraySpec> array = std::move(request.array);
  auto made = NewJob(who, std::move(request));
  if (!made.ok()) return made.status();
  Job& job = *made;
  COLO_RETURN_IF_ERROR(scheduler_.CheckPlaceable(Planned(job)));
  if (array) {
    COLO_RETURN_IF_ERROR(admission_.CheckArray(who, *array));
    return SubmitArray(std::move(job), *array, token);
  }
  job.state = JobState::kQueued;
  job.submitted = clock_.WallNow();
  JobEvent submitted = Event(
      0, "submitted",
      fmt::format("by {}: {} GPU(s), memory {}", job.owner.user, job.spec.gpus,
                  job.spec.memory.known() ? FormatBytes(job.spec.memory.Upper()) : "unknown"));
  // The id is the store's to give, in the same transaction that stores the job.
  std::vector<JobEvent> events = {submitted};
  if (job.estimate && job.estimate->learned && job.estimate->learned->solo_smact >= 0)
    events.push_back(SmactEvent(0, job.estimate->learned->solo_smact));
  if (Status stored = store_.Insert(job, events, token); !stored.ok()) {
    counters_.store_failures++;
    return Unavailable("the job could not be stored, so it was not submitted: " + stored.message());
  }
  for (JobEvent& e : events) {
    e.job = job.id();
    Log(e);
  }
  if (Admission::WaitsOutside(job)) {
    if (!job.dependencies.empty()) admission_.DependenciesChanged();
    const JobId id = job.id();
    AddLive(std::move(job));
    return id;
  }
  if (Status queued = scheduler_.Submit(Planned(job)); !queued.ok()) {
    // Checked above; should it still refuse, the stored job must not look queued.
    job.state = JobState::kFailed;
    job.reason = queued.message();
    job.finished = clock_.WallNow();
    Persist(job, {Event(job.id(), "failed", queued.message())});
    return queued;
  }
  const JobId id = job.id();
  AddLive(std::move(job));
  return id;
}

namespace {
// %A and %a in an array task's name: the array's id and the task's.
std::string ArrayTaskName(const std::string& pattern, JobId array, int task) {
  std::string name;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() &&
        (pattern[i + 1] == 'A' || pattern[i + 1] == 'a')) {
      name += pattern[i + 1] == 'A' ? std::to_string(array) : std::to_string(task);
      ++i;
    } else {
      name += pattern[i];
    }
  }
  return TruncateUtf8(name, kMaxNameBytes);
}
}  // namespace

Result<JobId> JobController::SubmitArray(Job base, const api::ArraySpec& array,
                                         std::string_view token) {
  const std::string pattern = base.spec.name;
  base.state = JobState::kQueued;
  base.submitted = clock_.WallNow();
  // The ids first (a task's name holds its array's), then every task in one transaction: the
  // array is stored whole or not at all, and a thousand tasks cost two writes, not a thousand.
  auto first = store_.ReserveIds(static_cast<int>(array.tasks.size()));
  Status failed = first.status();
  std::vector<Job> stored;
  std::vector<JobEvent> events;
  if (failed.ok()) {
    stored.reserve(array.tasks.size());
    for (size_t i = 0; i < array.tasks.size(); ++i) {
      const int task = array.tasks[i];
      Job& job = stored.emplace_back(base);
      job.spec.id = *first + static_cast<JobId>(i);
      job.array = ArrayMembership{*first, task, array.limit};
      job.spec.name = ArrayTaskName(pattern, *first, task);
      events.push_back(Event(
          job.id(), "submitted",
          fmt::format("by {}: task {} of an array of {}{}: {} GPU(s), memory {}", job.owner.user,
                      task, array.tasks.size(),
                      array.limit > 0 ? fmt::format(" (at most {} at once)", array.limit) : "",
                      job.spec.gpus,
                      job.spec.memory.known() ? FormatBytes(job.spec.memory.Upper()) : "unknown")));
    }
    failed = store_.InsertReserved(stored, events, token);
  }
  if (!failed.ok()) {
    counters_.store_failures++;
    return Unavailable("the array could not be stored, so it was not submitted: " +
                       failed.message());
  }
  for (const JobEvent& e : events) Log(e);
  const JobId array_id = stored.front().id();
  for (Job& job : stored) {
    const JobId id = job.id();
    AddLive(std::move(job));
    Job& live = live_.at(id);
    if (Admission::WaitsOutside(live)) {
      if (!live.dependencies.empty()) admission_.DependenciesChanged();
    } else {
      Enqueue(live, "at submit");
      if (!live.live()) ForgetIfDone(id);
    }
  }
  return array_id;
}

void JobController::Enqueue(Job& job, std::string_view when) {
  if (Admission::Throttled(job)) {
    job.state = JobState::kQueued;
    admission_.ArraysChanged();  // AdmitArrayTasks queues it when its array's turn comes
    return;
  }
  Requeue(job, when);
}

void JobController::AdmitArrayTasks() {
  const auto in_scheduler = [this](JobId id) { return scheduler_.job(id) != nullptr; };
  for (JobId id : admission_.ArrayTurns(live_, in_scheduler)) {
    Job& job = live_.at(id);
    Requeue(job, "when its array's turn came");
    if (!job.live()) ForgetIfDone(id);
  }
}

void JobController::AddLive(Job job) {
  admission_.Count(job);
  if (job.external) tenants_.Track(job);
  live_.emplace(job.id(), std::move(job));
}

// Slurm's kill_invalid_depend: a job whose dependency can never be met is cancelled (reason
// DependencyNeverSatisfied) rather than left waiting forever.
void JobController::CheckDependencies() {
  std::vector<Admission::DependencyChange> changes = admission_.ReviewDependencies(live_);
  // A storm (the thousands of dependents of one job) is taken a slice per turn, each slice stored
  // in one write, so that colod serves its users between the slices.
  if (changes.size() > kDependencySlice) {
    changes.resize(kDependencySlice);
    admission_.DependenciesChanged();
    more_work_ = true;
  }
  std::vector<std::pair<Job*, std::vector<JobEvent>>> stores;
  for (Admission::DependencyChange& change : changes) {
    auto it = live_.find(change.job);
    if (it == live_.end()) continue;
    Job& job = it->second;
    const JobId id = change.job;
    if (!change.never.empty()) {
      job.state = JobState::kCancelled;
      job.reason = TruncateUtf8("DependencyNeverSatisfied: " + change.never, kMaxDetailBytes);
      job.finished = clock_.WallNow();
      job.env.clear();
      stores.emplace_back(&job, std::vector<JobEvent>{Event(id, "cancelled", job.reason)});
      continue;
    }
    job.dependencies = std::move(change.left);
    std::vector<JobEvent> events;
    if (job.dependencies.empty()) {
      events.push_back(Event(id, "dependency", "every dependency is met"));
      if (!job.held) Enqueue(job, "when its dependencies were met");
    }
    stores.emplace_back(&job, std::move(events));
  }
  std::vector<JobId> ids;
  for (const auto& [job, events] : stores) ids.push_back(job->id());
  PersistMany(std::move(stores));
  for (JobId id : ids) ForgetIfDone(id);
}

void JobController::SetTimeLimit(Job& job, Running& running, TimePoint started) {
  if (job.time_limit_s <= 0 || !RunnerFor(job).enforces_time_limit()) return;
  running.timeout_at = started + Seconds(job.time_limit_s);
  // sbatch's --signal: its signal this long before the limit, to save what it has.
  if (job.context.signal && job.context.signal->lead_s < job.time_limit_s)
    running.warn_at = *running.timeout_at - Seconds(job.context.signal->lead_s);
}

void JobController::CheckTimeLimits(TimePoint now) {
  for (auto& [id, r] : running_) {
    if (r.warn_at && now >= *r.warn_at) {
      r.warn_at.reset();
      auto it = live_.find(id);
      if (it != live_.end() && it->second.state == JobState::kRunning &&
          !it->second.cancel_requested && !it->second.requeue_requested && !it->second.preemption) {
        const api::JobSignal signal = SignalOf(it->second);
        Persist(it->second,
                {Event(id, "signal",
                       fmt::format("{} to every process of attempt {}: {} s before its time limit",
                                   SignalName(signal.number),
                                   it->second.current() ? it->second.current()->number : 0,
                                   signal.lead_s))});
        RunnerFor(it->second).Signal(it->second, signal.number);
      }
    }
    if (!r.timeout_at || now < *r.timeout_at) continue;
    r.timeout_at.reset();
    auto it = live_.find(id);
    if (it == live_.end() || it->second.state != JobState::kRunning ||
        !RunnerFor(it->second).enforces_time_limit())
      continue;
    Job& job = it->second;
    if (job.timed_out || job.cancel_requested || job.requeue_requested) continue;
    job.timed_out = true;  // kept in memory and stored again should the store fail now
    Persist(job, {Event(id, "timeout",
                        fmt::format("time limit of {} reached: SIGTERM to every process of "
                                    "attempt {}; SIGKILL in {:.0f} s",
                                    FormatTimeLimit(job.time_limit_s),
                                    job.current() ? job.current()->number : 0,
                                    ToSeconds(options_.timeout_grace)))});
    RunnerFor(job).Signal(job, SIGTERM);
    r.kill_at = now + options_.timeout_grace;
  }
}

void JobController::OnSample(TimePoint time, const std::vector<DeviceSample>& devices) {
  const size_t gpus = std::min(devices.size(), scheduler_.gpu_count());
  for (size_t g = 0; g < gpus; ++g) {
    const DeviceSample& s = devices[g];
    // A process belongs to the job whose attempt it is part of (its cgroup or its session and
    // descendants), not merely to whoever started it.
    std::map<JobId, Bytes> per_job;
    for (const ProcessMemory& p : s.processes) {
      const auto owner = launcher_.AttemptOf(p.pid);
      if (!owner) continue;
      const Job* job = FindLive(owner->first);
      if (job && job->current() && job->current()->number == owner->second)
        per_job[owner->first] += p.used;
    }
    std::vector<JobUse> use;
    for (const auto& [id, used] : per_job) use.push_back(JobUse{id, used});
    for (const NeedRaised& raised : scheduler_.OnDeviceSample(
             GpuSample{static_cast<GpuIndex>(g), time, s.memory_used,
                       s.smact >= 0 ? s.smact : s.utilization, s.smocc, s.drama, true},
             s.smact, s.processes_read, use)) {
      if (auto it = live_.find(raised.job); it != live_.end() && it->second.current())
        OverPlan(it->second, raised);
    }
  }
}

std::vector<bool> JobController::GpusRunningJobs() const {
  std::vector<bool> busy(scheduler_.gpu_count(), false);
  for (size_t g = 0; g < busy.size(); ++g)
    busy[g] = !scheduler_.jobs_on(static_cast<GpuIndex>(g)).empty();
  return busy;
}

void JobController::OverPlan(Job& job, const NeedRaised& raised) {
  job.spec.memory = raised.need;
  Attempt& attempt = *job.current();
  if (attempt.over_plan) return;  // told once per attempt; the need follows its use silently
  attempt.over_plan = true;
  counters_.over_plan[raised.gpu]++;
  Persist(job, {Event(job.id(), "over-plan",
                      fmt::format("attempt {} uses {} on GPU {} ({}), above its plan of {}, "
                                  "sharing without an MPS memory limit; plans with {} for the "
                                  "rest of its run",
                                  attempt.number, FormatBytes(raised.used), raised.gpu,
                                  scheduler_.gpu_info(raised.gpu).uuid, FormatBytes(raised.plan),
                                  FormatBytes(raised.need.Upper())))});
}

void JobController::Tick() {
  launcher_.Refresh();
  const TimePoint began = clock_.Now();
  more_work_ = false;
  // Attempts that ended.
  std::vector<JobId> running;
  for (const auto& [id, r] : running_) running.push_back(id);
  bool finished_one = false;
  for (JobId id : running) {
    auto it = live_.find(id);
    if (it == live_.end() || it->second.state != JobState::kRunning) {
      running_.erase(id);
      continue;
    }
    if (finished_one && clock_.Now() - began >= kJobWorkPerTurn) {
      more_work_ = true;  // the others are looked at next turn
      break;
    }
    if (auto end = RunnerFor(it->second).Check(it->second)) {
      FinishAttempt(it->second, *end);
      finished_one = true;
    }
  }
  const TimePoint now = clock_.Now();
  CheckTimeLimits(now);
  // Cancels whose grace is over.
  for (auto& [id, r] : running_) {
    if (r.kill_at && now >= *r.kill_at) {
      if (auto job = live_.find(id); job != live_.end())
        RunnerFor(job->second).Signal(job->second, SIGKILL);
      r.kill_at = now + options_.cancel_grace;  // again, should anything survive
    }
  }
  // Records that could not be stored.
  for (JobId id : std::vector<JobId>(unsaved_.begin(), unsaved_.end())) {
    auto it = live_.find(id);
    if (it == live_.end()) {
      unsaved_.erase(id);
      continue;
    }
    if (Persist(it->second, {})) {
      Log(Event(id, "stored", "the job's record is stored again"));
      tenants_.Stored(id);
      ForgetIfDone(id);
    }
  }
  // Tenants that waited here too long go back to Slurm, to run on another node.
  for (JobId id : tenants_.TakeOverdue(now)) {
    auto it = live_.find(id);
    if (it == live_.end() || it->second.state == JobState::kRunning || !it->second.live()) continue;
    Job& job = it->second;
    const std::string why = WaitReason(job);
    HandBack(
        job,
        TenantHandback{
            job.external->id, id, job.spec.memory.known() ? job.spec.memory.peak : Bytes(0),
            job.external->earlier_ooms + OutOfMemoryAttempts(job), job.spec.gpus,
            fmt::format("{} could take it within {:.0f} s ({})",
                        job.spec.booked_gpus.empty() ? "no GPU of this node"
                                                     : "not the GPU(s) Slurm booked for it here",
                        ToSeconds(options_.tenant_wait_limit), why),
            /*avoid_this_node=*/true, /*out_of_memory=*/false},
        {});
  }
  if (admission_.dependencies_changed()) CheckDependencies();
  if (admission_.arrays_changed()) AdmitArrayTasks();
  PlacementPass(/*bounded=*/true);
  StartPreemptions();
}

void JobController::StartPreemptions() {
  for (const Preemption& chosen : scheduler_.Preempt()) {
    auto it = live_.find(chosen.job);
    if (it == live_.end() || it->second.state != JobState::kRunning ||
        it->second.cancel_requested || it->second.requeue_requested || it->second.timed_out) {
      scheduler_.AbortPreemption(chosen.job);  // ending anyway
      continue;
    }
    Job& job = it->second;
    if (!RunnerFor(job).MayControl(job, "preempt").ok()) {
      // An engine's run (preemptible = "all") is the engine's to preempt: it runs on.
      scheduler_.AbortPreemption(chosen.job);
      continue;
    }
    const api::JobSignal signal = SignalOf(job);
    const Duration notice = chosen.notice;
    // Stored first: a restart finishes a preemption it knows of, and never one it does not.
    Job updated = job;
    updated.preemption = PreemptionNotice{chosen.for_job, clock_.WallNow() + notice,
                                          TruncateUtf8(chosen.reason, kMaxDetailBytes)};
    const JobEvent event =
        Event(job.id(), "preempting",
              fmt::format("{}: {} to every process of attempt {}; SIGKILL in {:.0f} s, then it "
                          "waits again",
                          chosen.reason, SignalName(signal.number),
                          job.current() ? job.current()->number : 0, ToSeconds(notice)));
    if (Status s = store_.Update(updated, {event}); !s.ok()) {
      counters_.store_failures++;
      scheduler_.AbortPreemption(chosen.job);
      Log(Event(job.id(), "store-error",
                "the preemption could not be stored, so the job runs on: " + s.message()));
      continue;
    }
    Log(event);
    job.preemption = std::move(updated.preemption);
    counters_.preemptions++;
    RunnerFor(job).Signal(job, signal.number);
    running_[job.id()].kill_at = clock_.Now() + notice;
  }
}

void JobController::PlacementPass(bool bounded) {
  const TimePoint pass_began = clock_.Now();
  const std::vector<colo::Launch> launches =
      bounded ? scheduler_.Schedule(kPlacementsPerTurn) : scheduler_.Schedule();
  counters_.pass.Observe(ToSeconds(clock_.Now() - pass_began));
  for (const colo::Launch& launch : launches) Launch(launch);
  // Jobs the policy found it could never place: they end here.
  for (const JobEnded& failed : scheduler_.TakeFailed()) {
    auto it = live_.find(failed.job);
    if (it == live_.end()) continue;
    Record(it->second, failed);
    Persist(it->second, {Event(failed.job, "failed", it->second.reason)});
    ForgetIfDone(failed.job);
  }
  // A pass cut short goes on at the next turn, at once.
  if (bounded && launches.size() >= kPlacementsPerTurn) more_work_ = true;
}

std::optional<TimePoint> JobController::NextWakeup() const {
  std::optional<TimePoint> wake = scheduler_.NextWakeup();
  auto earlier = [&](TimePoint t) {
    if (!wake || t < *wake) wake = t;
  };
  for (const auto& [id, r] : running_) {
    if (r.kill_at) earlier(*r.kill_at);
    if (r.timeout_at) earlier(*r.timeout_at);
    if (r.warn_at) earlier(*r.warn_at);
  }
  if (admission_.dependencies_changed()) earlier(clock_.Now() + kStoreRetry);
  if (!unsaved_.empty()) earlier(clock_.Now() + kStoreRetry);
  if (more_work_) earlier(clock_.Now());
  if (const auto deadline = tenants_.NextDeadline()) earlier(*deadline);
  return wake;
}

void JobController::Launch(const colo::Launch& launch) {
  auto it = live_.find(launch.job);
  if (it == live_.end() ||
      (it->second.state != JobState::kQueued && it->second.state != JobState::kRecovering)) {
    // No waiting job of colod's is behind it: dropped, never put back at the head of the queue.
    Log(Event(launch.job, "dropped",
              "the scheduler placed a job that no longer waits; it leaves the queue"));
    scheduler_.Drop(launch.job);
    return;
  }
  Job& job = it->second;
  const JobState before = job.state;
  Attempt attempt;
  attempt.number = launch.attempt;
  attempt.phase = Attempt::Phase::kLaunching;
  for (GpuIndex g : launch.gpus) attempt.gpu_uuids.push_back(scheduler_.gpu_info(g).uuid);
  attempt.mode = launch.mode;
  attempt.thread_percent = launch.thread_percent;  // the user's --threads, where given
  attempt.memory_limit = launch.memory_limit;
  attempt.started = clock_.WallNow();
  std::vector<std::string> mps_env;
  // Stored with the attempt's start, so that `colo show` tells why a job ran without MPS.
  std::vector<JobEvent> launch_events;
  if (launch.memory_limit > launch.reservation && launch.reservation > Bytes(0)) {
    launch_events.push_back(
        Event(launch.job, "limit",
              fmt::format("attempt {} may use the {} its GPU has free, above its plan of {}: an "
                          "earlier attempt failed at its own limit",
                          attempt.number, FormatBytes(launch.memory_limit),
                          FormatBytes(launch.reservation))));
  }
  if (launch.mode == SharingMode::kMps) {
    auto env = options_.mps_env
                   ? options_.mps_env(attempt.thread_percent, launch.memory_limit,
                                      static_cast<int>(launch.gpus.size()))
                   : Result<std::vector<std::string>>(Unavailable("MPS is off in colod's config"));
    if (env.ok()) {
      mps_env = std::move(*env);
    } else {
      attempt.mode = SharingMode::kPlain;
      scheduler_.SharesPlainly(launch.job);
      launch_events.push_back(Event(
          launch.job, "mps", "MPS unavailable, sharing without it: " + env.status().message()));
    }
  }
  AttemptRunner& runner = RunnerFor(job);
  // The intent first: once it is stored, a restart can never start this attempt a second time,
  // and knows which GPUs an engine's run was given.
  job.attempts.push_back(attempt);
  job.state = JobState::kRunning;
  if (Status s = store_.Update(job, {}); !s.ok()) {
    job.attempts.pop_back();
    job.state = before;
    // Just placed: the scheduler runs it, and takes it back to the head of its queue.
    COLO_CHECK(scheduler_.AbortLaunch(launch.job).ok());
    counters_.store_failures++;
    Log(Event(launch.job, "store-error",
              fmt::format("attempt {} could not be recorded, so it was not started (the job "
                          "waits): {}",
                          launch.attempt, s.message())));
    return;
  }
  running_[launch.job] = Running{};
  SetTimeLimit(job, running_[launch.job], clock_.Now());
  if (job.external) tenants_.StopWaiting(launch.job);

  const AttemptEnv env = EnvOf(job, attempt, std::move(mps_env));
  const FrameworkEnv& frameworks = env.frameworks;
  if (!frameworks.set.empty() || !frameworks.kept.empty()) {
    // An engine's steps choose their own values: these are offered.
    launch_events.push_back(Event(
        launch.job, "env",
        job.external ? "framework settings offered to its steps (a step's own values win): " +
                           Join(frameworks.set, " ")
                     : fmt::format("framework settings set by colod: {}{}",
                                   frameworks.set.empty() ? "none" : Join(frameworks.set, " "),
                                   frameworks.kept.empty()
                                       ? ""
                                       : "; the job's own kept: " + Join(frameworks.kept, " "))));
  }
  auto started = runner.Start(job, attempt, env);
  Attempt& current = *job.current();
  if (!started.ok()) {
    const std::string why = TruncateUtf8(started.status().message(), kMaxDetailBytes);
    current.phase = Attempt::Phase::kEnded;
    current.ended = clock_.WallNow();
    current.exit = ExitKind::kFailure;
    current.detail = why;
    Record(job, scheduler_.OnJobExit(launch.job, JobExit{ExitKind::kFailure, why}));
    launch_events.push_back(Event(launch.job, "failure", why));
    Persist(job, std::move(launch_events));
    runner.Release(job);
    ForgetIfDone(launch.job);
    return;
  }
  if (const std::optional<ProcessHandle>& process = *started) {
    current.pid = process->pid;
    current.pid_start = process->start_ticks;
  }
  current.phase = Attempt::Phase::kRunning;
  counters_.placements++;
  if (current.number == 1) {
    counters_.wait.Observe(std::chrono::duration<double>(clock_.WallNow() - job.submitted).count());
  }
  launch_events.push_back(
      Event(launch.job, "started",
            fmt::format("attempt {} on {} ({}{}), {}", current.number, VisibleDevices(current),
                        ToString(current.mode),
                        current.mode == SharingMode::kMps
                            ? fmt::format(", {}% threads, {} limit", current.thread_percent,
                                          FormatBytes(current.memory_limit))
                            : "",
                        runner.Describe(job, current))));
  Persist(job, std::move(launch_events));
}

AttemptEnv JobController::EnvOf(const Job& job, const Attempt& attempt,
                                std::vector<std::string> mps) const {
  // The largest of its GPUs: a fraction of it is at most the plan on every one of them.
  GpuInfo largest;
  for (const std::string& uuid : attempt.gpu_uuids) {
    for (size_t g = 0; g < scheduler_.gpu_count(); ++g) {
      const GpuInfo& info = scheduler_.gpu_info(static_cast<GpuIndex>(g));
      if (info.uuid == uuid && info.capacity > largest.capacity) largest = info;
    }
  }
  // An engine's steps set their own environment: the frameworks' settings are offered to them.
  return MakeAttemptEnv(job, attempt, largest, std::move(mps),
                        job.external ? SharedStrings() : job.env);
}

void JobController::Record(Job& job, const JobEnded& ended) {
  if (ended.action == ExitAction::kIgnored) return;  // the scheduler did not count it running
  const bool was_live = job.live();
  job.state = ended.state;
  if (ended.state == JobState::kRecovering) job.spec.memory = ended.need;  // raised by the crash
  if (IsTerminal(ended.state)) {
    job.reason = TruncateUtf8(ended.reason, kMaxDetailBytes);
    if (was_live) job.finished = clock_.WallNow();
    job.env.clear();  // its secrets are not kept once it cannot run again
  }
}

void JobController::FinishAttempt(Job& job, const AttemptEnd& end) {
  const JobId id = job.id();
  Attempt& attempt = *job.current();
  const bool stopped = job.cancel_requested || job.timed_out || job.requeue_requested;
  const bool preempted = job.preemption && !stopped;
  JobExit exit = ClassifyExit(end.end, stopped || preempted, end.stderr_tail, end.stdout_tail);
  // A cancel asked for while a requeue stopped the job ends it for good (scancel after scontrol
  // requeue): it is not queued again.
  const bool requeue = job.requeue_requested && !job.cancel_requested;
  if (preempted) {
    // However it ended once it had its notice (saved its checkpoint and exited, or was killed):
    // it runs again, and an out-of-memory crash in its notice is no recovery's business.
    exit = JobExit{ExitKind::kPreempted, fmt::format("preempted for job {}: {}",
                                                     job.preemption->for_job, HowItEnded(end.end))};
  } else if (requeue) {
    exit = JobExit{ExitKind::kCancelled, "stopped to be queued again: " + HowItEnded(end.end)};
  } else if (job.timed_out && exit.kind != ExitKind::kSuccess) {
    exit = JobExit{ExitKind::kTimeout,
                   fmt::format("time limit of {} reached: {}", FormatTimeLimit(job.time_limit_s),
                               HowItEnded(end.end))};
  }
  // The estimate the client made from the job's profile: a recovery never plans below it.
  if (job.estimate) exit.oom.profile_upper = job.estimate->upper;
  attempt.phase = Attempt::Phase::kEnded;
  attempt.ended = clock_.WallNow();
  attempt.exit = exit.kind;
  attempt.detail = TruncateUtf8(exit.detail, kMaxDetailBytes);
  if (end.end.known) {
    (end.end.exited ? attempt.exit_code : attempt.exit_signal) = end.end.code;
  } else if (!end.end.exited && end.end.code > 0) {
    attempt.exit_signal = end.end.code;  // its shim was killed: so was the job
  }
  const Bytes need_before = job.spec.memory.known() ? job.spec.memory.Upper() : Bytes(0);
  // What the scheduler did with the job, and what the attempt measured while it ran.
  const JobEnded ended = scheduler_.OnJobExit(id, exit);
  const ExitAction action = ended.action;
  attempt.peak = ended.peak;
  attempt.solo_smact = ended.solo_smact;
  if (requeue) {
    // scontrol requeue: the same job waits again, keeping its attempts (and its environment).
    running_.erase(id);
    scheduler_.Drop(id);  // its next attempt is a new record (Requeue)
    job.requeue_requested = false;
    job.cancel_requested = false;
    job.preemption.reset();
    job.timed_out = false;
    Requeue(job, "when requeued");
    Persist(job,
            {Event(id, "requeued",
                   fmt::format("attempt {}: {}; waits again", attempt.number, attempt.detail))});
    RunnerFor(job).Release(job);
    ForgetIfDone(id);
    return;
  }
  Record(job, ended);
  running_.erase(id);
  if (action == ExitAction::kRequeuedAfterPreemption) {
    const JobId for_job = job.preemption->for_job;
    job.preemption.reset();
    Persist(job, {Event(id, "preempted",
                        fmt::format("attempt {} stopped for job {}: {}; waits again, attempt {} "
                                    "runs with COLO_RESTART_COUNT={}",
                                    attempt.number, for_job, HowItEnded(end.end),
                                    attempt.number + 1, Restarts(job)))});
    RunnerFor(job).Release(job);
    ForgetIfDone(id);
    return;
  }
  job.preemption.reset();
  if (exit.kind == ExitKind::kOutOfMemory) {
    counters_.oom_crashes++;
    if (action == ExitAction::kRequeuedForRecovery) {
      counters_.oom_recoveries++;
      const bool figures = exit.oom.in_use.has_value() || exit.oom.requested.has_value();
      counters_.oom_recoveries_by_reason[figures ? "framework" : "observed"]++;
    }
  }
  const std::string what = attempt.detail.empty() ? "done" : attempt.detail;
  std::string detail = fmt::format("attempt {}: {}", attempt.number, what);
  std::vector<JobEvent> events = {Event(id, std::string(ToString(exit.kind)), "")};
  if (action == ExitAction::kRequeuedForRecovery) {
    detail += fmt::format("; re-queued needing {} per GPU", FormatBytes(job.spec.memory.peak));
    events.push_back(Event(
        id, "need",
        fmt::format("{} -> {}: {}", need_before > Bytes(0) ? FormatBytes(need_before) : "unknown",
                    FormatBytes(job.spec.memory.Upper()), ended.need_basis)));
  }
  events.front().detail = TruncateUtf8(detail, kMaxEventDetailBytes);
  if (RunnerFor(job).reruns_through_engine() && action == ExitAction::kRequeuedForRecovery) {
    // Its next run is the engine's to start, on whichever node it picks, with the raised need.
    HandBack(job,
             TenantHandback{job.external->id, id, job.spec.memory.peak,
                            job.external->earlier_ooms + OutOfMemoryAttempts(job), job.spec.gpus,
                            fmt::format("out of memory; runs again needing {} per GPU",
                                        FormatBytes(job.spec.memory.peak)),
                            /*avoid_this_node=*/false, /*out_of_memory=*/true},
             std::move(events));
    return;
  }
  const bool stored = Persist(job, std::move(events));
  RunnerFor(job).Release(job);
  // Only a stored run may teach other jobs (the store answers the history's questions), and
  // only one that measured something (core's Teaches).
  if (stored && !job.live() && Teaches(EvidenceOf(attempt))) RefineQueuedJobs(job);
  ForgetIfDone(id);
}

// Back to the queue it was in, with its attempts and out-of-memory count (its retry cap and its
// priority survive a restart), and the age it had: it has waited since it was submitted, or
// since its last attempt ended.
void JobController::Requeue(Job& job, std::string_view when) {
  const int ooms = OutOfMemoryAttempts(job);
  job.state = ooms > 0 ? JobState::kRecovering : JobState::kQueued;
  const Attempt* last = job.current();
  const WallTime since = last && last->phase == Attempt::Phase::kEnded
                             ? std::max(last->ended, job.submitted)
                             : job.submitted;
  const PriorAttempts prior{static_cast<int>(job.attempts.size()), ooms,
                            MonotonicOf(clock_, since)};
  if (Status s = scheduler_.Submit(Planned(job), prior); !s.ok()) {
    job.state = JobState::kFailed;
    job.reason = TruncateUtf8(fmt::format("cannot be queued again {}: {}", when, s.message()),
                              kMaxDetailBytes);
    job.finished = clock_.WallNow();
    job.env.clear();
    Persist(job, {Event(job.id(), "failed", job.reason)});
  }
}

std::string JobController::WaitReason(const Job& job) const {
  const JobRecord* r = scheduler_.job(job.id());
  if (r && r->last_wait) return r->last_wait->Reason();
  // Not looked at by a placement pass yet: the jobs ahead of it go first.
  const bool recovering = job.state == JobState::kRecovering;
  const auto& queue = recovering ? scheduler_.recovery_queue() : scheduler_.main_queue();
  if (!queue.empty() && queue.front() != job.id())
    return fmt::format("waiting behind job {} in the queue", queue.front());
  if (!recovering && !scheduler_.recovery_queue().empty())
    return fmt::format("the recovery queue goes first (job {} waits there)",
                       scheduler_.recovery_queue().front());
  return "waiting for its turn";
}

}  // namespace colo

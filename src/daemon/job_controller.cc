#include "daemon/job_controller.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>

#include "api/output_pattern.h"
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
// A GPU counts as computing for a job alone on it above this SM activity: its start-up (imports,
// building the model, loading data) shows none, and would pull its solo mean down.
constexpr double kComputingSmact = 0.02;
// Samples alone and computing an attempt needs before its solo SM activity is recorded.
constexpr int kMinSoloSamples = 5;

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int OutOfMemoryAttempts(const Job& job) {
  return static_cast<int>(
      std::count_if(job.attempts.begin(), job.attempts.end(),
                    [](const Attempt& a) { return a.exit == ExitKind::kOutOfMemory; }));
}

// Wall-clock start of an attempt → the monotonic clock the scheduler uses.
TimePoint MonotonicStart(const Clock& clock, WallTime started) {
  const Duration ago = std::chrono::duration_cast<Duration>(clock.WallNow() - started);
  return clock.Now() - std::max(Duration::zero(), ago);
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
  if (const JobRecord* r = scheduler_.job(id); r && r->state == JobState::kRunning) {
    Log(Event(id, "lost",
              "ended while the scheduler still counted it as running; its GPUs "
              "are free again"));
    (void)scheduler_.OnJobExit(id, JobExit{ExitKind::kLost, {}});
  }
  (void)scheduler_.Cancel(id);
  scheduler_.Forget(id);
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
  const JobRecord* r = scheduler_.job(job.id());
  return r ? std::max(a->peak, r->attempt_peak) : a->peak;
}

JobSpec JobController::Planned(const Job& job) const {
  JobSpec spec = job.spec;
  // Backfill's reservations count on it.
  spec.time_limit = Seconds(job.time_limit_s);
  if (options_.plan_without_estimates && spec.memory.source != MemorySource::kLearned)
    spec.memory = MemoryNeed{};
  return spec;
}

// --- Submit ---

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

// --- Cancel ---

Result<std::string> JobController::Cancel(const Identity& who, JobId id) {
  // The array's id cancels every live task of it (scancel ARRAY_ID).
  std::vector<JobId> tasks;
  for (const auto& [task_id, job] : live_) {
    if (job.array && job.array->job == id && job.live()) tasks.push_back(task_id);
  }
  if (tasks.size() > 1 || (tasks.size() == 1 && tasks.front() != id)) {
    int cancelled = 0, cancelling = 0;
    std::optional<Status> first_error;
    std::vector<JobId> waiting;
    const auto count = [&](const Result<std::string>& state) {
      if (!state.ok()) {
        if (!first_error) first_error = state.status();
      } else {
        (*state == "cancelling" ? cancelling : cancelled)++;
      }
    };
    for (JobId task : tasks) {
      if (live_.at(task).state == JobState::kRunning) {
        count(CancelOne(who, task));
      } else {
        waiting.push_back(task);
      }
    }
    for (const Result<std::string>& state : CancelWaiting(who, waiting)) count(state);
    if (cancelled + cancelling == 0 && first_error) return *first_error;
    if (cancelling == 0) return fmt::format("cancelled {} task(s)", cancelled);
    return fmt::format("cancelling {} task(s), cancelled {}", cancelling, cancelled);
  }
  return CancelOne(who, id);
}

Result<Job*> JobController::CancelTarget(const Identity& who, JobId id) {
  auto it = live_.find(id);
  if (it == live_.end()) {
    auto ended = EndedJobFor(who, id, "cancel");
    if (!ended.ok()) return ended.status();
    return FailedPrecondition(fmt::format("job {} already ended ({})", id, ToString(ended->state)));
  }
  COLO_RETURN_IF_ERROR(MayControl(who, it->second, "cancel"));
  return &it->second;
}

Result<std::string> JobController::CancelOne(const Identity& who, JobId id) {
  auto target = CancelTarget(who, id);
  if (!target.ok()) return target.status();
  Job& job = **target;
  if (job.state != JobState::kRunning) return std::move(CancelWaiting(who, {id}).front());
  if (!job.cancel_requested) {
    // Stored first: if colod stops now, the restart still knows the end was asked for.
    Job updated = job;
    updated.cancel_requested = true;
    const JobEvent event = Event(
        id, "cancel",
        fmt::format("asked by {}: SIGTERM to every process of attempt {}; SIGKILL in {:.0f} s",
                    who.user, job.current() ? job.current()->number : 0,
                    ToSeconds(options_.cancel_grace)));
    if (Status s = store_.Update(updated, {event}); !s.ok())
      return Unavailable("the cancel could not be stored, so the job was not touched: " +
                         s.message());
    Log(event);
    job.cancel_requested = true;
    // Once: signalling every process of a job is not free, and asking again changes nothing
    // (SIGKILL follows when the grace is over).
    RunnerFor(job).Signal(job, SIGTERM);
    running_[id].kill_at = clock_.Now() + options_.cancel_grace;
  }
  return std::string("cancelling");
}

std::vector<Result<std::string>> JobController::CancelWaiting(const Identity& who,
                                                              const std::vector<JobId>& ids) {
  std::vector<Result<std::string>> results(ids.size(), std::string("cancelled"));
  // Stored first, all in one transaction: the tasks of a large array cost one write.
  std::vector<Job> ended;
  ended.reserve(ids.size());
  std::vector<JobChange> changes;
  std::vector<JobId> targets;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto target = CancelTarget(who, ids[i]);
    if (!target.ok()) {
      results[i] = target.status();
      continue;
    }
    Job& job = ended.emplace_back(**target);
    job.state = JobState::kCancelled;
    job.reason = fmt::format("cancelled by {} while waiting", who.user);
    job.finished = clock_.WallNow();
    job.env.clear();
    changes.push_back(JobChange{&job, {Event(ids[i], "cancelled", job.reason)}});
    targets.push_back(ids[i]);
  }
  if (Status s = store_.UpdateMany(changes); !s.ok()) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (results[i].ok())
        results[i] =
            Unavailable("the cancel could not be stored, so the job stays queued: " + s.message());
    }
    return results;
  }
  for (size_t k = 0; k < targets.size(); ++k) {
    const JobId id = targets[k];
    auto it = live_.find(id);
    if (it == live_.end()) continue;  // named twice
    Log(changes[k].events.front());
    if (scheduler_.job(id)) {
      if (Status s = scheduler_.Cancel(id); !s.ok()) Log(Event(id, "cancel", s.message()));
    }
    it->second = std::move(ended[k]);
    ForgetIfDone(id);
  }
  return results;
}

// --- Hold, release, requeue (scontrol) ---

Status JobController::MayControl(const Identity& who, const Job& job, std::string_view what) const {
  if (who.uid != 0 && who.uid != job.owner.uid)
    return PermissionDenied(fmt::format("job {} belongs to {}; only its owner or root may {} it",
                                        job.id(), job.owner.user, what));
  return RunnerFor(job).MayControl(job, what);
}

Result<Job> JobController::EndedJobFor(const Identity& who, JobId id, std::string_view what) const {
  auto stored = store_.Find(id);
  if (!stored.ok()) return stored.status();
  if (!*stored) return NotFound(fmt::format("no job {}", id));
  COLO_RETURN_IF_ERROR(MayControl(who, **stored, what));
  return std::move(**stored);
}

Result<std::string> JobController::Control(const Identity& who, api::JobAction action, JobId id,
                                           bool whole_array) {
  switch (action) {
    case api::JobAction::kHold:
    case api::JobAction::kRelease:
      return std::move(SetHolds(who, {id}, action == api::JobAction::kHold).front());
    case api::JobAction::kRequeue:
      return RequeueJob(who, id);
    case api::JobAction::kCancel:
      break;
  }
  return whole_array ? Cancel(who, id) : CancelOne(who, id);
}

std::vector<Result<std::string>> JobController::ControlMany(const Identity& who,
                                                            api::JobAction action,
                                                            const std::vector<JobId>& ids,
                                                            bool whole_array) {
  if (action == api::JobAction::kHold || action == api::JobAction::kRelease)
    return SetHolds(who, ids, action == api::JobAction::kHold);
  std::vector<Result<std::string>> results;
  for (JobId id : ids) results.push_back(Control(who, action, id, whole_array));
  return results;
}

Result<Job*> JobController::HoldTarget(const Identity& who, JobId id, bool hold) {
  const std::string_view verb = hold ? "hold" : "release";
  auto it = live_.find(id);
  if (it == live_.end()) {
    auto ended = EndedJobFor(who, id, verb);
    if (!ended.ok()) return ended.status();
    return FailedPrecondition(fmt::format("job {} already ended ({})", id, ToString(ended->state)));
  }
  Job& job = it->second;
  COLO_RETURN_IF_ERROR(MayControl(who, job, verb));
  if (job.state != JobState::kQueued && job.state != JobState::kRecovering)
    return FailedPrecondition(fmt::format("job {} is {}; only a waiting job can be {}", id,
                                          ToString(job.state), hold ? "held" : "released"));
  return &job;
}

std::vector<Result<std::string>> JobController::SetHolds(const Identity& who,
                                                         const std::vector<JobId>& ids, bool hold) {
  std::vector<Result<std::string>> results(ids.size(), std::string());
  std::vector<Job*> targets(ids.size(), nullptr);
  // Stored first, all in one transaction (a thousand jobs cost one write, not a thousand): a
  // restart must not start a job its owner held.
  std::vector<Job> updated;
  updated.reserve(ids.size());
  std::vector<JobChange> changes;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto target = HoldTarget(who, ids[i], hold);
    if (!target.ok()) {
      results[i] = target.status();
      continue;
    }
    targets[i] = *target;
    if ((*target)->held == hold) continue;
    updated.push_back(**target);
    updated.back().held = hold;
    changes.push_back(JobChange{&updated.back(), {HoldEvent(ids[i], who, hold)}});
  }
  const Status stored = store_.UpdateMany(changes);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!targets[i]) continue;
    if (targets[i]->held != hold && !stored.ok()) {
      results[i] =
          Unavailable(fmt::format("the {} could not be stored, so the job is as it was: {}",
                                  hold ? "hold" : "release", stored.message()));
    } else {
      results[i] = ApplyHold(*targets[i], who, hold);
    }
  }
  return results;
}

JobEvent JobController::HoldEvent(JobId id, const Identity& who, bool hold) const {
  return Event(id, hold ? "held" : "released", "by " + who.user);
}

Result<std::string> JobController::ApplyHold(Job& job, const Identity& who, bool hold) {
  const JobId id = job.id();
  if (job.held != hold) {
    Log(HoldEvent(id, who, hold));
    job.held = hold;
    if (hold) {
      if (scheduler_.job(id)) {
        (void)scheduler_.Cancel(id);
        scheduler_.Forget(id);
      }
      if (job.array) admission_.ArraysChanged();
    } else if (job.dependencies.empty()) {
      Enqueue(job, "when released");
      if (!job.live()) {
        const std::string reason = job.reason;
        ForgetIfDone(id);
        return FailedPrecondition(reason);
      }
    } else {
      admission_.DependenciesChanged();
    }
  }
  if (job.held) return std::string("held");
  return std::string(job.dependencies.empty() ? "queued" : "waiting for its dependencies");
}

Result<std::string> JobController::RequeueJob(const Identity& who, JobId id) {
  auto it = live_.find(id);
  if (it != live_.end()) {
    Job& job = it->second;
    COLO_RETURN_IF_ERROR(MayControl(who, job, "requeue"));
    if (job.state != JobState::kRunning)
      return FailedPrecondition(fmt::format("job {} is waiting already", id));
    if (!job.requeue_requested && !job.cancel_requested) {
      Job updated = job;
      updated.requeue_requested = true;
      const JobEvent event = Event(
          id, "requeue",
          fmt::format("asked by {}: SIGTERM to every process of attempt {}; SIGKILL in {:.0f} s; "
                      "then it waits again",
                      who.user, job.current() ? job.current()->number : 0,
                      ToSeconds(options_.cancel_grace)));
      if (Status s = store_.Update(updated, {event}); !s.ok())
        return Unavailable("the requeue could not be stored, so the job was not touched: " +
                           s.message());
      Log(event);
      job.requeue_requested = true;
      RunnerFor(job).Signal(job, SIGTERM);
      running_[id].kill_at = clock_.Now() + options_.cancel_grace;
    }
    return std::string("requeueing");
  }
  auto ended = EndedJobFor(who, id, "requeue");
  if (!ended.ok()) return ended.status();
  Job job = *std::move(ended);
  if (job.live()) return Unavailable(fmt::format("job {} is being read back; try again", id));
  if (who.uid != 0) COLO_RETURN_IF_ERROR(admission_.MayAdd(job.owner, 1));
  const JobState was = job.state;
  job.state = JobState::kQueued;
  job.reason.clear();
  job.finished = WallTime{};
  job.cancel_requested = job.timed_out = job.requeue_requested = false;
  job.dependencies.clear();
  // An ended job's environment is not kept (it may hold secrets): it runs again with a minimal
  // one, as sbatch --export=NONE would give it.
  job.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "USER=" + job.owner.user,
             "LOGNAME=" + job.owner.user};
  const JobEvent event =
      Event(id, "requeued",
            fmt::format("by {} after it ended ({}); waits again with a minimal environment "
                        "(PATH, USER, LOGNAME)",
                        who.user, ToString(was)));
  if (Status s = store_.Update(job, {event}); !s.ok())
    return Unavailable("the requeue could not be stored: " + s.message());
  Log(event);
  AddLive(std::move(job));
  Job& live = live_.at(id);
  Enqueue(live, "when requeued");
  if (!live.live()) {
    const std::string reason = live.reason;
    ForgetIfDone(id);
    return FailedPrecondition(reason);
  }
  return std::string("queued");
}

// --- Dependencies ---

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

// --- Time limits ---

void JobController::CheckTimeLimits(TimePoint now) {
  for (auto& [id, r] : running_) {
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

// --- Samples ---

void JobController::OnSample(TimePoint time, const std::vector<DeviceSample>& devices) {
  const size_t gpus = std::min(devices.size(), scheduler_.gpu_count());
  for (size_t g = 0; g < gpus; ++g) {
    const DeviceSample& s = devices[g];
    scheduler_.OnGpuSample(GpuSample{static_cast<GpuIndex>(g), time, s.memory_used,
                                     s.smact >= 0 ? s.smact : s.utilization, s.smocc, s.drama,
                                     true});
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
    const GpuIndex gpu = static_cast<GpuIndex>(g);
    std::vector<JobId> here;
    for (const auto& [id, running] : running_) {
      const JobRecord* r = scheduler_.job(id);
      if (!r || r->state != JobState::kRunning) continue;
      if (std::find(r->gpus.begin(), r->gpus.end(), gpu) == r->gpus.end()) continue;
      here.push_back(id);
    }
    for (JobId id : here) {
      auto it = live_.find(id);
      if (it == live_.end() || !it->second.current()) continue;
      Job& job = it->second;
      if (here.size() == 1 && s.smact > kComputingSmact) {
        running_[id].solo_smact_sum += s.smact;
        running_[id].solo_samples++;
      }
      // Not listed (the job started after the sample began): its use is as last seen.
      if (!s.processes_read) continue;
      const Attempt& attempt = *job.current();
      const auto seen = per_job.find(id);
      if (seen != per_job.end()) scheduler_.OnJobProcessSeen(id, gpu);
      Bytes used = seen == per_job.end() ? Bytes(0) : seen->second;
      // Part of an MPS client's context is in the MPS server, out of NVML's count of the client.
      if (used > Bytes(0) && attempt.mode == SharingMode::kMps)
        used += scheduler_.gpu_info(gpu).mps_uncounted_context;
      if (const auto raised = scheduler_.OnJobMemory(id, gpu, used)) OverPlan(job, *raised);
    }
  }
}

std::vector<bool> JobController::GpusRunningJobs() const {
  std::vector<bool> busy(scheduler_.gpu_count(), false);
  for (const auto& [id, running] : running_) {
    const JobRecord* r = scheduler_.job(id);
    if (!r || r->state != JobState::kRunning) continue;
    for (GpuIndex g : r->gpus)
      if (static_cast<size_t>(g) < busy.size()) busy[static_cast<size_t>(g)] = true;
  }
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

// --- The turn ---

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
}

void JobController::PlacementPass(bool bounded) {
  const TimePoint pass_began = clock_.Now();
  const std::vector<colo::Launch> launches =
      bounded ? scheduler_.Schedule(kPlacementsPerTurn) : scheduler_.Schedule();
  counters_.pass.Observe(ToSeconds(clock_.Now() - pass_began));
  for (const colo::Launch& launch : launches) Launch(launch);
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
  }
  if (admission_.dependencies_changed()) earlier(clock_.Now() + kStoreRetry);
  if (!unsaved_.empty()) earlier(clock_.Now() + kStoreRetry);
  if (more_work_) earlier(clock_.Now());
  if (const auto deadline = tenants_.NextDeadline()) earlier(*deadline);
  return wake;
}

// --- Launch ---

void JobController::Launch(const colo::Launch& launch) {
  auto it = live_.find(launch.job);
  if (it == live_.end() ||
      (it->second.state != JobState::kQueued && it->second.state != JobState::kRecovering)) {
    // No waiting job of colod's is behind it: dropped, never put back at the head of the queue.
    Log(Event(launch.job, "dropped",
              "the scheduler placed a job that no longer waits; it leaves the queue"));
    (void)scheduler_.AbortLaunch(launch.job);
    (void)scheduler_.Cancel(launch.job);
    scheduler_.Forget(launch.job);
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
    (void)scheduler_.AbortLaunch(launch.job);
    counters_.store_failures++;
    Log(Event(launch.job, "store-error",
              fmt::format("attempt {} could not be recorded, so it was not started (the job "
                          "waits): {}",
                          launch.attempt, s.message())));
    return;
  }
  running_[launch.job] = Running{};
  if (job.time_limit_s > 0 && runner.enforces_time_limit())
    running_[launch.job].timeout_at = clock_.Now() + Seconds(job.time_limit_s);
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
    scheduler_.OnJobExit(launch.job, JobExit{ExitKind::kFailure, why});
    TakeSchedulerState(job);
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

// --- Exit ---

void JobController::TakeSchedulerState(Job& job) {
  const JobRecord* r = scheduler_.job(job.id());
  if (!r) return;
  const bool was_live = job.live();
  job.state = r->state;
  if (r->state == JobState::kRecovering) job.spec.memory = r->need;  // raised by the crash
  if (IsTerminal(r->state)) {
    // A job that succeeded after out-of-memory retries keeps its story in its attempts.
    job.reason =
        r->state == JobState::kSucceeded ? "" : TruncateUtf8(r->end_reason, kMaxDetailBytes);
    if (was_live) job.finished = clock_.WallNow();
    job.env.clear();  // its secrets are not kept once it cannot run again
  }
}

void JobController::FinishAttempt(Job& job, const AttemptEnd& end) {
  const JobId id = job.id();
  Attempt& attempt = *job.current();
  JobExit exit =
      ClassifyExit(end.end, job.cancel_requested || job.timed_out || job.requeue_requested,
                   end.stderr_tail, end.stdout_tail);
  if (job.requeue_requested) {
    exit = JobExit{ExitKind::kCancelled, "stopped to be queued again: " + HowItEnded(end.end)};
  } else if (job.timed_out && exit.kind != ExitKind::kSuccess) {
    exit = JobExit{ExitKind::kTimeout,
                   fmt::format("time limit of {} reached: {}", FormatTimeLimit(job.time_limit_s),
                               HowItEnded(end.end))};
  }
  // The estimate the client made from the job's profile: a recovery never plans below it.
  if (job.estimate) exit.oom.profile_upper = job.estimate->upper;
  attempt.peak = CurrentPeak(job);  // while the scheduler still holds the attempt's peak
  attempt.phase = Attempt::Phase::kEnded;
  attempt.ended = clock_.WallNow();
  attempt.exit = exit.kind;
  attempt.detail = TruncateUtf8(exit.detail, kMaxDetailBytes);
  if (end.end.known) {
    (end.end.exited ? attempt.exit_code : attempt.exit_signal) = end.end.code;
  } else if (!end.end.exited && end.end.code > 0) {
    attempt.exit_signal = end.end.code;  // its shim was killed: so was the job
  }
  if (auto r = running_.find(id); r != running_.end() && r->second.solo_samples >= kMinSoloSamples)
    attempt.solo_smact = r->second.solo_smact_sum / r->second.solo_samples;
  const Bytes need_before = job.spec.memory.known() ? job.spec.memory.Upper() : Bytes(0);
  const ExitAction action = scheduler_.OnJobExit(id, exit);
  if (job.requeue_requested) {
    // scontrol requeue: the same job waits again, keeping its attempts (and its environment).
    running_.erase(id);
    scheduler_.Forget(id);
    job.requeue_requested = false;
    job.cancel_requested = false;
    job.timed_out = false;
    Requeue(job, "when requeued");
    Persist(job,
            {Event(id, "requeued",
                   fmt::format("attempt {}: {}; waits again", attempt.number, attempt.detail))});
    RunnerFor(job).Release(job);
    ForgetIfDone(id);
    return;
  }
  TakeSchedulerState(job);
  running_.erase(id);
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
    const JobRecord* r = scheduler_.job(id);
    events.push_back(Event(
        id, "need",
        fmt::format("{} -> {}: {}", need_before > Bytes(0) ? FormatBytes(need_before) : "unknown",
                    FormatBytes(job.spec.memory.Upper()), r ? r->need_basis : "")));
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

// --- Learning from earlier runs ---

ModelRuns JobController::RunsOf(const std::string& signature) const {
  if (signature.empty()) return {};
  auto runs = store_.EarlierRuns(signature, options_.history_runs);
  if (!runs.ok()) {
    Log(Event(0, "store-error", "earlier runs could not be read: " + runs.status().message()));
    return {};
  }
  return *std::move(runs);
}

SmactSource JobController::SmactSourceOf(const Job& job) {
  if (job.estimate && job.estimate->learned && job.estimate->learned->solo_smact >= 0)
    return SmactSource::kLearned;
  if (job.estimate && job.estimate->predicted_smact >= 0) return SmactSource::kPredicted;
  return job.spec.expected_smact >= 0 ? SmactSource::kUser : SmactSource::kUnknown;
}

void JobController::TakeLesson(Job& job, const Lesson& lesson) {
  if (!job.estimate || (!lesson.memory && !lesson.smact)) return;
  std::optional<api::JobEstimate::Learned>& learned = job.estimate->learned;
  if (!learned) learned = api::JobEstimate::Learned{};
  if (lesson.memory) {
    job.spec.memory = lesson.memory->need();
    learned->runs = lesson.memory->runs;
    learned->peak = lesson.memory->highest;
    learned->upper = lesson.memory->upper;
  }
  if (lesson.smact) {
    job.spec.expected_smact = *lesson.smact;
    learned->solo_smact = *lesson.smact;
  }
}

// A run ended that measured something: queued jobs of the same model were planned before it was
// known, and now plan with it (their estimate's margin is usually wider than what the run showed;
// their SM activity was unknown or an older runs' mean).
void JobController::RefineQueuedJobs(const Job& finished) {
  if (!finished.estimate || finished.estimate->signature.empty()) return;
  const std::string& signature = finished.estimate->signature;
  std::vector<JobId> waiting;
  for (const auto& [id, job] : live_) {
    if (job.state == JobState::kQueued && job.attempts.empty() && job.estimate &&
        job.estimate->signature == signature)
      waiting.push_back(id);
  }
  if (waiting.empty()) return;
  const ModelRuns runs = RunsOf(signature);
  for (JobId id : waiting) {
    Job& job = live_.at(id);
    const MemoryNeed before = job.spec.memory;
    const Lesson lesson = Learn(runs, before, job.spec.expected_smact, SmactSourceOf(job));
    // What the scheduler takes is what the job plans with.
    Lesson taken;
    std::vector<JobEvent> events;
    if (lesson.memory && scheduler_.UpdateNeed(id, lesson.memory->need()).ok()) {
      taken.memory = lesson.memory;
      events.push_back(Event(
          id, "estimate",
          fmt::format("refined by {} earlier run(s) of the same model: plans with {} (was {})",
                      lesson.memory->runs, FormatBytes(lesson.memory->need().Upper()),
                      before.known() ? FormatBytes(before.Upper()) : "nothing")));
    }
    if (lesson.smact && scheduler_.UpdateExpectedSmact(id, *lesson.smact).ok()) {
      taken.smact = lesson.smact;
      events.push_back(SmactEvent(id, *lesson.smact));
    }
    TakeLesson(job, taken);
    if (!events.empty()) Persist(job, std::move(events));
  }
}

JobEvent JobController::SmactEvent(JobId id, double smact) const {
  return Event(id, "smact",
               fmt::format("learned from earlier runs of the same model alone on a GPU: SM "
                           "activity {:.2f}, for its MPS thread share and the utilization gate",
                           smact));
}

// --- Restart ---

Status JobController::Recover() {
  auto loaded = store_.LoadLive();
  if (!loaded.ok()) return loaded.status();
  for (const QuarantinedJob& q : loaded->quarantined) {
    const JobEvent e = Event(q.id, "quarantined",
                             "its stored record cannot be read and was set aside: " + q.reason);
    Log(e);
    (void)store_.AddEvents({e});
  }
  std::map<std::string, GpuIndex> by_uuid;
  for (size_t g = 0; g < scheduler_.gpu_count(); ++g)
    by_uuid[scheduler_.gpu_info(static_cast<GpuIndex>(g)).uuid] = static_cast<GpuIndex>(g);
  for (Job& loaded_job : loaded->jobs) {
    const JobId id = loaded_job.id();
    AddLive(std::move(loaded_job));
    Job& job = live_.at(id);
    if (job.state == JobState::kRunning && job.current()) {
      RecoverRunning(job, by_uuid);
    } else if (Admission::WaitsOutside(job)) {
      job.state = JobState::kQueued;
      admission_.DependenciesChanged();
    } else {
      if (job.external) {
        // Back on the GPUs Slurm booked for it (a GPU gone since cannot take it: it waits, and
        // goes back to Slurm at its wait limit).
        job.spec.booked_gpus.clear();
        for (const std::string& uuid : job.external->gpu_uuids) {
          if (auto it = by_uuid.find(uuid); it != by_uuid.end())
            job.spec.booked_gpus.push_back(it->second);
        }
      }
      Enqueue(job, "after a restart");
      if (job.external && job.live())
        tenants_.WaitUntil(id, clock_.Now() + options_.tenant_wait_limit);
    }
    ForgetIfDone(id);
  }
  return Status::Ok();
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
                            MonotonicStart(clock_, since)};
  if (Status s = scheduler_.Submit(Planned(job), prior); !s.ok()) {
    job.state = JobState::kFailed;
    job.reason = TruncateUtf8(fmt::format("cannot be queued again {}: {}", when, s.message()),
                              kMaxDetailBytes);
    job.finished = clock_.WallNow();
    job.env.clear();
    Persist(job, {Event(job.id(), "failed", job.reason)});
  }
}

void JobController::RecoverRunning(Job& job, const std::map<std::string, GpuIndex>& by_uuid) {
  const JobId id = job.id();
  Attempt& attempt = *job.current();
  std::vector<GpuIndex> gpus;
  for (const std::string& uuid : attempt.gpu_uuids) {
    if (auto it = by_uuid.find(uuid); it != by_uuid.end()) gpus.push_back(it->second);
  }
  std::vector<JobEvent> events;
  AttemptRunner& runner = RunnerFor(job);
  if (attempt.phase == Attempt::Phase::kLaunching) {
    // colod stopped between storing the intent and storing the start.
    const AttemptRunner::Recovered found = runner.Recover(job);
    if (found.running) {
      attempt.pid = found.running->pid;
      attempt.pid_start = found.running->start_ticks;
      attempt.phase = Attempt::Phase::kRunning;
      events.push_back(Event(id, "adopted",
                             fmt::format("attempt {} had started when colod stopped (pid {})",
                                         attempt.number, attempt.pid)));
    } else if (!found.may_have_started) {
      events.push_back(
          Event(id, "requeued",
                fmt::format("attempt {} never started before colod stopped; the job waits again",
                            attempt.number)));
      job.attempts.pop_back();
      for (const JobEvent& e : events) Log(e);
      Requeue(job);
      if (job.live()) Persist(job, std::move(events));
      return;
    } else {
      // It ran and is gone: Check reads how it ended (its shim's record, if any).
      attempt.phase = Attempt::Phase::kRunning;
    }
  }
  const int ooms = OutOfMemoryAttempts(job);
  if (static_cast<int>(gpus.size()) != job.spec.gpus ||
      !scheduler_
           .Adopt(Planned(job), gpus, attempt.mode, attempt.thread_percent, attempt.number,
                  MonotonicStart(clock_, attempt.started), ooms)
           .ok()) {
    // Its processes are on GPUs colod no longer manages: they are stopped, not left unaccounted
    // (an engine's are the engine's: its record ends, and its steps keep what they were given).
    runner.Signal(job, SIGKILL);
    runner.Release(job);
    attempt.phase = Attempt::Phase::kEnded;
    attempt.ended = clock_.WallNow();
    attempt.exit = ExitKind::kLost;
    attempt.detail = "was running on GPUs this server no longer has";
    job.state = JobState::kLost;
    job.reason = attempt.detail;
    job.finished = clock_.WallNow();
    job.env.clear();
    events.push_back(Event(id, "lost", job.reason));
    Persist(job, std::move(events));
    return;
  }
  running_[id] = Running{};
  if (job.cancel_requested || job.requeue_requested)
    running_[id].kill_at = clock_.Now() + options_.cancel_grace;
  if (job.timed_out) running_[id].kill_at = clock_.Now() + options_.timeout_grace;
  // The limit counts from the attempt's start, not from colod's.
  if (job.time_limit_s > 0 && !job.timed_out && runner.enforces_time_limit())
    running_[id].timeout_at = MonotonicStart(clock_, attempt.started) + Seconds(job.time_limit_s);
  if (events.empty())
    events.push_back(Event(id, "adopted",
                           fmt::format("attempt {} ({}) taken back after a restart", attempt.number,
                                       runner.Describe(job, attempt))));
  Persist(job, std::move(events));
}

const Job* JobController::FindTenant(uint32_t slurm_job) const {
  const std::optional<JobId> id = tenants_.Find(slurm_job);
  return id ? FindLive(*id) : nullptr;
}

std::vector<const Job*> JobController::Tenants() const {
  std::vector<const Job*> jobs;
  for (JobId id : tenants_.live()) {
    if (const Job* job = FindLive(id)) jobs.push_back(job);
  }
  return jobs;
}

Result<api::SlurmAttachReply> JobController::AttachTenant(const TenantRequest& request) {
  if (const Job* live = FindTenant(request.slurm_job)) {
    if (live->external->restarts >= request.restarts) return TenantReply(*live);
    // A run of it whose end never reached colod (colod was down): Slurm has started it again.
    EndTenant(request.slurm_job, AttemptEnd{ProcessEnd{true, 0, /*known=*/false}, "", ""});
  } else if (auto ended = tenants_.EndedReply(request.slurm_job, request.restarts)) {
    return *ended;
  }
  if (request.owner.user.empty())
    return PermissionDenied(
        fmt::format("Slurm job {} runs as uid {}, which has no entry in the passwd database",
                    request.slurm_job, request.owner.uid));
  Job job;
  job.owner = request.owner;
  job.external =
      ExternalRun{"slurm", request.slurm_job, request.restarts, request.earlier_ooms, {}};
  job.spec.owner = request.owner.user;
  job.spec.command = {fmt::format("(Slurm job {})", request.slurm_job)};
  job.spec.name =
      TruncateUtf8(request.name.empty() ? fmt::format("slurm-{}", request.slurm_job) : request.name,
                   kMaxNameBytes);
  job.spec.gpus = request.gpus;
  job.spec.booked_gpus = request.booked_gpus;
  job.spec.threads = request.threads;
  for (GpuIndex g : request.booked_gpus) {
    if (g >= 0 && static_cast<size_t>(g) < scheduler_.gpu_count())
      job.external->gpu_uuids.push_back(scheduler_.gpu_info(g).uuid);
  }
  job.context.source = fmt::format("slurm {}", request.slurm_job);
  if (request.memory) {
    // The user's declared need is the limit; an out-of-memory crash of an earlier run raised it.
    const Bytes need = std::max(*request.memory, request.raised_need.value_or(Bytes(0)));
    job.spec.memory = MemoryNeed{need, MemorySource::kDeclared, 0.0};
    job.spec.sharing = request.share;
  } else {
    // Whole GPUs from Slurm: nobody shares them.
    job.spec.sharing = SharingPreference::kExclusive;
  }
  if (Status placeable = scheduler_.CheckPlaceable(Planned(job)); !placeable.ok()) {
    return api::SlurmAttachReply{
        api::SlurmPlacement::kFailed, 0, {}, {}, "cannot run on this node: " + placeable.message()};
  }
  job.state = JobState::kQueued;
  job.submitted = clock_.WallNow();
  const std::string booked = Join(job.external->gpu_uuids, ",");
  JobEvent attached = Event(
      0, "submitted",
      fmt::format("Slurm job {} (run {}) of {}: {} GPU(s){}, memory {}", request.slurm_job,
                  request.restarts, job.owner.user, job.spec.gpus,
                  booked.empty() ? "" : " booked by Slurm: " + booked,
                  job.spec.memory.known() ? FormatBytes(job.spec.memory.Upper()) : "whole GPUs"));
  if (Status stored = store_.Insert(job, {attached}); !stored.ok()) {
    counters_.store_failures++;
    return Unavailable("the Slurm job could not be stored on this node: " + stored.message());
  }
  attached.job = job.id();
  Log(attached);
  const JobId id = job.id();
  const int ooms = request.earlier_ooms;
  job.state = ooms > 0 ? JobState::kRecovering : JobState::kQueued;
  if (Status queued = scheduler_.Submit(Planned(job), PriorAttempts{0, ooms, std::nullopt});
      !queued.ok()) {
    job.state = JobState::kFailed;
    job.reason = TruncateUtf8(queued.message(), kMaxDetailBytes);
    job.finished = clock_.WallNow();
    Persist(job, {Event(id, "failed", job.reason)});
    return api::SlurmAttachReply{api::SlurmPlacement::kFailed, id, {}, {}, job.reason};
  }
  AddLive(std::move(job));
  tenants_.WaitUntil(id, clock_.Now() + options_.tenant_wait_limit);
  // At once, so that a job that fits starts without waiting for colod's next turn.
  PlacementPass();
  const Job* now = FindLive(id);
  if (!now) {
    if (auto ended = tenants_.EndedReply(request.slurm_job, request.restarts)) return *ended;
    return api::SlurmAttachReply{api::SlurmPlacement::kFailed, id, {}, {}, "ended at once"};
  }
  return TenantReply(*now);
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

api::SlurmAttachReply JobController::TenantReply(const Job& job) const {
  api::SlurmAttachReply reply;
  reply.job = job.id();
  switch (job.state) {
    case JobState::kRunning: {
      reply.state = api::SlurmPlacement::kPlaced;
      const Attempt* attempt = job.current();
      if (!attempt) break;
      std::vector<std::string> mps;
      if (attempt->mode == SharingMode::kMps && options_.mps_env) {
        auto env = options_.mps_env(attempt->thread_percent, attempt->memory_limit,
                                    static_cast<int>(attempt->gpu_uuids.size()));
        if (env.ok()) mps = *std::move(env);
      }
      AttemptEnv env = EnvOf(job, *attempt, std::move(mps));
      reply.env = std::move(env.colo);
      // Its steps' own values win: a step's environment is its owner's to choose.
      reply.env_defaults = std::move(env.frameworks.set);
      break;
    }
    case JobState::kQueued:
    case JobState::kRecovering: {
      reply.state = api::SlurmPlacement::kWaiting;
      reply.reason = WaitReason(job);
      break;
    }
    case JobState::kRequeued:
      reply.state = api::SlurmPlacement::kRequeue;
      reply.reason = job.reason;
      break;
    default:
      reply.state = api::SlurmPlacement::kFailed;
      reply.reason = job.reason.empty() ? std::string(ToString(job.state)) : job.reason;
      break;
  }
  return reply;
}

void JobController::HandBack(Job& job, TenantHandback handback, std::vector<JobEvent> events) {
  const JobId id = job.id();
  // It leaves this node's queue: left there, it would stay at the head, never launched (it is
  // no longer live), keeping a GPU for itself behind a launch grace renewed at every pass.
  (void)scheduler_.Cancel(id);
  job.state = JobState::kRequeued;
  job.reason = TruncateUtf8("given back to Slurm: " + handback.reason, kMaxDetailBytes);
  job.finished = clock_.WallNow();
  job.env.clear();
  events.push_back(Event(id, "requeued", job.reason));
  const bool stored = Persist(job, std::move(events));
  // Slurm hears of it once its record is stored (at a later turn, where the store failed now).
  tenants_.HandBack(std::move(handback), stored);
  if (stored) ForgetIfDone(id);
}

std::optional<JobId> JobController::EndTenant(uint32_t slurm_job, const AttemptEnd& end) {
  const std::optional<JobId> found = tenants_.Find(slurm_job);
  if (!found) return std::nullopt;
  const JobId id = *found;
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  Job& job = it->second;
  if (!job.live()) return id;  // ended, waiting to be stored
  if (job.state == JobState::kRunning && job.current()) {
    FinishAttempt(job, end);
    return id;
  }
  // It ended before colod placed it (Slurm cancelled it, or its time ran out).
  (void)scheduler_.Cancel(id);
  job.state = JobState::kCancelled;
  job.reason = "Slurm ended the job before it was placed here";
  job.finished = clock_.WallNow();
  job.env.clear();
  Persist(job, {Event(id, "cancelled", job.reason)});
  ForgetIfDone(id);
  return id;
}

}  // namespace colo

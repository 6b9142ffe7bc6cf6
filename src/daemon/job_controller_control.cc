// JobController: what an owner or root may do to a job, with Slurm's verbs (scancel; scontrol
// hold, release, requeue): who may, what is stored first (many jobs in one write), and what the
// scheduler and Admission hear of it. The rest of the controller is in job_controller.cc.
#include <fmt/format.h>
#include <signal.h>

#include "daemon/job_controller.h"

namespace colo {

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
  // Once: signalling every process of a job is not free, and asking again changes nothing
  // (SIGKILL follows when the grace is over).
  if (!job.cancel_requested) COLO_RETURN_IF_ERROR(AskToStop(who, job, &Job::cancel_requested, ""));
  return std::string("cancelling");
}

Status JobController::AskToStop(const Identity& who, Job& job, bool Job::*asked,
                                std::string_view then) {
  const std::string_view what = asked == &Job::cancel_requested ? "cancel" : "requeue";
  // Stored first: if colod stops now, the restart still knows what was asked for.
  Job updated = job;
  updated.*asked = true;
  const JobEvent event = Event(
      job.id(), std::string(what),
      fmt::format("asked by {}: SIGTERM to every process of attempt {}; SIGKILL in {:.0f} s{}",
                  who.user, job.current() ? job.current()->number : 0,
                  ToSeconds(options_.cancel_grace), then));
  if (Status s = store_.Update(updated, {event}); !s.ok())
    return Unavailable(fmt::format("the {} could not be stored, so the job was not touched: {}",
                                   what, s.message()));
  Log(event);
  job.*asked = true;
  RunnerFor(job).Signal(job, SIGTERM);
  running_[job.id()].kill_at = clock_.Now() + options_.cancel_grace;
  return Status::Ok();
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
    scheduler_.Drop(id);  // it no longer waits for GPUs
    it->second = std::move(ended[k]);
    ForgetIfDone(id);
  }
  return results;
}

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
  if (action != api::JobAction::kCancel) {
    for (JobId id : ids) results.push_back(Control(who, action, id, whole_array));
    return results;
  }
  // The waiting jobs named are cancelled together, in one write (as an array's are): a thousand
  // ids cost one transaction, not a thousand. Running jobs, and arrays named by their id, each
  // as Control cancels them.
  results.assign(ids.size(), std::string());
  std::vector<size_t> waiting;
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto it = live_.find(ids[i]);
    const bool names_array =
        whole_array && it != live_.end() && it->second.array && it->second.array->job == ids[i];
    if (it != live_.end() && it->second.live() && it->second.state != JobState::kRunning &&
        !names_array) {
      waiting.push_back(i);
    } else {
      results[i] = Control(who, action, ids[i], whole_array);
    }
  }
  std::vector<JobId> waiting_ids;
  for (size_t i : waiting) waiting_ids.push_back(ids[i]);
  std::vector<Result<std::string>> cancelled = CancelWaiting(who, waiting_ids);
  for (size_t k = 0; k < waiting.size(); ++k) results[waiting[k]] = std::move(cancelled[k]);
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
      scheduler_.Drop(id);  // it waits outside the scheduler's queues until released
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
    if (job.cancel_requested)
      return FailedPrecondition(fmt::format("job {} is being cancelled", id));
    if (!job.requeue_requested)
      COLO_RETURN_IF_ERROR(AskToStop(who, job, &Job::requeue_requested, "; then it waits again"));
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

}  // namespace colo

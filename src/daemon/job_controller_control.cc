// JobController: what an owner or root may do to a job besides cancelling it, with Slurm's verbs
// (scontrol hold, release, requeue): who may, what is stored first, and what the scheduler and
// Admission hear of it. The rest of the controller is in job_controller.cc.
#include <fmt/format.h>
#include <signal.h>

#include "daemon/job_controller.h"

namespace colo {

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

}  // namespace colo

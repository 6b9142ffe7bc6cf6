// JobController after a restart: every live job stored is taken back, a running attempt through
// its runner (re-adopted, read how it ended, or started again only when it certainly never
// started) and the scheduler (Adopt), a waiting one queued again where it was.
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>

#include "daemon/job_controller.h"

namespace colo {

Status JobController::Recover() {
  auto loaded = store_.LoadLive();
  if (!loaded.ok()) return loaded.status();
  for (const QuarantinedJob& q : loaded->quarantined) {
    const JobEvent e = Event(q.id, "quarantined",
                             "its stored record cannot be read and was set aside: " + q.reason);
    Log(e);
    if (Status stored = store_.AddEvents({e}); !stored.ok()) {
      counters_.store_failures++;
      Log(Event(q.id, "store-error", "the quarantine could not be recorded: " + stored.message()));
    }
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
  // Preemptions under way when colod stopped, once every job they make room for is back.
  for (auto& [id, job] : live_) {
    if (job.preemption && job.state == JobState::kRunning && running_.count(id))
      ResumePreemption(job);
  }
  return Status::Ok();
}

void JobController::ResumePreemption(Job& job) {
  const PreemptionNotice& notice = *job.preemption;
  // Never more than the notice the server now allows (the wall clock set back, a notice stored
  // under a longer max_notice).
  const Duration left =
      std::clamp(std::chrono::duration_cast<Duration>(notice.kill_at - clock_.WallNow()),
                 Duration::zero(), scheduler_.config().fairness.max_notice);
  const TimePoint kill_at = clock_.Now() + left;
  if (!scheduler_.ResumePreemption(job.id(), notice.for_job, kill_at).ok()) return;
  Running& running = running_[job.id()];
  if (!running.kill_at || kill_at < *running.kill_at) running.kill_at = kill_at;
  if (job.cancel_requested || job.requeue_requested || job.timed_out) return;
  // colod may have stopped between storing the preemption and signalling: the signal is sent
  // again while its notice lasts (a job may get it twice), so that it saves its checkpoint.
  if (left > Duration::zero()) RunnerFor(job).Signal(job, SignalOf(job).number);
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
  // A Slurm run holds the GPUs Slurm booked for it (not stored by index: the indices are this
  // start's): the scheduler never chooses it to make room, as before the restart.
  if (job.external) job.spec.booked_gpus = gpus;
  const int ooms = OutOfMemoryAttempts(job);
  if (static_cast<int>(gpus.size()) != job.spec.gpus ||
      !scheduler_
           .Adopt(Planned(job), gpus, attempt.mode, attempt.thread_percent, attempt.number,
                  MonotonicOf(clock_, attempt.started), ooms)
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
  // The limit counts from the attempt's start, not from colod's. A --signal whose time passed
  // while colod was down comes now (a job may get it twice).
  if (!job.timed_out) SetTimeLimit(job, running_[id], MonotonicOf(clock_, attempt.started));
  if (events.empty())
    events.push_back(Event(id, "adopted",
                           fmt::format("attempt {} ({}) taken back after a restart", attempt.number,
                                       runner.Describe(job, attempt))));
  Persist(job, std::move(events));
}

}  // namespace colo

// The scheduler's wake-ups: when it must look again with no event (a launch grace ending, a
// reservation settling, a utilization window that may let a held head in), and whether such a
// look can decide anything the last pass did not. Part of Scheduler (scheduler.h).
#include <algorithm>

#include "core/scheduler.h"

namespace colo {

std::optional<TimePoint> Scheduler::NextWakeup() const {
  if (!changed_ && (!wake_at_ || clock_.Now() < *wake_at_)) return wake_at_;
  return ComputeNextWakeup();
}

std::optional<TimePoint> Scheduler::ComputeNextWakeup() const {
  // No job waits (the held head may have been cancelled since the pass): nothing to look for.
  if (!AnyWaiting()) return std::nullopt;
  const TimePoint now = clock_.Now();
  std::optional<TimePoint> next = NextWakeupBesidesWindows(now);
  // A sliding utilization window changes the gate's answer only gradually: look again each sample
  // interval until it settles, as the daemon's own sampling would.
  if (head_blocked_by_utilization_ || booked_blocked_by_utilization_) {
    if (const auto look = NextWindowLook(now); look && (!next || *look < *next)) next = look;
  }
  return next;
}

std::optional<TimePoint> Scheduler::NextWakeupBesidesWindows(TimePoint now) const {
  if (!AnyWaiting()) return std::nullopt;
  std::optional<TimePoint> next;
  auto consider = [&](TimePoint t) {
    if (t > now && (!next || t < *next)) next = t;
  };
  // The head may have waited long enough for a preemption.
  if (config_.fairness.preempt) {
    if (const auto head = jobs_.find(head_);
        head != jobs_.end() && head->second.state == JobState::kQueued)
      consider(head->second.waiting_since + config_.fairness.preempt_after);
  }
  // A booked job held by utilization starts once its bounded delay is over.
  if (booked_blocked_by_utilization_) {
    for (JobId id : booked_) consider(jobs_.at(id).submitted + config_.booked_busy_wait);
  }
  const bool grace_from_process = policy_.grace_from_process();
  for (const GpuRecord& g : gpus_) {
    if (g.last_placement) consider(*g.last_placement + config_.launch_grace);
    for (const JobRecord* job_record : g.jobs) {
      const JobRecord& job = *job_record;
      if (grace_from_process) {
        for (const auto& seen : job.process_seen)
          consider(seen ? *seen + config_.launch_grace : job.started + config_.process_wait);
      }
      if (job.attempt_peak > Bytes(0)) {
        consider(job.last_growth + config_.steady_after);
        consider(job.started + config_.settle_timeout);
      }
    }
  }
  return next;
}

std::optional<TimePoint> Scheduler::NextWindowLook(TimePoint after) const {
  // Windows that can only rise (the GPU just got busier) cannot let a waiting job in without a
  // new event: no need to look.
  std::optional<TimePoint> look;
  for (const GpuRecord& g : gpus_) {
    const TimePoint settled = g.smact.SettledAt();
    if (settled <= after ||
        (g.smact.CannotFall(after) && g.smocc.CannotFall(after) && g.drama.CannotFall(after)))
      continue;
    const TimePoint at = std::min(settled, after + config_.sample_interval);
    if (!look || at < *look) look = at;
  }
  return look;
}

bool Scheduler::DecidesAsTheLastPass(TimePoint now) {
  if (!held_) {
    // What the last pass left (nothing changed since): the GPUs the utilization gate held, and
    // the next wake-up of another kind.
    held_ = HeldGpus{};
    // Under fair share the queue's order moves with time alone, and so do a backfill's
    // reservation and the jobs that end before it, and a preemption's due time: every look
    // decides afresh.
    held_->applies = (head_blocked_by_utilization_ || booked_blocked_by_utilization_) &&
                     config_.fairness.order == QueueOrder::kFifo && !config_.fairness.preempt &&
                     !config_.backfill;
    if (held_->applies) {
      held_->until = NextWakeupBesidesWindows(last_pass_);
      for (size_t i = 0; i < gpus_.size(); ++i) {
        // The gate reads a GPU's windows and whether it is idle, nothing else of its view
        // (HeldByUtilization): the rest of it is not made, and an idle GPU is never held.
        GpuView v;
        v.index = static_cast<GpuIndex>(i);
        v.job_count = static_cast<int>(gpus_[i].jobs.size());
        if (v.idle()) continue;
        SummarizeWindows(static_cast<GpuIndex>(i), last_pass_, reads_, v);
        if (!policy_.HeldByUtilization(v)) continue;
        GpuView low = v, high = v;
        BoundWindows(static_cast<GpuIndex>(i), low, high);
        if (!policy_.HeldByUtilization(low)) held_->gpus.push_back(std::move(v));
      }
    }
  }
  // Only a look the windows called for (a wake-up of another kind is a pass: a grace ended, a
  // reservation settled), and only while they let in no GPU the gate held: every other gate
  // reads no clock, and a GPU the gate did not hold gave no job a place.
  if (!held_->applies || (held_->until && now >= *held_->until)) return false;
  for (GpuView& v : held_->gpus) {
    SummarizeWindows(v.index, now, reads_, v);
    if (!policy_.HeldByUtilization(v)) return false;
  }
  return true;
}

}  // namespace colo

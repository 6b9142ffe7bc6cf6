// The scheduler's preemption: which running jobs make room for the waiting head of a user under
// their fair share, and the notices under way (kept apart from the placement pass, which it asks
// for a view of the GPUs and leaves unchanged). The rest of the scheduler is in scheduler.cc.
#include <fmt/format.h>

#include <algorithm>

#include "common/check.h"
#include "core/scheduler.h"

namespace colo {

std::vector<Preemption> Scheduler::Preempt() {
  if (!config_.fairness.preempt || !preempt_due_) return {};
  preempt_due_ = false;
  auto found = jobs_.find(head_);
  if (found == jobs_.end() || found->second.state != JobState::kQueued) return {};
  JobRecord& head = found->second;
  // Jobs already being stopped for it: it waits for them.
  std::erase_if(head.preempting, [&](JobId id) {
    const JobRecord* victim = job(id);
    return !victim || victim->state != JobState::kRunning || !victim->preempt_deadline;
  });
  if (!head.preempting.empty()) return {};
  const TimePoint now = clock_.Now();
  const Duration waited = now - head.waiting_since;
  if (waited < config_.fairness.preempt_after) return {};
  // Most passes end here, before every user's standings are built: passes run at every event in
  // the simulator, and the head's owner is often over their share too.
  if (!AnyPreemptibleFor(head)) return {};
  const UserStanding owner = StandingOf(head.spec.owner);
  if (!owner.under_share()) return {};
  const std::map<std::string, UserStanding> standings = Standings();
  // Who may be stopped: preemptible jobs of users over their share, most over it first, then the
  // most recently started (the least work to take up again).
  struct Candidate {
    double over;
    const JobRecord* job;
  };
  std::vector<Candidate> candidates;
  for (size_t g = 0; g < gpus_.size(); ++g) {
    for (const JobRecord* running : gpus_[g].jobs) {
      if (running->gpus.front() != static_cast<GpuIndex>(g) || !MayPreemptFor(*running, head))
        continue;
      const auto theirs = standings.find(running->spec.owner);
      if (theirs == standings.end() || theirs->second.share_fraction <= 0 ||
          theirs->second.usage_fraction <= theirs->second.share_fraction)
        continue;
      candidates.push_back(
          {theirs->second.usage_fraction / theirs->second.share_fraction, running});
    }
  }
  if (candidates.empty()) return {};
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.over != b.over) return a.over > b.over;
    if (a.job->started != b.job->started) return a.job->started > b.job->started;
    return a.job->spec.id > b.job->spec.id;
  });
  // The fewest of them whose leaving lets the head in: taken in that order until it fits, then
  // those it fits without given back (the last taken first). One view follows: a victim taken
  // releases its GPUs in it, one given back restores them.
  const ClusterView view = View();
  ClusterView later = view;
  std::set<const JobRecord*> leaving;
  auto take = [&](const JobRecord* victim) {
    leaving.insert(victim);
    Release(later, leaving, victim->gpus);
  };
  auto give_back = [&](const JobRecord* victim) {
    leaving.erase(victim);
    for (GpuIndex g : victim->gpus) {
      later.gpus[static_cast<size_t>(g)] = view.gpus[static_cast<size_t>(g)];
      // Another victim there still leaves it.
      for (const JobRecord* other : leaving) {
        if (std::find(other->gpus.begin(), other->gpus.end(), g) == other->gpus.end()) continue;
        Release(later, leaving, {g});
        break;
      }
    }
  };
  const PlacementRequest request = MakeRequest(head);
  auto fits = [&] { return std::holds_alternative<Placed>(policy_.Place(later, request)); };
  std::vector<const JobRecord*> victims;
  bool room = false;
  for (const Candidate& c : candidates) {
    victims.push_back(c.job);
    take(c.job);
    if ((room = fits())) break;
  }
  if (!room) return {};
  for (size_t i = victims.size(); i-- > 1;) {
    const JobRecord* spared = victims[i - 1];
    give_back(spared);
    if (fits())
      victims.erase(victims.begin() + static_cast<std::ptrdiff_t>(i - 1));
    else
      take(spared);
  }
  const auto notice_of = [&](const JobRecord& victim) {
    return std::min(victim.spec.preempt_notice, config_.fairness.max_notice);
  };
  // Preemption gains nothing where the room comes as soon without it.
  Duration notice{0};
  for (const JobRecord* v : victims) notice = std::max(notice, notice_of(*v));
  if (head.reservation && head.reservation->at && *head.reservation->at <= now + notice) return {};
  std::vector<Preemption> out;
  for (const JobRecord* v : victims) {
    JobRecord& victim = Get(v->spec.id);
    const UserStanding& theirs = standings.at(victim.spec.owner);
    victim.preempt_deadline = now + notice_of(victim);
    victim.preempted_for = head.spec.id;
    head.preempting.push_back(victim.spec.id);
    out.push_back(Preemption{
        victim.spec.id, head.spec.id, notice_of(victim),
        fmt::format("for job {} of {}, who has had {} of this server against a {} share and has "
                    "waited {}; {} has had {} against {}",
                    head.spec.id, head.spec.owner, Percent(owner.usage_fraction),
                    Percent(owner.share_fraction), FormatDuration(waited), victim.spec.owner,
                    Percent(theirs.usage_fraction), Percent(theirs.share_fraction))});
  }
  changed_ = true;
  return out;
}

bool Scheduler::MayPreemptFor(const JobRecord& running, const JobRecord& head) const {
  if (running.preempt_deadline || running.spec.owner == head.spec.owner) return false;
  // A run whose GPUs an outside scheduler (Slurm) booked is that scheduler's to preempt.
  if (!running.spec.booked_gpus.empty()) return false;
  return running.spec.requeue || config_.fairness.preemptible == Preemptible::kAll;
}

bool Scheduler::AnyPreemptibleFor(const JobRecord& head) const {
  for (const GpuRecord& g : gpus_) {
    for (const JobRecord* running : g.jobs) {
      if (MayPreemptFor(*running, head)) return true;
    }
  }
  return false;
}

void Scheduler::AbortPreemption(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  JobRecord& victim = it->second;
  if (auto head = jobs_.find(victim.preempted_for); head != jobs_.end())
    std::erase(head->second.preempting, id);
  victim.preempt_deadline.reset();
  victim.preempted_for = 0;
  changed_ = true;
}

Status Scheduler::ResumePreemption(JobId id, JobId for_job, TimePoint deadline) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound(fmt::format("no job {}", id));
  if (it->second.state != JobState::kRunning)
    return FailedPrecondition(fmt::format("job {} is not running", id));
  it->second.preempt_deadline = deadline;
  it->second.preempted_for = for_job;
  if (auto head = jobs_.find(for_job); head != jobs_.end()) {
    std::vector<JobId>& preempting = head->second.preempting;
    if (std::find(preempting.begin(), preempting.end(), id) == preempting.end())
      preempting.push_back(id);
  }
  changed_ = true;
  return Status::Ok();
}

}  // namespace colo

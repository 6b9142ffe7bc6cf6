// The waiting head's reservation under backfill: when it is expected to start and on which GPUs,
// from the known ends of the running jobs. Part of Scheduler (scheduler.h); the pass and its
// backfill, which start later jobs that leave the reservation be, are in scheduler.cc.
#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "core/scheduler.h"

namespace colo {

std::optional<TimePoint> Scheduler::ExpectedEnd(const JobRecord& job) const {
  if (job.preempt_deadline) return job.preempt_deadline;
  const TimePoint now = clock_.Now();
  // A time limit stops it: one past its limit is being stopped and may end at any moment.
  if (job.spec.time_limit > Duration::zero())
    return std::max(job.started + job.spec.time_limit, now);
  if (job.spec.expected_run <= Duration::zero()) return std::nullopt;
  if (job.started + job.spec.expected_run > now) return job.started + job.spec.expected_run;
  // It has outlived what its model's runs took. Run times are heavy-tailed: the longer a job has
  // run, the longer it is likely to go on, so it is expected to run as long again as it has
  // (at least kMinRemaining more), not to end at once.
  return now + std::max(now - job.started, kMinRemaining);
}

bool Scheduler::EndsBy(const JobRecord& job, TimePoint at) const {
  const Duration run =
      job.spec.time_limit > Duration::zero() ? job.spec.time_limit : job.spec.expected_run;
  return run > Duration::zero() && clock_.Now() + run <= at;
}

void Scheduler::Release(ClusterView& view, const std::set<const JobRecord*>& leaving,
                        const std::vector<GpuIndex>& gpus) const {
  for (GpuIndex g : gpus) {
    GpuView& v = view.gpus[static_cast<size_t>(g)];
    MakeView(g, view.now, v, &leaving);
    v.placed_recently = v.process_grace = false;
  }
}

HeadReservation Scheduler::Reserve(const JobRecord& head, const ClusterView& view) {
  HeadReservation r;
  const TimePoint now = clock_.Now();
  const PlacementRequest request = MakeRequest(head);
  // The running jobs whose ends are known, soonest first (each once, however many GPUs it has).
  std::vector<std::pair<TimePoint, const JobRecord*>> ends;
  for (size_t g = 0; g < gpus_.size(); ++g) {
    for (const JobRecord* job : gpus_[g].jobs) {
      if (job->gpus.front() != static_cast<GpuIndex>(g)) continue;
      if (const auto end = ExpectedEnd(*job)) ends.emplace_back(*end, job);
    }
  }
  if (!ends.empty()) {
    std::sort(ends.begin(), ends.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second->spec.id < b.second->spec.id;
    });
    // The server as it will be when those jobs have ended, one end after another, until the head
    // fits: launch graces will be over by then, and the windows of the GPUs they leave unknown.
    // The pass left the windows of a GPU in its grace unread (the grace decided it): with the
    // grace over, the policy reads them, and an unread window would pass for an idle GPU.
    for (const GpuView& g : view.gpus) {
      if (g.placed_recently || g.process_grace) Summarized(view, g);
    }
    ClusterView later = view;
    Duration grace{0};
    for (GpuView& g : later.gpus) {
      grace = std::max({grace, g.grace_left, g.process_grace_left});
      g.placed_recently = g.process_grace = false;
    }
    const PlacementDecision after_grace = policy_.Place(later, request);
    if (const auto* placed = std::get_if<Placed>(&after_grace)) {
      r.at = now + grace;  // only a launch grace holds it
      r.gpus = placed->gpus;
      return r;
    }
    std::set<const JobRecord*> leaving;
    for (size_t i = 0; i < ends.size(); ++i) {
      leaving.insert(ends[i].second);
      r.waits_for.push_back(ends[i].second->spec.id);
      Release(later, leaving, ends[i].second->gpus);
      if (i + 1 < ends.size() && ends[i + 1].first == ends[i].first) continue;
      const PlacementDecision decision = policy_.Place(later, request);
      if (const auto* placed = std::get_if<Placed>(&decision)) {
        r.at = ends[i].first;
        r.gpus = placed->gpus;
        return r;
      }
    }
    r.waits_for.clear();
  }
  // No end that makes room is known: the GPUs it would most likely get first, those with the most
  // memory free for placement.
  std::vector<GpuIndex> order(view.gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<GpuIndex>(i);
  std::stable_sort(order.begin(), order.end(), [&](GpuIndex a, GpuIndex b) {
    return view.gpus[a].free_for_placement > view.gpus[b].free_for_placement;
  });
  for (int i = 0; i < head.spec.gpus && i < static_cast<int>(order.size()); ++i)
    r.gpus.push_back(order[i]);
  return r;
}

}  // namespace colo

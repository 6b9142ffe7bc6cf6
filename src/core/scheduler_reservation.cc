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
    const WindowSummary smact = v.smact, smocc = v.smocc, drama = v.drama;
    MakeView(g, view.now, v, &leaving);
    v.placed_recently = v.process_grace = false;
    // A GPU left idle is not judged by its windows. One whose other jobs stay is taken to be as
    // busy as its windows show, the leaving jobs' share included: what the others alone will
    // show is not known, and reading the windows empty would count on a GPU still in use.
    if (!v.idle()) {
      v.smact = smact;
      v.smocc = smocc;
      v.drama = drama;
    }
  }
}

std::vector<GpuIndex> Scheduler::LikeliestGpus(const ClusterView& view, int count) const {
  // The usable GPUs by server, the most memory free for placement first in each; then the server
  // whose count-th such GPU has the most (the first server on a tie).
  std::vector<GpuIndex> usable;
  for (const GpuView& g : view.gpus) {
    if (g.healthy) usable.push_back(g.index);
  }
  std::stable_sort(usable.begin(), usable.end(), [&](GpuIndex a, GpuIndex b) {
    const GpuView& x = view.gpus[static_cast<size_t>(a)];
    const GpuView& y = view.gpus[static_cast<size_t>(b)];
    if (x.node != y.node) return x.node < y.node;
    return x.free_for_placement > y.free_for_placement;
  });
  std::vector<GpuIndex> best;
  std::optional<Bytes> best_least;
  for (size_t first = 0; first < usable.size();) {
    size_t end = first;
    const int node = view.gpus[static_cast<size_t>(usable[first])].node;
    while (end < usable.size() && view.gpus[static_cast<size_t>(usable[end])].node == node) ++end;
    if (static_cast<int>(end - first) >= count) {
      const auto last = first + static_cast<size_t>(count);
      const Bytes least = view.gpus[static_cast<size_t>(usable[last - 1])].free_for_placement;
      if (!best_least || least > *best_least) {
        best_least = least;
        best.assign(usable.begin() + static_cast<std::ptrdiff_t>(first),
                    usable.begin() + static_cast<std::ptrdiff_t>(last));
      }
    }
    first = end;
  }
  return best;
}

HeadReservation Scheduler::Reserve(const JobRecord& head, const ClusterView& view) {
  HeadReservation r;
  const TimePoint now = clock_.Now();
  const PlacementRequest request = MakeRequest(head);
  // The server once the launch graces are over, then as it will be when the running jobs whose
  // ends are known have ended, one end after another, until the head fits: a GPU left idle by
  // them free of its windows, and one whose other jobs stay as busy as its windows show
  // (Release). The pass leaves the windows of a GPU unread where the head's decision did not
  // need them (one in its grace, say): they are read now for every GPU that runs jobs, as an
  // unread window would pass for an idle GPU.
  // A GPU in its grace is taken to be as busy after it as its windows show now. They show the
  // jobs that ran there before the one that started the grace, whose load is not known yet; a
  // job that left it just before still shows for up to a window's length. A reservation set too
  // late never delays the head (it is tried first at every pass); one set too early on a GPU
  // that will not take it leaves the GPUs it will get to later jobs.
  for (const GpuView& g : view.gpus) {
    if (!g.idle()) Summarized(view, g);
  }
  ClusterView later = view;
  for (GpuView& g : later.gpus) g.placed_recently = g.process_grace = false;
  // Each server's count of the GPUs that may take the head (PlacementPolicy::MayTake), kept as
  // GPUs are released: most views along the way leave too few on every server, and the policy
  // is asked only about the others.
  std::vector<int> may_take;  // by server
  for (const GpuView& g : later.gpus)
    may_take.resize(std::max(may_take.size(), static_cast<size_t>(g.node) + 1));
  const auto count = [&](GpuIndex g, int sign) {
    const GpuView& v = later.gpus[static_cast<size_t>(g)];
    if (policy_.MayTake(v, request)) may_take[static_cast<size_t>(v.node)] += sign;
  };
  const auto may_fit = [&] {
    return std::any_of(may_take.begin(), may_take.end(), [&](int n) { return n >= request.gpus; });
  };
  for (const GpuView& g : later.gpus) count(g.index, 1);
  if (may_fit()) {
    const PlacementDecision after_grace = policy_.Place(later, request);
    if (const auto* placed = std::get_if<Placed>(&after_grace)) {
      // Only a launch grace holds it: until the longest left on its GPUs.
      Duration grace{0};
      for (GpuIndex g : placed->gpus)
        grace = std::max(grace, policy_.GraceLeft(view.gpus[static_cast<size_t>(g)], request));
      r.at = now + grace;
      r.gpus = placed->gpus;
      return r;
    }
  }
  // The running jobs whose ends are known, soonest first (each once, however many GPUs it has).
  std::vector<std::pair<TimePoint, const JobRecord*>> ends;
  for (size_t g = 0; g < gpus_.size(); ++g) {
    for (const JobRecord* job : gpus_[g].jobs) {
      if (job->gpus.front() != static_cast<GpuIndex>(g)) continue;
      if (const auto end = ExpectedEnd(*job)) ends.emplace_back(*end, job);
    }
  }
  std::sort(ends.begin(), ends.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second->spec.id < b.second->spec.id;
  });
  std::set<const JobRecord*> leaving;
  for (size_t i = 0; i < ends.size(); ++i) {
    const std::vector<GpuIndex>& gpus = ends[i].second->gpus;
    leaving.insert(ends[i].second);
    r.waits_for.push_back(ends[i].second->spec.id);
    for (GpuIndex g : gpus) count(g, -1);
    Release(later, leaving, gpus);
    for (GpuIndex g : gpus) count(g, 1);
    if (i + 1 < ends.size() && ends[i + 1].first == ends[i].first) continue;
    if (!may_fit()) continue;
    const PlacementDecision decision = policy_.Place(later, request);
    if (const auto* placed = std::get_if<Placed>(&decision)) {
      r.at = ends[i].first;
      r.gpus = placed->gpus;
      return r;
    }
  }
  r.waits_for.clear();
  // No end that makes room is known: the GPUs it would most likely get first.
  r.gpus = LikeliestGpus(view, head.spec.gpus);
  return r;
}

}  // namespace colo

// The scheduler's views of its GPUs: what each GPU offers a placement now (its jobs' reservations,
// its graces), the pass's view kept per GPU and made again only where an event touched it, and
// the windows' summaries taken only where a decision reads them. Part of Scheduler (scheduler.h);
// the pass that reads these views is in scheduler.cc.
#include <algorithm>
#include <set>

#include "core/scheduler.h"

namespace colo {

void Scheduler::MakeView(GpuIndex index, TimePoint now, GpuView& v,
                         const std::set<const JobRecord*>* leaving, TimePoint* until) const {
  const GpuRecord& g = gpus_[index];
  v = GpuView{};
  v.index = index;
  v.node = g.info.node;
  v.capacity = g.info.capacity;
  v.healthy = g.healthy;
  v.mig_instance = g.info.mig_instance;
  v.job_count = static_cast<int>(g.jobs.size());
  v.mode = g.info.default_mode;
  Bytes reserved, observed, left_use;
  for (const JobRecord* record : g.jobs) {
    if (leaving && leaving->count(record)) {
      // Gone: neither its count, its reservation nor what it uses now (and its windows' summaries
      // are left empty: what they will show once it has gone is not known).
      --v.job_count;
      for (size_t i = 0; i < record->gpus.size(); ++i) {
        if (record->gpus[i] == index) left_use += record->current_use[i];
      }
      continue;
    }
    const JobRecord& job = *record;
    reserved += Reservation(job, now);
    if (until) {
      // Its reservation settles when it has been quiet long enough, or has run long enough.
      for (const TimePoint t :
           {job.last_growth + config_.steady_after, job.started + config_.settle_timeout})
        if (t > now) *until = std::min(*until, t);
    }
    for (size_t i = 0; i < job.gpus.size(); ++i) {
      if (job.gpus[i] != index) continue;
      observed += job.current_use[i];
      const TimePoint grace_end = job.process_seen[i] ? *job.process_seen[i] + config_.launch_grace
                                                      : job.started + config_.process_wait;
      if (grace_end > now) {
        v.process_grace = true;
        v.process_grace_left = std::max(v.process_grace_left, grace_end - now);
      }
    }
    v.mode = job.mode;
    if (job.mode == SharingMode::kExclusive) v.holds_exclusive = true;
    if (job.mode == SharingMode::kMps) v.mps_owner = job.spec.owner;
  }
  const Bytes unmanaged = std::max(Bytes(0), g.used - left_use - observed);
  v.free_for_placement = g.info.capacity - reserved - unmanaged;
  if (g.last_placement && now - *g.last_placement < config_.launch_grace) {
    v.placed_recently = true;
    v.grace_left = *g.last_placement + config_.launch_grace - now;
  }
  if (until && (v.placed_recently || v.process_grace)) *until = now;  // the grace left shrinks
}

void Scheduler::RefreshPassView() {
  ClusterView& view = pass_view_;
  const TimePoint now = clock_.Now();
  const bool same_instant = view.now == now;
  view.now = now;
  view.last_placed = last_placed_;
  view.gpus.resize(gpus_.size());
  kept_.resize(gpus_.size());
  summarized_.resize(gpus_.size(), 0);
  for (size_t i = 0; i < gpus_.size(); ++i) {
    KeptView& kept = kept_[i];
    GpuView& v = view.gpus[i];
    if (kept.current && (now == kept.made_at || (now > kept.made_at && now < kept.until))) {
      // The windows' summaries taken (SummarizeWhereNeeded) hold for their instant, and later
      // where the windows say so: no sample came since, which would have made the view again.
      if (summarized_[i] && !same_instant && !SummariesHold(static_cast<GpuIndex>(i))) {
        v.smact = v.smocc = v.drama = WindowSummary{};
        summarized_[i] = 0;
      }
      continue;
    }
    summarized_[i] = 0;
    kept.until = TimePoint::max();
    MakeView(static_cast<GpuIndex>(i), now, v, nullptr, &kept.until);
    kept.made_at = now;
    kept.current = true;
  }
}

bool Scheduler::SummariesHold(GpuIndex index) const {
  const GpuRecord& g = gpus_[static_cast<size_t>(index)];
  const TimePoint taken = kept_[static_cast<size_t>(index)].summarized_at;
  return g.smact.SummaryHoldsAfter(taken, reads_.smact) &&
         g.smocc.SummaryHoldsAfter(taken, reads_.smocc) &&
         g.drama.SummaryHoldsAfter(taken, reads_.drama);
}

ClusterView Scheduler::View() const {
  return View(reads_);
}

ClusterView Scheduler::View(const WindowReads& reads) const {
  ClusterView view;
  FillView(view, reads);
  return view;
}

void Scheduler::FillView(ClusterView& view, const WindowReads& reads) const {
  view.now = clock_.Now();
  view.last_placed = last_placed_;
  view.gpus.resize(gpus_.size());
  for (size_t i = 0; i < gpus_.size(); ++i) {
    MakeView(static_cast<GpuIndex>(i), view.now, view.gpus[i]);
    SummarizeWindows(static_cast<GpuIndex>(i), view.now, reads, view.gpus[i]);
  }
}

const ClusterView& Scheduler::PassView(const PlacementRequest& request) {
  PassView();
  SummarizeWhereNeeded(request);
  return pass_view_;
}

const ClusterView& Scheduler::PassView() {
  RefreshPassView();
  placements_at_view_ = placements_;
  return pass_view_;
}

void Scheduler::SummarizeWindows(GpuIndex index, TimePoint now, const WindowReads& reads,
                                 GpuView& v) const {
  const GpuRecord& g = gpus_[index];
  v.smact = g.smact.Summarize(now, reads.smact);
  v.smocc = g.smocc.Summarize(now, reads.smocc);
  v.drama = g.drama.Summarize(now, reads.drama);
}

void Scheduler::BoundWindows(GpuIndex index, GpuView& low, GpuView& high) const {
  const GpuRecord& g = gpus_[index];
  g.smact.Bounds(low.smact, high.smact);
  g.smocc.Bounds(low.smocc, high.smocc);
  g.drama.Bounds(low.drama, high.drama);
}

void Scheduler::SummarizeWhereNeeded(const PlacementRequest& request) {
  for (size_t i = 0; i < pass_view_.gpus.size(); ++i) {
    if (!summarized_[i] && policy_.NeedsWindows(pass_view_.gpus[i], request)) TakeSummaries(i);
  }
}

const GpuView& Scheduler::Summarized(const ClusterView& view, const GpuView& gpu) {
  if (&view != &pass_view_) return gpu;
  const auto i = static_cast<size_t>(gpu.index);
  if (!summarized_[i]) TakeSummaries(i);
  return pass_view_.gpus[i];
}

void Scheduler::TakeSummaries(size_t g) {
  SummarizeWindows(static_cast<GpuIndex>(g), pass_view_.now, reads_, pass_view_.gpus[g]);
  summarized_[g] = 1;
  kept_[g].summarized_at = pass_view_.now;
}

}  // namespace colo

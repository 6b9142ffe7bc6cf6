#include "policies/gated_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace colo {

int ThreadPercentFor(double expected_smact) {
  if (expected_smact < 0) return 100;
  const int pct = static_cast<int>(std::ceil(expected_smact * 200.0 / 10.0 - 1e-9)) * 10;
  return std::clamp(pct, 20, 100);
}

WindowReads GatedPolicy::window_reads() const {
  WindowReads reads{SummaryDepth::kLast, SummaryDepth::kLast, SummaryDepth::kLast};
  if (GatesUtilization() || OrdersByUtilization()) reads.smact = DepthFor(gates_.stat);
  if (GatesUtilization() && gates_.compound)
    reads.smocc = reads.drama = DepthFor(UtilizationStat::kRisk);
  return reads;
}

bool GatedPolicy::NeedsWindows(const GpuView& gpu, const PlacementRequest& request) const {
  // The utilization gate reads a busy GPU that passed every other gate; a chooser ordering by
  // utilization reads every GPU that passes them all. Those that fail the gates most GPUs fail
  // (memory, then the launch grace) are ruled out here; the rest are summarized whether or not a
  // rarer gate would stop them, which is cheaper than checking every gate twice.
  if (!OrdersByUtilization() && !(GatesUtilization() && !gpu.idle())) return false;
  if (gates_.memory && !CheckMemory(gpu, request, gates_).fits()) return false;
  return gpu.idle() || !LaunchGraceHolds(gpu, request, gates_);
}

// Inline: every decision compares GPUs with it, and in a library built position-independent a
// function not declared inline may be replaced at load time, so the compiler does not inline it.
inline bool GatedPolicy::Before(const GpuView& a, const GpuView& b, const ClusterView& view) const {
  switch (chooser_) {
    case Chooser::kFirstFit:
      break;
    case Chooser::kBestFit:
      if (a.free_for_placement != b.free_for_placement)
        return a.free_for_placement < b.free_for_placement;
      break;
    case Chooser::kWorstFit:
      if (a.free_for_placement != b.free_for_placement)
        return a.free_for_placement > b.free_for_placement;
      break;
    case Chooser::kLeastUtilized: {
      const double ua = a.idle() ? 0.0 : UtilizationOf(view.Summarized(a), gates_.stat);
      const double ub = b.idle() ? 0.0 : UtilizationOf(view.Summarized(b), gates_.stat);
      if (ua != ub) return ua < ub;
      if (a.free_for_placement != b.free_for_placement)
        return a.free_for_placement > b.free_for_placement;
      break;
    }
    case Chooser::kRoundRobin: {
      const int n = static_cast<int>(view.gpus.size());
      const int da = ((a.index - view.last_placed - 1) % n + n) % n;
      const int db = ((b.index - view.last_placed - 1) % n + n) % n;
      return da < db;
    }
    case Chooser::kConsolidate: {
      if (a.idle() != b.idle()) return !a.idle();
      const double ua = UtilizationOf(view.Summarized(a), gates_.stat);
      const double ub = UtilizationOf(view.Summarized(b), gates_.stat);
      if (ua != ub) return ua > ub;
      if (a.free_for_placement != b.free_for_placement)
        return a.free_for_placement < b.free_for_placement;
      break;
    }
  }
  return a.index < b.index;
}

PlacementDecision GatedPolicy::Place(const ClusterView& view,
                                     const PlacementRequest& request) const {
  return Decide(view, request, /*verdicts=*/true);
}

PlacementDecision GatedPolicy::PlaceUnexplained(const ClusterView& view,
                                                const PlacementRequest& request) const {
  return Decide(view, request, /*verdicts=*/false);
}

PlacementDecision GatedPolicy::Decide(const ClusterView& view, const PlacementRequest& request,
                                      bool verdicts) const {
  if (request.gpus < 1) return Infeasible{"a job needs at least one GPU"};
  // Nodes are small dense integers; per-node counts live in flat vectors (this runs every pass).
  // A job of one GPU fits any node, and is placed without them unless exclusive-first.
  int nodes = 0;
  // Scratch buffers reused across calls: a policy decides at every pass.
  thread_local std::vector<int> gpus_per_node;
  if (request.gpus > 1 || gates_.exclusive_first || view.gpus.empty()) {
    for (const GpuView& g : view.gpus) nodes = std::max(nodes, g.node + 1);
    gpus_per_node.assign(static_cast<size_t>(nodes), 0);
    for (const GpuView& g : view.gpus) gpus_per_node[static_cast<size_t>(g.node)]++;
    if (std::none_of(gpus_per_node.begin(), gpus_per_node.end(),
                     [&](int n) { return n >= request.gpus; })) {
      return Infeasible{
          fmt::format("needs {} GPUs on one server; no server has that many", request.gpus)};
    }
  }

  // The verdicts go into a Wait only when the job waits: most decisions place it.
  thread_local std::vector<GateVerdict> blocked;
  blocked.clear();
  thread_local std::vector<const GpuView*> passing;
  passing.clear();
  thread_local std::vector<int> passing_per_node;
  passing_per_node.assign(static_cast<size_t>(nodes), 0);
  const auto before = [&](const GpuView* a, const GpuView* b) { return Before(*a, *b, view); };
  auto placed_on = [&](std::vector<GpuIndex> gpus) -> PlacementDecision {
    Placed placed;
    placed.gpus = std::move(gpus);
    placed.mode = ModeFor(view.gpus[placed.gpus.front()], request, gates_);
    // The user's thread share stands; otherwise one that fits the job's SM activity.
    placed.thread_percent = placed.mode != SharingMode::kMps ? 100
                            : request.threads > 0            ? request.threads
                                                  : ThreadPercentFor(request.expected_smact);
    return placed;
  };
  if (request.gpus == 1 && !gates_.exclusive_first) {
    // The first passing GPU in the chooser's order. Once one passes, a GPU after it in that order
    // cannot be chosen: its gates are not evaluated (a job that waits has every GPU's verdict),
    // unless the order reads the windows, which costs more than the gates most GPUs fail.
    const bool cheap_order = !OrdersByUtilization();
    const GpuView* first = nullptr;
    for (const GpuView& g : view.gpus) {
      if (cheap_order && first && !before(&g, first)) continue;
      const GateVerdict verdict = EvaluateGates(view, g, request, gates_);
      if (verdict.gate != Gate::kPass) {
        if (verdicts) blocked.push_back(verdict);
      } else if (!first || cheap_order || before(&g, first)) {  // (cheap: asked above)
        first = &g;
      }
    }
    if (first) return placed_on({first->index});
  } else {
    // Without verdicts: per server, its GPUs not yet failed, and the servers that may still have
    // enough passing.
    thread_local std::vector<int> not_failed;
    int open_nodes = 0;
    if (!verdicts) {
      not_failed.assign(gpus_per_node.begin(), gpus_per_node.end());
      open_nodes = static_cast<int>(std::count_if(gpus_per_node.begin(), gpus_per_node.end(),
                                                  [&](int n) { return n >= request.gpus; }));
    }
    for (const GpuView& g : view.gpus) {
      const GateVerdict verdict = EvaluateGates(view, g, request, gates_);
      if (verdict.gate == Gate::kPass) {
        passing.push_back(&g);
        ++passing_per_node[static_cast<size_t>(g.node)];
      } else if (verdicts) {
        blocked.push_back(verdict);
      } else if (--not_failed[static_cast<size_t>(g.node)] == request.gpus - 1 &&
                 --open_nodes == 0) {
        return Wait{};  // no server can have enough passing GPUs: the rest need not be asked
      }
    }
    // Only a server with enough passing GPUs can take the job; where none has, it waits, and the
    // passing GPUs' order is not needed.
    if (std::any_of(passing_per_node.begin(), passing_per_node.end(),
                    [&](int n) { return n >= request.gpus; })) {
      // Before() breaks every tie by index: the chooser's order is total, so the plain sort is
      // deterministic (and allocates nothing).
      std::sort(passing.begin(), passing.end(), before);
      // Take the first server to collect enough passing GPUs in chooser order; with
      // exclusive-first, idle GPUs are tried alone before any sharing.
      auto pick = [&](bool idle_only) -> std::vector<GpuIndex> {
        const auto counts = [&](const GpuView* g) { return !idle_only || g->idle(); };
        thread_local std::vector<int> collected;
        collected.assign(static_cast<size_t>(nodes), 0);
        for (const GpuView* g : passing) {
          if (!counts(g) || ++collected[static_cast<size_t>(g->node)] < request.gpus) continue;
          // This server's GPUs counted so far: the first of them in chooser order.
          std::vector<GpuIndex> chosen;
          chosen.reserve(static_cast<size_t>(request.gpus));
          for (const GpuView* on : passing) {
            if (on->node == g->node && counts(on)) chosen.push_back(on->index);
            if (on == g) break;
          }
          return chosen;
        }
        return {};
      };
      std::vector<GpuIndex> chosen;
      if (gates_.exclusive_first) chosen = pick(true);
      if (chosen.empty()) chosen = pick(false);
      if (!chosen.empty()) return placed_on(std::move(chosen));
    }
  }
  if (!verdicts) return Wait{};
  Wait wait;
  wait.per_gpu.reserve(blocked.size() + passing.size());
  wait.per_gpu.assign(blocked.begin(), blocked.end());
  // Passing GPUs exist but are spread over servers: say so per GPU.
  for (const GpuView* g : passing) {
    wait.per_gpu.push_back(GateVerdict{
        g->index, Gate::kNode, static_cast<double>(passing_per_node[static_cast<size_t>(g->node)]),
        static_cast<double>(request.gpus)});
  }
  std::sort(wait.per_gpu.begin(), wait.per_gpu.end(),
            [](const GateVerdict& a, const GateVerdict& b) { return a.gpu < b.gpu; });
  wait.gpus_considered = static_cast<int>(view.gpus.size());
  return wait;
}

}  // namespace colo

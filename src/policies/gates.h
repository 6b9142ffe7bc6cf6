// The shared gates every placement policy composes: each says whether one GPU may take a job now,
// and if not, which rule stopped it (that is what `colo explain` prints).
#pragma once

#include "core/placement.h"

namespace colo {

// Which window statistic of SMACT the utilization gate compares with its threshold.
enum class UtilizationStat { kLast, kMean, kRisk };

struct GateConfig {
  // Memory: need + margin <= free for placement. With an unknown need this demands `margin` free.
  bool memory = true;
  Bytes memory_margin = GiB(2);
  // Held back from every GPU's free memory before the gate compares (CARMA: the last free sample
  // minus 512 MiB).
  Bytes free_reserve{0};
  // Utilization: SMACT <= threshold (window statistic), or CARMA's compound rule.
  bool utilization = true;
  double smact_max = 0.80;
  UtilizationStat stat = UtilizationStat::kRisk;
  bool compound =
      false;  // exclude if smact >= smact_max and (smocc >= smocc_max or drama >= drama_max)
  double smocc_max = 0.45;
  double drama_max = 0.40;
  // The windows' median and p95 (in the risk blend): CARMA reads them as pandas does.
  QuantileMethod quantiles = QuantileMethod::kNearestRank;
  // Launch grace: a GPU that got a job moments ago takes no other until the grace period ends.
  bool launch_grace = true;
  // ... counted from when the job's process first appears on the GPU (CARMA), not from placement:
  // a framework that takes a minute to import allocates nothing before, and the grace is for
  // seeing its memory.
  bool grace_from_process = false;
  // Under MPS one user's jobs at a time per GPU (MPS serves one user per GPU).
  bool same_user_mps = true;
  // Every job needs an idle GPU (the conventional baseline).
  bool idle_only = false;
  // CARMA's exclusive-first: use idle GPUs alone while there are enough of them.
  bool exclusive_first = false;
  bool operator==(const GateConfig&) const = default;
};

// The memory gate's two sides: the GPU's memory free for placement less what the policy holds
// back, and the job's need with the margin.
struct MemoryCheck {
  Bytes free;
  Bytes required;
  bool fits() const { return free >= required; }
};
inline MemoryCheck CheckMemory(const GpuView& gpu, const PlacementRequest& request,
                               const GateConfig& config) {
  return {gpu.free_for_placement - config.free_reserve, request.memory_need + config.memory_margin};
}

// The mode a job would run in on this GPU.
SharingMode ModeFor(const GpuView& gpu, const PlacementRequest& request, const GateConfig& config);

// Checks one GPU against every gate, in order; returns the first that fails, or kPass.
GateVerdict EvaluateGates(const GpuView& gpu, const PlacementRequest& request,
                          const GateConfig& config);
// The same for `gpu`, one of `view`'s GPUs, whose windows' summaries are read from the view
// (ClusterView::Summarized), and only where the utilization gate is reached.
GateVerdict EvaluateGates(const ClusterView& view, const GpuView& gpu,
                          const PlacementRequest& request, const GateConfig& config);

// The utilization gate's rule on the window summaries in `gpu` (for a busy GPU that passed every
// other gate): true when they keep it out.
bool UtilizationExcludes(const GpuView& gpu, const GateConfig& config);

// Whether the launch grace holds the GPU now, and for how long at most.
bool InLaunchGrace(const GpuView& gpu, const GateConfig& config);
Duration LaunchGraceLeft(const GpuView& gpu, const GateConfig& config);
// Whether the launch-grace gate holds this request off this busy GPU: never a booked job's.
bool LaunchGraceHolds(const GpuView& gpu, const PlacementRequest& request,
                      const GateConfig& config);

// The SMACT figure the utilization gate and the utilization-ordering choosers use.
double UtilizationOf(const GpuView& gpu, UtilizationStat stat);
// How much of a window summary that figure needs.
SummaryDepth DepthFor(UtilizationStat stat);

}  // namespace colo

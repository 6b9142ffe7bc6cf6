#include "policies/gates.h"

namespace colo {

double UtilizationOf(const GpuView& gpu, UtilizationStat stat) {
  if (gpu.smact.empty) return 0.0;
  switch (stat) {
    case UtilizationStat::kLast:
      return gpu.smact.last;
    case UtilizationStat::kMean:
      return gpu.smact.mean;
    case UtilizationStat::kRisk:
      return gpu.smact.Risk();
  }
  return gpu.smact.Risk();
}

namespace {

// Whether a job in `mode` may join the jobs on a busy GPU: the same mode, and under MPS the same
// user (MPS serves one user per GPU).
bool Joins(const GpuView& gpu, SharingMode mode, const PlacementRequest& request,
           const GateConfig& config) {
  if (gpu.mode != mode) return false;
  return !(config.same_user_mps && mode == SharingMode::kMps && !gpu.mps_owner.empty() &&
           gpu.mps_owner != request.owner);
}

}  // namespace

SummaryDepth DepthFor(UtilizationStat stat) {
  switch (stat) {
    case UtilizationStat::kLast:
      return SummaryDepth::kLast;
    case UtilizationStat::kMean:
      return SummaryDepth::kMean;
    case UtilizationStat::kRisk:
      return SummaryDepth::kAll;
  }
  return SummaryDepth::kAll;
}

SharingMode ModeFor(const GpuView& gpu, const PlacementRequest& request, const GateConfig& config) {
  if (config.idle_only || request.sharing == SharingPreference::kExclusive || gpu.mig_instance) {
    return SharingMode::kExclusive;
  }
  SharingMode mode = gpu.mode == SharingMode::kExclusive ? SharingMode::kMps : gpu.mode;
  if (request.sharing == SharingPreference::kPlain) mode = SharingMode::kPlain;
  if (request.sharing == SharingPreference::kMps) mode = SharingMode::kMps;
  // A booked job shares the GPU it was given: plainly where it cannot join as it asked.
  if (request.booked && !gpu.idle() && !Joins(gpu, mode, request, config))
    return SharingMode::kPlain;
  return mode;
}

bool InLaunchGrace(const GpuView& gpu, const GateConfig& config) {
  return config.grace_from_process ? gpu.process_grace : gpu.placed_recently;
}

bool LaunchGraceHolds(const GpuView& gpu, const PlacementRequest& request,
                      const GateConfig& config) {
  return config.launch_grace && !request.booked && InLaunchGrace(gpu, config);
}

Duration LaunchGraceLeft(const GpuView& gpu, const GateConfig& config) {
  return config.grace_from_process ? gpu.process_grace_left : gpu.grace_left;
}

namespace {

// Every gate before the utilization gate, the last and the only one that reads the windows.
GateVerdict EvaluateGatesBeforeUtilization(const GpuView& gpu, const PlacementRequest& request,
                                           const GateConfig& config) {
  GateVerdict v;
  v.gpu = gpu.index;
  auto fail = [&](Gate gate, double value, double limit) {
    v.gate = gate;
    v.value = value;
    v.limit = limit;
    return v;
  };
  if (!gpu.healthy) return fail(Gate::kUnhealthy, 0, 0);
  if (gpu.mig_instance && !gpu.idle()) return fail(Gate::kMigBusy, gpu.job_count, 0);
  if (gpu.holds_exclusive) return fail(Gate::kExclusiveHeld, gpu.job_count, 0);
  const SharingMode mode = ModeFor(gpu, request, config);
  const bool needs_idle =
      config.idle_only || request.require_idle || mode == SharingMode::kExclusive;
  if (needs_idle && !gpu.idle()) return fail(Gate::kNotIdle, gpu.job_count, 0);
  if (!gpu.idle()) {
    if (gpu.mode != mode && !request.booked) return fail(Gate::kModeMismatch, 0, 0);
    if (config.same_user_mps && mode == SharingMode::kMps && !gpu.mps_owner.empty() &&
        gpu.mps_owner != request.owner) {
      return fail(Gate::kOtherUser, 0, 0);
    }
    if (LaunchGraceHolds(gpu, request, config)) {
      const double left = ToSeconds(LaunchGraceLeft(gpu, config));
      return fail(Gate::kLaunchGrace, left, left);
    }
  }
  if (config.memory) {
    const MemoryCheck memory = CheckMemory(gpu, request, config);
    if (!memory.fits()) {
      return fail(Gate::kMemory, static_cast<double>(memory.free.count()),
                  static_cast<double>(memory.required.count()));
    }
  }
  return v;
}

// The utilization gate, the last, for a GPU that passed every other: `summarized` is the GPU with
// its windows' summaries.
GateVerdict CheckUtilization(GateVerdict v, const GpuView& summarized, const GateConfig& config) {
  if (UtilizationExcludes(summarized, config)) {
    v.gate = Gate::kUtilization;
    v.value = UtilizationOf(summarized, config.stat);
    v.limit = config.smact_max;
  }
  return v;
}

bool ReachesUtilization(const GateVerdict& v, const GpuView& gpu, const PlacementRequest& request,
                        const GateConfig& config) {
  return v.gate == Gate::kPass && config.utilization && !gpu.idle() && !request.skip_utilization;
}

}  // namespace

GateVerdict EvaluateGates(const GpuView& gpu, const PlacementRequest& request,
                          const GateConfig& config) {
  const GateVerdict v = EvaluateGatesBeforeUtilization(gpu, request, config);
  return ReachesUtilization(v, gpu, request, config) ? CheckUtilization(v, gpu, config) : v;
}

GateVerdict EvaluateGates(const ClusterView& view, const GpuView& gpu,
                          const PlacementRequest& request, const GateConfig& config) {
  const GateVerdict v = EvaluateGatesBeforeUtilization(gpu, request, config);
  return ReachesUtilization(v, gpu, request, config)
             ? CheckUtilization(v, view.Summarized(gpu), config)
             : v;
}

bool UtilizationExcludes(const GpuView& gpu, const GateConfig& config) {
  const double smact = UtilizationOf(gpu, config.stat);
  if (!config.compound) return smact > config.smact_max;
  const double smocc = gpu.smocc.empty ? 0.0 : gpu.smocc.Risk();
  const double drama = gpu.drama.empty ? 0.0 : gpu.drama.Risk();
  return smact >= config.smact_max && (smocc >= config.smocc_max || drama >= config.drama_max);
}

}  // namespace colo

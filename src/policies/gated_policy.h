// A placement policy built the way all of colo's are: the shared gates filter the GPUs, then a
// chooser orders the survivors. Multi-GPU jobs take the best-ordered GPUs of one server, all or
// none.
#pragma once

#include <string>

#include "core/placement.h"
#include "policies/gates.h"

namespace colo {

enum class Chooser {
  kFirstFit,       // lowest index
  kBestFit,        // least memory left after placement (pack)
  kWorstFit,       // most available memory (MAGM)
  kLeastUtilized,  // lowest SMACT (LUG)
  kRoundRobin,     // the next GPU after the previous placement
  kConsolidate,    // busiest GPUs first, idle ones last (MUG): keeps idle GPUs idle
};

// MPS active-thread percentage for a job: twice its expected solo SMACT, rounded up to a multiple
// of 10, within [20, 100]; 100 when unknown. Measured on H100: a light job capped at 50% threads
// lost 1%.
int ThreadPercentFor(double expected_smact);

class GatedPolicy final : public PlacementPolicy {
 public:
  GatedPolicy(std::string name, Chooser chooser, GateConfig gates)
      : name_(std::move(name)), chooser_(chooser), gates_(gates) {}

  std::string_view name() const override { return name_; }
  PlacementDecision Place(const ClusterView& view, const PlacementRequest& request) const override;
  PlacementDecision PlaceUnexplained(const ClusterView& view,
                                     const PlacementRequest& request) const override;
  QuantileMethod window_quantiles() const override { return gates_.quantiles; }
  WindowReads window_reads() const override;
  bool NeedsWindows(const GpuView& gpu, const PlacementRequest& request) const override;
  bool HeldByUtilization(const GpuView& gpu) const override {
    return GatesUtilization() && !gpu.idle() && UtilizationExcludes(gpu, gates_);
  }
  bool grace_from_process() const override {
    return gates_.launch_grace && gates_.grace_from_process;
  }
  Duration GraceLeft(const GpuView& gpu, const PlacementRequest& request) const override {
    // As the gate holds it: only a GPU that runs jobs.
    return !gpu.idle() && LaunchGraceHolds(gpu, request, gates_) ? LaunchGraceLeft(gpu, gates_)
                                                                 : Duration{0};
  }
  // Exactly: whether it passes every gate (EvaluateGates).
  bool MayTake(const GpuView& gpu, const PlacementRequest& request) const override {
    return EvaluateGates(gpu, request, gates_).gate == Gate::kPass;
  }
  const GateConfig& gates() const { return gates_; }
  Chooser chooser() const { return chooser_; }

 private:
  // Place, or with `verdicts` false PlaceUnexplained: a refusal then gathers no GPU's verdict, and
  // a multi-GPU request stops at the first GPU after which no server can have enough passing.
  PlacementDecision Decide(const ClusterView& view, const PlacementRequest& request,
                           bool verdicts) const;
  // True if GPU a should be preferred over GPU b.
  // Inline, defined in gated_policy.cc, the one file that calls it (every decision, many times).
  inline bool Before(const GpuView& a, const GpuView& b, const ClusterView& view) const;
  bool OrdersByUtilization() const {
    return chooser_ == Chooser::kLeastUtilized || chooser_ == Chooser::kConsolidate;
  }
  // The utilization gate looks at GPUs that run jobs, which an idle-only policy never takes.
  bool GatesUtilization() const { return gates_.utilization && !gates_.idle_only; }

  std::string name_;
  Chooser chooser_;
  GateConfig gates_;
};

}  // namespace colo

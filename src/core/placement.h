// The contract between the scheduler and placement policies. A policy reads a ClusterView snapshot
// and a PlacementRequest and returns a decision; it never mutates state. The scheduler does the
// bookkeeping.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/model.h"
#include "core/window_stats.h"

namespace colo {

// What a policy sees of one GPU.
struct GpuView {
  GpuIndex index = 0;
  int node = 0;
  Bytes capacity;
  // capacity - sum of reservations - memory used by processes colo does not manage.
  Bytes free_for_placement;
  int job_count = 0;
  bool healthy = true;
  bool mig_instance = false;
  bool holds_exclusive = false;  // runs a job that asked for the GPU alone
  std::string_view mps_owner;    // owner of the jobs sharing it under MPS; empty when none
  SharingMode mode = SharingMode::kMps;
  WindowSummary smact, smocc, drama;
  bool placed_recently = false;  // got a job within the launch grace period
  Duration grace_left{0};
  // The grace counted from when each job's process first appeared on this GPU (CARMA's rule): a
  // job placed here whose process has not appeared yet, or appeared within the grace period.
  bool process_grace = false;
  Duration process_grace_left{0};  // until the last of them ends (an upper bound while one waits)

  bool idle() const { return job_count == 0; }
};

struct ClusterView;

// Takes a GPU's windows' summaries into a view as a policy reads them: the scheduler's pass view
// summarizes only the GPUs a decision reaches (most fail a cheaper gate first, and a chooser stops
// at the first GPU in its order that passes).
class WindowSource {
 public:
  virtual ~WindowSource() = default;
  // `gpu`, one of `view`'s GPUs, with its windows' summaries as of the view's instant.
  virtual const GpuView& Summarized(const ClusterView& view, const GpuView& gpu) = 0;
};

struct ClusterView {
  TimePoint now;
  std::vector<GpuView> gpus;  // ordered by index
  GpuIndex last_placed = -1;  // for round robin: the GPU that got the previous placement
  // Where set, a GPU's windows' summaries are taken only once asked for (Summarized); where
  // null, each GPU's view holds them.
  WindowSource* windows = nullptr;

  // `gpu`, one of `gpus`, with its windows' summaries: what a policy reads them from.
  const GpuView& Summarized(const GpuView& gpu) const {
    return windows ? windows->Summarized(*this, gpu) : gpu;
  }
};

struct PlacementRequest {
  JobId job = 0;
  std::string_view owner;
  int gpus = 1;
  MemoryNeed memory;  // per GPU
  Bytes memory_need;  // what the job must reserve per GPU (need incl. uncertainty); 0 if unknown
  SharingPreference sharing = SharingPreference::kAny;
  bool require_idle = false;  // recovery after OOM in the thesis mode, or the last adaptive retry
  double expected_smact = -1;
  int threads = 0;  // the MPS thread percentage the user asked for; 0: the policy's
  // Its GPUs were chosen, and their memory booked, by an outside scheduler (Slurm): the view holds
  // only them. The launch grace does not hold it (the booking, not a look at the GPU's memory,
  // keeps a GPU from being over-committed), and on a GPU whose jobs share it in a way it cannot
  // join (another user's MPS) it shares plainly.
  bool booked = false;
  // The utilization gate does not hold it: a booked job that has waited its bounded delay.
  bool skip_utilization = false;
};

// What a policy is asked for a job of `spec` that plans with `need`.
PlacementRequest RequestFor(const JobSpec& spec, const MemoryNeed& need, bool require_idle = false);

// The gates a GPU can fail, in the order they are checked.
enum class Gate {
  kPass,
  kUnhealthy,
  kMigBusy,        // a MIG instance takes one job at a time
  kExclusiveHeld,  // runs a job that asked for the GPU alone
  kNotIdle,        // this job (or policy) needs an idle GPU
  kModeMismatch,   // the GPU's sharing mode cannot serve the job's preference
  kOtherUser,      // MPS serves one user per GPU at a time
  kLaunchGrace,
  kMemory,
  kUtilization,
  kNode,       // not enough passing GPUs on this GPU's server for a multi-GPU job
  kEarmarked,  // kept for the head of the queue while backfilling
};
std::string_view ToString(Gate g);

struct GateVerdict {
  GpuIndex gpu = 0;
  Gate gate = Gate::kPass;
  double value = 0;  // what was measured (bytes free, SMACT, seconds of grace left)
  double limit = 0;  // what was required
  std::string Describe() const;
};

struct Placed {
  std::vector<GpuIndex> gpus;
  SharingMode mode = SharingMode::kMps;
  int thread_percent = 100;  // MPS active-thread percentage
};
struct Wait {
  std::vector<GateVerdict> per_gpu;  // the GPUs that stopped the job, by index
  int gpus_considered = 0;
  // "3 of 4 GPUs blocked, mostly by memory". Built on demand: a waiting head is re-evaluated at
  // every pass and its reason is rarely read.
  std::string Reason() const;
};
struct Infeasible {
  std::string reason;
};
using PlacementDecision = std::variant<Placed, Wait, Infeasible>;

// The window statistics a policy reads of each GPU signal: the scheduler computes no more.
struct WindowReads {
  SummaryDepth smact = SummaryDepth::kAll;
  SummaryDepth smocc = SummaryDepth::kAll;
  SummaryDepth drama = SummaryDepth::kAll;
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view name() const = 0;
  // A request it does not place on a view it places no more with more GPUs or more memory asked
  // and all else alike: a caller choosing among servers need not ask again on that view.
  // A GPU's window summaries are read through view.Summarized(gpu).
  virtual PlacementDecision Place(const ClusterView& view,
                                  const PlacementRequest& request) const = 0;
  // Place's decision, but a refusal may come back unexplained (an empty Wait): for a caller that
  // only starts the job or passes on (the simulator's cluster trying its servers), which reads no
  // GPU's verdict. A policy may then stop looking at GPUs once the request cannot fit.
  virtual PlacementDecision PlaceUnexplained(const ClusterView& view,
                                             const PlacementRequest& request) const {
    return Place(view, request);
  }
  // How the GPUs' utilization windows this policy reads compute their median and p95.
  virtual QuantileMethod window_quantiles() const { return QuantileMethod::kNearestRank; }
  // Which of the windows' statistics Place() reads (every one, unless the policy says less).
  virtual WindowReads window_reads() const { return {}; }
  // Whether Place() may read this GPU's window statistics for this request. A GPU it would rule
  // out before looking at them (or never look at) needs no summary: a view summarized before the
  // policy is asked (the scheduler's own pass) leaves those out, as most GPUs fail a cheaper gate
  // first.
  virtual bool NeedsWindows(const GpuView& /*gpu*/, const PlacementRequest& /*request*/) const {
    return true;
  }
  // Whether the utilization gate keeps every job off this GPU on the window summaries in `gpu`
  // (false for a policy without that gate, or for a GPU it does not read: an idle one). It reads
  // nothing else of the view but its job count: a scheduler whose head that gate holds looks again
  // when time alone turns this, and asks on views that hold only those.
  virtual bool HeldByUtilization(const GpuView& /*gpu*/) const { return false; }
  // Whether its launch grace counts from the job's first process on the GPU (GpuView's
  // process_grace) rather than from the placement.
  virtual bool grace_from_process() const { return false; }
  // How much longer its launch grace keeps `request` off `gpu`: zero where it does not (no grace,
  // an idle GPU, a booked job).
  virtual Duration GraceLeft(const GpuView& /*gpu*/, const PlacementRequest& /*request*/) const {
    return Duration{0};
  }
  // Whether `gpu`, with its windows' summaries, may take `request`: false only where Place would
  // refuse this GPU whatever the rest of the view holds; true where the policy cannot say (the
  // default). Place takes a job's GPUs on one server, so it does not place on a view where no
  // server has request.gpus GPUs that may take the job: a caller asking about many views in turn
  // (a waiting head's reservation, as the running jobs end one by one) skips those.
  virtual bool MayTake(const GpuView& /*gpu*/, const PlacementRequest& /*request*/) const {
    return true;
  }
};

}  // namespace colo

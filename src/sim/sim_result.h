// What a simulated run came to, read from the engine's state once nothing more can happen: each
// job's outcome, the run's metrics (waits, completion times and their percentiles, each user's
// slowdown, energy, SM activity and memory) and its timeline. The engine (simulator.cc) drives the
// run; this reads it once at the end.
#pragma once

#include <cstdint>

#include "sim/cluster_queue.h"
#include "sim/engine_state.h"
#include "sim/simulator.h"

namespace colo::sim {

// What the engine counted as it ran, beside its state.
struct RunCounts {
  int oom_crashes = 0;
  int preemptions = 0;
  double lost_gpu_seconds = 0;
  int64_t events = 0;
};

// Each job as its server's scheduler left it (or as the engine kept it once it ended there for
// good; one still in the cluster queue never placed), and every GPU's energy, SM activity and
// memory brought up to the last job's end. `cluster`: the cluster queue, if the run had one.
SimResult ResultOf(EngineState& state, const ClusterQueue* cluster, const RunCounts& counts,
                   Timeline timeline);

}  // namespace colo::sim

// What a simulated run came to, read from the engine's state once nothing more can happen: each
// job's outcome, the run's metrics (waits, completion times and their percentiles, each user's
// slowdown, energy, SM activity and memory) and its timeline. The engine (simulator.cc) drives the
// run; this reads it once at the end.
#pragma once

#include <cstdint>
#include <string>

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

// A job's result, written as it ends for good so that its state can go: what its server's
// scheduler said of it (`end`, and why it ended), with its attempts on servers it was taken back
// from.
JobResult EndedResult(const SimJob& job, const Ended& end, std::string reason);
// That of a job no server could ever run (why: SimJob::reason).
JobResult RejectedResult(const SimJob& job);

// The results written as jobs ended (EngineState::results), those of the jobs the run left
// waiting or running as their server's scheduler left them (or still in the cluster queue, never
// placed), the metrics, and every GPU's energy, SM activity and memory brought up to the last
// job's end. `cluster`: the cluster queue, if the run had one.
SimResult ResultOf(EngineState& state, const ClusterQueue* cluster, const RunCounts& counts,
                   Timeline timeline);

}  // namespace colo::sim

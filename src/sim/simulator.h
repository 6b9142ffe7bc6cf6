// The trace-driven simulator: the scheduler core and policies of the daemon, unchanged, driven by a
// discrete-event loop over simulated GPUs (interference, OOM and energy models).
#pragma once

#include <string>
#include <vector>

#include "core/scheduler.h"
#include "policies/gates.h"
#include "policies/registry.h"
#include "sim/interference.h"
#include "sim/trace.h"
#include "sim/workloads.h"

namespace colo {

// One configuration to simulate: a policy spec (policies/registry.h), read as colod reads it,
// with what the simulator does where the spec says nothing.
struct RunSpec {
  std::string label;
  PolicySpec policy;
  std::string estimator = "oracle";
  SharingMode sharing = SharingMode::kMps;
  RecoveryMode recovery = RecoveryMode::kAdaptive;
  // As colod does: when a job's run ends, the queued jobs of the same model on its server plan
  // with what its runs measured (core/run_learning.h), instead of their submitted estimate.
  bool learn = false;
};
// `defaults`: the estimator, sharing, recovery and learning where the spec names none, and the
// gates (defaults.policy.gates) its policy starts from.
Result<RunSpec> ParseRunSpec(const std::string& text, const RunSpec& defaults);

// est=rad:oracle|rad:horus|rad:faketensor|rad:gpumemnet: the task-file line (of a carma: trace)
// CARMA's oracle and estimator policies read; nullopt for any other estimator.
std::optional<std::optional<Bytes> TaskFileMemory::*> TaskFileLine(std::string_view estimator);

// How jobs reach servers.
enum class ClusterMode {
  // One cluster-wide queue in arrival order, as slurmctld keeps: a job goes to a server only when
  // that server's scheduler can start it now (which one of those: NodeChoice). The oldest waiting
  // job reserves the most free server and queues there; later jobs may start on any other
  // (backfill). At most `queue_depth` waiting jobs are looked at per scheduling round.
  kQueue,
  // The same queue in strict order (Slurm's sched/builtin): nothing starts while the oldest waits.
  kFifo,
  // The former rule: each job is sent on arrival to the server with the least outstanding GPU
  // demand and waits in that server's queue, never moving.
  kPerServer,
};
Result<ClusterMode> ParseClusterMode(std::string_view text);
std::string_view ToString(ClusterMode mode);

// Which of the servers that can start a job the cluster queue sends it to.
enum class NodeChoice {
  // The most free planned memory (idle GPUs for exclusive, free shards for shards), as a
  // consumable gpumem resource with least-loaded node selection would choose.
  kMostFree,
  // The least free that can start it: Slurm's native best fit, which packs jobs and keeps
  // servers whole for larger jobs.
  kBestFit,
};
Result<NodeChoice> ParseNodeChoice(std::string_view text);

struct SimOptions {
  ServerProfile server;
  int servers = 1;
  ClusterMode cluster = ClusterMode::kQueue;
  NodeChoice node_choice = NodeChoice::kMostFree;
  // Waiting jobs looked at per scheduling round of the cluster queue (Slurm's default_queue_depth);
  // 0: all of them.
  int queue_depth = 100;
  // For tests: after every instant, probe every waiting job the rule covers against every server
  // and count the jobs left waiting that a server could start (Metrics::dispatch_violations); with
  // the utilization gate on, only once that has lasted a sample interval (the window slides
  // continuously and is looked at again each interval, as colod samples). Also checks that the
  // cluster's accounting of free memory agrees with the servers' schedulers.
  bool check_dispatch = false;
  SchedulerConfig scheduler;
  // What backfill's reservations count on for a job: false, how long its model's earlier runs on
  // its server took (what colod learns); true, its solo run time, as if it gave that as --time.
  bool exact_run_times = false;
  InterferenceModel interference;
  PowerModel power;
  uint64_t seed = 1;
  // Memory a job holds before it reaches its peak: the CUDA context and framework start-up.
  Bytes startup_memory = MiB(500);
  bool record_timeline = true;
};

struct JobResult {
  int64_t id = 0;
  Interned name;  // the trace's
  int server = 0;
  JobState state = JobState::kQueued;
  double submit_s = 0, start_s = -1, end_s = -1;
  int attempts = 0;
  int ooms = 0;
  std::string reason;
};

struct Metrics {
  std::string label;
  std::string estimator;  // the memory estimator the run planned with
  int jobs = 0, succeeded = 0, failed = 0, rejected = 0;
  double total_time_s = 0;  // first submission to last completion
  double wait_avg_s = 0, wait_p50_s = 0, wait_p95_s = 0;
  double exec_avg_s = 0, exec_p50_s = 0, exec_p95_s = 0;
  double jct_avg_s = 0, jct_p50_s = 0, jct_p95_s = 0;
  double wait_p99_s = 0, jct_p99_s = 0;
  int oom_crashes = 0;
  // Jobs put back into the cluster queue after an out-of-memory crash (the shards baseline).
  int requeues = 0;
  // Running jobs stopped for a user under their share (--preempt-after).
  int preemptions = 0;
  double lost_gpu_hours = 0;
  double energy_mj = 0;
  double mean_smact = 0;          // over all GPUs and the trace's duration
  double mean_memory_frac = 0;    // used / capacity, likewise
  std::vector<double> gpu_smact;  // per GPU
  std::vector<double> gpu_memory_gib;
  // Fairness among the trace's users: a job's slowdown is its completion time over its solo run
  // time; each user's mean slowdown, Jain's index of them (1: every user alike) and the worst.
  int users = 0;
  double mean_slowdown = 0;
  double jain_slowdown = 1;
  double worst_user_slowdown = 0;
  std::string worst_user;
  int64_t events = 0;
  int64_t passes = 0;
  int64_t rounds = 0;  // scheduling rounds of the cluster queue
  // With SimOptions::check_dispatch: (job, server) pairs probed, and those where the server could
  // have started a job that was left waiting.
  int64_t dispatch_checks = 0;
  int64_t dispatch_violations = 0;
};

// What the HTML report draws. Filled only with SimOptions::record_timeline.
struct Timeline {
  struct Segment {
    int gpu;
    int64_t job;
    std::string name;
    double start_s, end_s;
    std::string outcome;  // "done", "oom", "cancelled", "failed"
  };
  // A value the GPU did not report is NaN (a real run's; the simulator knows every value).
  struct Point {
    double t_s;
    double memory_gib;
    double smact;
    double watts;
  };
  struct QueuePoint {
    double t_s;
    double queued, running;  // jobs
  };
  std::vector<Segment> segments;
  std::vector<std::vector<Point>> series;  // per GPU, at each change
  // Jobs waiting and running; empty: the report counts from the jobs' submit and start times.
  std::vector<QueuePoint> queue;
  double capacity_gib = 0;
  double max_watts = 0;  // the top of the power axis: the GPU's TDP or highest reading
};

struct SimResult {
  Metrics metrics;
  std::vector<JobResult> jobs;
  Timeline timeline;
};

Result<SimResult> Simulate(const Trace& trace, const RunSpec& spec, const SimOptions& options);

}  // namespace colo

// What the simulator's engine (simulator.cc) and its cluster queue (cluster_queue.h) both read and
// change: the trace's jobs as they run, the simulated GPUs, and the servers, each with the
// scheduler its colod would run. The engine owns it and drives time; the cluster queue decides
// which server a waiting job goes to. Internal to the simulator.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/check.h"
#include "common/clock.h"
#include "common/ring.h"
#include "core/run_learning.h"
#include "core/scheduler.h"
#include "policies/gates.h"
#include "sim/shard_policy.h"
#include "sim/simulator.h"

namespace colo::sim {

// What the cluster layer knows of the policy each server runs, to rule servers out cheaply before
// asking the policy itself.
struct ClusterRule {
  const GateConfig* gates = nullptr;    // a gated policy's gates
  const ShardPolicy* shards = nullptr;  // the shards baseline
};

// What its server's scheduler said of a job once it ended there (for good, or as the run ended):
// what its result is written from. The scheduler then forgets the job, and the engine drops its
// state.
struct Ended {
  TimePoint first_started, finished;
  JobState state = JobState::kQueued;
  int attempts = 0, ooms = 0;
  bool ever_started = false;
};

inline Ended EndedOf(const JobRecord& record) {
  return Ended{.first_started = record.first_started,
               .finished = record.finished,
               .state = record.state,
               .attempts = record.attempts,
               .ooms = record.oom_count,
               .ever_started = record.ever_started};
}

// A job as submitted to the cluster queue: its spec, and what a server's policy is asked for it
// before any server's lessons (its owner a view of the spec's: the two never move apart).
struct Submission {
  JobSpec spec;
  PlacementRequest request;
};

// The engine's state of a job from its arrival until its result is written (JobTable).
struct SimJob {
  // Fields are grouped so that small ones share words.
  const TraceJob* trace = nullptr;
  // SignatureOf(*trace), kept once in EngineState::signatures (a trace has few models
  // per user: a pointer costs a job 8 bytes where its own copy cost 32 and often a heap block).
  const ModelSignature* signature = nullptr;
  int server = -1;
  SharingMode mode = SharingMode::kMps;
  int thread_percent = 100;
  bool running = false;
  bool resumes = false;   // it waits after a preemption, to take up its checkpoint
  bool starting = false;  // in its start-up: on the CPU, no SM activity, not slowed
  // Its scheduler was told its memory on every GPU (and that its process is there) since the
  // memory last changed: telling it again would change nothing.
  bool reported = false;
  uint64_t attempt = 0;
  uint64_t version = 0;   // bumps invalidate scheduled completions
  std::vector<int> gpus;  // global GPU numbers
  // Solo seconds of work left; while it waits after a preemption (`resumes`), the work left at
  // the checkpoint it saved, which its next attempt takes up.
  double remaining_s = 0;
  double rate = 1;  // solo seconds done per second
  TimePoint progress_at;
  TimePoint started;
  Bytes memory;
  std::string reason;  // why it was rejected
  // The cluster queue.
  // As submitted: kept while the job may still be sent to a server (a requeued one goes again).
  // In the job's state, not a heap block of its own: only jobs that arrived have a state.
  std::optional<Submission> submitted;
  int rank = 0;                // arrival order: its place in the cluster queue
  bool queued = false;         // waiting in the cluster queue
  bool rejected = false;       // it can never be placed (why: `reason`)
  int64_t checked_round = -2;  // the last round it was looked at in; -2: not since it was queued
  // Attempts and out-of-memory crashes on servers it was taken back from (requeued).
  int prior_attempts = 0, prior_ooms = 0;
  double first_start_s = -1;
  Bytes planned;  // the reservation its current attempt was placed with (per GPU)

  // Its place in the trace (its id less one).
  int index() const { return static_cast<int>(trace->id - 1); }
};

// Each job's state (SimJob) by trace index, from its arrival until its result is written
// (EngineState::results), when it is dropped and its place reused: a job not arrived yet or
// ended holds only its entry here (8 bytes). At a million jobs every job's state kept to the end
// would be most of the simulator's memory, though only the jobs waiting or running are ever read.
class JobTable {
 public:
  void Resize(size_t jobs) { where_.assign(jobs, nullptr); }
  size_t size() const { return where_.size(); }
  // Whether the job arrived and its result is not written yet: only then is it in the table.
  bool live(size_t index) const { return where_[index] != nullptr; }
  SimJob& operator[](size_t index) { return *where_[index]; }
  const SimJob& operator[](size_t index) const { return *where_[index]; }
  // A fresh state for the job, which arrives.
  SimJob& Add(size_t index) {
    COLO_CHECK(!live(index));
    if (free_.empty()) {
      if (made_ % kChunk == 0) chunks_.push_back(std::make_unique<SimJob[]>(kChunk));
      free_.push_back(&chunks_.back()[made_++ % kChunk]);
    }
    where_[index] = free_.back();
    free_.pop_back();
    return *where_[index];
  }
  // The job's result is written: its state goes (with what it holds on the heap), made blank in
  // place for the next job.
  void Drop(size_t index) {
    COLO_CHECK(live(index));
    std::destroy_at(where_[index]);
    std::construct_at(where_[index]);
    free_.push_back(where_[index]);
    where_[index] = nullptr;
  }

 private:
  // States are made in chunks, so that one never moves while it lives.
  static constexpr size_t kChunk = 256;
  std::vector<SimJob*> where_;  // by trace index: its state, or null
  std::vector<std::unique_ptr<SimJob[]>> chunks_;
  size_t made_ = 0;            // states made in chunks_
  std::vector<SimJob*> free_;  // of those, the ones not in use
};

struct SimGpu {
  int server = 0;
  // SMACT fed to the scheduler at each change within the last utilization window (and the one in
  // effect at its start): whether the window's statistics can still fall. Kept only where a gate
  // can hold a GPU for its utilization.
  Ring<std::pair<TimePoint, double>> smact_log;
  GpuIndex local = 0;
  std::vector<int> jobs;
  std::vector<double> slowdown;  // parallel to jobs
  double smact = 0;
  bool computing = false;  // some job here is past its start-up
  double watts = 0;        // PowerModel::Watts of the two above
  Bytes used;
  TimePoint integrated_to;
  double energy_j = 0, smact_seconds = 0, memory_byte_seconds = 0;

  // Energy, SM activity and memory over time, brought up to `to` at the present figures.
  void IntegrateTo(TimePoint to) {
    if (to <= integrated_to) return;
    const double dt = ToSeconds(to - integrated_to);
    energy_j += watts * dt;
    smact_seconds += smact * dt;
    memory_byte_seconds += static_cast<double>(used.count()) * dt;
    integrated_to = to;
  }
};

struct Server {
  std::unique_ptr<Scheduler> scheduler;
  int first_gpu = 0;
  bool dirty = false;
  std::optional<TimePoint> wakeup;
  int demand = 0;  // GPUs of assigned, unfinished jobs: how the dispatcher balances servers
  // What the runs of each model that ended on this server measured, as its colod's store would
  // hold them (AddNewestRun): their run times always (backfill's reservations count on them),
  // their peaks and SM activity planned with only under learn=on. This and `sent` are keyed by
  // the one copy of each signature the run keeps (EngineState::signatures): a lookup hashes a
  // pointer and compares no text. Neither is ever walked in order.
  std::unordered_map<const ModelSignature*, ModelRuns> runs;
  // The jobs sent here, by model, while they may wait or run here (pruned as a run of their
  // model ends): what a run that ends tells how long their model runs.
  std::unordered_map<const ModelSignature*, std::vector<int>> sent;
  const ModelRuns& RunsOf(const ModelSignature* signature) const {
    static const ModelRuns kNone;
    const auto it = runs.find(signature);
    return it == runs.end() ? kNone : it->second;
  }
  // Its own queues are empty: the cluster may send it a job.
  bool idle_queues() const {
    return scheduler->main_queue().empty() && scheduler->recovery_queue().empty();
  }
};

// What links a trace job's runs: its model (a job of a CSV trace that names none is linked to no
// other) and its owner.
inline ModelSignature SignatureOf(const TraceJob& job) {
  return job.profile.name == "custom" ? ModelSignature()
                                      : ModelSignature(job.profile.name, job.owner);
}

// Each distinct signature of a trace's jobs (SignatureOf), kept once: a job holds a pointer to
// its own, and a lookup by signature compares pointers.
class Signatures {
 public:
  // The job's, found by its model's and owner's names, which are interned (one pointer per
  // text): its text is made only the first time the two come together.
  const ModelSignature* Of(const TraceJob& job) {
    const auto names = std::make_pair(&job.profile.name.str(), &job.owner.str());
    auto it = by_names_.find(names);
    if (it == by_names_.end())
      it = by_names_.emplace(names, &*kept_.insert(SignatureOf(job)).first).first;
    return it->second;
  }

 private:
  std::set<ModelSignature> kept_;
  std::map<std::pair<const std::string*, const std::string*>, const ModelSignature*> by_names_;
};

// How long a job sent to `server` is expected to run, where it has no time limit: what its
// model's runs there took (core's rule); 0 while none has ended there.
inline Duration LearnedRunTime(const Server& server, const SimJob& job) {
  return LearnRunTime(server.RunsOf(job.signature).run_times).value_or(Duration::zero());
}

// What happened to a server, for the cluster's picture of it.
enum class Change {
  kTook,    // it took more (a job started, memory grew): the picture is an upper bound
  kOpened,  // it may take more, its free memory unchanged
  kFreed,   // it may take more and have more memory free
};

struct EngineState {
  EngineState(const Trace& t, const RunSpec& s, const SimOptions& o, const PlacementPolicy& p,
              ClusterRule r)
      : trace(t), spec(s), options(o), policy(p), rule(r) {}

  const Trace& trace;
  const RunSpec& spec;
  const SimOptions& options;
  const PlacementPolicy& policy;
  const ClusterRule rule;
  ManualClock clock;
  JobTable jobs;  // by trace index (a job's id is its index + 1)
  // By trace index, each written as its job ends for good (the rest once the run ends).
  std::vector<JobResult> results;
  int rejected = 0;  // jobs no server could ever run
  Signatures signatures;
  std::vector<int> arrivals;  // job indices in arrival order (rank -> index)
  std::vector<SimGpu> gpus;
  std::vector<Server> servers;
  int64_t passes = 0;  // placement passes of the servers' schedulers

  TimePoint Now() const { return clock.Now(); }
  SimJob& job(int index) { return jobs[static_cast<size_t>(index)]; }
  Server& server(int index) { return servers[static_cast<size_t>(index)]; }
  const Server& server(int index) const { return servers[static_cast<size_t>(index)]; }
};

}  // namespace colo::sim

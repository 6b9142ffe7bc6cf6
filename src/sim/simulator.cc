#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

#include "common/check.h"
#include "common/clock.h"
#include "common/strings.h"
#include "estimate/estimator.h"
#include "estimate/job_estimators.h"
#include "policies/registry.h"
#include "sim/shard_policy.h"

namespace colo {

Result<RunSpec> ParseRunSpec(const std::string& text, const RunSpec& defaults) {
  RunSpec spec = defaults;
  spec.label = std::string(Trim(text));
  if (spec.label.empty()) return InvalidArgument("empty policy spec");
  const auto colon = spec.label.find(':');
  std::string policy = spec.label.substr(0, colon);
  if (auto carma = FindCarmaPolicy(policy)) {
    // CARMA's names carry their estimator and CARMA's recovery (alone on an idle GPU); settings
    // in the spec still override both.
    spec.estimator = carma->estimator;
    spec.recovery = RecoveryMode::kThesis;
  }
  std::vector<std::string> kept;
  if (colon != std::string::npos) {
    for (const std::string& raw : Split(spec.label.substr(colon + 1), ',')) {
      const std::string setting(Trim(raw));
      const auto eq = setting.find('=');
      const std::string key = setting.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : setting.substr(eq + 1);
      if (key == "est") {
        spec.estimator = value;
      } else if (key == "share") {
        if (value == "mps")
          spec.sharing = SharingMode::kMps;
        else if (value == "plain" || value == "streams")
          spec.sharing = SharingMode::kPlain;
        else
          return InvalidArgument(
              fmt::format("share takes mps or plain, not '{}' in '{}'", value, text));
      } else if (key == "learn") {
        if (value != "on" && value != "off")
          return InvalidArgument(
              fmt::format("learn takes on or off, not '{}' in '{}'", value, text));
        spec.learn = value == "on";
      } else if (key == "recovery") {
        auto mode = ParseRecoveryMode(value);
        if (!mode.ok()) return mode.status();
        spec.recovery = *mode;
      } else {
        kept.push_back(setting);
      }
    }
  }
  for (size_t i = 0; i < kept.size(); ++i) policy += (i == 0 ? ":" : ",") + kept[i];
  spec.policy = policy;
  return spec;
}

Result<NodeChoice> ParseNodeChoice(std::string_view text) {
  if (text == "most-free") return NodeChoice::kMostFree;
  if (text == "best-fit") return NodeChoice::kBestFit;
  return InvalidArgument(fmt::format("unknown node choice '{}' (use most-free or best-fit)", text));
}

Result<ClusterMode> ParseClusterMode(std::string_view text) {
  if (text == "queue") return ClusterMode::kQueue;
  if (text == "fifo") return ClusterMode::kFifo;
  if (text == "per-server") return ClusterMode::kPerServer;
  return InvalidArgument(
      fmt::format("unknown cluster mode '{}' (use queue, fifo or per-server)", text));
}

std::string_view ToString(ClusterMode mode) {
  switch (mode) {
    case ClusterMode::kQueue:
      return "queue";
    case ClusterMode::kFifo:
      return "fifo";
    case ClusterMode::kPerServer:
      return "per-server";
  }
  return "queue";
}

namespace {

enum class EventType : uint8_t {
  kArrival,
  kStartupDone,
  kWarmup,
  kCompletion,
  kWakeup,
  kNodeWakeup
};

// What the cluster layer knows of the policy each server runs, to rule servers out cheaply before
// asking the policy itself.
struct ClusterRule {
  const GateConfig* gates = nullptr;    // a gated policy's gates
  const ShardPolicy* shards = nullptr;  // the shards baseline
};

struct Event {
  TimePoint time;
  uint64_t seq;
  EventType type;
  int64_t subject;  // job index or server index
  uint64_t tag;     // attempt or version the event belongs to
};
struct Later {
  bool operator()(const Event& x, const Event& y) const {
    return x.time != y.time ? x.time > y.time : x.seq > y.seq;
  }
};

struct SimJob {
  const TraceJob* trace = nullptr;
  int server = -1;
  bool running = false;
  uint64_t attempt = 0;
  uint64_t version = 0;   // bumps invalidate scheduled completions
  std::vector<int> gpus;  // global GPU numbers
  SharingMode mode = SharingMode::kMps;
  int thread_percent = 100;
  double remaining_s = 0;  // solo seconds of work left
  double rate = 1;         // solo seconds done per second
  bool starting = false;   // in its start-up: on the CPU, no SM activity, not slowed
  TimePoint progress_at;
  TimePoint started;
  Bytes memory;
  bool rejected = false;
  std::string reject_reason;
  // The cluster queue.
  JobSpec spec;                // as submitted; kept until the job reaches a server
  int rank = 0;                // arrival order: its place in the cluster queue
  bool queued = false;         // waiting in the cluster queue
  int64_t checked_round = -2;  // the last round it was looked at in; -2: not since it was queued
  // Attempts and out-of-memory crashes on servers it was taken back from (requeued).
  int prior_attempts = 0, prior_ooms = 0;
  double first_start_s = -1;
  std::optional<TimePoint> startable_since;  // SimOptions::check_dispatch
  Bytes planned;  // the reservation its current attempt was placed with (per GPU)
};

struct SimGpu {
  int server = 0;
  // SMACT fed to the scheduler at each change within the last utilization window (and the one in
  // effect at its start): whether the window's statistics can still fall.
  std::deque<std::pair<TimePoint, double>> smact_log;
  GpuIndex local = 0;
  std::vector<int> jobs;
  std::vector<double> slowdown;  // parallel to jobs
  double smact = 0;
  double watts = 0;
  Bytes used;
  TimePoint integrated_to;
  double energy_j = 0, smact_seconds = 0, memory_byte_seconds = 0;
};

struct Server {
  std::unique_ptr<Scheduler> scheduler;
  int first_gpu = 0;
  bool dirty = false;
  std::optional<TimePoint> wakeup;
  int demand = 0;  // GPUs of assigned, unfinished jobs: how the dispatcher balances servers
  // The cluster queue's picture of the server, as of its last change.
  ClusterView view;
  bool eligible = false;  // its own queues are empty: the cluster may send it a job
  // Since its picture was read it may take more (a GPU's grace ended, a window fell, a job left):
  // the picture is no bound, it is read again before use. With `grew`, its free memory may have
  // grown too: it sits at the top of the index until read.
  bool changed = false;
  bool grew = false;
  bool stale = false;  // it only took more since: the picture is an upper bound
  bool indexed = false;
  std::pair<int64_t, int> key;  // its place in the index
  int64_t score = 0;            // free planned memory (bytes), idle GPUs' memory, or free shards
  int usable = 0;               // GPUs that could take some job now
  std::vector<int64_t> caps;    // caps[k]: the (k+1)-th largest usable GPU's free memory
  // Per GPU, kept exact between reads: free planned memory, jobs, exclusive jobs.
  std::vector<int64_t> free;
  std::vector<int> jobs_on, exclusive_on;
  // When its view changes with time alone: a GPU's grace ends, a window falls (opens), or a
  // reservation shrinks (grows).
  std::optional<TimePoint> open_wakeup, grow_wakeup;
};

// What happened to a server, for the cluster's picture of it.
enum class Change {
  kTook,    // it took more (a job started, memory grew): the picture is an upper bound
  kOpened,  // it may take more, its free memory unchanged
  kFreed,   // it may take more and have more memory free
};

class Engine {
 public:
  Engine(const Trace& trace, const RunSpec& spec, const SimOptions& options,
         const PlacementPolicy& policy, const MemoryEstimator& estimator, ClusterRule rule)
      : trace_(trace),
        spec_(spec),
        options_(options),
        policy_(policy),
        estimator_(estimator),
        rule_(rule),
        queue_mode_(options.cluster != ClusterMode::kPerServer) {}

  SimResult Run();

 private:
  const Event& Top() const { return events_.front(); }
  Event Pop() {
    std::pop_heap(events_.begin(), events_.end(), Later{});
    Event e = events_.back();
    events_.pop_back();
    return e;
  }
  // False for an event that a later one superseded (its handler would ignore it).
  bool Live(const Event& e) const {
    switch (e.type) {
      case EventType::kArrival:
        return true;
      case EventType::kStartupDone:
      case EventType::kWarmup: {
        const SimJob& job = jobs_[static_cast<size_t>(e.subject)];
        return job.running && job.attempt == e.tag;
      }
      case EventType::kCompletion: {
        const SimJob& job = jobs_[static_cast<size_t>(e.subject)];
        return job.running && job.version == e.tag;
      }
      case EventType::kWakeup: {
        const auto& wakeup = servers_[static_cast<size_t>(e.subject)].wakeup;
        return wakeup && *wakeup == e.time;
      }
      case EventType::kNodeWakeup: {
        const Server& server = servers_[static_cast<size_t>(e.subject)];
        const auto& wakeup = e.tag == 0 ? server.open_wakeup : server.grow_wakeup;
        return wakeup && *wakeup == e.time;
      }
    }
    return true;
  }
  void Compact() {
    std::erase_if(events_, [&](const Event& e) { return !Live(e); });
    std::make_heap(events_.begin(), events_.end(), Later{});
    compact_at_ = std::max(kMinCompaction, 2 * events_.size());
  }
  void Push(TimePoint t, EventType type, int64_t subject, uint64_t tag) {
    events_.push_back(Event{t, next_seq_++, type, subject, tag});
    std::push_heap(events_.begin(), events_.end(), Later{});
    if (events_.size() >= compact_at_) Compact();
  }
  TimePoint Now() const { return clock_.Now(); }
  JobSpec SpecFor(const TraceJob& t) const;
  void Arrive(int index);
  void Start(int server, const Launch& launch);
  void StartupDone(int index, uint64_t attempt);
  void Warmup(int index, uint64_t attempt);
  void Complete(int index, uint64_t version);
  void LearnFrom(const SimJob& job);
  void Pass(int server);
  void PushWakeup(int server);
  void MarkDirty(int server);
  void AddDemand(int server, int gpus);
  // Brings energy, progress and the timeline up to now for `gpus` and everything sharing a job with
  // them, so a change can be applied; returns that closure.
  // The GPUs whose jobs' progress must be brought up to now (these GPUs and every GPU their jobs
  // also run on), in a buffer reused by every event.
  const std::vector<int>& Touch(const std::vector<int>& gpus);
  // `freed`: a job left; otherwise the servers only took more, unless a GPU's SMACT fell.
  void Refresh(const std::vector<int>& gpus, bool freed = false);
  void Detach(SimJob& job, const char* outcome);
  void Integrate(SimGpu& gpu, TimePoint to);
  SimResult Finish();

  // The cluster queue (ClusterMode::kQueue and kFifo).
  void MarkChanged(int server, Change change);
  void Index(int server, std::pair<int64_t, int> key);
  void Unindex(int server);
  // Moves an indexed server to the place its accounted free memory gives it.
  void Reindex(int server);
  // The accounting of reservations between reads of a server.
  void AccountLaunch(int server, const Launch& launch);
  Bytes ReservationOf(const SimJob& job) const;
  void AccountGrowth(const SimJob& job, Bytes before);
  void AccountExit(const SimJob& job, Bytes reservation);
  // The next time the job's reservation shrinks without an event, if it will.
  std::optional<TimePoint> NextShrink(const SimJob& job, TimePoint now) const;
  void WakeToGrow(int server, TimePoint t);
  // Re-reads a server's view and what the cluster keeps of it (eligibility, free memory, usable
  // GPUs), re-indexes it and schedules a look at the time its view changes without an event.
  void ReadServer(int server);
  MemoryNeed NeedOn(const SimJob& job, int server) const;
  PlacementRequest RequestFor(const SimJob& job, int server) const;
  // A necessary condition for the policy to place the request on the server (no policy call).
  bool MayPlace(const Server& server, const PlacementRequest& request) const;
  // The least score a server that can take the request has.
  int64_t NeededScore(const PlacementRequest& request) const;
  // Starts the job on the server if it can start it now.
  bool TryStart(int index, int server, const PlacementRequest& request);
  // Starts the job on the most free server that can start it now, if any. A job looked at in the
  // previous round is tried only on the servers that may take more since; others go down the
  // free-memory index.
  bool StartSomewhere(int index, bool looked_at_last_round);
  // Queues the oldest waiting job on the most free server, which no other job is then sent to;
  // true if that server's pass started it at once.
  bool Reserve(int index);
  void Unreserve();
  void Round();
  void StartPending();
  void Requeue(int index);
  void CheckDispatch();
  void Enqueue(int index);
  // Whether an idle server could start the job (else it is refused at submission).
  Status Placeable(const JobSpec& spec) const;

  const Trace& trace_;
  const RunSpec& spec_;
  const SimOptions& options_;
  const PlacementPolicy& policy_;
  const MemoryEstimator& estimator_;
  const ClusterRule rule_;
  const bool queue_mode_;
  ManualClock clock_;
  // A binary heap (earliest on top). Rescheduling leaves superseded events behind; Compact() drops
  // them when the heap has doubled, so it stays the size of what is really pending.
  std::vector<Event> events_;
  size_t compact_at_ = kMinCompaction;
  static constexpr size_t kMinCompaction = 1 << 12;
  uint64_t next_seq_ = 0;
  std::vector<SimJob> jobs_;
  std::vector<int> arrivals_;  // job indices in arrival order (rank -> index)
  std::vector<SimGpu> gpus_;
  std::vector<Server> servers_;
  // (demand, server), so the dispatcher finds the least-loaded server without scanning them all;
  // ties go to the lowest index.
  std::set<std::pair<int, int>> by_demand_;
  std::vector<int> dirty_;
  std::vector<CoRunner> runners_;  // scratch for Refresh
  std::vector<double> computed_;   // scratch for Refresh
  std::vector<int> closure_;       // scratch for Touch
  // With learn=on: the peaks of each model's successful runs, per (server, model).
  std::map<std::pair<int, std::string>, std::vector<Bytes>> peaks_;
  Timeline timeline_;
  int oom_crashes_ = 0;
  double lost_gpu_seconds_ = 0;
  int64_t event_count_ = 0, pass_count_ = 0;

  // The cluster queue: ranks of waiting jobs, oldest first.
  std::set<int> queue_;
  bool queue_grew_ = false;  // jobs joined since the last round
  // Eligible servers by (-score, index): the most free first, ties to the lowest index.
  std::set<std::pair<int64_t, int>> index_;
  std::vector<int> changed_;        // servers to look at again in the next round
  std::vector<int> round_changed_;  // those of the current round, most free first
  bool round_changed_sorted_ = true;
  bool left_waiting_ = false;  // the last round left jobs waiting
  bool queue_moved_ = false;   // a job left the queue outside a round
  // The last round looked at the waiting jobs up to this rank and left this many waiting; since,
  // this many of them started outside a round.
  int old_until_rank_ = -1, left_waiting_count_ = 0, left_outside_ = 0;
  bool requeued_ = false;  // a job went back into the queue since the last round
  int64_t round_ = 0;
  int reserved_job_ = -1;  // the oldest waiting job, queued on the server it reserved
  int reserved_server_ = -1;
  std::vector<std::pair<int, Launch>> pending_;  // launches of this round, started after it
  int requeues_ = 0;
  // How long a GPU's utilization window can keep falling after its last change: the window, or
  // longer while its EMA closes in on the latest value.
  Duration utilization_horizon_{0};
  int64_t idle_free_ = 0;  // free memory of an idle GPU
  // Whether a server could ever run a request of this shape (GPUs, planned memory, sharing).
  std::map<std::tuple<int, int64_t, bool, SharingPreference>, Status> placeable_;
  int64_t dispatch_checks_ = 0, dispatch_violations_ = 0;
};

void Engine::Integrate(SimGpu& gpu, TimePoint to) {
  if (to <= gpu.integrated_to) return;
  const double dt = ToSeconds(to - gpu.integrated_to);
  gpu.energy_j += gpu.watts * dt;
  gpu.smact_seconds += gpu.smact * dt;
  gpu.memory_byte_seconds += static_cast<double>(gpu.used.count()) * dt;
  gpu.integrated_to = to;
}

const std::vector<int>& Engine::Touch(const std::vector<int>& gpus) {
  std::vector<int>& closure = closure_;
  closure.assign(gpus.begin(), gpus.end());
  for (int g : gpus) {
    for (int j : gpus_[g].jobs)
      closure.insert(closure.end(), jobs_[j].gpus.begin(), jobs_[j].gpus.end());
  }
  std::sort(closure.begin(), closure.end());
  closure.erase(std::unique(closure.begin(), closure.end()), closure.end());
  const TimePoint now = Now();
  for (int g : closure) {
    Integrate(gpus_[g], now);
    for (int j : gpus_[g].jobs) {
      SimJob& job = jobs_[j];
      job.remaining_s -= job.rate * ToSeconds(now - job.progress_at);
      job.progress_at = now;
    }
  }
  return closure;
}

void Engine::Refresh(const std::vector<int>& gpus, bool freed) {
  const TimePoint now = Now();
  // Slowdowns depend only on who shares each GPU; rates on the slowest GPU of each job.
  std::vector<CoRunner>& runners = runners_;
  for (int g : gpus) {
    SimGpu& gpu = gpus_[g];
    runners.clear();
    SharingMode mode = SharingMode::kExclusive;
    // Jobs still starting up neither slow the others nor are slowed: they have no kernels yet.
    bool any_starting = false;
    for (int j : gpu.jobs) {
      if (jobs_[j].starting)
        any_starting = true;
      else
        runners.push_back(CoRunner{jobs_[j].trace->profile.smact, jobs_[j].thread_percent});
      mode = jobs_[j].mode;
    }
    if (!any_starting) {
      options_.interference.Slowdowns(mode, runners, gpu.slowdown);
      continue;
    }
    options_.interference.Slowdowns(mode, runners, computed_);
    gpu.slowdown.assign(gpu.jobs.size(), 1.0);
    for (size_t i = 0, k = 0; i < gpu.jobs.size(); ++i)
      if (!jobs_[gpu.jobs[i]].starting) gpu.slowdown[i] = computed_[k++];
  }
  for (int g : gpus) {
    for (int j : gpus_[g].jobs) {
      SimJob& job = jobs_[j];
      double slowest = 1.0;
      for (int h : job.gpus) {
        const auto& on = gpus_[h].jobs;
        const size_t pos = static_cast<size_t>(std::find(on.begin(), on.end(), j) - on.begin());
        slowest = std::max(slowest, gpus_[h].slowdown[pos]);
      }
      const double rate = 1.0 / slowest;
      if (rate != job.rate) {
        job.rate = rate;
        ++job.version;
        const double left = std::max(0.0, job.remaining_s) / rate;
        Push(now + SecondsF(left), EventType::kCompletion, j, job.version);
      }
    }
  }
  for (int g : gpus) {
    SimGpu& gpu = gpus_[g];
    Server& server = servers_[static_cast<size_t>(gpu.server)];
    double smact = 0;
    bool computing = false;
    Bytes used = options_.server.baseline_used;
    for (int j : gpu.jobs) {
      if (!jobs_[j].starting) {
        smact += jobs_[j].trace->profile.smact * jobs_[j].rate;
        computing = true;
      }
      used += jobs_[j].memory;
    }
    const double smact_before = gpu.smact;
    gpu.smact = std::min(1.0, smact);
    gpu.used = used;
    if (queue_mode_) {
      auto& log = gpu.smact_log;
      if (log.empty() || log.back().second != gpu.smact) {
        if (!log.empty() && log.back().first == now)
          log.back().second = gpu.smact;
        else
          log.emplace_back(now, gpu.smact);
      }
      MarkChanged(gpu.server, freed || gpu.smact < smact_before ? Change::kOpened : Change::kTook);
    }
    // A GPU whose jobs are all still starting up draws about its idle power (measured on the
    // H200: 86 W against 80 W idle).
    gpu.watts = options_.power.Watts(options_.server.idle_watts, options_.server.tdp_watts,
                                     computing, gpu.smact);
    server.scheduler->OnGpuSample(GpuSample{
        gpu.local, now, std::min(used, options_.server.capacity), gpu.smact, -1, -1, true});
    for (int j : gpu.jobs) {
      // A simulated job holds its start-up memory (its CUDA context) from launch: its process is
      // on the GPU from the first sample after it.
      server.scheduler->OnJobProcessSeen(jobs_[j].trace->id, gpu.local);
      server.scheduler->OnJobMemory(jobs_[j].trace->id, gpu.local, jobs_[j].memory);
    }
    if (options_.record_timeline) {
      auto& series = timeline_.series[static_cast<size_t>(g)];
      const Timeline::Point point{ToSeconds(now), used.gib(), gpu.smact, gpu.watts};
      if (!series.empty() && series.back().t_s == point.t_s)
        series.back() = point;
      else
        series.push_back(point);
    }
  }
}

void Engine::Detach(SimJob& job, const char* outcome) {
  const int index = static_cast<int>(&job - jobs_.data());
  for (int g : job.gpus) {
    SimGpu& gpu = gpus_[g];
    const auto it = std::find(gpu.jobs.begin(), gpu.jobs.end(), index);
    COLO_CHECK(it != gpu.jobs.end());
    gpu.slowdown.erase(gpu.slowdown.begin() + (it - gpu.jobs.begin()));
    gpu.jobs.erase(it);
    if (options_.record_timeline) {
      timeline_.segments.push_back(Timeline::Segment{
          g, job.trace->id, job.trace->name, ToSeconds(job.started), ToSeconds(Now()), outcome});
    }
  }
  job.running = false;
  ++job.version;
}

JobSpec Engine::SpecFor(const TraceJob& t) const {
  JobSpec spec;
  spec.id = t.id;
  spec.name = t.name;
  spec.owner = t.owner;
  spec.gpus = t.profile.gpus;
  spec.expected_smact = t.profile.smact;
  std::optional<Bytes> declared = t.declared;
  if (const auto line = TaskFileLine(spec_.estimator)) {
    // CARMA's estimator policies read the task file's line; its "not known" (40000) is more than
    // any 40 GB GPU has free after CARMA's 2 GiB margin: such a task only ever runs alone.
    declared = t.task_file ? (*t.task_file).*(*line) : std::nullopt;
    if (!declared) {
      spec.sharing = SharingPreference::kExclusive;
      return spec;
    }
  }
  JobDescription description{static_cast<uint64_t>(t.id), t.profile.name, t.profile.batch,
                             t.profile.peak, declared};
  auto estimate = estimator_.Estimate(description);
  if (estimate.ok()) spec.memory = estimate->AsNeed();
  return spec;
}

void Engine::MarkDirty(int server_index) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  if (!server.dirty) {
    server.dirty = true;
    dirty_.push_back(server_index);
  }
}

void Engine::Arrive(int index) {
  SimJob& job = jobs_[static_cast<size_t>(index)];
  const TraceJob& t = *job.trace;
  if (queue_mode_) {
    job.spec = SpecFor(t);
    // Every server is alike: what an idle one could never run, none could. Rejected at
    // submission, as slurmctld refuses a job no node can satisfy (otherwise it would wait at the
    // head of the queue forever). The verdict depends only on the shape of the request (an idle
    // server has no owners), so it is asked once per shape.
    const auto shape = std::make_tuple(job.spec.gpus, job.spec.memory.Upper().count(),
                                       job.spec.memory.known(), job.spec.sharing);
    auto cached = placeable_.find(shape);
    if (cached == placeable_.end()) cached = placeable_.emplace(shape, Placeable(job.spec)).first;
    const Status& placeable = cached->second;
    if (!placeable.ok()) {
      job.rejected = true;
      job.reject_reason = placeable.message();
      return;
    }
    Enqueue(index);
    return;
  }
  // The dispatcher sends a job to the server with the least outstanding GPU demand.
  const int chosen = by_demand_.begin()->second;
  Server& server = servers_[static_cast<size_t>(chosen)];
  const JobSpec spec = SpecFor(t);
  const Status submitted = server.scheduler->Submit(spec);
  job.server = chosen;
  if (!submitted.ok()) {
    job.rejected = true;
    job.reject_reason = submitted.message();
    return;
  }
  AddDemand(chosen, spec.gpus);
  MarkDirty(chosen);
}

Status Engine::Placeable(const JobSpec& spec) const {
  // As Scheduler::CheckPlaceable, on an idle server as the simulation has it: its GPUs show the
  // memory an idle GPU already uses (the driver, other tenants) as taken.
  const ServerProfile& server = options_.server;
  if (spec.gpus > server.gpus) {
    return InfeasibleStatus(
        fmt::format("needs {} GPUs on one server; the largest has {}", spec.gpus, server.gpus));
  }
  const Bytes free = server.capacity - server.baseline_used;
  if (spec.memory.known() && spec.memory.Upper() > free) {
    return InfeasibleStatus(fmt::format("needs {} per GPU; an idle GPU has {} free",
                                        FormatBytes(spec.memory.Upper()), FormatBytes(free)));
  }
  ClusterView idle;
  idle.now = Now();
  for (int g = 0; g < server.gpus; ++g) {
    GpuView v;
    v.index = g;
    v.capacity = server.capacity;
    v.free_for_placement = free;
    v.mode = spec_.sharing;
    idle.gpus.push_back(v);
  }
  PlacementRequest request;
  request.job = spec.id;
  request.owner = spec.owner;
  request.gpus = spec.gpus;
  request.memory = spec.memory;
  request.memory_need = spec.memory.Upper();
  request.sharing = spec.sharing;
  request.expected_smact = spec.expected_smact;
  const PlacementDecision decision = policy_.Place(idle, request);
  if (const auto* no = std::get_if<Infeasible>(&decision)) return InfeasibleStatus(no->reason);
  if (const auto* wait = std::get_if<Wait>(&decision)) {
    for (const GateVerdict& v : wait->per_gpu) {
      if (v.gate == Gate::kMemory) {
        return InfeasibleStatus(
            fmt::format("needs {} per GPU including the policy's margin; an idle GPU has {} free",
                        FormatBytes(Bytes(static_cast<int64_t>(v.limit))), FormatBytes(free)));
      }
    }
    return InfeasibleStatus("no GPU of an idle server could take it: " + wait->Reason());
  }
  return Status::Ok();
}

void Engine::Enqueue(int index) {
  SimJob& job = jobs_[static_cast<size_t>(index)];
  job.queued = true;
  job.server = -1;
  job.checked_round = -2;
  queue_.insert(job.rank);
  queue_grew_ = true;
}

void Engine::Start(int server_index, const Launch& launch) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  const int index = static_cast<int>(launch.job - 1);
  SimJob& job = jobs_[static_cast<size_t>(index)];
  COLO_CHECK(!job.running && !job.queued);
  job.server = server_index;
  job.gpus.clear();
  for (GpuIndex local : launch.gpus) job.gpus.push_back(server.first_gpu + local);
  const auto& closure = Touch(job.gpus);
  const TimePoint now = Now();
  if (job.first_start_s < 0) job.first_start_s = ToSeconds(now);
  job.running = true;
  ++job.attempt;
  job.mode = launch.mode;
  job.planned = launch.reservation;
  job.thread_percent = launch.mode == SharingMode::kMps ? launch.thread_percent : 100;
  job.remaining_s = ToSeconds(job.trace->profile.duration);  // a restart loses all progress
  job.rate = 0;  // no rate yet: Refresh sets one and schedules the completion
  ++job.version;
  job.progress_at = now;
  job.started = now;
  job.starting = job.trace->profile.startup > Duration(0);
  if (job.starting)
    Push(now + job.trace->profile.startup, EventType::kStartupDone, index, job.attempt);
  job.memory = std::min(options_.startup_memory, job.trace->profile.peak);
  for (int g : job.gpus) {
    gpus_[g].jobs.push_back(index);
    gpus_[g].slowdown.push_back(1.0);
  }
  Push(now + job.trace->profile.warmup, EventType::kWarmup, index, job.attempt);
  const Bytes planned = queue_mode_ ? ReservationOf(job) : Bytes(0);
  Refresh(closure);
  if (queue_mode_) {
    AccountGrowth(job, planned);  // its start-up memory, if above its plan
    if (const auto t = NextShrink(job, now)) WakeToGrow(server_index, *t);
  }
}

void Engine::StartupDone(int index, uint64_t attempt) {
  SimJob& job = jobs_[static_cast<size_t>(index)];
  if (!job.running || job.attempt != attempt) return;
  const auto& closure = Touch(job.gpus);
  job.starting = false;
  Refresh(closure);
}

void Engine::Warmup(int index, uint64_t attempt) {
  SimJob& job = jobs_[static_cast<size_t>(index)];
  if (!job.running || job.attempt != attempt) return;
  const auto& closure = Touch(job.gpus);
  job.memory = job.trace->profile.peak;
  // The allocation that overflows a GPU fails: this job crashes with out-of-memory.
  bool overflow = false, alone = true;
  for (int g : job.gpus) {
    Bytes used = options_.server.baseline_used;
    for (int j : gpus_[g].jobs) used += jobs_[j].memory;
    overflow |= used > options_.server.capacity;
    alone &= gpus_[g].jobs.size() == 1;
  }
  if (!overflow) {
    const Bytes before = queue_mode_ ? ReservationOf(job) : Bytes(0);
    Refresh(closure);
    if (queue_mode_) AccountGrowth(job, before);  // its peak, if above its plan
    return;
  }
  ++oom_crashes_;
  lost_gpu_seconds_ += ToSeconds(Now() - job.started) * static_cast<double>(job.gpus.size());
  Detach(job, "oom");
  job.memory = Bytes(0);
  Refresh(closure, /*freed=*/true);
  Server& server = servers_[static_cast<size_t>(job.server)];
  if (queue_mode_) AccountExit(job, ReservationOf(job));
  if (queue_mode_ && rule_.shards) {
    // Slurm requeues the crashed job: it leaves the server and waits in the cluster queue again,
    // at its place, with the same request (nothing was learned). After MaxBatchRequeue (5)
    // requeues Slurm holds it instead: it fails here. One that overflowed a GPU alone would crash
    // on every attempt: it fails at once.
    constexpr int kMaxBatchRequeue = 5;
    if (alone || job.prior_attempts >= kMaxBatchRequeue) {
      server.scheduler->OnJobExit(
          job.trace->id,
          JobExit{ExitKind::kFailure,
                  alone ? "out of memory alone on its GPUs"
                        : "out of memory again after 5 requeues: held (MaxBatchRequeue)"});
      return;
    }
    server.scheduler->OnJobExit(job.trace->id,
                                JobExit{ExitKind::kFailure, "out of memory: requeued"});
    server.scheduler->Forget(job.trace->id);
    Requeue(index);
    return;
  }
  const ExitAction action = server.scheduler->OnJobExit(
      job.trace->id, JobExit{ExitKind::kOutOfMemory, "torch.OutOfMemoryError: CUDA out of memory"});
  if (!queue_mode_ && action != ExitAction::kRequeuedForRecovery)
    AddDemand(job.server, -job.trace->profile.gpus);
  MarkDirty(job.server);
}

void Engine::Requeue(int index) {
  SimJob& job = jobs_[static_cast<size_t>(index)];
  ++requeues_;
  requeued_ = true;
  ++job.prior_attempts;
  ++job.prior_ooms;
  Enqueue(index);
}

void Engine::Complete(int index, uint64_t version) {
  SimJob& job = jobs_[static_cast<size_t>(index)];
  if (!job.running || job.version != version) return;
  const auto& closure = Touch(job.gpus);
  Detach(job, "done");
  job.memory = Bytes(0);
  Refresh(closure, /*freed=*/true);
  Server& server = servers_[static_cast<size_t>(job.server)];
  if (queue_mode_) AccountExit(job, ReservationOf(job));
  server.scheduler->OnJobExit(job.trace->id, JobExit{ExitKind::kSuccess, ""});
  if (spec_.learn) LearnFrom(job);
  if (!queue_mode_) AddDemand(job.server, -job.trace->profile.gpus);
  MarkDirty(job.server);
}

void Engine::LearnFrom(const SimJob& job) {
  const std::string& model = job.trace->profile.name;
  if (model == "custom") return;  // a CSV job with no model named: nothing links its runs
  auto& peaks = peaks_[{job.server, model}];
  peaks.push_back(job.trace->profile.peak);
  auto learned = EstimateFromHistory(peaks);
  if (!learned.ok()) return;
  const MemoryNeed need = learned->AsNeed();
  Scheduler& scheduler = *servers_[static_cast<size_t>(job.server)].scheduler;
  for (JobId id : scheduler.main_queue()) {
    const SimJob& queued = jobs_[static_cast<size_t>(id - 1)];
    if (queued.attempt == 0 && queued.trace->profile.name == model) {
      (void)scheduler.UpdateNeed(id, need);  // refused only for jobs that are not queued
    }
  }
}

void Engine::PushWakeup(int server_index) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  const auto wake = server.scheduler->NextWakeup();
  if (wake && (!server.wakeup || *wake < *server.wakeup || *server.wakeup <= Now())) {
    server.wakeup = wake;
    Push(*wake, EventType::kWakeup, server_index, 0);
  }
}

void Engine::Pass(int server_index) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  ++pass_count_;
  if (!queue_mode_) {
    for (const Launch& launch : server.scheduler->Schedule()) Start(server_index, launch);
    PushWakeup(server_index);
    return;
  }
  const bool was_eligible = server.eligible;
  for (Launch& launch : server.scheduler->Schedule()) {
    SimJob& job = jobs_[static_cast<size_t>(launch.job - 1)];
    if (job.queued) {
      // The oldest waiting job, started by the server it had reserved.
      COLO_CHECK(static_cast<int>(launch.job - 1) == reserved_job_ &&
                 server_index == reserved_server_);
      queue_.erase(job.rank);
      job.queued = false;
      reserved_job_ = reserved_server_ = -1;
      queue_moved_ = true;  // the next job becomes the oldest, and one more enters the round's view
      ++left_outside_;
    }
    // Started after the cluster's round of this instant, which decides on the same samples.
    AccountLaunch(server_index, launch);
    pending_.emplace_back(server_index, std::move(launch));
  }
  PushWakeup(server_index);
  // A server whose own queues just emptied may take jobs from the cluster queue again.
  if (!was_eligible && server.scheduler->main_queue().empty() &&
      server.scheduler->recovery_queue().empty()) {
    MarkChanged(server_index, Change::kFreed);
  }
}

void Engine::AddDemand(int server_index, int gpus) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  by_demand_.erase({server.demand, server_index});
  server.demand += gpus;
  by_demand_.insert({server.demand, server_index});
}

// ---- The cluster queue ----
//
// The cluster keeps a picture of every server: its view as last read (the policy decides on it),
// what it derives from it (usable GPUs and their free memory, to rule a server out without asking
// the policy) and the server's free planned memory, its place in the index. Reading a view costs
// as much as a placement pass, so pictures are read only when needed, and each carries what is
// known of it since: `stale`, it only took more (an upper bound); `changed`, it may take more
// (no bound: read before it is trusted to refuse); `grew`, its free memory may be higher than its
// place in the index (read before the index is trusted). Free memory itself is kept exact between
// reads by accounting every reservation the servers' schedulers make and release.

void Engine::Index(int server_index, std::pair<int64_t, int> key) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  Unindex(server_index);
  server.key = key;
  index_.insert(key);
  server.indexed = true;
}

void Engine::Unindex(int server_index) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  if (server.indexed) index_.erase(server.key);
  server.indexed = false;
}

void Engine::Reindex(int server_index) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  if (server.grew || !server.indexed) return;
  int64_t score = 0;
  for (size_t g = 0; g < server.free.size(); ++g) {
    if (rule_.shards) {
      score += std::max(0, rule_.shards->shards_per_gpu() - server.jobs_on[g]);
    } else if (server.exclusive_on[g] == 0) {
      score += std::max<int64_t>(0, server.free[g]);
    }
  }
  server.score = score;
  if (server.key.first != -score) Index(server_index, {-score, server_index});
}

void Engine::AccountLaunch(int server_index, const Launch& launch) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  if (server.free.empty()) return;  // never read: its first read counts everything
  for (GpuIndex g : launch.gpus) {
    server.free[static_cast<size_t>(g)] -= launch.reservation.count();
    ++server.jobs_on[static_cast<size_t>(g)];
    if (launch.mode == SharingMode::kExclusive) ++server.exclusive_on[static_cast<size_t>(g)];
  }
  server.stale = true;
  Reindex(server_index);
}

Bytes Engine::ReservationOf(const SimJob& job) const {
  const JobRecord* record = servers_[static_cast<size_t>(job.server)].scheduler->job(job.trace->id);
  return record ? servers_[static_cast<size_t>(job.server)].scheduler->Reservation(*record)
                : Bytes(0);
}

void Engine::AccountGrowth(const SimJob& job, Bytes before) {
  const Bytes after = ReservationOf(job);
  Server& server = servers_[static_cast<size_t>(job.server)];
  if (after == before || server.free.empty()) return;
  for (int g : job.gpus)
    server.free[static_cast<size_t>(g - server.first_gpu)] -= (after - before).count();
  Reindex(job.server);
}

void Engine::AccountExit(const SimJob& job, Bytes reservation) {
  Server& server = servers_[static_cast<size_t>(job.server)];
  if (server.free.empty()) return;
  for (int g : job.gpus) {
    const size_t local = static_cast<size_t>(g - server.first_gpu);
    server.free[local] += reservation.count();
    --server.jobs_on[local];
    if (job.mode == SharingMode::kExclusive) --server.exclusive_on[local];
  }
  Reindex(job.server);
}

void Engine::MarkChanged(int server_index, Change change) {
  if (!queue_mode_) return;
  Server& server = servers_[static_cast<size_t>(server_index)];
  if (change == Change::kTook) {
    server.stale = true;
    return;
  }
  if (!server.changed) {
    server.changed = true;
    changed_.push_back(server_index);
  }
  const Scheduler& scheduler = *server.scheduler;
  const bool eligible = scheduler.main_queue().empty() && scheduler.recovery_queue().empty();
  // Free memory that grew by an amount not accounted (a reservation shrank; or anything while the
  // server was busy with its own queue, which just emptied): at the top of the index until read.
  if (change == Change::kFreed || (!server.indexed && eligible)) server.grew = true;
  const std::pair<int64_t, int> top{-std::numeric_limits<int64_t>::max(), server_index};
  if (server.grew && (server.indexed || eligible) && !(server.indexed && server.key == top)) {
    server.eligible = eligible;
    Index(server_index, top);
  }
}

// Whether the utilization window of a GPU can still fall without a new sample: some value it was
// fed within `horizon` (the window, or longer while the EMA closes in) is above the latest.
bool CanFall(std::deque<std::pair<TimePoint, double>>& log, TimePoint now, Duration horizon) {
  while (log.size() >= 2 && log[1].first <= now - horizon) log.pop_front();
  if (log.empty() || now >= log.back().first + horizon) return false;
  const double latest = log.back().second;
  for (const auto& [t, value] : log) {
    if (value > latest) return true;
  }
  return false;
}

void Engine::ReadServer(int server_index) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  const Scheduler& scheduler = *server.scheduler;
  const TimePoint now = Now();
  server.view = scheduler.View();
  const size_t gpus = server.view.gpus.size();
  if (options_.check_dispatch && !server.grew && !server.free.empty()) {
    // The accounting between reads must agree with the scheduler's own.
    for (size_t g = 0; g < gpus; ++g) {
      const GpuView& v = server.view.gpus[g];
      // (A GPU over its capacity reports its capacity: what others hold is then unknown.)
      if (gpus_[static_cast<size_t>(server.first_gpu) + g].used > options_.server.capacity)
        continue;
      COLO_CHECK(server.free[g] == v.free_for_placement.count());
      COLO_CHECK(server.jobs_on[g] == v.job_count);
      COLO_CHECK((server.exclusive_on[g] > 0) == v.holds_exclusive);
    }
  }
  server.stale = server.changed = server.grew = false;
  server.eligible = scheduler.main_queue().empty() && scheduler.recovery_queue().empty();
  server.free.resize(gpus);
  server.jobs_on.resize(gpus);
  server.exclusive_on.resize(gpus);
  server.score = 0;
  server.usable = 0;
  server.caps.clear();
  std::optional<TimePoint> opens, grows;
  auto open = [&](TimePoint t) {
    if (t > now && (!opens || t < *opens)) opens = t;
  };
  auto grow = [&](TimePoint t) {
    if (t > now && (!grows || t < *grows)) grows = t;
  };
  const SchedulerConfig& config = scheduler.config();
  for (size_t g = 0; g < gpus; ++g) {
    const GpuView& v = server.view.gpus[g];
    server.free[g] = v.free_for_placement.count();
    server.jobs_on[g] = v.job_count;
    server.exclusive_on[g] = v.holds_exclusive ? 1 : 0;
    bool usable = true;
    if (rule_.shards) {
      const int free = rule_.shards->FreeShards(v);
      usable = free > 0;
      server.score += free;
    } else {
      // Free planned memory, as a consumable gpumem resource would count it; a GPU held by an
      // exclusive job has none to give.
      if (!v.holds_exclusive) server.score += std::max<int64_t>(0, v.free_for_placement.count());
      if (rule_.gates) {
        // The least demanding job there could be: one GPU, no memory, the GPU's own user and mode.
        PlacementRequest any;
        any.owner = v.mps_owner;
        const GateVerdict verdict = EvaluateGates(v, any, *rule_.gates);
        usable = verdict.gate == Gate::kPass;
        if (verdict.gate == Gate::kLaunchGrace) open(now + LaunchGraceLeft(v, *rule_.gates));
        if (verdict.gate == Gate::kUtilization) {
          // The window may let the GPU in as it slides: look again each sample interval, as the
          // server's own scheduler does for a head waiting on this gate.
          auto& log = gpus_[static_cast<size_t>(server.first_gpu) + g].smact_log;
          if (CanFall(log, now, utilization_horizon_)) {
            open(std::min(log.back().first + utilization_horizon_, now + config.sample_interval));
          }
        }
      }
    }
    if (usable) {
      ++server.usable;
      server.caps.push_back(v.free_for_placement.count());
    }
  }
  std::sort(server.caps.begin(), server.caps.end(), std::greater<>());
  // When a reservation of a running job shrinks (the free memory grows by an amount not accounted).
  for (size_t g = 0; g < gpus; ++g) {
    if (rule_.shards) break;  // shards count jobs, not memory
    for (int j : gpus_[static_cast<size_t>(server.first_gpu) + g].jobs) {
      if (const auto t = NextShrink(jobs_[static_cast<size_t>(j)], now)) grow(*t);
    }
  }
  if (server.eligible)
    Index(server_index, {-server.score, server_index});
  else
    Unindex(server_index);
  // Only the earliest time of each kind is kept: once it comes the server is read again before
  // use, and its next time found then. The accounting needs every shrink, busy or not; a server
  // busy with its own queue is woken by its own scheduler, and read again once its queue empties.
  if (grows) WakeToGrow(server_index, *grows);
  if (server.eligible && opens &&
      (!server.open_wakeup || *opens < *server.open_wakeup || *server.open_wakeup <= now)) {
    server.open_wakeup = opens;
    Push(*opens, EventType::kNodeWakeup, server_index, 0);
  }
}

std::optional<TimePoint> Engine::NextShrink(const SimJob& job, TimePoint now) const {
  // A running job's reservation shrinks to what it was seen to use once it is steady: quiet for
  // steady_after since its memory last grew (at its start and at the end of its warm-up) and at
  // 90% of its plan, or running for settle_timeout. Only a plan above what it uses can shrink.
  const SchedulerConfig& config = options_.scheduler;
  const Bytes peak = job.trace->profile.peak;
  const Bytes startup = std::min(options_.startup_memory, peak);
  const TimePoint warm = job.started + job.trace->profile.warmup;
  std::optional<TimePoint> next;
  auto consider = [&](TimePoint t) {
    if (t > now && (!next || t < *next)) next = t;
  };
  if (job.planned > peak) {
    consider(warm + config.steady_after);
    consider(job.started + config.settle_timeout);
  }
  if (now < warm && job.planned > startup) {
    if (startup >= job.planned.Scaled(0.9)) consider(job.started + config.steady_after);
    if (warm > job.started + config.settle_timeout) consider(job.started + config.settle_timeout);
  }
  return next;
}

void Engine::WakeToGrow(int server_index, TimePoint t) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  if (!server.grow_wakeup || t < *server.grow_wakeup || *server.grow_wakeup <= Now()) {
    server.grow_wakeup = t;
    Push(t, EventType::kNodeWakeup, server_index, 1);
  }
}

MemoryNeed Engine::NeedOn(const SimJob& job, int server_index) const {
  // With learn=on the server's colod plans with the peaks of the model's runs it has seen finish.
  if (!spec_.learn || job.trace->profile.name == "custom") return job.spec.memory;
  const auto it = peaks_.find({server_index, job.trace->profile.name});
  if (it == peaks_.end()) return job.spec.memory;
  auto learned = EstimateFromHistory(it->second);
  return learned.ok() ? learned->AsNeed() : job.spec.memory;
}

PlacementRequest Engine::RequestFor(const SimJob& job, int server_index) const {
  PlacementRequest r;
  r.job = job.spec.id;
  r.owner = job.spec.owner;
  r.gpus = job.spec.gpus;
  r.memory = NeedOn(job, server_index);
  r.memory_need = r.memory.Upper();
  r.sharing = job.spec.sharing;
  r.expected_smact = job.spec.expected_smact;
  return r;
}

bool Engine::MayPlace(const Server& server, const PlacementRequest& request) const {
  if (!server.eligible || server.usable < request.gpus) return false;
  if (rule_.gates && rule_.gates->memory) {
    const int64_t required = (request.memory_need + rule_.gates->memory_margin).count();
    return server.caps[static_cast<size_t>(request.gpus - 1)] >= required;
  }
  return true;
}

int64_t Engine::NeededScore(const PlacementRequest& request) const {
  if (spec_.learn) return 0;  // the need depends on the server
  if (rule_.shards) return request.gpus;
  // Only idle GPUs count towards an idle-only policy's score, each with all its free memory.
  if (rule_.gates && rule_.gates->idle_only) return request.gpus * idle_free_;
  if (rule_.gates && rule_.gates->memory) {
    return request.gpus * (request.memory_need + rule_.gates->memory_margin).count();
  }
  return 0;
}

bool Engine::TryStart(int index, int server_index, const PlacementRequest& request) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  // A picture read at this instant that took nothing since is the server as it is: the policy
  // answers on it. Otherwise the job is submitted and the server's own pass answers (reading the
  // view once), and taken back if it waits.
  Scheduler& scheduler = *server.scheduler;
  // A server busy with its own queue (a reservation, a recovery) takes nothing from the cluster.
  if (!scheduler.main_queue().empty() || !scheduler.recovery_queue().empty()) return false;
  const bool current = !server.changed && !server.stale && server.view.now == Now();
  if (current && !std::holds_alternative<Placed>(policy_.Place(server.view, request))) return false;
  SimJob& job = jobs_[static_cast<size_t>(index)];
  JobSpec spec = job.spec;
  spec.memory = request.memory;
  COLO_CHECK(scheduler.Submit(spec).ok());
  ++pass_count_;
  std::vector<Launch> launches = scheduler.Schedule();
  if (launches.empty()) {
    COLO_CHECK(!current);  // the policy on the same view said it would start
    COLO_CHECK(scheduler.Cancel(spec.id).ok());
    scheduler.Forget(spec.id);
    ReadServer(server_index);  // now known not to take it
    return false;
  }
  COLO_CHECK(launches.size() == 1 && launches.front().job == spec.id);
  if (index == reserved_job_) Unreserve();
  queue_.erase(job.rank);
  job.queued = false;
  job.server = server_index;
  AccountLaunch(server_index, launches.front());
  pending_.emplace_back(server_index, std::move(launches.front()));
  PushWakeup(server_index);
  return true;
}

bool Engine::StartSomewhere(int index, bool looked_at_last_round) {
  const SimJob& job = jobs_[static_cast<size_t>(index)];
  const PlacementRequest shared = RequestFor(job, -1);
  auto request_for = [&](int s) { return spec_.learn ? RequestFor(job, s) : shared; };
  if (looked_at_last_round) {
    // Every other server turned it down and has only taken more since.
    if (!round_changed_sorted_) {
      const bool best_fit = options_.node_choice == NodeChoice::kBestFit;
      std::sort(round_changed_.begin(), round_changed_.end(), [&](int a, int b) {
        const int64_t sa = servers_[static_cast<size_t>(a)].score;
        const int64_t sb = servers_[static_cast<size_t>(b)].score;
        return sa != sb ? (best_fit ? sa < sb : sa > sb) : a < b;
      });
      round_changed_sorted_ = true;
    }
    for (size_t i = 0; i < round_changed_.size(); ++i) {
      const int s = round_changed_[i];
      const Server& server = servers_[static_cast<size_t>(s)];
      const PlacementRequest request = request_for(s);
      if ((server.changed || MayPlace(server, request)) && TryStart(index, s, request)) {
        round_changed_sorted_ = false;
        return true;
      }
    }
    return false;
  }
  if (options_.node_choice == NodeChoice::kBestFit) {
    // The least free server that can start it: up the index from the last server with enough
    // free memory (servers whose place is not known are read first: they move down to it).
    while (!index_.empty() && servers_[static_cast<size_t>(index_.begin()->second)].grew)
      ReadServer(index_.begin()->second);
    // Groups of equal free memory, least first; within one, the lowest index first.
    auto group_end = index_.upper_bound({-NeededScore(shared), std::numeric_limits<int>::max()});
    while (group_end != index_.begin()) {
      const int64_t group = std::prev(group_end)->first;
      for (auto it = index_.lower_bound({group, std::numeric_limits<int>::min()});
           it != index_.end() && it->first == group;) {
        const std::pair<int64_t, int> key = *it;
        const int s = key.second;
        const Server& server = servers_[static_cast<size_t>(s)];
        const PlacementRequest request = request_for(s);
        if (server.changed || MayPlace(server, request)) {
          // The least free servers turn most jobs down: read first, then ask the policy.
          if (server.changed || server.stale || server.view.now != Now()) ReadServer(s);
          if (MayPlace(server, request) && TryStart(index, s, request)) return true;
        }
        it = index_.upper_bound(key);  // reading the server may have moved it
      }
      group_end = index_.lower_bound({group, std::numeric_limits<int>::min()});
    }
    return false;
  }
  // The most free server that can start it: down the index, passing over servers whose picture
  // rules the job out, until no server below could have the memory.
  for (auto it = index_.begin(); it != index_.end();) {
    const std::pair<int64_t, int> key = *it;
    const int s = key.second;
    Server& server = servers_[static_cast<size_t>(s)];
    if (server.grew) {
      ReadServer(s);  // its place was not known: it moves down to it
      it = index_.lower_bound(key);
      continue;
    }
    const PlacementRequest request = request_for(s);
    if (-key.first < NeededScore(request)) break;
    if ((server.changed || MayPlace(server, request)) && TryStart(index, s, request)) return true;
    it = index_.upper_bound(key);
  }
  return false;
}

bool Engine::Reserve(int index) {
  // The most free server (servers whose place is not known are read first: they move down).
  while (!index_.empty() && servers_[static_cast<size_t>(index_.begin()->second)].grew)
    ReadServer(index_.begin()->second);
  if (index_.empty()) return false;  // every server is busy with its own queue: next round
  const int s = index_.begin()->second;
  SimJob& job = jobs_[static_cast<size_t>(index)];
  Server& server = servers_[static_cast<size_t>(s)];
  JobSpec spec = job.spec;
  spec.memory = NeedOn(job, s);
  COLO_CHECK(server.scheduler->Submit(spec).ok());
  job.server = s;
  ++pass_count_;
  std::vector<Launch> launches = server.scheduler->Schedule();
  PushWakeup(s);
  if (!launches.empty()) {
    // A utilization window fell below the gate since the server was last looked at (it is looked
    // at again each sample interval): its own pass starts the job now.
    COLO_CHECK(launches.size() == 1 && launches.front().job == spec.id);
    queue_.erase(job.rank);
    job.queued = false;
    AccountLaunch(s, launches.front());
    pending_.emplace_back(s, std::move(launches.front()));
    return true;
  }
  reserved_job_ = index;
  reserved_server_ = s;
  server.eligible = false;
  Unindex(s);
  return false;
}

void Engine::Unreserve() {
  SimJob& job = jobs_[static_cast<size_t>(reserved_job_)];
  const int s = reserved_server_;
  Scheduler& scheduler = *servers_[static_cast<size_t>(s)].scheduler;
  COLO_CHECK(scheduler.Cancel(job.trace->id).ok());
  scheduler.Forget(job.trace->id);
  job.server = -1;
  reserved_job_ = reserved_server_ = -1;
  ReadServer(s);  // eligible again: later jobs of this round may use it
  if (std::find(round_changed_.begin(), round_changed_.end(), s) == round_changed_.end())
    round_changed_.push_back(s);
  round_changed_sorted_ = false;
}

void Engine::Round() {
  round_changed_.clear();
  if (left_waiting_) {
    // The jobs the last round left waiting were turned down by every server: they are tried on
    // those that may take more since, read now.
    for (int s : changed_) {
      if (!servers_[static_cast<size_t>(s)].changed) continue;
      ReadServer(s);
      round_changed_.push_back(s);
    }
    changed_.clear();
  } else {
    // No such jobs: servers are read when a job needs them.
    std::erase_if(changed_, [&](int s) { return !servers_[static_cast<size_t>(s)].changed; });
  }
  if (left_waiting_ && !queue_grew_ && !queue_moved_ &&
      std::none_of(round_changed_.begin(), round_changed_.end(), [&](int s) {
        const Server& server = servers_[static_cast<size_t>(s)];
        return server.eligible && server.usable > 0;
      })) {
    // Only the jobs already looked at wait, and no server that changed has a GPU any job could
    // use: nothing can start. They keep their standing, as if looked at now.
    return;
  }
  queue_moved_ = false;
  ++round_;
  round_changed_sorted_ = false;
  const bool fifo = options_.cluster == ClusterMode::kFifo;
  // Whether a server that changed since the last round could take any job (it has a usable GPU,
  // or its picture does not say): if none can, the jobs that round left waiting still wait.
  auto changed_may_take = [&] {
    return std::any_of(round_changed_.begin(), round_changed_.end(), [&](int s) {
      const Server& server = servers_[static_cast<size_t>(s)];
      return server.eligible && (server.usable > 0 || server.stale || server.changed);
    });
  };
  int waiting = 0, old_seen = 0, last_rank = old_until_rank_;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (options_.queue_depth > 0 && waiting >= options_.queue_depth) break;
    const int rank = *it;
    const int index = arrivals_[static_cast<size_t>(rank)];
    SimJob& job = jobs_[static_cast<size_t>(index)];
    // Looked at in the last round (the jobs up to the last one it looked at, but requeued ones).
    const bool looked_at = job.checked_round >= 0 && rank <= old_until_rank_;
    const bool oldest = it == queue_.begin();
    if (looked_at && !oldest && !requeued_ && !changed_may_take()) {
      // Every job the last round left waiting and this one has not reached still waits: go past
      // them to the jobs it never looked at.
      const int rest = left_waiting_count_ - left_outside_ - old_seen;
      waiting += rest;
      old_seen += rest;
      it = queue_.upper_bound(old_until_rank_);
      continue;
    }
    job.checked_round = round_;
    last_rank = std::max(last_rank, rank);
    if (looked_at) ++old_seen;
    if (oldest && reserved_job_ >= 0 && reserved_job_ != index) {
      // A requeued job went ahead of the one holding the reservation: it passes to the oldest.
      jobs_[static_cast<size_t>(reserved_job_)].checked_round = -2;
      Unreserve();
    }
    ++it;  // starting the job takes it out of the queue
    if (StartSomewhere(index, looked_at)) continue;
    // It waits. The oldest waiting job reserves the most free server, where it queues: nothing
    // else is sent there, so that server's own scheduler starts it once it fits.
    if (oldest && reserved_job_ < 0 && Reserve(index)) continue;
    ++waiting;
    if (fifo) break;
  }
  old_until_rank_ = last_rank;
  left_waiting_count_ = waiting;
  left_outside_ = 0;
  requeued_ = false;
  left_waiting_ = waiting > 0;
}

void Engine::StartPending() {
  // Launches are carried out once the instant's passes and round have decided, as a server's pass
  // decides all its launches before any starts: every decision of the instant saw the same
  // samples.
  for (size_t i = 0; i < pending_.size(); ++i) Start(pending_[i].first, pending_[i].second);
  pending_.clear();
}

void Engine::CheckDispatch() {
  // A sliding utilization window lets a GPU in at any moment; the cluster, as the server's own
  // scheduler, looks again each sample interval while it can fall. With that gate on, a job counts
  // as wrongly waiting once a server could have started it for a whole interval.
  const Duration tolerance = rule_.gates && rule_.gates->utilization
                                 ? options_.scheduler.sample_interval
                                 : Duration::zero();
  const bool fifo = options_.cluster == ClusterMode::kFifo;
  int looked = 0;
  for (int rank : queue_) {
    if (options_.queue_depth > 0 && looked >= options_.queue_depth) break;
    if (fifo && looked >= 1) break;
    ++looked;
    SimJob& job = jobs_[static_cast<size_t>(arrivals_[static_cast<size_t>(rank)])];
    bool startable = false;
    for (size_t s = 0; s < servers_.size(); ++s) {
      const Scheduler& scheduler = *servers_[s].scheduler;
      if (!scheduler.main_queue().empty() || !scheduler.recovery_queue().empty()) continue;
      ++dispatch_checks_;
      startable |= std::holds_alternative<Placed>(
          policy_.Place(scheduler.View(), RequestFor(job, static_cast<int>(s))));
    }
    if (!startable) {
      job.startable_since.reset();
      continue;
    }
    if (!job.startable_since) job.startable_since = Now();
    if (Now() - *job.startable_since >= tolerance) ++dispatch_violations_;
  }
}

SimResult Engine::Run() {
  const int per_server = options_.server.gpus;
  for (int s = 0; s < options_.servers; ++s) {
    Server server;
    SchedulerConfig config = options_.scheduler;
    config.recovery = spec_.recovery;
    // Its jobs crash when their GPU overflows, never at a per-job MPS limit.
    config.mps_limits_enforced = false;
    server.scheduler = std::make_unique<Scheduler>(clock_, policy_, config);
    server.first_gpu = static_cast<int>(gpus_.size());
    for (int i = 0; i < per_server; ++i) {
      GpuInfo info;
      info.uuid = fmt::format("GPU-sim-{}-{}", s, i);
      info.model = options_.server.gpu_model;
      info.capacity = options_.server.capacity;
      info.node = 0;
      info.default_mode = spec_.sharing;
      SimGpu gpu;
      gpu.server = s;
      gpu.local = server.scheduler->AddGpu(info);
      gpu.used = options_.server.baseline_used;
      gpu.watts = options_.server.idle_watts;
      gpus_.push_back(gpu);
    }
    servers_.push_back(std::move(server));
    by_demand_.insert({0, s});
  }
  if (options_.record_timeline) {
    timeline_.series.resize(gpus_.size());
    timeline_.capacity_gib = options_.server.capacity.gib();
    timeline_.max_watts = options_.server.tdp_watts;
  }
  jobs_.resize(trace_.jobs.size());
  // Arrivals are known up front: they are taken from a sorted list rather than the event heap,
  // which then holds only what running jobs and wake-ups schedule (a few per GPU, not the trace).
  std::vector<int>& arrivals = arrivals_;
  arrivals.resize(trace_.jobs.size());
  for (size_t i = 0; i < trace_.jobs.size(); ++i) {
    jobs_[i].trace = &trace_.jobs[i];
    COLO_CHECK(trace_.jobs[i].id == static_cast<int64_t>(i + 1));
    arrivals[i] = static_cast<int>(i);
  }
  std::stable_sort(arrivals.begin(), arrivals.end(), [&](int a, int b) {
    return trace_.jobs[static_cast<size_t>(a)].submit < trace_.jobs[static_cast<size_t>(b)].submit;
  });
  for (size_t k = 0; k < arrivals.size(); ++k)
    jobs_[static_cast<size_t>(arrivals[k])].rank = static_cast<int>(k);
  if (queue_mode_) {
    const SchedulerConfig& config = options_.scheduler;
    const double decay = 1.0 - 2.0 / (config.window_samples + 1.0);
    const double ema_steps = decay > 0 ? std::ceil(std::log(1e-2) / std::log(decay)) : 0.0;
    utilization_horizon_ = std::max<Duration>(
        config.sample_interval * config.window_samples,
        std::chrono::duration_cast<Duration>(config.sample_interval * ema_steps));
    idle_free_ = (options_.server.capacity - options_.server.baseline_used).count();
    for (int s = 0; s < options_.servers; ++s) MarkChanged(s, Change::kFreed);
  }
  size_t next_arrival = 0;
  auto arrival_time = [&](size_t k) {
    return TimePoint(trace_.jobs[static_cast<size_t>(arrivals[k])].submit);
  };
  // Initial samples so every GPU's window starts at the trace's beginning.
  for (int s = 0; s < options_.servers; ++s) {
    for (int i = 0; i < per_server; ++i) {
      servers_[static_cast<size_t>(s)].scheduler->OnGpuSample(
          GpuSample{i, Now(), options_.server.baseline_used, 0.0, -1, -1, true});
    }
  }
  while (!events_.empty() || next_arrival < arrivals.size()) {
    Event event;
    // At equal times arrivals come first, as if they had been scheduled before everything else.
    if (next_arrival < arrivals.size() &&
        (events_.empty() || arrival_time(next_arrival) <= Top().time)) {
      event = Event{arrival_time(next_arrival), 0, EventType::kArrival, arrivals[next_arrival], 0};
      ++next_arrival;
    } else {
      event = Pop();
    }
    ++event_count_;
    clock_.AdvanceTo(event.time);
    const int subject = static_cast<int>(event.subject);
    switch (event.type) {
      case EventType::kArrival:
        Arrive(subject);
        break;
      case EventType::kStartupDone:
        StartupDone(subject, event.tag);
        break;
      case EventType::kWarmup:
        Warmup(subject, event.tag);
        break;
      case EventType::kCompletion:
        Complete(subject, event.tag);
        break;
      case EventType::kWakeup: {
        Server& server = servers_[static_cast<size_t>(subject)];
        if (server.wakeup && *server.wakeup == event.time) {
          server.wakeup.reset();
          MarkDirty(subject);
        }
        break;
      }
      case EventType::kNodeWakeup: {
        Server& server = servers_[static_cast<size_t>(subject)];
        auto& wakeup = event.tag == 0 ? server.open_wakeup : server.grow_wakeup;
        if (wakeup && *wakeup == event.time) {
          wakeup.reset();
          MarkChanged(subject, event.tag == 0 ? Change::kOpened : Change::kFreed);
        }
        break;
      }
    }
    // One placement pass per server per instant, after every event of that instant.
    const bool instant_ends =
        (events_.empty() || Top().time > event.time) &&
        (next_arrival == arrivals.size() || arrival_time(next_arrival) > event.time);
    if (instant_ends) {
      for (size_t i = 0; i < dirty_.size(); ++i) {
        const int s = dirty_[i];
        servers_[static_cast<size_t>(s)].dirty = false;
        Pass(s);
      }
      dirty_.clear();
      // Then the cluster queue, when something it waits for may have changed.
      if (queue_mode_) {
        if (!queue_.empty() && (!changed_.empty() || queue_grew_)) Round();
        queue_grew_ = false;
        StartPending();
        if (options_.check_dispatch) CheckDispatch();
      }
    }
  }
  return Finish();
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

SimResult Engine::Finish() {
  SimResult result;
  Metrics& m = result.metrics;
  m.label = spec_.label;
  m.estimator = spec_.estimator;
  m.jobs = static_cast<int>(jobs_.size());
  std::vector<double> waits, execs, jcts;
  double first_submit = jobs_.empty() ? 0 : ToSeconds(jobs_.front().trace->submit);
  double last_end = first_submit;
  for (const SimJob& job : jobs_) {
    JobResult r;
    r.id = job.trace->id;
    r.name = job.trace->name;
    r.server = job.server;
    r.submit_s = ToSeconds(job.trace->submit);
    if (job.rejected) {
      r.state = JobState::kFailed;
      r.reason = "rejected: " + job.reject_reason;
      ++m.rejected;
      ++m.failed;
      result.jobs.push_back(r);
      continue;
    }
    const JobRecord* record =
        job.server < 0 ? nullptr
                       : servers_[static_cast<size_t>(job.server)].scheduler->job(job.trace->id);
    if (record == nullptr) {
      // Still in the cluster queue when nothing more could happen.
      COLO_CHECK(queue_mode_ && job.queued);
      r.state = JobState::kFailed;
      r.attempts = job.prior_attempts;
      r.ooms = job.prior_ooms;
      r.start_s = job.first_start_s;
      r.reason = "never placed: waiting in the cluster queue";
      ++m.failed;
      result.jobs.push_back(r);
      continue;
    }
    r.state = record->state;
    r.attempts = record->attempts + job.prior_attempts;
    r.ooms = record->oom_count + job.prior_ooms;
    r.reason = record->end_reason;
    if (record->ever_started) r.start_s = ToSeconds(record->first_started);
    if (job.prior_attempts > 0) r.start_s = job.first_start_s;  // its first start, elsewhere
    if (IsTerminal(record->state)) r.end_s = ToSeconds(record->finished);
    if (!IsTerminal(record->state)) {
      // Nothing more could happen to it: the trace ended with the job still waiting.
      r.state = JobState::kFailed;
      r.reason =
          record->last_wait ? "never placed: " + record->last_wait->Reason() : "never placed";
    }
    if (r.state == JobState::kSucceeded) {
      ++m.succeeded;
      waits.push_back(r.start_s - r.submit_s);
      execs.push_back(r.end_s - r.start_s);
      jcts.push_back(r.end_s - r.submit_s);
    } else {
      ++m.failed;
    }
    if (r.end_s >= 0) last_end = std::max(last_end, r.end_s);
    result.jobs.push_back(r);
  }
  m.total_time_s = last_end - first_submit;
  m.wait_avg_s = Mean(waits);
  m.wait_p50_s = Percentile(waits, 0.5);
  m.wait_p95_s = Percentile(waits, 0.95);
  m.exec_avg_s = Mean(execs);
  m.exec_p50_s = Percentile(execs, 0.5);
  m.exec_p95_s = Percentile(execs, 0.95);
  m.jct_avg_s = Mean(jcts);
  m.jct_p50_s = Percentile(jcts, 0.5);
  m.jct_p95_s = Percentile(jcts, 0.95);
  m.wait_p99_s = Percentile(waits, 0.99);
  m.jct_p99_s = Percentile(jcts, 0.99);
  m.requeues = requeues_;
  m.rounds = round_;
  m.dispatch_checks = dispatch_checks_;
  m.dispatch_violations = dispatch_violations_;
  m.oom_crashes = oom_crashes_;
  m.lost_gpu_hours = lost_gpu_seconds_ / 3600.0;
  const TimePoint end = AtSeconds(last_end);
  const double span = std::max(1e-9, last_end - first_submit);
  double energy = 0, smact = 0, memory = 0;
  for (SimGpu& gpu : gpus_) {
    Integrate(gpu, end);
    energy += gpu.energy_j;
    const double gpu_smact = gpu.smact_seconds / span;
    const double gpu_memory = gpu.memory_byte_seconds / span / static_cast<double>(1 << 30);
    m.gpu_smact.push_back(gpu_smact);
    m.gpu_memory_gib.push_back(gpu_memory);
    smact += gpu_smact;
    memory += gpu_memory / options_.server.capacity.gib();
  }
  m.energy_mj = energy / 1e6;
  m.mean_smact = gpus_.empty() ? 0 : smact / static_cast<double>(gpus_.size());
  m.mean_memory_frac = gpus_.empty() ? 0 : memory / static_cast<double>(gpus_.size());
  m.events = event_count_;
  m.passes = pass_count_;
  result.timeline = std::move(timeline_);
  return result;
}

}  // namespace

std::optional<std::optional<Bytes> TaskFileMemory::*> TaskFileLine(std::string_view estimator) {
  if (!StartsWith(estimator, "rad:")) return std::nullopt;
  const std::string_view line = estimator.substr(4);
  if (line == "oracle") return &TaskFileMemory::measured;
  if (line == "horus") return &TaskFileMemory::horus;
  if (line == "faketensor") return &TaskFileMemory::faketensor;
  if (line == "gpumemnet") return &TaskFileMemory::gpumemnet;
  return std::nullopt;
}

Result<SimResult> Simulate(const Trace& trace, const RunSpec& spec, const SimOptions& options) {
  if (options.servers < 1) return InvalidArgument("at least one server is needed");
  if (options.server.gpus < 1) return InvalidArgument("a server needs at least one GPU");
  if (options.queue_depth < 0) return InvalidArgument("the queue depth cannot be negative");
  const bool task_file_estimate = StartsWith(spec.estimator, "rad:");
  if (task_file_estimate && !TaskFileLine(spec.estimator)) {
    return InvalidArgument(fmt::format(
        "unknown task-file estimator '{}' (use rad:oracle, rad:horus, rad:faketensor or "
        "rad:gpumemnet)",
        spec.estimator));
  }
  const bool has_task_files =
      std::any_of(trace.jobs.begin(), trace.jobs.end(),
                  [](const TraceJob& j) { return j.task_file.has_value(); });
  if (task_file_estimate && !has_task_files && spec.estimator != "rad:oracle") {
    return InvalidArgument(fmt::format(
        "est={} reads CARMA's task files: it needs a carma:SCRIPT trace", spec.estimator));
  }
  // Without task files, CARMA's oracle line is the true peak itself.
  RunSpec run = spec;
  if (task_file_estimate && !has_task_files) run.estimator = "oracle";
  auto estimator =
      MakeEstimator(StartsWith(run.estimator, "rad:") ? "declared" : run.estimator, options.seed);
  if (!estimator.ok()) return estimator.status();
  if (IsShardSpec(run.policy)) {
    auto shards = ParseShardSpec(run.policy);
    if (!shards.ok()) return shards.status();
    const ShardPolicy policy(*shards);
    Engine engine(trace, run, options, policy, **estimator, ClusterRule{nullptr, &policy});
    return engine.Run();
  }
  auto policy = MakePolicy(run.policy, options.gates);
  if (!policy.ok()) return policy.status();
  Engine engine(trace, run, options, **policy, **estimator,
                ClusterRule{&(*policy)->gates(), nullptr});
  return engine.Run();
}

}  // namespace colo

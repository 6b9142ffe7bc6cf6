#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "common/check.h"
#include "common/clock.h"
#include "common/strings.h"
#include "estimate/estimator.h"
#include "estimate/job_estimators.h"
#include "policies/registry.h"
#include "sim/cluster_queue.h"
#include "sim/engine_state.h"
#include "sim/indexed_heap.h"
#include "sim/shard_policy.h"
#include "sim/sim_result.h"

namespace colo {

Result<RunSpec> ParseRunSpec(const std::string& text, const RunSpec& defaults) {
  auto policy = ParsePolicySpec(text, defaults.policy.gates);
  if (!policy.ok()) return policy.status();
  RunSpec spec;
  spec.label = policy->text;
  spec.estimator = policy->estimator.value_or(defaults.estimator);
  spec.sharing = policy->sharing.value_or(defaults.sharing);
  spec.recovery = policy->recovery.value_or(defaults.recovery);
  spec.learn = policy->learn.value_or(defaults.learn);
  spec.policy = *std::move(policy);
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

// 32 bytes, so that the heap moves two in a cache line.
struct Event {
  TimePoint time;
  uint64_t seq;
  uint64_t tag;  // attempt or version the event belongs to
  int subject;   // job index or server index
  EventType type;
};

struct Later {
  bool operator()(const Event& x, const Event& y) const {
    return x.time != y.time ? x.time > y.time : x.seq > y.seq;
  }
};

// Each running job's pending completion, at most one a job (keyed by the job's index). A job's
// completion moves in place when its rate changes and goes when the job leaves its GPUs, where a
// plain heap kept every superseded one until it came due (about four and a half a job under
// best-fit, as co-runners come and go).
using CompletionHeap = sim::IndexedHeap<Event, Later>;

// Drives the simulation: events in time order, the simulated GPUs (interference, OOM, energy),
// one scheduler per server, and (with a cluster queue) the ClusterQueue that sends jobs to them.
class Engine final : public sim::ClusterHost {
 public:
  Engine(const Trace& trace, const RunSpec& spec, const SimOptions& options,
         const PlacementPolicy& policy, const MemoryEstimator& estimator, sim::ClusterRule rule)
      : estimator_(estimator),
        task_file_line_(TaskFileLine(spec.estimator)),
        queue_mode_(options.cluster != ClusterMode::kPerServer),
        logs_smact_(queue_mode_ && rule.gates && rule.gates->utilization),
        state_(trace, spec, options, policy, rule) {}

  SimResult Run();

  // sim::ClusterHost
  void WakeAt(int server, TimePoint time, uint64_t tag) override {
    Push(time, EventType::kNodeWakeup, server, tag);
  }
  void PushWakeup(int server) override;
  void Start(int server, Launch launch) override;

 private:
  using SimJob = sim::SimJob;
  using SimGpu = sim::SimGpu;
  using Server = sim::Server;
  using Change = sim::Change;

  // The earliest pending event, the heap's top, the first lane's head or the earliest
  // completion; nullptr when none is pending.
  const Event* Next() const {
    const Event* next = first_lane_ < 0 ? nullptr : &lanes_[first_lane_].events.front();
    if (!events_.empty() && (!next || Later{}(*next, events_.front()))) next = &events_.front();
    if (!completions_.empty() && (!next || Later{}(*next, completions_.top())))
      next = &completions_.top();
    return next;
  }
  // The earliest pending event that is still live. Superseded ones on top are dropped on the way:
  // none moves the clock or ends an instant, so the run does not depend on which of them are still
  // pending (Compact drops them only once the heap has doubled).
  const Event* NextLive() {
    for (;;) {
      const Event* next = Next();
      // A completion pending is a running job's current one (CompletionHeap).
      if (!next || next->type == EventType::kCompletion || Live(*next)) return next;
      Take(next);
    }
  }
  // Takes out the event Next() returned.
  Event Take(const Event* next) {
    const Event e = *next;
    if (!completions_.empty() && next == &completions_.top()) {
      completions_.Pop();
    } else if (!events_.empty() && next == &events_.front()) {
      std::pop_heap(events_.begin(), events_.end(), Later{});
      events_.pop_back();
    } else {
      lanes_[first_lane_].events.pop_front();
      --lane_events_;
      FindFirstLane();
    }
    return e;
  }
  void FindFirstLane() {
    first_lane_ = -1;
    for (size_t i = 0; i < lanes_.size(); ++i) {
      const auto& lane = lanes_[i].events;
      if (!lane.empty() &&
          (first_lane_ < 0 || Later{}(lanes_[first_lane_].events.front(), lane.front())))
        first_lane_ = static_cast<int>(i);
    }
  }
  // False for an event that a later one superseded (its handler would ignore it).
  bool Live(const Event& e) const {
    switch (e.type) {
      case EventType::kArrival:
        return true;
      case EventType::kStartupDone:
      case EventType::kWarmup: {
        if (!jobs_.live(static_cast<size_t>(e.subject))) return false;
        const SimJob& job = jobs_[static_cast<size_t>(e.subject)];
        return job.running && job.attempt == e.tag;
      }
      case EventType::kCompletion: {
        if (!jobs_.live(static_cast<size_t>(e.subject))) return false;
        const SimJob& job = jobs_[static_cast<size_t>(e.subject)];
        return job.running && job.version == e.tag;
      }
      case EventType::kWakeup: {
        const auto& wakeup = servers_[static_cast<size_t>(e.subject)].wakeup;
        return wakeup && *wakeup == e.time;
      }
      case EventType::kNodeWakeup:
        return cluster_->IsCurrentWakeup(e.subject, e.tag, e.time);
    }
    return true;
  }
  // Drops superseded events, from the lanes too, so that the heap and the lanes stay the size of
  // what is pending (NextLive drops any that come due first: none is ever handled).
  void Compact() {
    const auto superseded = [&](const Event& e) { return !Live(e); };
    std::erase_if(events_, superseded);
    std::make_heap(events_.begin(), events_.end(), Later{});
    lane_events_ = 0;
    for (Lane& lane : lanes_) {
      std::erase_if(lane.events, superseded);
      lane_events_ += lane.events.size();
    }
    FindFirstLane();
    compact_at_ = std::max(kMinCompaction, 2 * (events_.size() + lane_events_));
  }
  void Push(TimePoint t, EventType type, int subject, uint64_t tag) {
    events_.push_back(Event{t, next_seq_++, tag, subject, type});
    std::push_heap(events_.begin(), events_.end(), Later{});
    if (events_.size() + lane_events_ >= compact_at_) Compact();
  }
  // An event `delay` from now. Events of one delay come due in the order they were scheduled, so
  // the first few delays in use (a job class's start-up or warm-up) each get a lane, which keeps
  // them in that order without the heap's sifting; any other goes to the heap.
  void PushAfter(Duration delay, EventType type, int subject, uint64_t tag) {
    const TimePoint t = Now() + delay;
    auto lane =
        std::find_if(lanes_.begin(), lanes_.end(), [&](const Lane& l) { return l.delay == delay; });
    if (lane == lanes_.end()) {
      if (lanes_.size() == kMaxLanes) return Push(t, type, subject, tag);
      lane = lanes_.insert(lanes_.end(), Lane{delay, {}});
    }
    const bool was_empty = lane->events.empty();
    lane->events.push_back(Event{t, next_seq_++, tag, subject, type});
    if (was_empty) FindFirstLane();
    if (events_.size() + ++lane_events_ >= compact_at_) Compact();
  }
  TimePoint Now() const { return clock_.Now(); }
  // The job's spec, into a blank one (a submission's own, made in place).
  void SpecFor(const TraceJob& t, JobSpec& spec);
  // The job arrives, `rank`-th of the trace.
  void Arrive(int index, int rank);
  void StartupDone(int index, uint64_t attempt);
  void Warmup(int index, uint64_t attempt);
  void Complete(int index, uint64_t version);
  // What the job's run taught its server's colod, through the rule colod learns by
  // (core/run_learning.h): the jobs of its model there expect to run as long, and with learn=on
  // the queued ones plan with its peak.
  void LearnFrom(const SimJob& job, const RunEvidence& run);
  void Pass(int server);
  void MarkDirty(int server);
  void AddDemand(int server, int gpus);
  // The GPUs whose jobs' progress must be brought up to now (these GPUs, the event's job's, and
  // every GPU their jobs also run on), brought up to now (energy, progress, the timeline) so that
  // a change can be applied, in ascending order: `gpus` itself where that is all of them (one GPU
  // whose jobs run on it alone, the usual event), else a buffer reused by every event.
  const std::vector<int>& Touch(const std::vector<int>& gpus);
  // What an event changed on the GPUs Touch was given.
  enum class Changed {
    kSharing,  // who shares them, or which of their jobs still start up: slowdowns and rates
    kMemory,   // only what their jobs hold
    kFreed,    // a job left them
  };
  // After the change to the GPUs Touch was given: the rates of their jobs and the figures of the
  // GPUs it returned (`gpus`), each sampled by its server's scheduler. Unless a job left, the
  // servers only took more, unless a GPU's SMACT fell.
  void Refresh(const std::vector<int>& gpus, Changed changed = Changed::kSharing);
  // Refresh's slowdowns on the GPUs Touch was given, and the rates of the jobs on `gpus` (a
  // completion scheduled again for each whose rate changed).
  void UpdateRates(const std::vector<int>& gpus);
  void Detach(SimJob& job, const char* outcome);
  // After its server's scheduler was told the job's attempt ended: if the job ended there for
  // good, its result is written from what the scheduler says of it, the scheduler forgets it and
  // its state goes after this event (Drop).
  void Settle(SimJob& job);
  // The job ended for good and its result is written: its state goes after this event (nothing
  // of the event's handling reads it then).
  void Retire(const SimJob& job, JobResult result);
  // Whether the job's state is still there for an event of its own.
  bool HasState(int index) const { return jobs_.live(static_cast<size_t>(index)); }
  // A running job its server's scheduler stops for the head of its queue (fair share).
  void Preempt(const Preemption& preemption);
  void MarkChanged(int server, Change change) {
    if (cluster_) cluster_->MarkChanged(server, change);
  }

  const MemoryEstimator& estimator_;
  // The task-file line CARMA's estimator policies read (TaskFileLine), if the run plans with one.
  const std::optional<std::optional<Bytes> TaskFileMemory::*> task_file_line_;
  const bool queue_mode_;
  // The cluster queue reads a GPU's log of SM activity only where a gate can hold the GPU for its
  // utilization (SimGpu::smact_log).
  const bool logs_smact_;
  sim::EngineState state_;
  // Names for what the engine uses of its state at every event.
  const Trace& trace_ = state_.trace;
  const RunSpec& spec_ = state_.spec;
  const SimOptions& options_ = state_.options;
  const sim::ClusterRule& rule_ = state_.rule;
  ManualClock& clock_ = state_.clock;
  sim::JobTable& jobs_ = state_.jobs;
  std::vector<SimGpu>& gpus_ = state_.gpus;
  std::vector<Server>& servers_ = state_.servers;
  // The cluster queue (ClusterMode::kQueue and kFifo); made once the servers are.
  std::optional<sim::ClusterQueue> cluster_;
  // A binary heap (earliest on top). Rescheduling leaves superseded events behind; Compact() drops
  // them when the heap and the lanes have doubled, so they stay the size of what is really pending.
  std::vector<Event> events_;
  size_t compact_at_ = kMinCompaction;
  static constexpr size_t kMinCompaction = 1 << 12;
  // Beside the heap, the events of a fixed delay (PushAfter), each lane in time order. Between
  // them, as in the heap, the earlier time goes first and then the one scheduled first (`seq`).
  struct Lane {
    Duration delay;
    std::deque<Event> events;
  };
  std::vector<Lane> lanes_;
  // Beside them, running jobs' completions, one a job: moved in place when the job's rate changes
  // and erased when it leaves its GPUs, so that none pending is ever superseded.
  CompletionHeap completions_;
  size_t lane_events_ = 0;  // in all lanes
  int first_lane_ = -1;     // the lane with the earliest head, if any has one
  static constexpr size_t kMaxLanes = 4;
  uint64_t next_seq_ = 0;
  // (demand, server), so the dispatcher finds the least-loaded server without scanning them all;
  // ties go to the lowest index.
  std::set<std::pair<int, int>> by_demand_;
  std::vector<int> dirty_;
  std::vector<int> ended_;         // jobs whose result this event wrote: their state goes after it
  std::vector<CoRunner> runners_;  // scratch for Refresh
  std::vector<double> computed_;   // scratch for Refresh
  std::vector<int> closure_;       // scratch for Touch
  // The GPUs of the event Touch was last given: its job's, which stay as they are while the
  // event is handled (the job's state goes only after it).
  const std::vector<int>* touched_ = nullptr;
  std::vector<JobUse> job_use_;  // scratch for Refresh's samples
  JobDescription description_;   // scratch for SpecFor
  Timeline timeline_;
  int oom_crashes_ = 0;
  int preemptions_ = 0;
  double lost_gpu_seconds_ = 0;
  int64_t event_count_ = 0;
};

const std::vector<int>& Engine::Touch(const std::vector<int>& gpus) {
  touched_ = &gpus;
  // The usual event: one GPU whose jobs all run on it alone, the closure `gpus` itself. Otherwise
  // it is made in closure_, sorted (a launch lists a job's GPUs in the policy's order).
  const auto alone = [&](int g) {
    return std::all_of(gpus_[g].jobs.begin(), gpus_[g].jobs.end(),
                       [&](int j) { return jobs_[j].gpus.size() == 1; });
  };
  const std::vector<int>* closure = &gpus;
  if (gpus.size() > 1 || (gpus.size() == 1 && !alone(gpus.front()))) {
    closure_.assign(gpus.begin(), gpus.end());
    for (int g : gpus) {
      for (int j : gpus_[g].jobs) {
        for (int h : jobs_[j].gpus)
          if (std::find(closure_.begin(), closure_.end(), h) == closure_.end())
            closure_.push_back(h);
      }
    }
    std::sort(closure_.begin(), closure_.end());
    closure = &closure_;
  }
  const TimePoint now = Now();
  for (int g : *closure) {
    gpus_[g].IntegrateTo(now);
    for (int j : gpus_[g].jobs) {
      SimJob& job = jobs_[j];
      if (job.progress_at == now) continue;  // brought up to now on another of its GPUs
      job.remaining_s -= job.rate * ToSeconds(now - job.progress_at);
      job.progress_at = now;
    }
  }
  return *closure;
}

void Engine::UpdateRates(const std::vector<int>& gpus) {
  const TimePoint now = Now();
  // Slowdowns depend only on who shares each GPU (and which of them still start up): they
  // changed only on the GPUs the event touched.
  std::vector<CoRunner>& runners = runners_;
  for (int g : *touched_) {
    SimGpu& gpu = gpus_[g];
    runners.clear();
    SharingMode mode = SharingMode::kExclusive;
    // Jobs still starting up neither slow the others nor are slowed: they have no kernels yet.
    bool any_starting = false;
    for (int j : gpu.jobs) {
      const SimJob& job = jobs_[j];
      if (job.starting)
        any_starting = true;
      else
        runners.push_back(CoRunner{job.trace->profile.smact, job.thread_percent});
      mode = job.mode;
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
  // Rates: each job's on its slowest GPU.
  for (int g : gpus) {
    const SimGpu& gpu = gpus_[g];
    for (size_t i = 0; i < gpu.jobs.size(); ++i) {
      const int j = gpu.jobs[i];
      SimJob& job = jobs_[j];
      double slowest = std::max(1.0, gpu.slowdown[i]);
      for (int h : job.gpus) {
        if (h == g) continue;  // its place there is i
        const auto& on = gpus_[h].jobs;
        const size_t pos = static_cast<size_t>(std::find(on.begin(), on.end(), j) - on.begin());
        slowest = std::max(slowest, gpus_[h].slowdown[pos]);
      }
      const double rate = 1.0 / slowest;
      if (rate != job.rate) {
        job.rate = rate;
        ++job.version;
        const double left = std::max(0.0, job.remaining_s) / rate;
        completions_.Set(
            Event{now + SecondsF(left), next_seq_++, job.version, j, EventType::kCompletion});
      }
    }
  }
}

void Engine::Refresh(const std::vector<int>& gpus, Changed changed) {
  const TimePoint now = Now();
  const bool freed = changed == Changed::kFreed;
  // A job's rate follows from the slowdowns on its GPUs alone, which change only with who shares
  // them: where only memory changed, every rate is still the one set at their last change.
  if (changed != Changed::kMemory) UpdateRates(gpus);
  bool any_unreported = false;
  for (int g : gpus) {
    SimGpu& gpu = gpus_[g];
    Server& server = servers_[static_cast<size_t>(gpu.server)];
    double smact = 0;
    bool computing = false;
    Bytes used = options_.server.baseline_used;
    // A simulated job holds its start-up memory (its CUDA context) from launch: its process is
    // on the GPU from the first sample after it. Where every job here was told its memory since
    // it last changed, the sample tells only the GPU's figures.
    bool all_reported = true;
    // What each job's processes use, read only where the sample lists them.
    job_use_.clear();
    for (int j : gpu.jobs) {
      const SimJob& job = jobs_[j];
      if (!job.starting) {
        smact += job.trace->profile.smact * job.rate;
        computing = true;
      }
      used += job.memory;
      all_reported = all_reported && job.reported;
      job_use_.push_back(JobUse{job.trace->id, job.memory});
    }
    any_unreported = any_unreported || !all_reported;
    const double smact_before = gpu.smact;
    gpu.smact = std::min(1.0, smact);
    gpu.used = used;
    if (queue_mode_) {
      auto& log = gpu.smact_log;
      if (logs_smact_ && (log.empty() || log.back().second != gpu.smact)) {
        if (!log.empty() && log.back().first == now)
          log.back().second = gpu.smact;
        else
          log.push_back({now, gpu.smact});
        // What the cluster queue would drop before it reads the log (older than the utilization
        // horizon), dropped now: unread, the log would grow with every change for the whole run.
        const TimePoint horizon = now - cluster_->utilization_horizon();
        while (log.size() >= 2 && log[1].first <= horizon) log.pop_front();
      }
      MarkChanged(gpu.server, freed || gpu.smact < smact_before ? Change::kOpened : Change::kTook);
    }
    // A GPU whose jobs are all still starting up draws about its idle power (measured on the
    // H200: 86 W against 80 W idle).
    if (computing != gpu.computing || gpu.smact != smact_before) {
      gpu.computing = computing;
      gpu.watts = options_.power.Watts(options_.server.idle_watts, options_.server.tdp_watts,
                                       computing, gpu.smact);
    }
    // Its SM activity alone is the trace's, not a measurement (-1): learning it back would teach
    // the simulator its own input. A use above its plan raises the need of a job that shares
    // plainly (core's rule): its reservation is then that need, until it is steady.
    for (const NeedRaised& raised : server.scheduler->OnDeviceSample(
             GpuSample{gpu.local, now, std::min(used, options_.server.capacity), gpu.smact, -1, -1,
                       true},
             /*measured_smact=*/-1, /*uses_read=*/!all_reported, job_use_)) {
      SimJob& raised_job = jobs_[static_cast<size_t>(raised.job - 1)];
      raised_job.planned = std::max(raised_job.planned, raised.need.Upper());
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
  // A job's memory changes only in events that refresh all its GPUs: it was told on each of them.
  if (!any_unreported) return;
  for (int g : gpus)
    for (int j : gpus_[g].jobs) jobs_[j].reported = true;
}

void Engine::Detach(SimJob& job, const char* outcome) {
  const int index = job.index();
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
  completions_.Erase(index);
}

void Engine::SpecFor(const TraceJob& t, JobSpec& spec) {
  spec.id = t.id;
  // Unnamed: no scheduler reads a job's name (the job's result takes the trace's), and a name
  // copied into each spec would be a heap block per job.
  spec.owner = t.owner;
  spec.gpus = t.profile.gpus;
  spec.expected_smact = t.profile.smact;
  if (options_.exact_run_times) spec.expected_run = t.profile.duration;
  std::optional<Bytes> declared = t.declared;
  if (const auto line = task_file_line_) {
    // CARMA's estimator policies read the task file's line; its "not known" (40000) is more than
    // any 40 GB GPU has free after CARMA's 2 GiB margin: such a task only ever runs alone.
    declared = t.task_file ? (*t.task_file).*(*line) : std::nullopt;
    if (!declared) {
      spec.sharing = SharingPreference::kExclusive;
      return;
    }
  }
  // What the estimator is asked, in the one description every job reuses (its model's name is
  // copied into the text it already holds, not into a new one).
  JobDescription& description = description_;
  description.key = static_cast<uint64_t>(t.id);
  description.workload = t.profile.name.str();
  description.batch = t.profile.batch;
  description.true_peak = t.profile.peak;
  description.declared = declared;
  auto estimate = estimator_.Estimate(description);
  if (estimate.ok()) spec.memory = estimate->AsNeed();
}

void Engine::MarkDirty(int server_index) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  if (!server.dirty) {
    server.dirty = true;
    dirty_.push_back(server_index);
  }
}

void Engine::Arrive(int index, int rank) {
  SimJob& job = jobs_.Add(static_cast<size_t>(index));
  const TraceJob& t = trace_.jobs[static_cast<size_t>(index)];
  job.trace = &t;
  job.signature = state_.signatures.Of(t);
  job.rank = rank;
  if (cluster_) {
    sim::Submission& submitted = job.submitted.emplace();
    SpecFor(t, submitted.spec);
    submitted.request = RequestFor(submitted.spec, submitted.spec.memory);
    cluster_->Submit(index);
    if (job.rejected) {
      ++state_.rejected;
      Retire(job, sim::RejectedResult(job));
    }
    return;
  }
  // The dispatcher sends a job to the server with the least outstanding GPU demand.
  const int chosen = by_demand_.begin()->second;
  Server& server = servers_[static_cast<size_t>(chosen)];
  JobSpec spec;
  SpecFor(t, spec);
  // Its server's colod knows how long the model's earlier runs there took, not how long this
  // one will.
  if (!options_.exact_run_times) spec.expected_run = sim::LearnedRunTime(server, job);
  const Status submitted = server.scheduler->Submit(spec);
  job.server = chosen;
  if (!submitted.ok()) {
    job.rejected = true;
    job.reason = submitted.message();
    ++state_.rejected;
    Retire(job, sim::RejectedResult(job));
    return;
  }
  server.sent[job.signature].push_back(index);
  AddDemand(chosen, spec.gpus);
  MarkDirty(chosen);
}

void Engine::Start(int server_index, Launch launch) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  const int index = static_cast<int>(launch.job - 1);
  SimJob& job = jobs_[static_cast<size_t>(index)];
  COLO_CHECK(!job.running && !job.queued);
  job.server = server_index;
  job.gpus = std::move(launch.gpus);
  for (int& g : job.gpus) g += server.first_gpu;  // global numbers
  const auto& closure = Touch(job.gpus);
  const TimePoint now = Now();
  if (job.first_start_s < 0) job.first_start_s = ToSeconds(now);
  job.running = true;
  ++job.attempt;
  job.mode = launch.mode;
  job.planned = launch.reservation;
  job.thread_percent = launch.mode == SharingMode::kMps ? launch.thread_percent : 100;
  // A restart loses all progress, save what a preempted job's checkpoint kept.
  if (!job.resumes) job.remaining_s = ToSeconds(job.trace->profile.duration);
  job.resumes = false;
  job.rate = 0;  // no rate yet: Refresh sets one and schedules the completion
  ++job.version;
  job.progress_at = now;
  job.started = now;
  job.starting = job.trace->profile.startup > Duration(0);
  if (job.starting)
    PushAfter(job.trace->profile.startup, EventType::kStartupDone, index, job.attempt);
  job.memory = std::min(options_.startup_memory, job.trace->profile.peak);
  job.reported = false;
  for (int g : job.gpus) {
    gpus_[g].jobs.push_back(index);
    gpus_[g].slowdown.push_back(1.0);
  }
  PushAfter(job.trace->profile.warmup, EventType::kWarmup, index, job.attempt);
  Refresh(closure);
  if (cluster_) {
    // Its start-up memory, if above the reservation it was launched with (its scheduler's at
    // this instant: nothing changed its record before this refresh).
    cluster_->AccountGrowth(job, launch.reservation);
    cluster_->WatchShrink(job);
  }
}

void Engine::StartupDone(int index, uint64_t attempt) {
  if (!HasState(index)) return;
  SimJob& job = jobs_[static_cast<size_t>(index)];
  if (!job.running || job.attempt != attempt) return;
  const auto& closure = Touch(job.gpus);
  job.starting = false;
  Refresh(closure);
}

void Engine::Warmup(int index, uint64_t attempt) {
  if (!HasState(index)) return;
  SimJob& job = jobs_[static_cast<size_t>(index)];
  if (!job.running || job.attempt != attempt) return;
  const auto& closure = Touch(job.gpus);
  job.memory = job.trace->profile.peak;
  job.reported = false;
  // The allocation that overflows a GPU fails: this job crashes with out-of-memory. Its message
  // gives PyTorch's figures, which colod reads: what the process held (the room its fullest GPU
  // had for it) and what it tried to allocate (here the rest of its peak, the one growth the
  // simulator knows of).
  bool overflow = false, alone = true;
  Bytes held = job.memory;
  for (int g : job.gpus) {
    Bytes used = options_.server.baseline_used;
    for (int j : gpus_[g].jobs) used += jobs_[j].memory;
    if (used > options_.server.capacity) {
      overflow = true;
      held = std::min(held, std::max(Bytes(0), options_.server.capacity - (used - job.memory)));
    }
    alone &= gpus_[g].jobs.size() == 1;
  }
  if (!overflow) {
    const Bytes before = cluster_ ? cluster_->ReservationOf(job) : Bytes(0);
    Refresh(closure, Changed::kMemory);
    if (cluster_) cluster_->AccountGrowth(job, before);  // its peak, if above its plan
    return;
  }
  ++oom_crashes_;
  lost_gpu_seconds_ += ToSeconds(Now() - job.started) * static_cast<double>(job.gpus.size());
  Server& server = servers_[static_cast<size_t>(job.server)];
  // Its process is gone: it holds nothing on its GPUs, as the next sample there shows. (The
  // recovery caps a raised need at what the server can place, less the memory no job of its own
  // uses there, which it reads from the samples and its jobs' uses: a stale use would hide that.)
  for (int g : job.gpus) server.scheduler->OnJobMemory(job.trace->id, gpus_[g].local, Bytes(0));
  Detach(job, "oom");
  job.memory = Bytes(0);
  Refresh(closure, Changed::kFreed);
  if (cluster_) cluster_->AccountExit(job, cluster_->ReservationOf(job));
  if (cluster_ && rule_.shards) {
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
      Settle(job);
      return;
    }
    // It leaves the server (its cluster queue keeps its attempts).
    COLO_CHECK(server.scheduler->Drop(job.trace->id) == JobState::kRunning);
    cluster_->Requeue(index);
    return;
  }
  const ExitAction action =
      server.scheduler
          ->OnJobExit(job.trace->id,
                      JobExit{ExitKind::kOutOfMemory, "torch.OutOfMemoryError: CUDA out of memory",
                              OutOfMemoryEvidence{"PyTorch", held, job.trace->profile.peak - held,
                                                  Bytes(0)}})
          .action;
  if (!queue_mode_ && action != ExitAction::kRequeuedForRecovery)
    AddDemand(job.server, -job.trace->profile.gpus);
  Settle(job);
  MarkDirty(job.server);
}

void Engine::Complete(int index, uint64_t version) {
  // A pending completion is its running job's current one (NextLive takes it unchecked): a
  // version bumped without the completion moved, or one left behind, would end instants again.
  COLO_CHECK(HasState(index));
  SimJob& job = jobs_[static_cast<size_t>(index)];
  COLO_CHECK(job.running && job.version == version);
  const auto& closure = Touch(job.gpus);
  Detach(job, "done");
  job.memory = Bytes(0);
  Refresh(closure, Changed::kFreed);
  Server& server = servers_[static_cast<size_t>(job.server)];
  if (cluster_) cluster_->AccountExit(job, cluster_->ReservationOf(job));
  const JobEnded ended =
      server.scheduler->OnJobExit(job.trace->id, JobExit{ExitKind::kSuccess, {}});
  Settle(job);
  LearnFrom(job, RunEvidence{ExitKind::kSuccess, ended.over_plan, ended.peak, ended.solo_smact,
                             Now() - job.started});
  if (!queue_mode_) AddDemand(job.server, -job.trace->profile.gpus);
  MarkDirty(job.server);
}

void Engine::Preempt(const Preemption& preemption) {
  const int index = static_cast<int>(preemption.job - 1);
  SimJob& job = jobs_[static_cast<size_t>(index)];
  if (!job.running) return;
  // It saves a checkpoint when signalled and exits: its GPUs are free at once, and its next
  // attempt takes up the work left (start-up and warm-up again).
  const auto& closure = Touch(job.gpus);
  job.remaining_s = std::max(0.0, job.remaining_s);
  job.resumes = true;
  Detach(job, "preempted");
  job.memory = Bytes(0);
  Refresh(closure, Changed::kFreed);
  ++preemptions_;
  Server& server = servers_[static_cast<size_t>(job.server)];
  const ExitAction action =
      server.scheduler->OnJobExit(job.trace->id, JobExit{ExitKind::kPreempted, preemption.reason})
          .action;
  COLO_CHECK(action == ExitAction::kRequeuedAfterPreemption);
  MarkDirty(job.server);
}

void Engine::Settle(SimJob& job) {
  Scheduler& scheduler = *servers_[static_cast<size_t>(job.server)].scheduler;
  const JobRecord* record = scheduler.job(job.trace->id);
  if (record == nullptr || !IsTerminal(record->state)) return;
  Retire(job, sim::EndedResult(job, sim::EndedOf(*record), record->end_reason));
  scheduler.Forget(job.trace->id);
}

void Engine::Retire(const SimJob& job, JobResult result) {
  state_.results[static_cast<size_t>(job.index())] = std::move(result);
  ended_.push_back(job.index());
}

void Engine::LearnFrom(const SimJob& job, const RunEvidence& run) {
  const ModelSignature& signature = *job.signature;
  if (signature.empty()) return;
  Server& server = servers_[static_cast<size_t>(job.server)];
  Scheduler& scheduler = *server.scheduler;
  if (!Teaches(run)) return;
  ModelRuns& runs = server.runs[job.signature];
  AddNewestRun(run, runs);
  if (const auto run_time = LearnRunTime(runs.run_times); run_time && !options_.exact_run_times) {
    // The model's jobs that wait or run here count on it from now on, as colod's do.
    std::vector<int>& sent = server.sent[job.signature];
    std::erase_if(sent, [&](int index) {
      const JobRecord* record = scheduler.job(trace_.jobs[static_cast<size_t>(index)].id);
      if (record == nullptr || IsTerminal(record->state)) return true;  // it left this server
      COLO_CHECK(scheduler.UpdateExpectedRun(record->spec.id, *run_time).ok());
      return false;
    });
  }
  if (!spec_.learn) return;
  for (JobId id : scheduler.main_queue()) {
    const SimJob& queued = jobs_[static_cast<size_t>(id - 1)];
    if (queued.attempt != 0 || queued.signature != job.signature) continue;
    const JobRecord& waiting = *scheduler.job(id);
    const Lesson lesson =
        Learn(runs, waiting.need, waiting.spec.expected_smact, SmactSource::kUser);
    // A job of the main queue is queued, and no peak is above a GPU: the update is taken.
    if (lesson.memory) COLO_CHECK(scheduler.UpdateNeed(id, lesson.memory->need()).ok());
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
  ++state_.passes;
  if (!cluster_) {
    for (Launch& launch : server.scheduler->Schedule()) Start(server_index, std::move(launch));
    for (const Preemption& preemption : server.scheduler->Preempt()) Preempt(preemption);
    PushWakeup(server_index);
    return;
  }
  const bool was_eligible = cluster_->eligible(server_index);
  cluster_->OnPass(server_index, server.scheduler->Schedule(), was_eligible);
}

void Engine::AddDemand(int server_index, int gpus) {
  Server& server = servers_[static_cast<size_t>(server_index)];
  by_demand_.erase({server.demand, server_index});
  server.demand += gpus;
  by_demand_.insert({server.demand, server_index});
}

SimResult Engine::Run() {
  const int per_server = options_.server.gpus;
  for (int s = 0; s < options_.servers; ++s) {
    Server server;
    SchedulerConfig config = options_.scheduler;
    config.recovery = spec_.recovery;
    // Its jobs crash when their GPU overflows, never at a per-job MPS limit.
    config.mps_limits_enforced = false;
    server.scheduler = std::make_unique<Scheduler>(clock_, state_.policy, config);
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
  jobs_.Resize(trace_.jobs.size());
  completions_.Resize(trace_.jobs.size());
  // Sized once: at a million jobs a vector's growth would double it for a while.
  state_.results.resize(trace_.jobs.size());
  // Arrivals are known up front: they are taken from a sorted list rather than the event heap,
  // which then holds only what running jobs and wake-ups schedule (a few per GPU, not the trace).
  std::vector<int>& arrivals = state_.arrivals;
  arrivals.resize(trace_.jobs.size());
  for (size_t i = 0; i < trace_.jobs.size(); ++i) {
    COLO_CHECK(trace_.jobs[i].id == static_cast<int64_t>(i + 1));
    arrivals[i] = static_cast<int>(i);
  }
  const auto submitted_before = [&](int a, int b) {
    return trace_.jobs[static_cast<size_t>(a)].submit < trace_.jobs[static_cast<size_t>(b)].submit;
  };
  // Most traces list their jobs in submission order already: a sort would cost a merge sort's
  // work all the same.
  if (!std::is_sorted(arrivals.begin(), arrivals.end(), submitted_before))
    std::stable_sort(arrivals.begin(), arrivals.end(), submitted_before);
  if (queue_mode_) {
    cluster_.emplace(state_, *this);
    cluster_->Begin();
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
  for (const Event* next = NextLive(); next || next_arrival < arrivals.size();) {
    Event event;
    // At equal times arrivals come first, as if they had been scheduled before everything else.
    if (next_arrival < arrivals.size() && (!next || arrival_time(next_arrival) <= next->time)) {
      // Its tag is its rank: its place in arrival order.
      event = Event{arrival_time(next_arrival), 0, next_arrival, arrivals[next_arrival],
                    EventType::kArrival};
      ++next_arrival;
    } else {
      event = Take(next);
    }
    ++event_count_;
    clock_.AdvanceTo(event.time);
    const int subject = event.subject;
    switch (event.type) {
      case EventType::kArrival:
        Arrive(subject, static_cast<int>(event.tag));
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
      case EventType::kNodeWakeup:
        cluster_->Wake(subject, event.tag, event.time);
        break;
    }
    for (int index : ended_) jobs_.Drop(static_cast<size_t>(index));
    ended_.clear();
    // One placement pass per server per instant, after every event of that instant.
    const Event* after = NextLive();
    const bool instant_ends =
        (!after || after->time > event.time) &&
        (next_arrival == arrivals.size() || arrival_time(next_arrival) > event.time);
    if (instant_ends) {
      for (size_t i = 0; i < dirty_.size(); ++i) {
        const int s = dirty_[i];
        servers_[static_cast<size_t>(s)].dirty = false;
        Pass(s);
      }
      dirty_.clear();
      // Then the cluster queue, when something it waits for may have changed.
      if (cluster_) cluster_->EndInstant();
      after = NextLive();  // the passes may have scheduled some
    }
    next = after;
  }
  return sim::ResultOf(state_, cluster_ ? &*cluster_ : nullptr,
                       sim::RunCounts{oom_crashes_, preemptions_, lost_gpu_seconds_, event_count_},
                       std::move(timeline_));
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
  const bool has_task_files = std::any_of(trace.jobs.begin(), trace.jobs.end(),
                                          [](const TraceJob& j) { return j.task_file != nullptr; });
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
  if (run.policy.shards > 0) {
    const ShardPolicy policy(run.policy.shards);
    Engine engine(trace, run, options, policy, **estimator, sim::ClusterRule{nullptr, &policy});
    return engine.Run();
  }
  const std::unique_ptr<GatedPolicy> policy = MakePolicy(run.policy);
  Engine engine(trace, run, options, *policy, **estimator,
                sim::ClusterRule{&policy->gates(), nullptr});
  return engine.Run();
}

}  // namespace colo
#include "sim/cluster_queue.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"
#include "policies/gates.h"

namespace colo::sim {
namespace {

// A question of the pictures asked for many jobs of a round: answered again only once a picture
// changed (its version moved).
class AnswerUntilPicturesChange {
 public:
  template <typename Ask>
  bool Get(uint64_t version, Ask ask) {
    if (version_ != version) {
      version_ = version;
      answer_ = ask();
    }
    return answer_;
  }

 private:
  uint64_t version_ = 0;  // pictures' versions start at 1: the first Get asks
  bool answer_ = false;
};

// No request (of the kind and GPUs): the least memory of none.
constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

// Whether the utilization window of a GPU can still fall without a new sample: some value it was
// fed within `horizon` (the window, or longer while the EMA closes in) is above the latest.
bool CanFall(Ring<std::pair<TimePoint, double>>& log, TimePoint now, Duration horizon) {
  while (log.size() >= 2 && log[1].first <= now - horizon) log.pop_front();
  if (log.empty() || now >= log.back().first + horizon) return false;
  const double latest = log.back().second;
  for (const auto& [t, value] : log) {
    if (value > latest) return true;
  }
  return false;
}

}  // namespace

ClusterQueue::ClusterQueue(EngineState& state, ClusterHost& host)
    : state_(state),
      host_(host),
      pictures_(state.servers.size()),
      kind_of_(state.trace.jobs.size(), -1),
      left_least_(static_cast<size_t>(state.options.server.gpus) + 1, kNone),
      left_next_(left_least_) {}

void ClusterQueue::Begin() {
  const SchedulerConfig& config = state_.options.scheduler;
  const double decay = 1.0 - 2.0 / (config.window_samples + 1.0);
  const double ema_steps = decay > 0 ? std::ceil(std::log(1e-2) / std::log(decay)) : 0.0;
  utilization_horizon_ =
      std::max<Duration>(config.sample_interval * config.window_samples,
                         std::chrono::duration_cast<Duration>(config.sample_interval * ema_steps));
  idle_free_ = (state_.options.server.capacity - state_.options.server.baseline_used).count();
  for (size_t s = 0; s < state_.servers.size(); ++s)
    MarkChanged(static_cast<int>(s), Change::kFreed);
}

void ClusterQueue::Submit(int index) {
  SimJob& job = state_.job(index);
  // Every server is alike: what an idle one could never run, none could. Rejected at submission,
  // as slurmctld refuses a job no node can satisfy (otherwise it would wait at the head of the
  // queue forever). The verdict depends only on the shape of the request (an idle server has no
  // owners), so it is asked once per shape, of any server's scheduler, whose idle GPUs hold the
  // memory the simulation leaves to others.
  const auto shape =
      std::make_tuple(job.submitted->spec.gpus, job.submitted->spec.memory.Upper().count(),
                      job.submitted->spec.memory.known(), job.submitted->spec.sharing);
  auto cached = placeable_.find(shape);
  if (cached == placeable_.end()) {
    cached = placeable_
                 .emplace(shape, state_.server(0).scheduler->CheckPlaceable(
                                     job.submitted->spec, state_.options.server.baseline_used))
                 .first;
  }
  const Status& placeable = cached->second;
  if (!placeable.ok()) {
    job.rejected = true;
    job.reason = placeable.message();
    job.submitted.reset();
    return;
  }
  Enqueue(index);
}

void ClusterQueue::Enqueue(int index) {
  SimJob& job = state_.job(index);
  job.queued = true;
  job.server = -1;
  job.checked_round = -2;
  if (spare_places_.empty()) {
    queue_.insert(job.rank);
  } else {
    spare_places_.back().value() = job.rank;
    queue_.insert(std::move(spare_places_.back()));
    spare_places_.pop_back();
  }
  queue_grew_ = true;
}

void ClusterQueue::Dequeue(SimJob& job) {
  spare_places_.push_back(queue_.extract(job.rank));
  job.queued = false;
}

void ClusterQueue::Requeue(int index) {
  SimJob& job = state_.job(index);
  ++requeues_;
  requeued_ = true;
  ++job.prior_attempts;
  ++job.prior_ooms;
  Enqueue(index);
}

void ClusterQueue::WatchShrink(const SimJob& job) {
  if (const auto t = NextShrink(job, state_.Now())) WakeToGrow(job.server, *t);
}

void ClusterQueue::OnPass(int server_index, std::vector<Launch> launches, bool was_eligible) {
  for (Launch& launch : launches) {
    SimJob& job = state_.job(static_cast<int>(launch.job - 1));
    if (job.queued) {
      // The oldest waiting job, started by the server it had reserved.
      COLO_CHECK(static_cast<int>(launch.job - 1) == reserved_job_ &&
                 server_index == reserved_server_);
      Dequeue(job);
      reserved_job_ = reserved_server_ = -1;
      queue_moved_ = true;  // the next job becomes the oldest, and one more enters the round's view
      ++left_outside_;
    }
    // Started after the cluster's round of this instant, which decides on the same samples.
    AccountLaunch(server_index, launch);
    pending_.emplace_back(server_index, std::move(launch));
  }
  host_.PushWakeup(server_index);
  // A server whose own queues just emptied may take jobs from the cluster queue again.
  if (!was_eligible && state_.server(server_index).idle_queues())
    MarkChanged(server_index, Change::kFreed);
}

bool ClusterQueue::IsCurrentWakeup(int server, uint64_t tag, TimePoint time) const {
  const Picture& picture = pictures_[static_cast<size_t>(server)];
  const auto& wakeup = tag == 0 ? picture.open_wakeup : picture.grow_wakeup;
  return wakeup && *wakeup == time;
}

void ClusterQueue::Wake(int server, uint64_t tag, TimePoint time) {
  Picture& picture = pictures_[static_cast<size_t>(server)];
  auto& wakeup = tag == 0 ? picture.open_wakeup : picture.grow_wakeup;
  if (wakeup && *wakeup == time) {
    wakeup.reset();
    const bool as_read = !picture.changed && !picture.stale && !picture.grew;
    MarkChanged(server, tag == 0 ? Change::kOpened : Change::kFreed);
    picture.look_only = tag == 0 && as_read;
  }
}

void ClusterQueue::EndInstant() {
  if (!queue_.empty() && (AnyChanged() || queue_grew_) && !LooksChangeNothing()) Round();
  queue_grew_ = false;
  StartPending();
  if (state_.options.check_dispatch) CheckDispatch();
}

void ClusterQueue::Index(int server_index, std::pair<int64_t, int> key) {
  Picture& server = pictures_[static_cast<size_t>(server_index)];
  PicturesChanged();
  if (server.place) {
    // It moves in the index (at every launch and exit): its node is reused, not reallocated.
    auto node = index_.extract(*server.place);
    node.value() = key;
    server.place = index_.insert(std::move(node)).position;
  } else {
    server.place = index_.insert(key).first;
  }
}

void ClusterQueue::Unindex(int server_index) {
  Picture& server = pictures_[static_cast<size_t>(server_index)];
  PicturesChanged();
  if (server.place) index_.erase(*server.place);
  server.place.reset();
}

void ClusterQueue::Reindex(int server_index) {
  Picture& server = pictures_[static_cast<size_t>(server_index)];
  if (server.grew || !server.place) return;
  int64_t score = 0;
  if (state_.rule.shards) {
    const int shards = state_.rule.shards->shards_per_gpu();
    for (int jobs : server.jobs_on) score += std::max(0, shards - jobs);
  } else {
    for (size_t g = 0; g < server.free.size(); ++g)
      if (server.exclusive_on[g] == 0) score += std::max<int64_t>(0, server.free[g]);
  }
  server.score = score;
  if ((*server.place)->first != -score) Index(server_index, {-score, server_index});
}

void ClusterQueue::AccountLaunch(int server_index, const Launch& launch) {
  Picture& server = pictures_[static_cast<size_t>(server_index)];
  PicturesChanged();
  if (server.free.empty()) return;  // never read: its first read counts everything
  for (GpuIndex g : launch.gpus) {
    server.free[static_cast<size_t>(g)] -= launch.reservation.count();
    ++server.jobs_on[static_cast<size_t>(g)];
    if (launch.mode == SharingMode::kExclusive) ++server.exclusive_on[static_cast<size_t>(g)];
  }
  server.stale = true;
  Reindex(server_index);
}

Bytes ClusterQueue::ReservationOf(const SimJob& job) const {
  const Scheduler& scheduler = *state_.server(job.server).scheduler;
  const JobRecord* record = scheduler.job(job.trace->id);
  return record ? scheduler.Reservation(*record) : Bytes(0);
}

void ClusterQueue::AccountGrowth(const SimJob& job, Bytes before) {
  const Bytes after = ReservationOf(job);
  Picture& server = pictures_[static_cast<size_t>(job.server)];
  if (after == before || server.free.empty()) return;
  PicturesChanged();
  const int first_gpu = state_.server(job.server).first_gpu;
  for (int g : job.gpus)
    server.free[static_cast<size_t>(g - first_gpu)] -= (after - before).count();
  Reindex(job.server);
}

void ClusterQueue::AccountExit(const SimJob& job, Bytes reservation) {
  Picture& server = pictures_[static_cast<size_t>(job.server)];
  PicturesChanged();
  if (server.free.empty()) return;
  const int first_gpu = state_.server(job.server).first_gpu;
  for (int g : job.gpus) {
    const size_t local = static_cast<size_t>(g - first_gpu);
    server.free[local] += reservation.count();
    --server.jobs_on[local];
    if (job.mode == SharingMode::kExclusive) --server.exclusive_on[local];
  }
  Reindex(job.server);
}

void ClusterQueue::MarkChanged(int server_index, Change change) {
  Picture& server = pictures_[static_cast<size_t>(server_index)];
  PicturesChanged();
  server.look_only = false;
  if (change == Change::kTook) {
    server.stale = true;
    return;
  }
  if (!server.changed) {
    server.changed = true;
    ListChanged(server_index);
  }
  const bool eligible = state_.server(server_index).idle_queues();
  // Free memory that grew by an amount not accounted (a reservation shrank; or anything while the
  // server was busy with its own queue, which just emptied): at the top of the index until read.
  if (change == Change::kFreed || (!server.place && eligible)) server.grew = true;
  const std::pair<int64_t, int> top{-kNone, server_index};
  if (server.grew && (server.place || eligible) && !(server.place && **server.place == top)) {
    server.eligible = eligible;
    Index(server_index, top);
  }
}

void ClusterQueue::ReadServer(int server_index) {
  Picture& server = pictures_[static_cast<size_t>(server_index)];
  Scheduler& scheduler = *state_.server(server_index).scheduler;
  const int first_gpu = state_.server(server_index).first_gpu;
  const TimePoint now = state_.Now();
  // The view of the server's next pass (kept per GPU, made again only where an event touched a
  // GPU), summarized where the least demanding job there could be would read its windows.
  const ClusterView& view = scheduler.PassView(PlacementRequest{});
  PicturesChanged();
  server.read_at = now;
  server.view = view;
  const size_t gpus = view.gpus.size();
  if (state_.options.check_dispatch && !server.grew && !server.free.empty()) {
    // The accounting between reads must agree with the scheduler's own.
    for (size_t g = 0; g < gpus; ++g) {
      const GpuView& v = view.gpus[g];
      // (A GPU over its capacity reports its capacity: what others hold is then unknown.)
      if (state_.gpus[static_cast<size_t>(first_gpu) + g].used > state_.options.server.capacity)
        continue;
      COLO_CHECK(server.free[g] == v.free_for_placement.count());
      COLO_CHECK(server.jobs_on[g] == v.job_count);
      COLO_CHECK((server.exclusive_on[g] > 0) == v.holds_exclusive);
    }
  }
  if (!server.listed.empty() && !server.read_since_prune) {
    server.read_since_prune = true;
    read_since_prune_.push_back(server_index);
  }
  server.stale = server.changed = server.grew = server.look_only = false;
  server.eligible = state_.server(server_index).idle_queues();
  server.free.resize(gpus);
  server.jobs_on.resize(gpus);
  server.exclusive_on.resize(gpus);
  server.score = 0;
  server.usable = 0;
  server.caps.clear();
  server.gates.assign(gpus, Gate::kPass);
  server.grace_ends.assign(gpus, TimePoint{});
  server.answer_lasts.assign(gpus, 0);
  // The least demanding job there could be: one GPU, no memory, the GPU's own user and mode.
  PlacementRequest any;
  for (size_t g = 0; g < gpus; ++g) {
    const GpuView& v = view.gpus[g];
    server.free[g] = v.free_for_placement.count();
    server.jobs_on[g] = v.job_count;
    server.exclusive_on[g] = v.holds_exclusive ? 1 : 0;
    bool usable = true;
    if (state_.rule.shards) {
      const int free = state_.rule.shards->FreeShards(v);
      usable = free > 0;
      server.score += free;
    } else {
      // Free planned memory, as a consumable gpumem resource would count it; a GPU held by an
      // exclusive job has none to give.
      if (!v.holds_exclusive) server.score += std::max<int64_t>(0, v.free_for_placement.count());
      if (state_.rule.gates) {
        any.owner = v.mps_owner;
        const GateVerdict verdict = EvaluateGates(v, any, *state_.rule.gates);
        usable = verdict.gate == Gate::kPass;
        server.gates[g] = verdict.gate;
        if (verdict.gate == Gate::kLaunchGrace)
          server.grace_ends[g] = now + LaunchGraceLeft(v, *state_.rule.gates);
        if (verdict.gate == Gate::kUtilization || (usable && !v.idle())) {
          GpuView low = v, high = v;
          scheduler.BoundWindows(static_cast<GpuIndex>(g), low, high);
          server.answer_lasts[g] = usable ? !UtilizationExcludes(high, *state_.rule.gates)
                                          : UtilizationExcludes(low, *state_.rule.gates);
        }
      }
    }
    if (usable) {
      ++server.usable;
      server.caps.push_back(v.free_for_placement.count());
    }
  }
  std::sort(server.caps.begin(), server.caps.end(), std::greater<>());
  if (server.eligible)
    Index(server_index, {-server.score, server_index});
  else
    Unindex(server_index);
  WakeWhenViewChanges(server_index, /*shrinks=*/true);
}

void ClusterQueue::WakeWhenViewChanges(int server_index, bool shrinks) {
  Picture& server = pictures_[static_cast<size_t>(server_index)];
  const int first_gpu = state_.server(server_index).first_gpu;
  const TimePoint now = state_.Now();
  std::optional<TimePoint> opens, grows;
  auto open = [&](TimePoint t) {
    if (t > now && (!opens || t < *opens)) opens = t;
  };
  auto grow = [&](TimePoint t) {
    if (t > now && (!grows || t < *grows)) grows = t;
  };
  for (size_t g = 0; g < server.gates.size(); ++g) {
    if (server.gates[g] == Gate::kLaunchGrace) open(server.grace_ends[g]);
    if (server.gates[g] == Gate::kUtilization) {
      // The window may let the GPU in as it slides: look again each sample interval, as the
      // server's own scheduler does for a head waiting on this gate.
      auto& log = state_.gpus[static_cast<size_t>(first_gpu) + g].smact_log;
      if (CanFall(log, now, utilization_horizon_)) {
        open(std::min(log.back().first + utilization_horizon_,
                      now + state_.options.scheduler.sample_interval));
      }
    }
  }
  // When a reservation of a running job shrinks (the free memory grows by an amount not accounted).
  // A look that finds the server as it was read finds no shrink sooner than the one its read
  // found (its jobs are as they were, and that one has not come, or it would have changed it).
  for (size_t g = 0; g < server.free.size(); ++g) {
    if (state_.rule.shards || !shrinks) break;  // shards count jobs, not memory
    for (int j : state_.gpus[static_cast<size_t>(first_gpu) + g].jobs) {
      if (const auto t = NextShrink(state_.jobs[static_cast<size_t>(j)], now)) grow(*t);
    }
  }
  // Only the earliest time of each kind is kept: once it comes the server is read again before
  // use, and its next time found then. The accounting needs every shrink, busy or not; a server
  // busy with its own queue is woken by its own scheduler, and read again once its queue empties.
  if (grows) WakeToGrow(server_index, *grows);
  if (server.eligible && opens &&
      (!server.open_wakeup || *opens < *server.open_wakeup || *server.open_wakeup <= now)) {
    server.open_wakeup = opens;
    host_.WakeAt(server_index, *opens, 0);
  }
}

bool ClusterQueue::GatesAnswerAsRead(int server_index) const {
  const Picture& server = pictures_[static_cast<size_t>(server_index)];
  if (!state_.rule.gates || server.eligible != state_.server(server_index).idle_queues())
    return false;
  const Scheduler& scheduler = *state_.server(server_index).scheduler;
  const int first_gpu = state_.server(server_index).first_gpu;
  const TimePoint now = state_.Now();
  for (size_t g = 0; g < server.gates.size(); ++g) {
    // Over its capacity a GPU reports its capacity, and a read could find other free memory than
    // the accounting keeps.
    if (state_.gpus[static_cast<size_t>(first_gpu) + g].used > state_.options.server.capacity)
      return false;
    const Gate gate = server.gates[g];
    if (gate == Gate::kLaunchGrace && server.grace_ends[g] <= now) return false;
    const GpuView& read = server.view.gpus[g];
    const bool gated = gate == Gate::kUtilization ||
                       (gate == Gate::kPass && !read.idle() && state_.rule.gates->utilization);
    if (!gated || server.answer_lasts[g]) continue;
    GpuView v = read;
    scheduler.SummarizeWindowsAt(static_cast<GpuIndex>(g), now, v);
    if (UtilizationExcludes(v, *state_.rule.gates) != (gate == Gate::kUtilization)) return false;
  }
  return true;
}

bool ClusterQueue::LooksChangeNothing() {
  if (!left_waiting_ || queue_grew_ || queue_moved_ || requeued_) return false;
  for (int s : changed_) {
    if (s < 0 || !pictures_[static_cast<size_t>(s)].changed) continue;
    if (!pictures_[static_cast<size_t>(s)].look_only || !GatesAnswerAsRead(s)) return false;
  }
  // As the round would have read them, in its order.
  for (int s : changed_) {
    if (s < 0) continue;
    Picture& server = pictures_[static_cast<size_t>(s)];
    if (!server.changed) continue;
    server.changed = server.look_only = false;
    WakeWhenViewChanges(s, /*shrinks=*/false);
  }
  ClearChanged();
  return true;
}

std::optional<TimePoint> ClusterQueue::NextShrink(const SimJob& job, TimePoint now) const {
  // A running job's reservation shrinks to what it was seen to use once it is steady: quiet for
  // steady_after since its memory last grew (at its start and at the end of its warm-up) and at
  // 90% of its plan, or running for settle_timeout. Only a plan above what it uses can shrink.
  const SchedulerConfig& config = state_.options.scheduler;
  const Bytes peak = job.trace->profile.peak;
  const Bytes startup = std::min(state_.options.startup_memory, peak);
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

void ClusterQueue::WakeToGrow(int server_index, TimePoint t) {
  Picture& server = pictures_[static_cast<size_t>(server_index)];
  if (!server.grow_wakeup || t < *server.grow_wakeup || *server.grow_wakeup <= state_.Now()) {
    server.grow_wakeup = t;
    host_.WakeAt(server_index, t, 1);
  }
}

MemoryNeed ClusterQueue::NeedOn(const SimJob& job, int server_index) const {
  // With learn=on the server's colod plans with what the runs of the job's model it saw taught.
  if (!state_.spec.learn || server_index < 0) return job.submitted->spec.memory;
  const Lesson lesson =
      Learn(state_.server(server_index).RunsOf(job.signature), job.submitted->spec.memory,
            job.submitted->spec.expected_smact, SmactSource::kUser);
  return lesson.memory ? lesson.memory->need() : job.submitted->spec.memory;
}

PlacementRequest ClusterQueue::RequestFor(const SimJob& job, int server_index) const {
  if (!state_.spec.learn || server_index < 0) return job.submitted->request;
  return colo::RequestFor(job.submitted->spec, NeedOn(job, server_index));
}

bool ClusterQueue::MayPlace(const Picture& server, const PlacementRequest& request) const {
  if (!server.eligible || server.usable < request.gpus) return false;
  if (state_.rule.gates && state_.rule.gates->memory) {
    const int64_t required = (request.memory_need + state_.rule.gates->memory_margin).count();
    return server.caps[static_cast<size_t>(request.gpus - 1)] >= required;
  }
  return true;
}

int64_t ClusterQueue::NeededScore(const PlacementRequest& request) const {
  if (state_.spec.learn) return 0;  // the need depends on the server
  if (state_.rule.shards) return request.gpus;
  // Only idle GPUs count towards an idle-only policy's score, each with all its free memory.
  if (state_.rule.gates && state_.rule.gates->idle_only) return request.gpus * idle_free_;
  if (state_.rule.gates && state_.rule.gates->memory) {
    return request.gpus * (request.memory_need + state_.rule.gates->memory_margin).count();
  }
  return 0;
}

std::optional<Launch> ClusterQueue::SubmitTo(int server_index, SimJob& job, const MemoryNeed& need,
                                             Placed* placed) {
  Server& server = state_.server(server_index);
  // The spec as submitted but for the need and the run time the server's runs of its model
  // taught (the scheduler copies it): changed for the call only.
  JobSpec& spec = job.submitted->spec;
  const MemoryNeed submitted = std::exchange(spec.memory, need);
  if (!state_.options.exact_run_times) spec.expected_run = LearnedRunTime(server, job);
  std::optional<Launch> launch;
  if (placed) {
    Result<Launch> started = server.scheduler->StartPlaced(spec, std::move(*placed));
    COLO_CHECK(started.ok());
    launch = std::move(*started);
  } else {
    COLO_CHECK(server.scheduler->Submit(spec).ok());
  }
  spec.memory = submitted;
  server.sent[job.signature].push_back(job.index());
  return launch;
}

bool ClusterQueue::TryStart(int index, int server_index, const PlacementRequest& request) {
  Picture& server = pictures_[static_cast<size_t>(server_index)];
  Scheduler& scheduler = *state_.server(server_index).scheduler;
  // A server busy with its own queue (a reservation, a recovery) takes nothing from the cluster.
  if (!scheduler.main_queue().empty() || !scheduler.recovery_queue().empty()) return false;
  // The policy answers on the view the server's own pass would decide on (summarizing the windows
  // it reads as it reads them), and the job is handed to the server only to start there: a
  // refusal leaves nothing behind on the server.
  PlacementDecision decision = state_.policy.PlaceUnexplained(scheduler.PassView(), request);
  Placed* placed = std::get_if<Placed>(&decision);
  if (!placed) {
    // A picture that was no longer the server as it is is now known not to take the job.
    const bool current = !server.changed && !server.stale && server.read_at == state_.Now();
    if (!current) ReadServer(server_index);
    return false;
  }
  SimJob& job = state_.jobs[static_cast<size_t>(index)];
  Launch launch = *SubmitTo(server_index, job, request.memory, placed);
  COLO_CHECK(launch.job == job.trace->id);
  if (index == reserved_job_) Unreserve();
  Dequeue(job);
  job.server = server_index;
  AccountLaunch(server_index, launch);
  pending_.emplace_back(server_index, std::move(launch));
  host_.PushWakeup(server_index);
  return true;
}

bool ClusterQueue::StartSomewhere(int index, bool looked_at_last_round) {
  // With learn=on the request depends on the server: no two jobs' compare.
  const bool memo = !state_.spec.learn;
  const SimJob& job = state_.jobs[static_cast<size_t>(index)];
  if (memo && KnownRefused(job, looked_at_last_round)) {
    // As the search would have left it.
    if (looked_at_last_round) SortRoundChanged();
    return false;
  }
  if (SearchAndStart(index, looked_at_last_round)) return true;
  if (memo) NoteRefused(job, looked_at_last_round);
  return false;
}

// RefusedOfKind, KnownRefused and LeftWaiting are inline: the round's walk calls them for every
// job it passes, and in a library built position-independent a function not declared inline may
// be replaced at load time, so the compiler does not inline it.
inline ClusterQueue::Refused& ClusterQueue::RefusedOfKind(const SimJob& job) {
  int& kind = kind_of_[static_cast<size_t>(job.index())];
  if (kind < 0) kind = KindOf(job.submitted->request);
  return refused_[static_cast<size_t>(kind)];
}

int ClusterQueue::KindOf(const PlacementRequest& request) {
  auto owner = owners_.find(request.owner);
  if (owner == owners_.end())
    owner = owners_.emplace(request.owner, static_cast<int>(owners_.size())).first;
  const auto [known, added] =
      kinds_.try_emplace(RequestKind{owner->second, request.sharing, request.require_idle,
                                     request.booked, request.skip_utilization},
                         static_cast<int>(kinds_.size()));
  if (added) refused_.emplace_back();
  return known->second;
}

inline bool ClusterQueue::KnownRefused(const SimJob& job, bool looked_at) {
  if (refusals_version_ != pictures_version_) return false;  // none noted since a change
  const Refused& refused = RefusedOfKind(job);
  if (refused.version != pictures_version_) return false;
  const PlacementRequest& request = job.submitted->request;
  const auto& least = looked_at ? refused.by_changed : refused.everywhere;
  return least[static_cast<size_t>(request.gpus)] <= request.memory_need.count();
}

void ClusterQueue::NoteRefused(const SimJob& job, bool looked_at) {
  Refused& refused = RefusedOfKind(job);
  refusals_version_ = pictures_version_;
  const size_t gpus = static_cast<size_t>(state_.options.server.gpus) + 1;
  if (refused.version != pictures_version_) {
    refused.version = pictures_version_;
    refused.by_changed.assign(gpus, kNone);
    refused.everywhere.assign(gpus, kNone);
  }
  const PlacementRequest& request = job.submitted->request;
  const int64_t memory = request.memory_need.count();
  for (size_t g = static_cast<size_t>(request.gpus); g < gpus; ++g) {
    refused.by_changed[g] = std::min(refused.by_changed[g], memory);
    if (!looked_at) refused.everywhere[g] = std::min(refused.everywhere[g], memory);
  }
}

std::set<int>::const_iterator ClusterQueue::PassKnownRefused(std::set<int>::const_iterator from,
                                                             int& waiting, int& old_seen) {
  auto it = from;
  const int depth = state_.options.queue_depth;
  for (; it != queue_.end() && (depth <= 0 || waiting < depth); ++it) {
    const int rank = *it;
    if (rank > old_until_rank_) break;
    SimJob& job = state_.jobs[static_cast<size_t>(state_.arrivals[static_cast<size_t>(rank)])];
    if (job.checked_round < 0 || !KnownRefused(job, /*looked_at=*/true)) break;
    job.checked_round = round_;
    ++old_seen;
    ++waiting;
    LeftWaiting(job);
  }
  // As StartSomewhere leaves the order of the servers that changed after a refusal it knew.
  if (it != from) SortRoundChanged();
  return it;
}

inline void ClusterQueue::LeftWaiting(const SimJob& job) {
  const PlacementRequest& request = job.submitted->request;
  int64_t& least = left_next_[static_cast<size_t>(request.gpus)];
  least = std::min(least, request.memory_need.count());
}

bool ClusterQueue::ChangedMayStartLeftWaiting() const {
  if (state_.spec.learn) return true;  // what they ask depends on the server
  for (int s : round_changed_) {
    const Picture& server = pictures_[static_cast<size_t>(s)];
    if (server.changed) return true;
    for (size_t g = 1; g < left_least_.size(); ++g) {
      if (left_least_[g] == kNone) continue;
      PlacementRequest least;
      least.gpus = static_cast<int>(g);
      least.memory_need = Bytes(left_least_[g]);
      if (MayPlace(server, least)) return true;
    }
  }
  return false;
}

void ClusterQueue::SortRoundChanged() {
  if (round_changed_sorted_) return;
  const bool best_fit = state_.options.node_choice == NodeChoice::kBestFit;
  std::sort(round_changed_.begin(), round_changed_.end(), [&](int a, int b) {
    const int64_t sa = pictures_[static_cast<size_t>(a)].score;
    const int64_t sb = pictures_[static_cast<size_t>(b)].score;
    return sa != sb ? (best_fit ? sa < sb : sa > sb) : a < b;
  });
  round_changed_sorted_ = true;
}

bool ClusterQueue::SearchAndStart(int index, bool looked_at_last_round) {
  const SimJob& job = state_.jobs[static_cast<size_t>(index)];
  const PlacementRequest& shared = job.submitted->request;
  std::optional<PlacementRequest> on_server;  // learn=on: the need depends on the server
  auto request_for = [&](int s) -> const PlacementRequest& {
    if (!state_.spec.learn) return shared;
    on_server = RequestFor(job, s);
    return *on_server;
  };
  if (looked_at_last_round) {
    // Every other server turned it down and has only taken more since.
    SortRoundChanged();
    for (size_t i = 0; i < round_changed_.size(); ++i) {
      const int s = round_changed_[i];
      const Picture& server = pictures_[static_cast<size_t>(s)];
      const PlacementRequest& request = request_for(s);
      if ((server.changed || MayPlace(server, request)) && TryStart(index, s, request)) {
        round_changed_sorted_ = false;
        return true;
      }
    }
    return false;
  }
  if (state_.options.node_choice == NodeChoice::kBestFit) {
    // The least free server that can start it: up the index from the last server with enough
    // free memory (servers whose place is not known are read first: they move down to it).
    while (!index_.empty() && pictures_[static_cast<size_t>(index_.begin()->second)].grew)
      ReadServer(index_.begin()->second);
    // Groups of equal free memory, least first; within one, the lowest index first.
    auto group_end = index_.upper_bound({-NeededScore(shared), std::numeric_limits<int>::max()});
    while (group_end != index_.begin()) {
      const int64_t group = std::prev(group_end)->first;
      for (auto it = index_.lower_bound({group, std::numeric_limits<int>::min()});
           it != index_.end() && it->first == group;) {
        const std::pair<int64_t, int> key = *it;
        const int s = key.second;
        const Picture& server = pictures_[static_cast<size_t>(s)];
        const PlacementRequest& request = request_for(s);
        if (server.changed || MayPlace(server, request)) {
          // The least free servers turn most jobs down: read first, then ask the policy.
          if (server.changed || server.stale || server.read_at != state_.Now()) ReadServer(s);
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
    Picture& server = pictures_[static_cast<size_t>(s)];
    if (server.grew) {
      ReadServer(s);  // its place was not known: it moves down to it
      it = index_.lower_bound(key);
      continue;
    }
    const PlacementRequest& request = request_for(s);
    if (-key.first < NeededScore(request)) break;
    if ((server.changed || MayPlace(server, request)) && TryStart(index, s, request)) return true;
    it = index_.upper_bound(key);
  }
  return false;
}

bool ClusterQueue::Reserve(int index) {
  // The most free server (servers whose place is not known are read first: they move down).
  while (!index_.empty() && pictures_[static_cast<size_t>(index_.begin()->second)].grew)
    ReadServer(index_.begin()->second);
  if (index_.empty()) return false;  // every server is busy with its own queue: next round
  const int s = index_.begin()->second;
  SimJob& job = state_.jobs[static_cast<size_t>(index)];
  Picture& server = pictures_[static_cast<size_t>(s)];
  Scheduler& scheduler = *state_.server(s).scheduler;
  SubmitTo(s, job, NeedOn(job, s));
  job.server = s;
  ++state_.passes;
  std::vector<Launch> launches = scheduler.Schedule();
  host_.PushWakeup(s);
  if (!launches.empty()) {
    // A utilization window fell below the gate since the server was last looked at (it is looked
    // at again each sample interval): its own pass starts the job now.
    COLO_CHECK(launches.size() == 1 && launches.front().job == job.trace->id);
    Dequeue(job);
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

void ClusterQueue::Unreserve() {
  SimJob& job = state_.jobs[static_cast<size_t>(reserved_job_)];
  const int s = reserved_server_;
  Scheduler& scheduler = *state_.server(s).scheduler;
  COLO_CHECK(scheduler.Drop(job.trace->id) == JobState::kQueued);
  job.server = -1;
  reserved_job_ = reserved_server_ = -1;
  ReadServer(s);  // eligible again: later jobs of this round may use it
  if (std::find(round_changed_.begin(), round_changed_.end(), s) == round_changed_.end())
    round_changed_.push_back(s);
  round_changed_sorted_ = false;
}

void ClusterQueue::ListChanged(int server_index) {
  pictures_[static_cast<size_t>(server_index)].listed.push_back(
      static_cast<uint32_t>(changed_.size()));
  changed_.push_back(server_index);
}

void ClusterQueue::PruneChanged() {
  for (int s : read_since_prune_) {
    Picture& server = pictures_[static_cast<size_t>(s)];
    server.read_since_prune = false;
    if (server.changed) continue;  // it changed again since: its places stand
    for (uint32_t at : server.listed) changed_[at] = -1;
    changed_dropped_ += server.listed.size();
    server.listed.clear();
  }
  read_since_prune_.clear();
  if (changed_dropped_ == 0 || 2 * changed_dropped_ < changed_.size()) return;
  // Mostly dropped: the list is rebuilt in order.
  std::erase(changed_, -1);
  changed_dropped_ = 0;
  for (int s : changed_) pictures_[static_cast<size_t>(s)].listed.clear();
  for (size_t i = 0; i < changed_.size(); ++i)
    pictures_[static_cast<size_t>(changed_[i])].listed.push_back(static_cast<uint32_t>(i));
}

void ClusterQueue::ClearChanged() {
  for (int s : changed_)
    if (s >= 0) pictures_[static_cast<size_t>(s)].listed.clear();
  for (int s : read_since_prune_) pictures_[static_cast<size_t>(s)].read_since_prune = false;
  read_since_prune_.clear();
  changed_.clear();
  changed_dropped_ = 0;
}

void ClusterQueue::Round() {
  round_changed_.clear();
  // Time passed since the last round: what was refused then may start now.
  PicturesChanged();
  if (left_waiting_) {
    // The jobs the last round left waiting were turned down by every server: they are tried on
    // those that may take more since, read now.
    for (size_t i = 0; i < changed_.size(); ++i) {
      const int s = changed_[i];
      if (s < 0 || !pictures_[static_cast<size_t>(s)].changed) continue;
      ReadServer(s);
      round_changed_.push_back(s);
    }
    ClearChanged();
  } else {
    // No such jobs: servers are read when a job needs them.
    PruneChanged();
  }
  if (left_waiting_ && !queue_grew_ && !queue_moved_ &&
      std::none_of(round_changed_.begin(), round_changed_.end(), [&](int s) {
        const Picture& server = pictures_[static_cast<size_t>(s)];
        return server.eligible && server.usable > 0;
      })) {
    // Only the jobs already looked at wait, and no server that changed has a GPU any job could
    // use: nothing can start. They keep their standing, as if looked at now.
    return;
  }
  queue_moved_ = false;
  ++round_;
  round_changed_sorted_ = false;
  const bool fifo = state_.options.cluster == ClusterMode::kFifo;
  // Whether a server that changed since the last round could take any job (it has a usable GPU,
  // or its picture does not say): if none can, the jobs that round left waiting still wait.
  // (Asked of every job the last round left waiting: answered again only once a picture changed.)
  AnswerUntilPicturesChange may_take;
  auto changed_may_take = [&] {
    return may_take.Get(pictures_version_, [&] {
      return std::any_of(round_changed_.begin(), round_changed_.end(), [&](int s) {
        const Picture& server = pictures_[static_cast<size_t>(s)];
        return server.eligible && (server.usable > 0 || server.stale || server.changed);
      });
    });
  };
  // Whether a server that changed may start one of the jobs the last round left waiting, as the
  // least demanding of them are known (asked as often, answered again once a picture changed).
  AnswerUntilPicturesChange may_start;
  auto changed_may_start = [&] {
    return may_start.Get(pictures_version_, [&] { return ChangedMayStartLeftWaiting(); });
  };
  // Whether the round looks at every waiting job (else those it passes over keep their part in
  // what the jobs left waiting ask).
  bool looked_at_all = true;
  int waiting = 0, old_seen = 0, last_rank = old_until_rank_;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (state_.options.queue_depth > 0 && waiting >= state_.options.queue_depth) {
      looked_at_all = false;
      break;
    }
    const int rank = *it;
    const int index = state_.arrivals[static_cast<size_t>(rank)];
    SimJob& job = state_.jobs[static_cast<size_t>(index)];
    // Looked at in the last round (the jobs up to the last one it looked at, but requeued ones).
    const bool looked_at = job.checked_round >= 0 && rank <= old_until_rank_;
    const bool oldest = it == queue_.begin();
    if (looked_at && !oldest && !requeued_ && (!changed_may_take() || !changed_may_start())) {
      // Every job the last round left waiting and this one has not reached still waits: go past
      // them to the jobs it never looked at.
      looked_at_all = false;
      const int rest = left_waiting_count_ - left_outside_ - old_seen;
      waiting += rest;
      old_seen += rest;
      it = queue_.upper_bound(old_until_rank_);
      continue;
    }
    if (looked_at && !oldest && !fifo && !state_.spec.learn) {
      // It and the jobs after it that a refusal of this round rules out wait on, not tried. No
      // picture changes while they pass, so the test above would let each of them through as it
      // did this one. (Not the oldest, which may reserve a server; not under fifo, which looks at
      // one job; not with learn=on, where no refusal is remembered.)
      const auto next = PassKnownRefused(it, waiting, old_seen);
      if (next != it) {
        it = next;
        continue;
      }
    }
    job.checked_round = round_;
    last_rank = std::max(last_rank, rank);
    if (looked_at) ++old_seen;
    if (oldest && reserved_job_ >= 0 && reserved_job_ != index) {
      // A requeued job went ahead of the one holding the reservation: it passes to the oldest.
      state_.jobs[static_cast<size_t>(reserved_job_)].checked_round = -2;
      Unreserve();
    }
    ++it;  // starting the job takes it out of the queue
    if (StartSomewhere(index, looked_at)) continue;
    // It waits. The oldest waiting job reserves the most free server, where it queues: nothing
    // else is sent there, so that server's own scheduler starts it once it fits.
    if (oldest && reserved_job_ < 0 && Reserve(index)) continue;
    ++waiting;
    LeftWaiting(job);
    if (fifo) {
      looked_at_all = false;
      break;
    }
  }
  // What the jobs left waiting ask: those looked at now, and those passed over as before.
  if (waiting > 0 || !looked_at_all) {
    for (size_t g = 0; g < left_least_.size(); ++g) {
      left_least_[g] = looked_at_all ? left_next_[g] : std::min(left_least_[g], left_next_[g]);
      left_next_[g] = kNone;
    }
  } else {
    std::fill(left_least_.begin(), left_least_.end(), kNone);
  }
  old_until_rank_ = last_rank;
  left_waiting_count_ = waiting;
  left_outside_ = 0;
  requeued_ = false;
  left_waiting_ = waiting > 0;
}

void ClusterQueue::StartPending() {
  // Launches are carried out once the instant's passes and round have decided, as a server's pass
  // decides all its launches before any starts: every decision of the instant saw the same
  // samples.
  for (size_t i = 0; i < pending_.size(); ++i)
    host_.Start(pending_[i].first, std::move(pending_[i].second));
  pending_.clear();
}

void ClusterQueue::CheckDispatch() {
  // A sliding utilization window lets a GPU in at any moment; the cluster, as the server's own
  // scheduler, looks again each sample interval while it can fall. With that gate on, a job counts
  // as wrongly waiting once a server could have started it for a whole interval.
  const Duration tolerance = state_.rule.gates && state_.rule.gates->utilization
                                 ? state_.options.scheduler.sample_interval
                                 : Duration::zero();
  const bool fifo = state_.options.cluster == ClusterMode::kFifo;
  int looked = 0;
  for (int rank : queue_) {
    if (state_.options.queue_depth > 0 && looked >= state_.options.queue_depth) break;
    if (fifo && looked >= 1) break;
    ++looked;
    SimJob& job = state_.jobs[static_cast<size_t>(state_.arrivals[static_cast<size_t>(rank)])];
    bool startable = false;
    for (size_t s = 0; s < state_.servers.size(); ++s) {
      const Scheduler& scheduler = *state_.servers[s].scheduler;
      if (!scheduler.main_queue().empty() || !scheduler.recovery_queue().empty()) continue;
      ++dispatch_checks_;
      startable |= std::holds_alternative<Placed>(
          state_.policy.Place(scheduler.View(), RequestFor(job, static_cast<int>(s))));
    }
    if (!startable) {
      startable_since_.erase(rank);
      continue;
    }
    const TimePoint since = startable_since_.try_emplace(rank, state_.Now()).first->second;
    if (state_.Now() - since >= tolerance) ++dispatch_violations_;
  }
}
}  // namespace colo::sim

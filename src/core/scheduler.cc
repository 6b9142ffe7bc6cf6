#include "core/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/check.h"

namespace colo {

Result<RecoveryMode> ParseRecoveryMode(std::string_view text) {
  if (text == "thesis" || text == "idle") return RecoveryMode::kThesis;
  if (text == "adaptive") return RecoveryMode::kAdaptive;
  return InvalidArgument(fmt::format("unknown recovery mode '{}' (use adaptive or thesis)", text));
}

std::string_view ToString(RecoveryMode mode) {
  return mode == RecoveryMode::kThesis ? "thesis" : "adaptive";
}

Scheduler::Scheduler(const Clock& clock, const PlacementPolicy& policy, SchedulerConfig config)
    : clock_(clock),
      policy_(policy),
      reads_(policy.window_reads()),
      config_(config),
      ledger_(config.fairness.half_life),
      limits_used_(config.user_limits.any()) {
  pass_view_.windows = this;
}

GpuIndex Scheduler::AddGpu(const GpuInfo& info) {
  gpus_.emplace_back(info, config_.window_samples, config_.sample_interval,
                     policy_.window_quantiles());
  changed_ = true;
  std::map<int, int> per_node;
  for (const auto& g : gpus_) per_node[g.info.node]++;
  max_gpus_per_node_ = 0;
  for (const auto& [node, count] : per_node)
    max_gpus_per_node_ = std::max(max_gpus_per_node_, count);
  max_capacity_ = std::max(max_capacity_, info.capacity);
  return static_cast<GpuIndex>(gpus_.size() - 1);
}

JobRecord& Scheduler::Get(JobId id) {
  auto it = jobs_.find(id);
  COLO_CHECK(it != jobs_.end());
  return it->second;
}

const JobRecord* Scheduler::job(JobId id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

JobRecord& Scheduler::AddRecord(const JobSpec& spec, TimePoint submitted) {
  JobRecord* job = nullptr;
  if (spare_records_.empty()) {
    job = &jobs_.try_emplace(spec.id).first->second;
  } else {
    auto node = std::move(spare_records_.back());
    spare_records_.pop_back();
    node.key() = spec.id;
    job = &jobs_.insert(std::move(node)).position->second;
  }
  job->spec = spec;  // into the buffers of a spare's texts
  job->need = spec.memory;
  job->submitted = submitted;
  return *job;
}

void Scheduler::RemoveRecord(std::unordered_map<JobId, JobRecord>::iterator it) {
  if (spare_records_.size() >= kSpareRecords) {
    jobs_.erase(it);
    return;
  }
  auto node = jobs_.extract(it);
  // Blank, as a new record is, but for the buffers it keeps (cleared) for the next job: the
  // record is made anew in place, which costs a fraction of assigning a blank one member by
  // member.
  JobRecord& job = node.mapped();
  auto gpus = std::move(job.gpus);
  auto current_use = std::move(job.current_use);
  auto process_seen = std::move(job.process_seen);
  auto name = std::move(job.spec.name);
  auto owner = std::move(job.spec.owner);
  job.~JobRecord();
  ::new (static_cast<void*>(&job)) JobRecord;
  const auto keep = [](auto& buffer, auto& into) {
    buffer.clear();
    std::swap(buffer, into);
  };
  keep(gpus, job.gpus);
  keep(current_use, job.current_use);
  keep(process_seen, job.process_seen);
  keep(name, job.spec.name);
  keep(owner, job.spec.owner);
  spare_records_.push_back(std::move(node));
}

Status Scheduler::CheckSubmission(const JobSpec& spec) const {
  if (jobs_.count(spec.id))
    return InvalidArgument(fmt::format("job id {} already exists", spec.id));
  if (spec.gpus < 1)
    return InvalidArgument(fmt::format("job {} asks for {} GPUs", spec.id, spec.gpus));
  if (spec.gpus > max_gpus_per_node_) {
    return InvalidArgument(fmt::format("job {} needs {} GPUs on one server; the largest has {}",
                                       spec.id, spec.gpus, max_gpus_per_node_));
  }
  if (spec.memory.known() && spec.memory.peak > max_capacity_) {
    return InvalidArgument(fmt::format("job {} needs {} per GPU; the largest GPU has {}", spec.id,
                                       FormatBytes(spec.memory.peak), FormatBytes(max_capacity_)));
  }
  if (spec.memory.uncertainty < 0 || spec.memory.peak < Bytes(0)) {
    return InvalidArgument(fmt::format("job {} has a negative memory need", spec.id));
  }
  if (!spec.booked_gpus.empty()) {
    COLO_RETURN_IF_ERROR(CheckBooking(spec));
  }
  return Status::Ok();
}

Status Scheduler::Submit(const JobSpec& spec, PriorAttempts prior) {
  COLO_RETURN_IF_ERROR(CheckSubmission(spec));
  JobRecord& record = AddRecord(spec, clock_.Now());
  // It keeps the age it had before a restart.
  record.waiting_since = std::min(prior.waiting_since.value_or(record.submitted), record.submitted);
  record.attempts = prior.attempts;
  record.ever_started = prior.attempts > 0;
  if (prior.out_of_memory > 0) {
    // Back where the crash put it: the recovery queue, with the retry count it had.
    record.oom_count = prior.out_of_memory;
    record.state = JobState::kRecovering;
    record.require_idle = config_.recovery == RecoveryMode::kThesis ||
                          prior.out_of_memory >= config_.max_oom_retries ||
                          (spec.memory.known() && spec.memory.peak >= max_capacity_);
    QueueJob(record, /*front=*/false);
    changed_ = true;
    return Status::Ok();
  }
  if (!spec.booked_gpus.empty()) {
    // It waits for its own GPUs only: behind no other job, and holding none up.
    booked_.push_back(spec.id);
    changed_ = true;
    return Status::Ok();
  }
  // A job queued behind a waiting head changes nothing unless backfill may start it (or, under
  // fair share or limits, it may come before the head or the head be held).
  if (config_.backfill || config_.fairness.order == QueueOrder::kFairShare || limits_used_ ||
      (main_queue_.empty() && recovery_queue_.empty()))
    changed_ = true;
  Enqueue(record);
  return Status::Ok();
}

Result<Launch> Scheduler::StartPlaced(const JobSpec& spec, Placed placed) {
  if (!main_queue_.empty() || !recovery_queue_.empty() || !booked_.empty())
    return FailedPrecondition(fmt::format("job {}: other jobs wait here", spec.id));
  if (!spec.booked_gpus.empty())
    return FailedPrecondition(fmt::format("job {} is booked: a pass places it", spec.id));
  const TimePoint now = clock_.Now();
  // The placement was decided on the pass's view of this instant, untouched since: no GPU's view
  // was touched, and nothing was placed.
  bool current = pass_view_.now == now && placements_ == placements_at_view_ &&
                 kept_.size() == gpus_.size() && static_cast<int>(placed.gpus.size()) == spec.gpus;
  for (const KeptView& kept : kept_) current = current && kept.current;
  for (GpuIndex g : placed.gpus)
    current = current && g >= 0 && static_cast<size_t>(g) < gpus_.size();
  if (!current)
    return FailedPrecondition(fmt::format("job {}: placed on a view no longer current", spec.id));
  COLO_RETURN_IF_ERROR(CheckSubmission(spec));
  JobRecord& job = AddRecord(spec, now);
  job.waiting_since = now;
  if (const auto held = HeldByLimits(job)) {
    RemoveRecord(jobs_.find(spec.id));
    return FailedPrecondition(fmt::format("job {}: {}", spec.id, *held));
  }
  // What queueing it would have noted.
  if (spec.priority != 0 && config_.fairness.order != QueueOrder::kFairShare)
    priorities_used_ = true;
  BeginPass();
  Launch launch = Apply(job, std::move(placed), pass_view_, /*view_read_again=*/false);
  // As after the pass that started it: the queues are empty, nothing is due.
  changed_ = false;
  wake_at_ = ComputeNextWakeup();
  return launch;
}

void Scheduler::Enqueue(JobRecord& job, bool front) {
  const JobId id = job.spec.id;
  const std::string& owner = job.spec.owner;
  if (front)
    main_queue_.push_front(id);
  else
    main_queue_.push_back(id);
  waiting_owners_[owner]++;
  if (config_.fairness.order == QueueOrder::kFairShare) {
    OwnerQueue& queue = owner_queues_[owner];
    queue.jobs.emplace(-job.spec.priority, id);
    queue.places.insert(job.waiting_since);
    return;
  }
  // Until a priority is used, arrival order is every owner's order (and a submit stays O(1)).
  if (job.spec.priority != 0) priorities_used_ = true;
  if (priorities_used_) OrderOwnersJobs(owner);
}

void Scheduler::QueueJob(JobRecord& job, bool front) {
  const JobId id = job.spec.id;
  if (!job.spec.booked_gpus.empty()) {
    // A booked job waits for its own GPUs, in no order among users.
    front ? booked_.push_front(id) : booked_.push_back(id);
    return;
  }
  if (job.state == JobState::kRecovering) {
    front ? recovery_queue_.push_front(id) : recovery_queue_.push_back(id);
    waiting_owners_[job.spec.owner]++;
    return;
  }
  Enqueue(job, front);
}

void Scheduler::Unindex(const JobRecord& job, bool main) {
  if (!job.spec.booked_gpus.empty()) return;  // never indexed (QueueJob)
  const std::string& owner = job.spec.owner;
  if (auto it = waiting_owners_.find(owner); it != waiting_owners_.end() && --it->second <= 0)
    waiting_owners_.erase(it);
  if (!main) return;  // the recovery queue has no owner index
  auto queue = owner_queues_.find(owner);
  if (queue == owner_queues_.end()) return;
  queue->second.jobs.erase({-job.spec.priority, job.spec.id});
  if (auto place = queue->second.places.find(job.waiting_since);
      place != queue->second.places.end())
    queue->second.places.erase(place);
  if (queue->second.jobs.empty()) owner_queues_.erase(queue);
}

void Scheduler::RemoveFromMainQueue(const std::vector<JobId>& left) {
  if (left.empty()) return;
  // Usually the queue's front (FIFO), else wherever they were.
  size_t removed = 0;
  while (!main_queue_.empty() && Get(main_queue_.front()).state != JobState::kQueued) {
    main_queue_.pop_front();
    ++removed;
  }
  if (removed < left.size()) {
    std::erase_if(main_queue_, [&](JobId id) { return Get(id).state != JobState::kQueued; });
  }
  for (JobId id : left) Unindex(Get(id), /*main=*/true);
}

// A user's priorities reorder only that user's own places in the main queue: the slots their
// jobs hold stay theirs, so no priority lets one user pass another.
void Scheduler::OrderOwnersJobs(const std::string& owner) {
  std::vector<size_t> slots;
  std::vector<JobId> ids;
  for (size_t i = 0; i < main_queue_.size(); ++i) {
    const JobRecord& r = jobs_.at(main_queue_[i]);
    if (r.spec.owner != owner) continue;
    slots.push_back(i);
    ids.push_back(main_queue_[i]);
  }
  // Stable: equal priorities keep their order of arrival.
  std::stable_sort(ids.begin(), ids.end(), [&](JobId a, JobId b) {
    return jobs_.at(a).spec.priority > jobs_.at(b).spec.priority;
  });
  for (size_t k = 0; k < slots.size(); ++k) {
    if (main_queue_[slots[k]] == ids[k]) continue;
    main_queue_[slots[k]] = ids[k];
    changed_ = true;
  }
}

Status Scheduler::CheckPlaceable(const JobSpec& spec, Bytes idle_used) const {
  if (gpus_.empty()) return InfeasibleStatus("this server has no GPUs");
  if (spec.gpus > max_gpus_per_node_) {
    return InfeasibleStatus(fmt::format("needs {} GPUs on one server; the largest has {}",
                                        spec.gpus, max_gpus_per_node_));
  }
  const Bytes most_free = max_capacity_ - idle_used;
  // What the largest GPU offers, as the reason says it.
  const std::string largest = idle_used > Bytes(0)
                                  ? fmt::format("an idle GPU has {} free", FormatBytes(most_free))
                                  : fmt::format("the largest GPU has {}", FormatBytes(most_free));
  if (spec.memory.known() && spec.memory.Upper() > most_free) {
    return InfeasibleStatus(
        fmt::format("needs {} per GPU; {}", FormatBytes(spec.memory.Upper()), largest));
  }
  // What its owner may hold at once, were they to hold nothing else.
  if (const UserLimits limits = TermsOf(spec.owner).limits; limits.any()) {
    const Bytes per_gpu = spec.memory.known() ? spec.memory.Upper() : max_capacity_;
    if (auto over = OverLimit(spec.owner, limits, Holdings{}, spec.gpus,
                              Bytes(per_gpu.count() * spec.gpus)))
      return InfeasibleStatus(
          fmt::format("could never start within its owner's limits: {}", *over));
  }
  if (!spec.booked_gpus.empty()) COLO_RETURN_IF_ERROR(CheckBooking(spec));
  // The policy's own gates on an idle server (a booked job's GPUs idle): what it refuses there it
  // refuses forever.
  ClusterView idle;
  idle.now = clock_.Now();
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const GpuInfo& info = gpus_[i].info;
    GpuView v;
    v.index = static_cast<GpuIndex>(i);
    v.node = info.node;
    v.capacity = info.capacity;
    v.free_for_placement = info.capacity - idle_used;
    v.mig_instance = info.mig_instance;
    v.mode = info.default_mode;
    idle.gpus.push_back(v);
  }
  JobRecord probe;
  probe.spec = spec;
  probe.need = spec.memory;
  const PlacementDecision decision = Decide(probe, MakeRequest(probe), idle, nullptr);
  if (const auto* no = std::get_if<Infeasible>(&decision)) return InfeasibleStatus(no->reason);
  if (const auto* wait = std::get_if<Wait>(&decision)) {
    for (const GateVerdict& v : wait->per_gpu) {
      if (v.gate == Gate::kMemory) {
        return InfeasibleStatus(fmt::format(
            "needs {} per GPU including the policy's margin; {}",
            FormatBytes(Bytes(static_cast<int64_t>(v.limit))),
            spec.booked_gpus.empty()
                ? largest
                : fmt::format("GPU {} has {}", v.gpu, FormatBytes(gpus_[v.gpu].info.capacity))));
      }
    }
    return InfeasibleStatus(fmt::format("no GPU of {} server could ever take it: {}",
                                        idle_used > Bytes(0) ? "an idle" : "this", wait->Reason()));
  }
  return Status::Ok();
}

Status Scheduler::AbortLaunch(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound(fmt::format("no job {}", id));
  JobRecord& job = it->second;
  if (job.state != JobState::kRunning)
    return FailedPrecondition(fmt::format("job {} is not being launched", id));
  Detach(job);
  job.gpus.clear();
  job.current_use.clear();
  job.process_seen.clear();
  job.attempts--;
  job.ever_started = job.attempts > 0;
  job.state = job.oom_count > 0 ? JobState::kRecovering : JobState::kQueued;
  QueueJob(job, /*front=*/true);
  changed_ = true;
  return Status::Ok();
}

void Scheduler::Forget(JobId id) {
  auto it = jobs_.find(id);
  if (it != jobs_.end() && IsTerminal(it->second.state)) RemoveRecord(it);
}

std::optional<JobState> Scheduler::Drop(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  JobRecord& job = it->second;
  const JobState was = job.state;
  if (was == JobState::kRunning) {
    Detach(job);
  } else if (!IsTerminal(was)) {
    auto& queue = QueueOf(job);
    queue.erase(std::remove(queue.begin(), queue.end(), id), queue.end());
    Unindex(job, was == JobState::kQueued);
  }
  RemoveRecord(it);
  changed_ = true;
  return was;
}

void Scheduler::SetUserTerms(const std::string& user, const UserTerms& terms) {
  auto it = terms_.find(user);
  if (it != terms_.end() && it->second == terms) return;
  terms_[user] = terms;
  if (terms.limits.any()) limits_used_ = true;
  changed_ = true;
}

void Scheduler::SetTermsSource(TermsSource source, bool any_limits) {
  terms_source_ = std::move(source);
  if (any_limits) limits_used_ = true;
  changed_ = true;
}

UserTerms Scheduler::TermsOf(const std::string& user) const {
  const auto it = terms_.find(user);
  if (it != terms_.end()) return it->second;
  if (!terms_source_) return UserTerms{1.0, config_.user_limits};
  return terms_.emplace(user, terms_source_(user)).first->second;
}

void Scheduler::RestoreUsage(const std::string& user, double usage) {
  ledger_.Restore(user, usage, clock_.Now());
  changed_ = true;
}

template <typename Visit>
void Scheduler::ForEachCountedUser(Visit visit) const {
  // A merge of three maps' keys.
  auto waiting = waiting_owners_.begin();
  auto held = holdings_.begin();
  const auto& accounts = ledger_.accounts();
  auto account = accounts.begin();
  for (;;) {
    const std::string* next = nullptr;
    auto consider = [&](const std::string& user) {
      if (!next || user < *next) next = &user;
    };
    if (waiting != waiting_owners_.end()) consider(waiting->first);
    if (held != holdings_.end()) consider(held->first);
    if (account != accounts.end()) consider(account->first);
    if (!next) return;
    const std::string& user = *next;  // a node of one of the maps: it outlives the steps below
    visit(user);
    if (waiting != waiting_owners_.end() && waiting->first == user) ++waiting;
    if (held != holdings_.end() && held->first == user) ++held;
    if (account != accounts.end() && account->first == user) ++account;
  }
}

std::map<std::string, double> Scheduler::CountedUsers() const {
  std::map<std::string, double> users;
  ForEachCountedUser(
      [&](const std::string& user) { users.emplace_hint(users.end(), user, TermsOf(user).share); });
  return users;
}

std::map<std::string, UserStanding> Scheduler::Standings() const {
  return colo::Standings(ledger_, CountedUsers(), clock_.Now());
}

UserStanding Scheduler::StandingOf(const std::string& user) const {
  const TimePoint now = clock_.Now();
  // The shares are added in the order Standings adds them, so that the fractions come out equal.
  StandingTotals totals;
  totals.usage = ledger_.Total(now);
  ForEachCountedUser([&](const std::string& counted) { totals.share += TermsOf(counted).share; });
  return colo::StandingOf(ledger_, user, TermsOf(user).share, totals, now);
}

Holdings Scheduler::HeldBy(const std::string& user) const {
  const auto it = holdings_.find(user);
  return it == holdings_.end() ? Holdings{} : it->second.held;
}

int Scheduler::WaitingOf(const std::string& user) const {
  const auto it = waiting_owners_.find(user);
  return it == waiting_owners_.end() ? 0 : it->second;
}

Status Scheduler::UpdateExpectedRun(JobId id, Duration run) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound(fmt::format("no job {}", id));
  if (IsTerminal(it->second.state)) return FailedPrecondition(fmt::format("job {} has ended", id));
  if (run < Duration::zero())
    return InvalidArgument(fmt::format("job {}: a negative run time", id));
  if (it->second.spec.expected_run == run) return Status::Ok();
  it->second.spec.expected_run = run;
  changed_ = true;
  return Status::Ok();
}

void Scheduler::Hold(JobRecord& job, bool holding) {
  const std::string& owner = job.spec.owner;
  if (!holding) {
    COLO_CHECK(job.owner_holdings != nullptr);  // it holds what Hold(job, true) counted
    OwnerHoldings& owner_holdings = *job.owner_holdings;
    Holdings& held = owner_holdings.held;
    held.gpus -= job.holds.gpus;
    held.gpu_memory -= job.holds.gpu_memory;
    held.running_jobs -= job.holds.running_jobs;
    Charge(owner, owner_holdings, -job.charge);
    if (held.running_jobs <= 0) holdings_.erase(owner);
    job.holds = Holdings{};
    job.charge = 0;
    job.owner_holdings = nullptr;
    return;
  }
  // What it plans on each GPU: its need, or the whole GPU where it has none or is alone there.
  job.holds = Holdings{static_cast<int>(job.gpus.size()), Bytes(0), 1};
  job.charge = 0;
  const Bytes need = job.need.known() ? job.need.Upper() : Bytes(0);
  for (GpuIndex g : job.gpus) {
    const Bytes capacity = gpus_[g].info.capacity;
    const bool whole = job.mode == SharingMode::kExclusive || need <= Bytes(0);
    const Bytes planned = whole ? capacity : std::min(need, capacity);
    job.holds.gpu_memory += planned;
    job.charge += capacity > Bytes(0)
                      ? static_cast<double>(planned.count()) / static_cast<double>(capacity.count())
                      : 1.0;
  }
  OwnerHoldings& owner_holdings = holdings_[owner];
  job.owner_holdings = &owner_holdings;
  Holdings& held = owner_holdings.held;
  held.gpus += job.holds.gpus;
  held.gpu_memory += job.holds.gpu_memory;
  held.running_jobs += job.holds.running_jobs;
  Charge(owner, owner_holdings, job.charge);
}

void Scheduler::Charge(const std::string& owner, OwnerHoldings& holdings, double delta) {
  if (delta == 0) return;  // no account opened for nothing
  if (!holdings.account) holdings.account = ledger_.Open(owner);
  if (!ledger_.AddRate(*holdings.account, delta, clock_.Now())) holdings.account.reset();
}

std::optional<std::string> Scheduler::HeldByLimits(const JobRecord& job) const {
  if (!limits_used_) return std::nullopt;
  const UserLimits limits = TermsOf(job.spec.owner).limits;
  if (!limits.any()) return std::nullopt;
  const auto held = holdings_.find(job.spec.owner);
  const Holdings none;
  const Bytes need = job.need.known() ? job.need.Upper() : max_capacity_;
  return OverLimit(job.spec.owner, limits, held == holdings_.end() ? none : held->second.held,
                   job.spec.gpus, Bytes(need.count() * job.spec.gpus));
}

bool Scheduler::OwnerAtLimit(const std::string& owner) const {
  const auto held = holdings_.find(owner);
  return held != holdings_.end() && AtLimit(TermsOf(owner).limits, held->second.held);
}

Status Scheduler::UpdateNeed(JobId id, const MemoryNeed& need) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound(fmt::format("no job {}", id));
  JobRecord& job = it->second;
  if (job.state != JobState::kQueued) {
    return FailedPrecondition(
        fmt::format("job {} is {}: only a queued job's need can change", id, ToString(job.state)));
  }
  if (need.uncertainty < 0 || need.peak < Bytes(0)) {
    return InvalidArgument(fmt::format("job {}: a negative memory need", id));
  }
  if (need.known() && need.peak > max_capacity_) {
    return InvalidArgument(fmt::format("job {} would need {} per GPU; the largest GPU has {}", id,
                                       FormatBytes(need.peak), FormatBytes(max_capacity_)));
  }
  job.need = need;
  job.spec.memory = need;
  changed_ = true;
  return Status::Ok();
}

Status Scheduler::UpdateExpectedSmact(JobId id, double smact) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound(fmt::format("no job {}", id));
  JobRecord& job = it->second;
  if (job.state != JobState::kQueued && job.state != JobState::kRecovering)
    return FailedPrecondition(fmt::format("job {} is {}, not waiting", id, ToString(job.state)));
  if (!(smact >= 0 && smact <= 1))
    return InvalidArgument(fmt::format("job {}: SM activity {} is not in 0..1", id, smact));
  job.spec.expected_smact = smact;
  changed_ = true;
  return Status::Ok();
}

Status Scheduler::Adopt(const JobSpec& spec, const std::vector<GpuIndex>& gpus, SharingMode mode,
                        int thread_percent, int attempt, TimePoint started,
                        int prior_out_of_memory) {
  if (jobs_.count(spec.id))
    return InvalidArgument(fmt::format("job id {} already exists", spec.id));
  if (gpus.empty() || static_cast<int>(gpus.size()) != spec.gpus)
    return InvalidArgument(
        fmt::format("job {} runs on {} GPUs but asked for {}", spec.id, gpus.size(), spec.gpus));
  for (GpuIndex g : gpus) {
    if (g < 0 || static_cast<size_t>(g) >= gpus_.size())
      return NotFound(
          fmt::format("job {} runs on GPU {}, which this server does not have", spec.id, g));
  }
  JobRecord& job = AddRecord(spec, started);
  job.state = JobState::kRunning;
  job.gpus = gpus;
  job.current_use.assign(gpus.size(), Bytes(0));
  // It ran before the restart: its grace, wherever counted from, began no later than its start.
  job.process_seen.assign(gpus.size(), started);
  job.mode = mode;
  job.thread_percent = thread_percent;
  job.attempts = attempt;
  job.oom_count = prior_out_of_memory;
  job.started = job.first_started = job.last_growth = started;
  job.ever_started = true;
  job.placed_limit = Reservation(job);
  for (GpuIndex g : gpus) gpus_[g].jobs.push_back(&job);
  ViewChanged(gpus);
  Hold(job, true);
  changed_ = true;
  return Status::Ok();
}

std::optional<PlacementDecision> Scheduler::Explain(JobId id) const {
  const JobRecord* record = job(id);
  if (!record || (record->state != JobState::kQueued && record->state != JobState::kRecovering))
    return std::nullopt;
  const PlacementRequest request = MakeRequest(*record);
  const ClusterView view = View();
  // As the pass decides it: a job behind the head under backfill is kept off the head's GPUs
  // unless it ends by the head's time.
  const auto head = jobs_.find(head_);
  if (!config_.backfill || head == jobs_.end() || head_ == id || !head->second.reservation ||
      record->state != JobState::kQueued || !record->spec.booked_gpus.empty())
    return Decide(*record, request, view, nullptr);
  const HeadReservation& reserved = *head->second.reservation;
  // Backfill looks at the first backfill_depth jobs behind the head that their owners' limits
  // let start: one further back waits for the head, every GPU kept from it.
  const std::vector<JobId> order = QueueOrder();
  const auto head_at = std::find(order.begin(), order.end(), head_);
  const auto job_at = std::find(order.begin(), order.end(), id);
  if (head_at == order.end() || job_at < head_at) return Decide(*record, request, view, nullptr);
  int looked_at_before = 0;
  for (auto it = head_at + 1; it < job_at; ++it) {
    if (!HeldByLimits(jobs_.at(*it))) ++looked_at_before;
  }
  const bool looked_at = looked_at_before < config_.backfill_depth;
  std::vector<bool> earmarked(view.gpus.size(), !looked_at);
  for (GpuIndex g : reserved.gpus) earmarked[static_cast<size_t>(g)] = true;
  PlacementDecision decision = Decide(*record, request, view, &earmarked);
  if (looked_at && std::holds_alternative<Wait>(decision) && reserved.at &&
      EndsBy(*record, *reserved.at))
    decision = Decide(*record, request, view, nullptr);
  return decision;
}

void Scheduler::OnGpuSample(const GpuSample& sample) {
  TakeSample(sample);
}

const Scheduler::GpuRecord* Scheduler::TakeSample(const GpuSample& sample) {
  if (sample.gpu < 0 || static_cast<size_t>(sample.gpu) >= gpus_.size()) return nullptr;
  GpuRecord& g = gpus_[sample.gpu];
  changed_ = true;
  ViewChanged(sample.gpu);
  g.used = sample.used;
  g.healthy = sample.healthy;
  // A figure not read is negative; one that is not a number or infinite (a driver's garbage) is
  // not read either: a window's settling time is computed from its values.
  const auto read = [](double figure) { return figure >= 0 && std::isfinite(figure); };
  if (read(sample.smact)) g.smact.Add(sample.time, sample.smact);
  if (read(sample.smocc)) g.smocc.Add(sample.time, sample.smocc);
  if (read(sample.drama)) g.drama.Add(sample.time, sample.drama);
  return &g;
}

std::optional<NeedRaised> Scheduler::OnJobMemory(JobId id, GpuIndex gpu, Bytes used) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != JobState::kRunning) return std::nullopt;
  return UseOn(it->second, gpu, used);
}

std::optional<NeedRaised> Scheduler::UseOn(JobRecord& job, GpuIndex gpu, Bytes used) {
  const JobId id = job.spec.id;
  std::optional<NeedRaised> raised;
  for (size_t i = 0; i < job.gpus.size(); ++i) {
    if (job.gpus[i] != gpu || job.current_use[i] == used) continue;
    changed_ = true;
    // Its reservation on every GPU it runs on reads its peak.
    ViewChanged(job.gpus);
    job.current_use[i] = used;
    if (used > job.attempt_peak) {
      job.attempt_peak = used;
      job.last_growth = clock_.Now();
      job.max_peak = std::max(job.max_peak, used);
    }
    // Under MPS the limit stops it; an exclusive job has its GPUs to itself.
    if (job.mode != SharingMode::kPlain || job.placed_limit <= Bytes(0) ||
        used <= job.placed_limit || used <= job.need.Upper())
      continue;
    // No need above the largest GPU: a job that uses (nearly) all of one holds that much, and a
    // larger number could never be placed again after a crash.
    const MemoryNeed wanted{used.Scaled(1 + kOverPlanMargin), MemorySource::kLearned, 0.0};
    const MemoryNeed capped =
        wanted.Upper() > max_capacity_ ? MemoryNeed{max_capacity_, wanted.source, 0.0} : wanted;
    if (capped.Upper() <= job.need.Upper()) continue;
    job.need = capped;
    job.spec.memory = capped;
    // It holds and is charged what it plans with now.
    Hold(job, false);
    Hold(job, true);
    raised = NeedRaised{id, gpu, used, job.placed_limit, capped, !job.over_plan};
    job.over_plan = true;
  }
  return raised;
}

std::vector<NeedRaised> Scheduler::OnDeviceSample(const GpuSample& sample, double measured_smact,
                                                  bool uses_read, std::span<const JobUse> job_use) {
  std::vector<NeedRaised> raised;
  const GpuRecord* gpu = TakeSample(sample);
  if (!gpu) return raised;
  // Nothing below moves a job on or off the GPU: its list is walked as it is, not copied (this
  // runs for every GPU at every sample, in colod and in colo sim).
  const std::vector<const JobRecord*>& here = gpu->jobs;
  const bool solo = here.size() == 1 && measured_smact > kComputingSmact;
  if (!solo && !uses_read) return raised;  // nothing of a job's changes (colo sim's usual sample)
  const bool reads_seen = policy_.grace_from_process();  // asked once, not once per job
  for (const JobRecord* record : here) {
    // A GPU's jobs are running ones, and their records this scheduler's own: changed in place,
    // not looked up again.
    JobRecord& job = const_cast<JobRecord&>(*record);
    if (solo) {
      job.solo_smact_sum += measured_smact;
      job.solo_samples++;
    }
    if (!uses_read) continue;
    const auto seen = std::find_if(job_use.begin(), job_use.end(),
                                   [&job](const JobUse& use) { return use.job == job.spec.id; });
    if (reads_seen && seen != job_use.end()) SeenOn(job, sample.gpu);
    Bytes used = seen == job_use.end() ? Bytes(0) : seen->used;
    // Part of an MPS client's context is in the MPS server, out of NVML's count of the client.
    if (used > Bytes(0) && job.mode == SharingMode::kMps) used += gpu->info.mps_uncounted_context;
    if (auto need = UseOn(job, sample.gpu, used)) raised.push_back(*need);
  }
  return raised;
}

void Scheduler::SharesPlainly(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != JobState::kRunning) return;
  it->second.mode = SharingMode::kPlain;
  ViewChanged(it->second.gpus);
  changed_ = true;
}

void Scheduler::OnJobProcessSeen(JobId id, GpuIndex gpu) {
  if (!policy_.grace_from_process()) return;  // nothing reads it: no reason to look again
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != JobState::kRunning) return;
  SeenOn(it->second, gpu);
}

void Scheduler::SeenOn(JobRecord& job, GpuIndex gpu) {
  if (!policy_.grace_from_process()) return;
  for (size_t i = 0; i < job.gpus.size(); ++i) {
    if (job.gpus[i] != gpu || job.process_seen[i]) continue;
    changed_ = true;
    ViewChanged(gpu);
    job.process_seen[i] = clock_.Now();
  }
}

Bytes Scheduler::Reservation(const JobRecord& job, TimePoint now) const {
  const Bytes planned = job.need.Upper();
  // Steady: quiet (its peak has not grown for steady_after), and it reached 90% of its plan or has
  // run for settle_timeout. The rest of the test is made only for a quiet job.
  const bool quiet = job.attempt_peak > Bytes(0) && now - job.last_growth >= config_.steady_after;
  if (quiet &&
      (job.attempt_peak >= planned.Scaled(0.9) || now - job.started >= config_.settle_timeout))
    return job.attempt_peak;
  return std::max(planned, job.attempt_peak);
}

void Scheduler::Detach(JobRecord& job) {
  ViewChanged(job.gpus);
  for (GpuIndex g : job.gpus) {
    auto& list = gpus_[g].jobs;
    list.erase(std::remove(list.begin(), list.end(), &job), list.end());
  }
  Hold(job, false);
  job.preempt_deadline.reset();
}

JobEnded Scheduler::OnJobExit(JobId id, const JobExit& exit) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != JobState::kRunning) {
    JobEnded ignored;
    ignored.job = id;
    return ignored;  // ExitAction::kIgnored
  }
  JobRecord& job = it->second;
  // What the attempt measured (its next placement starts them again).
  const Bytes peak = job.attempt_peak;
  const bool over_plan = job.over_plan;
  const double solo_smact =
      job.solo_samples >= kMinSoloSamples ? job.solo_smact_sum / job.solo_samples : -1;
  const ExitAction action = EndAttempt(job, exit);
  JobEnded ended = EndedOf(job, action);
  ended.peak = peak;
  ended.over_plan = over_plan;
  ended.solo_smact = solo_smact;
  return ended;
}

JobEnded Scheduler::EndedOf(const JobRecord& job, ExitAction action) const {
  JobEnded ended;
  ended.job = job.spec.id;
  ended.action = action;
  ended.state = job.state;
  // A job that succeeded after out-of-memory retries keeps its story in its attempts.
  if (IsTerminal(job.state) && job.state != JobState::kSucceeded) ended.reason = job.end_reason;
  ended.need = job.need;
  ended.need_basis = job.need_basis;
  return ended;
}

std::vector<JobEnded> Scheduler::TakeFailed() {
  std::vector<JobEnded> taken;
  taken.swap(failed_);
  return taken;
}

ExitAction Scheduler::EndAttempt(JobRecord& job, const JobExit& exit) {
  Detach(job);
  changed_ = true;
  const TimePoint now = clock_.Now();
  job.finished = now;
  job.end_reason = exit.detail;
  switch (exit.kind) {
    case ExitKind::kSuccess:
      job.state = JobState::kSucceeded;
      return ExitAction::kFinished;
    case ExitKind::kFailure:
      job.state = JobState::kFailed;
      return ExitAction::kFinished;
    case ExitKind::kCancelled:
      job.state = JobState::kCancelled;
      return ExitAction::kFinished;
    case ExitKind::kLost:
      job.state = JobState::kLost;
      return ExitAction::kFinished;
    case ExitKind::kTimeout:
      job.state = JobState::kTimeout;
      return ExitAction::kFinished;
    case ExitKind::kPreempted:
      // It waits again as any newly submitted job, keeping its attempts (its age starts again).
      job.state = JobState::kQueued;
      job.end_reason.clear();
      job.gpus.clear();
      job.current_use.clear();
      job.process_seen.clear();
      job.preempted_for = 0;
      job.waiting_since = now;
      QueueJob(job, /*front=*/false);
      return ExitAction::kRequeuedAfterPreemption;
    case ExitKind::kOutOfMemory:
      break;
  }
  job.oom_count++;
  if (job.oom_count > config_.max_oom_retries) {
    job.state = JobState::kFailed;
    job.end_reason =
        fmt::format("out of memory {} times (retry cap {}); last peak seen {}", job.oom_count,
                    config_.max_oom_retries, FormatBytes(job.attempt_peak));
    return ExitAction::kFailedRetryCap;
  }
  if (config_.recovery == RecoveryMode::kThesis) {
    job.require_idle = true;
  } else {
    // What the crash proved: the job needs more than it had.
    OutOfMemoryFacts facts;
    facts.planned = job.need.Upper();
    // Its budget when it failed: what it was placed with, or more where its use raised its need.
    facts.limit = std::max(job.placed_limit, job.need.Upper());
    facts.hard_limit =
        config_.mps_limits_enforced && job.mode == SharingMode::kMps && job.placed_limit > Bytes(0);
    facts.observed_peak = job.attempt_peak;
    facts.evidence = exit.oom;
    facts.capacity = max_capacity_;
    const RaisedNeed raised = RaiseNeedAfterOutOfMemory(
        facts, OutOfMemoryGrowth{config_.oom_growth, config_.oom_limit_growth, config_.oom_extra});
    Bytes need = raised.need;
    job.need_basis = raised.basis;
    // Geometric growth can overshoot what this server can ever give (the policy's margin on top
    // of the largest GPU, less the memory nothing colod runs uses there: other tenants'
    // processes, the simulator's baseline): such a need would hold the recovery queue's head
    // forever. The largest need the policy would place on an idle GPU is the most it can get.
    Bytes unmanaged = max_capacity_;
    for (size_t g = 0; g < gpus_.size(); ++g) {
      Bytes observed;
      for (const JobRecord* other : gpus_[g].jobs) {
        for (size_t i = 0; i < other->gpus.size(); ++i)
          if (other->gpus[i] == static_cast<GpuIndex>(g)) observed += other->current_use[i];
      }
      for (size_t i = 0; i < job.gpus.size(); ++i)
        if (job.gpus[i] == static_cast<GpuIndex>(g)) observed += job.current_use[i];
      unmanaged = std::min(unmanaged, std::max(Bytes(0), gpus_[g].used - observed));
    }
    JobSpec probe = job.spec;
    // A booked job's next run may be given other GPUs of this server (or of another).
    probe.booked_gpus.clear();
    const auto placeable = [&](Bytes candidate) {
      probe.memory = MemoryNeed{candidate + unmanaged, MemorySource::kLearned, 0.0};
      return CheckPlaceable(probe).ok();
    };
    if (!placeable(need)) {
      // The largest need that is placeable; never one that is not (the job's plan may itself
      // be beyond placing: a need raised while it ran).
      Bytes lo(0), hi = need;
      for (int i = 0; i < 64 && hi - lo > MiB(1); ++i) {
        const Bytes mid(lo.count() + (hi.count() - lo.count()) / 2);
        (placeable(mid) ? lo : hi) = mid;
      }
      need = lo;
      job.need_basis +=
          fmt::format("; at most {}, the most this server can place", FormatBytes(need));
    }
    job.need = MemoryNeed{need, MemorySource::kLearned, 0.0};
    job.outgrew_limit = job.outgrew_limit || raised.limit_bound;
    job.require_idle = job.oom_count == config_.max_oom_retries || need >= max_capacity_;
  }
  job.state = JobState::kRecovering;
  job.gpus.clear();
  job.current_use.clear();
  job.process_seen.clear();
  QueueJob(job, /*front=*/false);
  return ExitAction::kRequeuedForRecovery;
}

PlacementRequest Scheduler::MakeRequest(const JobRecord& job) const {
  PlacementRequest r = RequestFor(job.spec, job.need, job.require_idle);
  r.skip_utilization = r.booked && clock_.Now() - job.submitted >= config_.booked_busy_wait;
  return r;
}

std::deque<JobId>& Scheduler::QueueOf(const JobRecord& job) {
  if (!job.spec.booked_gpus.empty()) return booked_;
  return job.state == JobState::kRecovering ? recovery_queue_ : main_queue_;
}

Status Scheduler::CheckBooking(const JobSpec& spec) const {
  if (static_cast<int>(spec.booked_gpus.size()) != spec.gpus)
    return InvalidArgument(fmt::format("job {} asks for {} GPUs but {} were booked for it", spec.id,
                                       spec.gpus, spec.booked_gpus.size()));
  for (size_t i = 0; i < spec.booked_gpus.size(); ++i) {
    const GpuIndex g = spec.booked_gpus[i];
    if (g < 0 || static_cast<size_t>(g) >= gpus_.size())
      return InvalidArgument(
          fmt::format("job {} was booked GPU {}, which this server does not have", spec.id, g));
    if (std::find(spec.booked_gpus.begin(), spec.booked_gpus.begin() + i, g) !=
        spec.booked_gpus.begin() + i)
      return InvalidArgument(fmt::format("job {} was booked GPU {} twice", spec.id, g));
  }
  return Status::Ok();
}

PlacementDecision Scheduler::Decide(const JobRecord& job, const PlacementRequest& request,
                                    const ClusterView& view,
                                    const std::vector<bool>* earmarked) const {
  const std::vector<GpuIndex>& booked = job.spec.booked_gpus;
  if (!earmarked && booked.empty()) return policy_.Place(view, request);
  // The GPUs it may not use are shown to the policy as unusable, and their verdicts are not the
  // job's reason to wait: a booked job sees its own GPUs, a backfill candidate those not
  // earmarked for the head.
  auto hidden = [&](GpuIndex g) {
    if (!booked.empty()) return std::find(booked.begin(), booked.end(), g) == booked.end();
    return static_cast<bool>((*earmarked)[g]);
  };
  // Into a buffer reused across calls, as its GPUs' storage is: every backfill candidate is
  // decided on such a copy, at every pass while a head waits.
  thread_local ClusterView masked;
  masked = view;
  for (GpuView& g : masked.gpus) {
    if (hidden(g.index)) g.healthy = false;
  }
  PlacementDecision decision = policy_.Place(masked, request);
  if (auto* wait = std::get_if<Wait>(&decision)) {
    if (!booked.empty()) {
      std::erase_if(wait->per_gpu, [&](const GateVerdict& v) { return hidden(v.gpu); });
      wait->gpus_considered = static_cast<int>(booked.size());
    } else {
      for (GateVerdict& v : wait->per_gpu) {
        if (hidden(v.gpu)) v.gate = Gate::kEarmarked;
      }
    }
  }
  return decision;
}

Launch Scheduler::Apply(JobRecord& job, Placed placed, ClusterView& view, bool view_read_again) {
  COLO_CHECK(job.state == JobState::kQueued || job.state == JobState::kRecovering);
  COLO_CHECK(static_cast<int>(placed.gpus.size()) == job.spec.gpus);
  const TimePoint now = clock_.Now();
  job.state = JobState::kRunning;
  job.gpus = placed.gpus;
  job.current_use.assign(placed.gpus.size(), Bytes(0));
  job.process_seen.assign(placed.gpus.size(), std::nullopt);
  job.mode = placed.mode;
  job.thread_percent = placed.thread_percent;
  job.attempts++;
  job.started = now;
  if (!job.ever_started) job.first_started = now;
  job.ever_started = true;
  job.attempt_peak = Bytes(0);
  job.over_plan = false;
  job.solo_smact_sum = 0;
  job.solo_samples = 0;
  job.last_growth = now;
  job.last_wait.reset();
  for (GpuIndex g : placed.gpus) {
    auto& list = gpus_[g].jobs;
    COLO_CHECK(std::find(list.begin(), list.end(), &job) == list.end());  // never twice
    list.push_back(&job);
    gpus_[g].last_placement = now;
  }
  // The room its GPUs had for it, from the view the placement was decided on.
  Bytes room = view.gpus[placed.gpus.front()].free_for_placement;
  for (GpuIndex g : placed.gpus) room = std::min(room, view.gpus[g].free_for_placement);
  last_placed_ = placed.gpus.back();
  view.last_placed = last_placed_;
  ++placements_;
  for (GpuIndex g : placed.gpus) {
    if (view_read_again) MakeView(g, now, view.gpus[g]);
    summarized_[g] = 0;
  }
  ViewChanged(placed.gpus);  // the next pass makes them again
  const Bytes reservation = Reservation(job, now);
  job.placed_limit = AttemptLimit(reservation, room, job.outgrew_limit);
  job.limit_wait.clear();
  job.reservation.reset();
  Hold(job, true);
  return Launch{job.spec.id, std::move(placed.gpus), placed.mode, placed.thread_percent,
                reservation, job.placed_limit,       job.attempts};
}

Scheduler::Outcome Scheduler::TryPlace(JobRecord& job, ClusterView& view,
                                       std::vector<Launch>& launches,
                                       const std::vector<bool>* earmarked) {
  const PlacementRequest request = MakeRequest(job);
  SummarizeWhereNeeded(request);
  PlacementDecision decision = Decide(job, request, view, earmarked);
  if (auto* placed = std::get_if<Placed>(&decision)) {
    launches.push_back(Apply(job, std::move(*placed), view));
    return Outcome::kPlaced;
  }
  if (auto* infeasible = std::get_if<Infeasible>(&decision)) {
    job.state = JobState::kFailed;
    job.finished = clock_.Now();
    job.end_reason = "cannot be placed: " + infeasible->reason;
    failed_.push_back(EndedOf(job, ExitAction::kFinished));
    return Outcome::kInfeasible;
  }
  job.last_wait = std::get<Wait>(std::move(decision));
  return Outcome::kWaiting;
}

// The main queue in the order a pass looks at it: arrival order (FIFO), or by priority under fair
// share, where an owner's k-th place has the priority of their fair-share factor and the age of
// their k-th oldest job, and their jobs take their places in their own order. Yields each job
// once; the queue and its indexes do not change while it walks.
class Scheduler::Walk {
 public:
  explicit Walk(const Scheduler& s)
      : s_(s), fair_(s.config_.fairness.order == QueueOrder::kFairShare), now_(s.clock_.Now()) {
    if (!fair_) return;
    const std::map<std::string, UserStanding> standings = s.Standings();
    cursors_.reserve(s.owner_queues_.size());
    for (const auto& [owner, queue] : s.owner_queues_) {
      const auto standing = standings.find(owner);
      cursors_.push_back(Cursor{&owner, standing == standings.end() ? 1.0 : standing->second.factor,
                                queue.jobs.begin(), queue.jobs.end(), queue.places.begin()});
      Push(cursors_.size() - 1);
    }
  }

  std::optional<JobId> Next() {
    if (!fair_) {
      while (pos_ < s_.main_queue_.size()) {
        const JobId id = s_.main_queue_[pos_++];
        if (skipped_.empty() || !skipped_.count(s_.jobs_.at(id).spec.owner)) return id;
      }
      return std::nullopt;
    }
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Lower);
      const Entry top = heap_.back();
      heap_.pop_back();
      Cursor& cursor = cursors_[top.cursor];
      ++cursor.job;
      ++cursor.place;
      if (cursor.job != cursor.end) Push(top.cursor);
      if (!skipped_.empty() && skipped_.count(*cursor.owner)) continue;
      priority_ = top.priority;
      age_factor_ = top.age_factor;
      return top.id;
    }
    return std::nullopt;
  }
  // None of the owner's jobs may start in this pass (their limits).
  void SkipOwner(const std::string& owner) { skipped_.insert(owner); }
  // Of the job Next gave last, under fair share.
  double priority() const { return priority_; }
  double age_factor() const { return age_factor_; }

 private:
  using Jobs = std::set<std::pair<int, JobId>>;
  struct Cursor {
    const std::string* owner;
    double factor;
    Jobs::const_iterator job, end;
    std::multiset<TimePoint>::const_iterator place;
  };
  struct Entry {
    double priority, age_factor;
    TimePoint place;
    JobId id;
    size_t cursor;
  };
  // Heap order: the highest priority on top, then the oldest place, then the lowest id.
  static bool Lower(const Entry& a, const Entry& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.place != b.place) return a.place > b.place;
    return a.id > b.id;
  }
  void Push(size_t index) {
    const Cursor& cursor = cursors_[index];
    const FairnessConfig& config = s_.config_.fairness;
    const double age = AgeFactor(now_ - *cursor.place, config.max_age);
    heap_.push_back(
        Entry{Priority(config, cursor.factor, age), age, *cursor.place, cursor.job->second, index});
    std::push_heap(heap_.begin(), heap_.end(), Lower);
  }

  const Scheduler& s_;
  const bool fair_;
  const TimePoint now_;
  size_t pos_ = 0;
  std::vector<Cursor> cursors_;
  std::vector<Entry> heap_;
  std::set<std::string> skipped_;
  double priority_ = 0, age_factor_ = 0;
};

bool Scheduler::HeldBack(JobRecord& job, Walk* walk) {
  auto held = HeldByLimits(job);
  job.limit_wait = held.value_or("");
  if (!held) return false;
  // An owner who can start nothing more has the rest of their jobs passed over at once.
  if (walk && OwnerAtLimit(job.spec.owner)) walk->SkipOwner(job.spec.owner);
  return true;
}

std::vector<JobId> Scheduler::QueueOrder() const {
  std::vector<JobId> order;
  order.reserve(main_queue_.size());
  Walk walk(*this);
  while (const auto id = walk.Next()) order.push_back(*id);
  return order;
}

std::optional<QueueStanding> Scheduler::StandingOf(JobId id) const {
  const JobRecord* record = job(id);
  if (!record || record->state != JobState::kQueued) return std::nullopt;
  QueueStanding standing;
  standing.waiting = static_cast<int>(main_queue_.size());
  Walk walk(*this);
  int position = 0;
  for (auto next = walk.Next(); next; next = walk.Next()) {
    ++position;
    if (*next != id) continue;
    standing.position = position;
    standing.priority = walk.priority();
    standing.age_factor = walk.age_factor();
    break;
  }
  if (standing.position == 0) return std::nullopt;
  const std::map<std::string, UserStanding> standings = Standings();
  if (const auto it = standings.find(record->spec.owner); it != standings.end())
    standing.owner = it->second;
  if (config_.fairness.order == QueueOrder::kFifo)
    standing.age_factor = AgeFactor(clock_.Now() - record->waiting_since, config_.fairness.max_age);
  return standing;
}

void Scheduler::Backfill(JobRecord& head, Walk& walk, ClusterView& view,
                         std::vector<Launch>& launches, std::vector<JobId>& left) {
  head.reservation = Reserve(head, view);
  std::vector<bool> earmarked(view.gpus.size(), false);
  for (GpuIndex g : head.reservation->gpus) earmarked[g] = true;
  const std::optional<TimePoint> at = head.reservation->at;
  int looked = 0;
  while (looked < config_.backfill_depth) {
    const auto id = walk.Next();
    if (!id) break;
    JobRecord& candidate = Get(*id);
    if (HeldBack(candidate, &walk)) continue;
    ++looked;
    Outcome outcome = TryPlace(candidate, view, launches, &earmarked);
    // The head's GPUs too, for a job that ends before the head's time comes.
    if (outcome == Outcome::kWaiting && at && EndsBy(candidate, *at))
      outcome = TryPlace(candidate, view, launches, nullptr);
    if (outcome != Outcome::kWaiting) left.push_back(*id);
  }
}

std::vector<Launch> Scheduler::Schedule(size_t max_launches) {
  const TimePoint now = clock_.Now();
  if (!changed_ && (!wake_at_ || now < *wake_at_)) return {};
  if (!changed_ && DecidesAsTheLastPass(now)) {
    // A look in time alone that would decide as the last pass: it only announces the next.
    const std::optional<TimePoint> look = NextWindowLook(now);
    wake_at_ = look && (!held_->until || *look < *held_->until) ? look : held_->until;
    return {};
  }
  std::vector<Launch> launches = Pass(max_launches);
  changed_ = launches.size() >= max_launches;  // cut short: the next call goes on
  wake_at_ = ComputeNextWakeup();
  last_pass_ = now;
  held_.reset();
  return launches;
}

void Scheduler::BeginPass() {
  head_blocked_by_utilization_ = false;
  booked_blocked_by_utilization_ = false;
  preempt_due_ = true;
  if (auto it = jobs_.find(head_); it != jobs_.end()) it->second.reservation.reset();
  head_ = 0;
}

std::vector<Launch> Scheduler::Pass(size_t max_launches) {
  std::vector<Launch> launches;
  BeginPass();
  if (!AnyWaiting()) return launches;
  // The pass's view reuses one buffer: passes run at every event in the simulator.
  ClusterView& view = pass_view_;
  // Without the windows' summaries: SummarizeWhereNeeded adds those a job's decision reads.
  RefreshPassView();

  auto blocked_by_utilization = [](const JobRecord& job) {
    if (!job.last_wait) return false;
    for (const auto& v : job.last_wait->per_gpu) {
      if (v.gate == Gate::kUtilization) return true;
    }
    return false;
  };

  // Booked jobs first, each on its own GPUs: they are running in the outside scheduler already.
  for (size_t pos = 0; pos < booked_.size();) {
    JobRecord& job = Get(booked_[pos]);
    if (TryPlace(job, view, launches, nullptr) != Outcome::kWaiting) {
      booked_.erase(booked_.begin() + static_cast<std::ptrdiff_t>(pos));
      continue;
    }
    booked_blocked_by_utilization_ |= blocked_by_utilization(job);
    ++pos;
  }
  // The recovery queue has strict priority: while its head waits, nothing else starts (a job its
  // owner's limits hold is passed over, not waited for).
  for (size_t pos = 0; pos < recovery_queue_.size() && launches.size() < max_launches;) {
    JobRecord& job = Get(recovery_queue_[pos]);
    if (HeldBack(job, nullptr)) {
      ++pos;
      continue;
    }
    const Outcome outcome = TryPlace(job, view, launches, nullptr);
    if (outcome == Outcome::kWaiting) {
      head_blocked_by_utilization_ = blocked_by_utilization(job);
      return launches;
    }
    recovery_queue_.erase(recovery_queue_.begin() + static_cast<std::ptrdiff_t>(pos));
    Unindex(job, /*main=*/false);
  }
  Walk walk(*this);
  std::vector<JobId> left;  // started or failed: out of the queue once the walk is over
  while (launches.size() < max_launches) {
    const auto id = walk.Next();
    if (!id) break;
    JobRecord& job = Get(*id);
    if (HeldBack(job, &walk)) continue;
    const Outcome outcome = TryPlace(job, view, launches, nullptr);
    if (outcome != Outcome::kWaiting) {
      left.push_back(*id);
      continue;
    }
    head_ = *id;
    head_blocked_by_utilization_ = blocked_by_utilization(job);
    if (config_.backfill) Backfill(job, walk, view, launches, left);
    break;
  }
  RemoveFromMainQueue(left);
  return launches;
}

}  // namespace colo

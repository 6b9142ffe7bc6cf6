#include "daemon/slurm_bridge.h"

#include <fmt/format.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>

#include "common/text.h"

namespace colo {
namespace {

constexpr auto kRerunRecheck = std::chrono::milliseconds(250);

std::optional<Identity> IdentityOf(unsigned uid) {
  passwd entry{}, *found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || !found)
    return std::nullopt;
  return Identity{uid, found->pw_gid, found->pw_name};
}

void LogLine(const std::string& line) {
  fmt::print(stderr, "colod: {}\n", Printable(line));
}

// How a job ended by Slurm's record: what the classifier reads.
ProcessEnd EndOf(const SlurmJobInfo& info) {
  if (info.exit_signal != 0) return ProcessEnd{false, info.exit_signal, true};
  return ProcessEnd{true, info.exit_code, true};
}

ProcessEnd EndOfWaitStatus(int status) {
  if (WIFSIGNALED(status)) return ProcessEnd{false, WTERMSIG(status), true};
  return ProcessEnd{true, WIFEXITED(status) ? WEXITSTATUS(status) : 0, true};
}

// Slurm's end states; any other (RUNNING, COMPLETING, SUSPENDED, SIGNALING, ...) is not an end.
bool Ended(const std::string& state) {
  static constexpr std::string_view kEnded[] = {"COMPLETED", "FAILED",    "CANCELLED",
                                                "TIMEOUT",   "NODE_FAIL", "PREEMPTED",
                                                "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};
  return std::find(std::begin(kEnded), std::end(kEnded), state) != std::end(kEnded);
}

}  // namespace

SlurmBridge::SlurmBridge(const Clock& clock, TenantHost& host,
                         std::unique_ptr<SlurmCommands> commands, SlurmBridgeOptions options,
                         std::function<void()> wake)
    : clock_(clock),
      host_(host),
      commands_(std::move(commands)),
      options_(std::move(options)),
      wake_(std::move(wake)),
      next_reconcile_(clock.Now()) {
  for (int i = 0; i < std::max(1, options_.workers); ++i)
    workers_.emplace_back([this] { WorkerLoop(); });
  LearnNode();
}

SlurmBridge::~SlurmBridge() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void SlurmBridge::Post(std::function<std::function<void()>()> work) {
  {
    std::lock_guard lock(mutex_);
    work_.push_back(std::move(work));
    ++in_flight_;
  }
  work_ready_.notify_one();
}

void SlurmBridge::WorkerLoop() {
  for (;;) {
    std::function<std::function<void()>()> work;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [this] { return stopping_ || !work_.empty(); });
      if (stopping_) return;
      work = std::move(work_.front());
      work_.pop_front();
    }
    std::function<void()> done;
    try {
      done = work();
    } catch (const std::exception& e) {
      const std::string what = e.what();
      done = [what] { LogLine("Slurm work failed: " + what); };
    }
    {
      std::lock_guard lock(mutex_);
      done_.push_back(std::move(done));
    }
    if (wake_) wake_();
  }
}

Result<api::SlurmRunReply> SlurmBridge::BeginRun(const api::SlurmRunRequest& request) {
  runs_.erase(request.job);
  runs_.emplace(request.job, request);
  // A bounded memory: the oldest announcements go first (by arrival, not by id: ids wrap).
  run_order_.push_back(request.job);
  while (run_order_.size() > options_.max_pending) {
    const uint32_t oldest = run_order_.front();
    run_order_.pop_front();
    if (std::find(run_order_.begin(), run_order_.end(), oldest) == run_order_.end())
      runs_.erase(oldest);
  }
  prolog_waits_.erase(request.job);
  return api::SlurmRunReply{request.job, request.restarts};
}

namespace {

api::SlurmAttachReply Waiting(std::string reason) {
  return api::SlurmAttachReply{api::SlurmPlacement::kWaiting, 0, {}, {}, std::move(reason)};
}

api::SlurmAttachReply CannotRun(std::string reason) {
  return api::SlurmAttachReply{api::SlurmPlacement::kFailed, 0, {}, {}, std::move(reason)};
}

}  // namespace

void SlurmBridge::LearnNode() {
  const std::string node = options_.node;
  Post([this, node]() -> std::function<void()> {
    auto gres = commands_->SlurmdGres(node);
    std::map<int, SlurmGpu> gpus;
    std::string unread;
    if (gres.ok())
      gpus = ParseSlurmdGres(*gres);
    else
      unread = gres.status().message();
    SlurmGpuMap map = MapSlurmGpus(gpus, options_.devices, options_.shard_size, options_.margin);
    if (!unread.empty()) {
      map.problems.insert(map.problems.begin(),
                          "slurmd's list of this node's GPUs could not be read (" + unread +
                              "): Slurm's GPU i is taken to be the GPU of the i-th lowest minor "
                              "number, as gres.conf lists /dev/nvidia[0-N]");
    }
    // gres.conf booking more of a GPU than it has is the one problem Slurm would act on: it would
    // send jobs there that cannot all fit. The node is drained until that is mended.
    const std::string overbooked = map.overbooked.empty() ? "" : map.overbooked.front();
    auto state = commands_->ShowNode(node);
    Status updated;
    std::string action;
    if (!overbooked.empty()) {
      updated = commands_->UpdateNode(node, true, "colo: " + overbooked.substr(0, 200));
      action = "drained: " + overbooked;
    } else if (state.ok() && state->drained && state->reason.rfind("colo:", 0) == 0) {
      // A drain of colo's own (colod was unreachable, or gres.conf was wrong): colod serves again.
      updated = commands_->UpdateNode(node, false, "");
      action = "resumed from a drain of colo's own (" + state->reason + ")";
    }
    return [this, map = std::move(map), action, updated] {
      for (const std::string& problem : map.problems) LogLine("Slurm node: " + problem);
      if (!action.empty()) {
        LogLine(updated.ok() ? fmt::format("Slurm node {} {}", options_.node, action)
                             : fmt::format("Slurm node {} could not be {}: {}", options_.node,
                                           action.substr(0, action.find(':')), updated.message()));
      }
      std::string listed;
      for (const auto& [index, gpu] : map.by_slurm_index)
        listed += fmt::format("{}{}=colod GPU {}", listed.empty() ? "" : ", ", index, gpu);
      LogLine(fmt::format("Slurm node {}: Slurm's GPUs {}", options_.node,
                          listed.empty() ? "none" : listed));
      gpus_ = map;
    };
  });
}

Result<api::SlurmAttachReply> SlurmBridge::Attach(const api::SlurmAttachRequest& asked) {
  if (!gpus_) return Waiting("reading slurmd's list of this node's GPUs");
  api::SlurmAttachRequest request = asked;
  const Job* live = FindLiveTenant(request.job);
  const api::SlurmRunRequest* prolog = nullptr;
  bool ask_slurm = false;
  if (auto run = runs_.find(request.job); run != runs_.end()) {
    prolog = &run->second;  // which run, and what Slurm booked: the step's numbers are not used
    request.restarts = std::max(request.restarts, prolog->restarts);
  } else if (live) {
    request.restarts = std::max(request.restarts, live->external->restarts);  // another step
  } else {
    // Which run of the job this is and what it booked, slurmd's prolog says (Slurm 22.05 gives
    // the batch step no restart count). It runs beside the batch step's launch and may come a
    // moment later.
    auto [wait, inserted] =
        prolog_waits_.try_emplace(request.job, clock_.Now() + options_.prolog_grace);
    if (inserted && prolog_waits_.size() > options_.max_pending)
      prolog_waits_.erase(prolog_waits_.begin());
    if (clock_.Now() < wait->second)
      return Waiting("waiting for slurmd's prolog to say which run this is");
    // No word from it (colod was down then): Slurm's record says.
    ask_slurm = true;
  }
  if (live && live->external->restarts >= request.restarts) {
    // Placed or queued already (an earlier step, an earlier ask): the same answer.
    TenantRequest same;
    same.slurm_job = request.job;
    same.restarts = request.restarts;
    return host_.AttachTenant(same);
  }
  // Slurm's record: for a run after a requeue (an earlier run, here or on another node, may
  // have raised its need), without the prolog's word, and for a job without colo's options
  // (what it booked: whole GPUs, shards, an mps percentage).
  const bool colo_job = prolog && prolog->share;
  const bool full = ask_slurm || request.restarts > 0;
  const Lookup* record = nullptr;
  if (full || !colo_job) {
    auto it = lookups_.find(request.job);
    if (it == lookups_.end() || it->second.restarts != request.restarts) {
      bool queue_full;
      {
        std::lock_guard lock(mutex_);
        queue_full = work_.size() >= options_.max_pending;
      }
      if (queue_full) return Unavailable("colod's queue of work for Slurm is full; try again");
      if (lookups_.size() >= options_.max_pending) lookups_.erase(lookups_.begin());
      lookups_[request.job] = Lookup{request.restarts, {}, 0, {}, {}};
      const uint32_t job = request.job;
      const int restarts = request.restarts;
      const std::string node = options_.node;
      Post([this, job, restarts, full, node]() -> std::function<void()> {
        // The full record (squeue --json, every job of the cluster in Slurm 22.05) only where
        // its note or per-node GPUs are needed; else one job's booking.
        auto info = full ? commands_->ShowJob(job) : commands_->Booking(job);
        return [this, job, restarts, node, info = std::move(info)] {
          auto found = lookups_.find(job);
          if (found == lookups_.end() || found->second.restarts != restarts) return;
          Lookup& l = found->second;
          if (info.ok() && *info) {
            l.note = ParseSlurmNote((*info)->admin_comment);
            l.slurm_restarts = (*info)->restarts;
            l.booked.tres_per_node = (*info)->tres_per_node;
            l.booked.comment = (*info)->comment;
            if (auto here = (*info)->gpus_by_node.find(node); here != (*info)->gpus_by_node.end())
              l.booked.gpus = here->second;
          } else {
            l.error = info.ok() ? "Slurm does not know the job" : info.status().message();
          }
        };
      });
      return Waiting("reading Slurm's record of the job");
    }
    const Lookup& l = it->second;
    if (!l.note && l.error.empty()) return Waiting("reading Slurm's record of the job");
    if (!l.note && (ask_slurm || !colo_job)) {
      const std::string why = "Slurm's record of the job could not be read: " + l.error;
      lookups_.erase(it);
      prolog_waits_.erase(request.job);
      return CannotRun(why);
    }
    if (l.note) {
      request.restarts = std::max(request.restarts, l.slurm_restarts);
      record = &l;
    } else {
      LogLine(
          fmt::format("Slurm job {}: its earlier runs are unknown ({}); it plans with what "
                      "it asked for",
                      request.job, l.error));
    }
  }
  auto tenant =
      BookTenant(request, prolog, record ? &record->booked : nullptr, *gpus_, options_.shard_size);
  if (tenant.ok()) tenant->owner = IdentityOf(request.uid).value_or(Identity{request.uid, 0, ""});
  if (tenant.ok() && record && request.restarts > 0) {
    tenant->raised_need = record->note->need;
    tenant->earlier_ooms = record->note->ooms;
  }
  lookups_.erase(request.job);
  prolog_waits_.erase(request.job);
  if (!tenant.ok()) return CannotRun(tenant.status().message());
  return host_.AttachTenant(*tenant);
}

// The live tenant of a Slurm job, or nullptr.
const Job* SlurmBridge::FindLiveTenant(uint32_t slurm_job) const {
  const Job* job = host_.FindTenant(slurm_job);
  return job && job->live() ? job : nullptr;
}

Result<api::SlurmEndReply> SlurmBridge::End(const api::SlurmEndRequest& request) {
  // The epilog: this run is over on the node; a later run here is a new one, which its prolog
  // announces.
  if (!request.wait_status) runs_.erase(request.job);
  const Job* tenant = host_.FindTenant(request.job);
  const JobId id = tenant ? tenant->id() : 0;
  if (!tenant || !tenant->live()) {
    // This run is over here already (a repeated ask while its requeue goes on, or a late one).
    if (requeuing_.count(request.job) || (tenant && host_.HandBackUnsent(id)))
      return api::SlurmEndReply{id, "ending"};
    if ((tenant && tenant->state == JobState::kRequeued) ||
        std::find(requeued_.begin(), requeued_.end(), request.job) != requeued_.end())
      return api::SlurmEndReply{id, "requeued"};
    return api::SlurmEndReply{id, tenant ? "ended" : "unknown"};
  }
  if (ending_.count(request.job)) return api::SlurmEndReply{id, "ending"};
  if (!request.wait_status) {
    // Slurm's epilog: the whole job is over on this node (a job of steps without a batch
    // script ends here; a batch job's script reported its own end before).
    host_.EndTenant(request.job, AttemptEnd{ProcessEnd{true, 0, true}, "", ""});
    return api::SlurmEndReply{id, "ended"};
  }
  if (*request.wait_status == 0) {
    host_.EndTenant(request.job, AttemptEnd{EndOfWaitStatus(*request.wait_status), "", ""});
    return api::SlurmEndReply{id, "ended"};
  }
  FinishEnd(request.job, id, tenant->owner, *request.wait_status);
  return api::SlurmEndReply{id, "ending"};
}

// A failed run: its output says whether it ran out of memory. Slurm knows where that went;
// it is read as the job's user, off colod's loop.
void SlurmBridge::FinishEnd(uint32_t slurm_job, JobId job, Identity owner, int wait_status) {
  ending_.insert(slurm_job);
  Post([this, slurm_job, job, owner, wait_status]() -> std::function<void()> {
    AttemptEnd end{EndOfWaitStatus(wait_status), "", ""};
    std::vector<std::string> problems;
    std::string std_err;
    auto info = commands_->ShowJob(slurm_job);
    if (!info.ok()) problems.push_back(info.status().message());
    if (info.ok() && !*info) problems.push_back("Slurm no longer knows the job");
    if (info.ok() && *info) {
      std_err = (*info)->std_err;
      auto err = commands_->TailAsUser(owner, (*info)->std_err, kTailBytes);
      if (err.ok())
        end.stderr_tail = std::move(*err);
      else
        problems.push_back(err.status().message());
      if ((*info)->std_out != (*info)->std_err) {
        auto out = commands_->TailAsUser(owner, (*info)->std_out, kTailBytes);
        if (out.ok())
          end.stdout_tail = std::move(*out);
        else
          problems.push_back(out.status().message());
      }
    }
    return [this, slurm_job, job, owner, std_err, end = std::move(end),
            problems = std::move(problems)] {
      for (const std::string& problem : problems) {
        LogLine(
            fmt::format("Slurm job {}: its output could not be read, so its end is judged "
                        "by its exit status alone: {}",
                        slurm_job, problem));
      }
      ending_.erase(slurm_job);
      const Job* tenant = host_.FindTenant(slurm_job);
      if (!tenant || tenant->id() != job) return;
      host_.EndTenant(slurm_job, end);
      TellUser(slurm_job, job, owner, std_err);
    };
  });
}

// What colo made of a failed run goes into the job's own error output, which its user reads:
// requeued needing more memory, or given up at the retry cap.
void SlurmBridge::TellUser(uint32_t slurm_job, JobId job, const Identity& owner,
                           const std::string& std_err) {
  auto found = host_.Find(job);
  if (std_err.empty() || !found.ok() || !*found) return;
  const Job& ended = **found;
  const Attempt* last = ended.current();
  if (!last || last->exit != ExitKind::kOutOfMemory) return;
  std::string text;
  if (ended.state == JobState::kRequeued) {
    text = fmt::format("colo: Slurm job {} ran out of GPU memory on {}; {}", slurm_job,
                       options_.node, ended.reason);
  } else if (ended.state == JobState::kFailed) {
    text = fmt::format(
        "colo: Slurm job {} failed: colo gave up and does not requeue it again: {}. Ask for "
        "more GPU memory (--colo-mem) or make the job use less.",
        slurm_job, ended.reason);
  } else {
    return;
  }
  Post([this, owner, std_err, text, slurm_job]() -> std::function<void()> {
    const Status written = commands_->AppendAsUser(owner, std_err, text);
    return [written, slurm_job] {
      if (!written.ok())
        LogLine(fmt::format("Slurm job {}: its output could not be told why: {}", slurm_job,
                            written.message()));
    };
  });
}

void SlurmBridge::HandBack(const TenantHandback& handback) {
  const SlurmNote note{
      handback.need > Bytes(0) ? std::optional<Bytes>(handback.need) : std::nullopt, handback.ooms};
  const std::string avoid = handback.avoid_this_node ? options_.node : "";
  const uint32_t slurm_job = handback.slurm_job;
  const std::string reason = handback.reason;
  // Its shards, where it books shards: the raised need in whole shards.
  const int64_t shards = ShardsFor(handback.need, options_.shard_size);
  requeuing_.insert(slurm_job);
  // Two steps: the requeue (the batch step, if it is still there, waits for it), then, once
  // Slurm has the job pending, what its next run needs.
  Post([this, slurm_job, note, shards, avoid, reason]() -> std::function<void()> {
    const Status s = commands_->Requeue(slurm_job, note);
    return [this, s, slurm_job, note, shards, avoid, reason] {
      requeuing_.erase(slurm_job);
      if (!s.ok()) {
        LogLine(fmt::format("Slurm job {} could not be requeued ({}): {}", slurm_job, reason,
                            s.message()));
        return;
      }
      requeued_.push_back(slurm_job);
      if (requeued_.size() > options_.max_pending) requeued_.pop_front();
      PrepareRerun(slurm_job, note, shards, avoid, reason, clock_.Now() + options_.rerun_deadline);
    };
  });
}

void SlurmBridge::PrepareRerun(uint32_t slurm_job, SlurmNote note, int64_t shards,
                               std::string avoid, std::string reason, TimePoint deadline) {
  Post([=, this]() -> std::function<void()> {
    const Result<bool> prepared = commands_->PrepareRerun(slurm_job, note, shards, avoid);
    return [=, this] {
      if (prepared.ok() && !*prepared) {
        if (clock_.Now() >= deadline) {
          LogLine(
              fmt::format("Slurm job {} requeued ({}) but not pending in time: it runs "
                          "again as it is",
                          slurm_job, reason));
          return;
        }
        // Not pending yet: looked at again shortly, never holding a worker meanwhile.
        later_.emplace(clock_.Now() + kRerunRecheck, [=, this] {
          PrepareRerun(slurm_job, note, shards, avoid, reason, deadline);
        });
        return;
      }
      if (prepared.ok())
        LogLine(fmt::format("Slurm job {} requeued: {}", slurm_job, reason));
      else
        LogLine(fmt::format("Slurm job {} requeued ({}), its next run not prepared: {}", slurm_job,
                            reason, prepared.status().message()));
    };
  });
}

void SlurmBridge::Reconcile() {
  if (reconciling_) return;  // the last round is not through yet
  struct Watched {
    uint32_t slurm_job;
    int restarts;
    JobId id;
    Identity owner;
  };
  std::vector<Watched> watched;
  std::vector<uint32_t> ids;
  for (const Job* job : host_.Tenants()) {
    // Waiting tenants too: one whose Slurm job ended while it waited (its epilog's word lost)
    // would otherwise hold its place at the head of the queue until the wait limit.
    const ExternalRun& run = *job->external;
    if (!job->live() || ending_.count(run.id)) continue;
    watched.push_back({run.id, run.restarts, job->id(), job->owner});
    ids.push_back(run.id);
  }
  if (watched.empty()) return;
  reconciling_ = true;
  // One query for all of them: on a busy cluster each is a listing of every job.
  Post([this, watched = std::move(watched), ids = std::move(ids)]() -> std::function<void()> {
    auto records = commands_->ShowJobs(ids);
    return [this, watched, records = std::move(records)] {
      reconciling_ = false;
      if (!records.ok()) return;  // Slurm did not answer: asked again at the next round
      for (const Watched& r : watched) {
        const Job* tenant = host_.FindTenant(r.slurm_job);
        if (!tenant || tenant->id() != r.id || ending_.count(r.slurm_job)) continue;
        const auto it = records->find(r.slurm_job);
        if (it == records->end()) {
          // Its end never reached colod (colod was down, or the plugin could not tell), and
          // Slurm has forgotten it since.
          host_.EndTenant(r.slurm_job, AttemptEnd{ProcessEnd{true, 0, false}, "", ""});
          continue;
        }
        const SlurmJobInfo& info = it->second;
        if (!Ended(info.state) && info.state != "PENDING" && info.restarts <= r.restarts) continue;
        if (tenant->state != JobState::kRunning) {
          // It never started here: Slurm ended or requeued it meanwhile.
          host_.EndTenant(r.slurm_job, AttemptEnd{ProcessEnd{true, 0, false}, "", ""});
          continue;
        }
        if (info.state == "PENDING" || info.restarts > r.restarts) {
          // Requeued by someone else (scontrol requeue, a node failure): this run is over.
          host_.EndTenant(r.slurm_job, AttemptEnd{ProcessEnd{false, SIGKILL, false}, "", ""});
          continue;
        }
        const ProcessEnd end = EndOf(info);
        if (end.exited && end.code == 0) {
          host_.EndTenant(r.slurm_job, AttemptEnd{end, "", ""});
          continue;
        }
        FinishEnd(r.slurm_job, r.id, r.owner, end.exited ? (end.code << 8) : end.code);
      }
    };
  });
}

void SlurmBridge::Tick() {
  std::deque<std::function<void()>> done;
  {
    std::lock_guard lock(mutex_);
    done.swap(done_);
    in_flight_ -= done.size();
  }
  for (auto& f : done) f();
  while (!later_.empty() && later_.begin()->first <= clock_.Now()) {
    auto work = std::move(later_.begin()->second);
    later_.erase(later_.begin());
    work();
  }
  if (clock_.Now() >= next_reconcile_) {
    next_reconcile_ = clock_.Now() + options_.reconcile_interval;
    Reconcile();
  }
}

std::optional<TimePoint> SlurmBridge::NextWakeup() const {
  if (!later_.empty()) return std::min(next_reconcile_, later_.begin()->first);
  return next_reconcile_;
}

}  // namespace colo

#include "daemon/api_handlers.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>

#include "api/codec.h"
#include "common/signals.h"
#include "common/strings.h"

namespace colo {
namespace {

bool MaySeeDetails(const Identity& caller, const Job& job) {
  return caller.uid == 0 || caller.uid == job.owner.uid;
}

// "1st", "2nd", "3rd", "11th", "22nd".
std::string Ordinal(int n) {
  const int tens = n % 100, ones = n % 10;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : ones == 1                ? "st"
                       : ones == 2                ? "nd"
                       : ones == 3                ? "rd"
                                                  : "th";
  return fmt::format("{}{}", n, suffix);
}

std::string IdList(const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < 8; ++i)
    out += fmt::format("{}{}", i ? ", " : "", ids[i]);
  if (ids.size() > 8) out += fmt::format(" and {} more", ids.size() - 8);
  return out;
}

// Where a user stands for fair share, for people: "alice has had 40% of this server lately (usage
// halves every 7.0 d) against a 25% share".
std::string StandingText(const UserStanding& u, Duration half_life) {
  return fmt::format(
      "{} has had {} of this server lately (usage halves every {}) against a {} "
      "share",
      u.user, Percent(u.usage_fraction), FormatDuration(half_life), Percent(u.share_fraction));
}

// What backfill keeps for the head of the main queue, for people.
std::string ReservationText(const HeadReservation& r, TimePoint now) {
  std::vector<int64_t> gpus(r.gpus.begin(), r.gpus.end());
  std::sort(gpus.begin(), gpus.end());
  std::string text =
      fmt::format("GPU{} {} kept for it", r.gpus.size() == 1 ? "" : "s", IdList(gpus));
  if (r.at && r.waits_for.empty()) {
    // Only a launch grace holds it: no job has to end first.
    text += *r.at <= now ? ", free once the last launch settles"
                         : fmt::format(" from about {} from now, when the launch grace there ends",
                                       FormatDuration(*r.at - now));
  } else if (r.at && *r.at <= now) {
    // Past the end expected of them (a job over its --time being stopped, say).
    text += fmt::format(", free as soon as job{} {} end{}", r.waits_for.size() == 1 ? "" : "s",
                        IdList(r.waits_for), r.waits_for.size() == 1 ? "s" : "");
  } else if (r.at) {
    text += fmt::format(" from about {} from now, when job{} {} end{}", FormatDuration(*r.at - now),
                        r.waits_for.size() == 1 ? "" : "s", IdList(r.waits_for),
                        r.waits_for.size() == 1 ? "s" : "");
  } else {
    text += fmt::format(" until {} (no running job there has a --time limit or a learned run time)",
                        r.gpus.size() == 1 ? "it frees" : "they free");
  }
  return text + "; a later job starts before it only where it cannot delay it";
}

}  // namespace

std::string ApiHandlers::Handle(const Identity& caller, std::string_view line) {
  try {
    auto request = api::DecodeRequest(line);
    if (!request.ok()) return api::EncodeError(request.status());
    return Reply(caller, *request);
  } catch (const std::exception& e) {
    // Nothing a client sends may end colod; an allocation failure on a huge reply is this
    // request's error, not the daemon's.
    return api::EncodeError(api::ErrorCode::kInternal,
                            fmt::format("colod could not answer: {}", e.what()));
  }
}

std::optional<std::string> ApiHandlers::HandleFromMemory(const Identity& caller,
                                                         std::string_view line) {
  // These requests are a few bytes; a larger one is left for its turn without being decoded
  // again and again.
  constexpr size_t kMaxBytes = 4096;
  if (line.size() > kMaxBytes) return std::nullopt;
  try {
    auto request = api::DecodeRequest(line);
    if (!request.ok()) return api::EncodeError(request.status());
    const bool from_memory = std::holds_alternative<api::HelloRequest>(*request) ||
                             std::holds_alternative<api::QueueRequest>(*request) ||
                             std::holds_alternative<api::GpusRequest>(*request) ||
                             std::holds_alternative<api::ShareRequest>(*request);
    if (!from_memory) return std::nullopt;
    return Reply(caller, *request);
  } catch (const std::exception& e) {
    return api::EncodeError(api::ErrorCode::kInternal,
                            fmt::format("colod could not answer: {}", e.what()));
  }
}

std::string ApiHandlers::Reply(const Identity& caller, const api::Request& request) {
  return std::visit(
      [&](const auto& typed) -> std::string {
        auto reply = Handle(caller, typed);
        if (!reply.ok()) return api::EncodeError(reply.status());
        return api::EncodeReply(*reply);
      },
      request);
}

Result<api::HelloReply> ApiHandlers::Handle(const Identity& caller, const api::HelloRequest&) {
  api::HelloReply reply;
  reply.gpu_backend = c_.gpus.name();
  reply.user = caller.user;
  reply.personal = c_.personal;
  return reply;
}

Result<api::SubmitReply> ApiHandlers::Handle(const Identity& caller,
                                             const api::SubmitRequest& request) {
  // A Slurm node's GPUs are Slurm's to book: a job submitted here would run outside its queue,
  // its accounting and its booking of the GPUs' memory.
  if (c_.slurm && !c_.direct_submit && caller.uid != 0)
    return PermissionDenied(
        "this node's GPUs are booked through Slurm: submit the job with sbatch (e.g. sbatch "
        "--colo-mem=12GiB job.sh) or srun; colod takes jobs from root only here "
        "(slurm.direct_submit)");
  auto id = c_.controller.Submit(caller, request);
  if (!id.ok()) return id.status();
  return api::SubmitReply{*id};
}

// Only root speaks for Slurm: the plugin runs in slurmstepd and slurmd as root, and the uid it
// names is Slurm's word. A user saying so would place jobs as anyone.
static Status SlurmCaller(const Identity& caller, const SlurmBridge* slurm) {
  if (caller.uid != 0)
    return PermissionDenied("only root (colo's Slurm plugin) may place or end Slurm jobs");
  if (!slurm)
    return FailedPrecondition(
        "this colod is not a Slurm node (start it with --slurm-node NAME or set slurm.node)");
  return Status::Ok();
}

Result<api::SlurmAttachReply> ApiHandlers::Handle(const Identity& caller,
                                                  const api::SlurmAttachRequest& request) {
  COLO_RETURN_IF_ERROR(SlurmCaller(caller, c_.slurm));
  return c_.slurm->Attach(request);
}

Result<api::SlurmEndReply> ApiHandlers::Handle(const Identity& caller,
                                               const api::SlurmEndRequest& request) {
  COLO_RETURN_IF_ERROR(SlurmCaller(caller, c_.slurm));
  return c_.slurm->End(request);
}

Result<api::SlurmRunReply> ApiHandlers::Handle(const Identity& caller,
                                               const api::SlurmRunRequest& request) {
  COLO_RETURN_IF_ERROR(SlurmCaller(caller, c_.slurm));
  return c_.slurm->BeginRun(request);
}

std::vector<int> ApiHandlers::GpuIndices(const std::vector<std::string>& uuids) const {
  std::vector<int> out;
  const Scheduler& s = c_.controller.scheduler();
  for (const std::string& uuid : uuids) {
    for (size_t g = 0; g < s.gpu_count(); ++g) {
      if (s.gpu_info(static_cast<GpuIndex>(g)).uuid == uuid) out.push_back(static_cast<int>(g));
    }
  }
  return out;
}

api::JobSummary ApiHandlers::Summarize(const Job& job, const Identity& caller) const {
  api::JobSummary s;
  s.id = job.id();
  s.name = job.spec.name;
  s.user = job.owner.user;
  s.state = job.state;
  s.gpus = job.spec.gpus;
  s.submitted = ToEpochSeconds(job.submitted);
  s.finished = ToEpochSeconds(job.finished);
  s.attempts = static_cast<int>(job.attempts.size());
  if (job.spec.memory.known()) s.memory = job.spec.memory.Upper();
  s.share = job.spec.sharing;
  if (const Attempt* a = job.current()) {
    s.started = ToEpochSeconds(a->started);
    s.gpu_uuids = a->gpu_uuids;
    s.gpu_indices = GpuIndices(a->gpu_uuids);
    s.mode = std::string(ToString(a->mode));
  }
  s.peak = c_.controller.CurrentPeak(job);
  if (job.external && job.external->engine == "slurm") s.slurm_job = job.external->id;
  s.time_limit_s = job.time_limit_s;
  if (job.array) {
    s.array_job = job.array->job;
    s.array_task = job.array->task;
  }
  s.priority = job.spec.priority;
  // How it ended is its owner's business (and root's), as its reason is.
  if (const Attempt* a = job.current(); a && !job.live() && MaySeeDetails(caller, job)) {
    s.exit_code = a->exit_code;
    s.exit_signal = a->exit_signal;
  }
  if (std::string held = c_.controller.HeldReason(job); !held.empty()) {
    s.reason = std::move(held);
  } else if (job.state == JobState::kQueued || job.state == JobState::kRecovering) {
    // Why it waits is colod's own account, not the job's: everyone may read it.
    const JobRecord* r = c_.controller.scheduler().job(job.id());
    s.reason = r && r->last_wait ? r->last_wait->Reason() : "waiting for its turn";
  } else if (MaySeeDetails(caller, job)) {
    s.reason = job.reason;  // may quote the job's own error output
  } else {
    s.redacted = true;
  }
  return s;
}

api::JobDetail ApiHandlers::Detail(const Job& job) const {
  api::JobDetail d;
  d.command = job.spec.command;
  d.context = job.context;
  d.output_file = OutputFileOf(job, job.output_pattern);
  d.error_file = job.error_pattern.empty() ? d.output_file : OutputFileOf(job, job.error_pattern);
  d.estimate = job.estimate;
  if (job.spec.expected_smact >= 0) d.smact = job.spec.expected_smact;
  for (const Attempt& a : job.attempts) {
    api::AttemptInfo info;
    info.number = a.number;
    info.pid = a.pid;
    info.gpus = GpuIndices(a.gpu_uuids);
    info.gpu_uuids = a.gpu_uuids;
    info.mode = std::string(ToString(a.mode));
    info.thread_percent = a.thread_percent;
    info.memory_limit = a.memory_limit;
    info.started = ToEpochSeconds(a.started);
    info.ended = ToEpochSeconds(a.ended);
    info.exit_kind = a.exit ? std::string(ToString(*a.exit)) : "";
    info.detail = a.detail;
    info.peak = &a == job.current() ? c_.controller.CurrentPeak(job) : a.peak;
    info.over_plan = a.over_plan;
    info.solo_smact = a.solo_smact;
    info.exit_code = a.exit_code;
    info.exit_signal = a.exit_signal;
    d.attempt_list.push_back(std::move(info));
  }
  if (const JobRecord* r = c_.controller.scheduler().job(job.id()); r && job.live()) {
    if (r->need.known()) d.need = r->need.Upper();
    d.need_source = std::string(ToString(r->need.source));
    if (r->state == JobState::kRunning) d.reservation = c_.controller.scheduler().Reservation(*r);
    d.oom_count = r->oom_count;
  } else {
    d.oom_count = OutOfMemoryAttempts(job);
  }
  return d;
}

Result<Job> ApiHandlers::JobForOwner(const Identity& caller, JobId id,
                                     std::string_view what) const {
  auto found = c_.controller.Find(id);
  if (!found.ok()) return found.status();
  if (!*found) return NotFound(fmt::format("no job {}", id));
  if (!MaySeeDetails(caller, **found)) {
    return PermissionDenied(fmt::format("job {} belongs to {}; only its owner or root may {}", id,
                                        (*found)->owner.user, what));
  }
  return std::move(**found);
}

Result<api::QueueReply> ApiHandlers::Handle(const Identity& caller,
                                            const api::QueueRequest& request) {
  api::QueueReply reply;
  const size_t limit = static_cast<size_t>(std::clamp(request.limit, 1, api::kMaxQueuePage));
  // Counting every job is cheap; describing one is what costs, so only a page is described.
  for (const auto& [id, job] : c_.controller.live_jobs()) {
    if (!job.live() || (!request.user.empty() && job.owner.user != request.user)) continue;
    (job.state == JobState::kRunning ? reply.running : reply.waiting) += 1;
    if (request.after && id <= *request.after) continue;
    if (reply.jobs.size() < limit) {
      reply.jobs.push_back(Summarize(job, caller));
    } else if (!reply.next) {
      reply.next = reply.jobs.back().id;
    }
  }
  reply.main_queue = static_cast<int>(c_.controller.scheduler().main_queue().size());
  reply.recovery_queue = static_cast<int>(c_.controller.scheduler().recovery_queue().size());
  return reply;
}

Result<api::ShowReply> ApiHandlers::Handle(const Identity& caller,
                                           const api::ShowRequest& request) {
  auto job = JobForOwner(caller, request.job, "see its details");
  if (!job.ok()) return job.status();
  api::ShowReply reply;
  reply.job = Detail(*job);
  reply.job.summary = Summarize(*job, caller);
  auto events = c_.store.Events(request.job);
  if (events.ok()) {
    for (const JobEvent& e : *events)
      reply.job.events.push_back(api::EventInfo{ToEpochSeconds(e.time), e.kind, e.detail});
  }
  return reply;
}

Result<api::CancelReply> ApiHandlers::Handle(const Identity& caller,
                                             const api::CancelRequest& request) {
  auto state = c_.controller.Cancel(caller, request.job);
  if (!state.ok()) return state.status();
  return api::CancelReply{request.job, *state};
}

Result<api::ControlReply> ApiHandlers::Handle(const Identity& caller,
                                              const api::ControlRequest& request) {
  api::ControlReply reply;
  auto states =
      c_.controller.ControlMany(caller, request.action, request.jobs, !request.each_alone);
  for (size_t i = 0; i < request.jobs.size(); ++i) {
    api::ControlResult result;
    result.job = request.jobs[i];
    const auto& state = states[i];
    if (state.ok()) {
      result.ok = true;
      result.state = *state;
    } else {
      result.error = state.status().message();
      result.code = api::CodeOf(state.status());
    }
    reply.results.push_back(std::move(result));
  }
  return reply;
}

Result<api::ExplainReply> ApiHandlers::Handle(const Identity&, const api::ExplainRequest& request) {
  auto found = c_.controller.Find(request.job);
  if (!found.ok()) return found.status();
  if (!*found) return NotFound(fmt::format("no job {}", request.job));
  const Job& job = **found;
  const Scheduler& scheduler = c_.controller.scheduler();
  api::ExplainReply reply;
  reply.job = job.id();
  reply.state = job.state;
  if (job.state == JobState::kRunning && job.preemption) {
    const PreemptionNotice& notice = *job.preemption;
    reply.summary = fmt::format(
        "running; being preempted {}: {} sent, SIGKILL in {}, then it waits again", notice.reason,
        SignalName(SignalOf(job).number),
        FormatDuration(std::max(Duration::zero(), std::chrono::duration_cast<Duration>(
                                                      notice.kill_at - c_.clock.WallNow()))));
    return reply;
  }
  if (job.state != JobState::kQueued && job.state != JobState::kRecovering) {
    reply.summary = job.state == JobState::kRunning
                        ? "running; nothing to explain"
                        : fmt::format("ended ({})", ToString(job.state));
    return reply;
  }
  if (std::string held = c_.controller.HeldReason(job); !held.empty()) {
    reply.summary = "waits outside the queue: " + held;
    return reply;
  }
  const bool recovering = job.state == JobState::kRecovering;
  reply.queue = recovering ? "recovery" : "main";
  if (recovering) {
    const auto& queue = scheduler.recovery_queue();
    const auto pos = std::find(queue.begin(), queue.end(), job.id()) - queue.begin();
    reply.position = static_cast<int>(pos) + 1;
    reply.waiting = static_cast<int>(queue.size());
    if (pos > 0) reply.summary = fmt::format("waits behind job {} (queue order)", queue.front());
  } else if (const auto standing = scheduler.StandingOf(job.id())) {
    const JobRecord* record = scheduler.job(job.id());
    const FairnessConfig& fairness = scheduler.config().fairness;
    const bool fair = fairness.order == QueueOrder::kFairShare;
    reply.position = standing->position;
    reply.waiting = standing->waiting;
    if (fair) {
      reply.priority = standing->priority;
      reply.standing = fmt::format(
          "{}: fair-share factor {:.2f}, age factor {:.2f} (waited {}), priority "
          "{:.0f} = {:.0f} x {:.2f} + {:.0f} x {:.2f}",
          StandingText(standing->owner, fairness.half_life), standing->owner.factor,
          standing->age_factor, FormatDuration(c_.clock.Now() - record->waiting_since),
          standing->priority, fairness.weight_fair_share, standing->owner.factor,
          fairness.weight_age, standing->age_factor);
    }
    if (standing->position > 1) {
      reply.summary =
          fair ? fmt::format("{} of {} in the queue: {}", Ordinal(standing->position),
                             standing->waiting, StandingText(standing->owner, fairness.half_life))
               : fmt::format("{} of {} in the queue, first come first served",
                             Ordinal(standing->position), standing->waiting);
    }
    if (const auto held = scheduler.HeldByLimits(*record)) {
      reply.limit = *held;
      reply.summary = "held by its owner's limits: " + *held;
    }
    if (scheduler.head() == job.id() && record->reservation)
      reply.reservation = ReservationText(*record->reservation, c_.clock.Now());
  }
  if (!recovering && !scheduler.recovery_queue().empty())
    reply.summary = fmt::format("the recovery queue goes first (job {} waits there)",
                                scheduler.recovery_queue().front());
  if (auto decision = scheduler.Explain(job.id())) {
    if (const auto* wait = std::get_if<Wait>(&*decision)) {
      if (reply.summary.empty()) reply.summary = wait->Reason();
      for (const GateVerdict& v : wait->per_gpu)
        reply.gpus.push_back(api::GateInfo{v.gpu, std::string(ToString(v.gate)), v.Describe()});
    } else if (const auto* placed = std::get_if<Placed>(&*decision)) {
      if (reply.summary.empty()) reply.summary = "fits now; starts at the next scheduling pass";
      for (GpuIndex g : placed->gpus) reply.gpus.push_back(api::GateInfo{g, "pass", "fits"});
    } else if (const auto* no = std::get_if<Infeasible>(&*decision)) {
      reply.summary = "can never run here: " + no->reason;
    }
  }
  const auto add = [&](const std::string& part) {
    reply.summary += (reply.summary.empty() ? "" : "; ") + part;
  };
  if (const JobRecord* record = scheduler.job(job.id()); record && !record->preempting.empty()) {
    std::vector<std::string> ids;
    for (JobId id : record->preempting) ids.push_back(std::to_string(id));
    add(fmt::format("job(s) {} being preempted to make room for it", Join(ids, ", ")));
  }
  if (const Attempt* last = job.current(); last && last->exit == ExitKind::kPreempted)
    add(fmt::format("its attempt {} was {}", last->number, last->detail));
  return reply;
}

Result<api::ShareReply> ApiHandlers::Handle(const Identity&, const api::ShareRequest&) {
  const Scheduler& scheduler = c_.controller.scheduler();
  const FairnessConfig& fairness = scheduler.config().fairness;
  api::ShareReply reply;
  reply.order = std::string(ToString(fairness.order));
  reply.half_life_s = ToSeconds(fairness.half_life);
  for (const auto& [user, standing] : scheduler.Standings()) {
    api::ShareUser u;
    u.user = user;
    u.share = standing.share;
    // Fractions within the reply's bounds whatever the rounding.
    u.share_fraction = std::clamp(standing.share_fraction, 0.0, 1.0);
    u.usage_gpu_hours = standing.usage / 3600;
    u.usage_fraction = std::clamp(standing.usage_fraction, 0.0, 1.0);
    u.factor = std::clamp(standing.factor, 0.0, 1.0);
    const Holdings held = scheduler.HeldBy(user);
    u.running = held.running_jobs;
    u.gpus = held.gpus;
    u.gpu_memory = held.gpu_memory;
    u.waiting = scheduler.WaitingOf(user);
    const UserLimits limits = scheduler.TermsOf(user).limits;
    std::vector<std::string> parts;
    if (limits.gpus > 0) parts.push_back(fmt::format("gpus {}", limits.gpus));
    if (limits.gpu_memory > Bytes(0))
      parts.push_back(fmt::format("gpu memory {}", FormatBytes(limits.gpu_memory)));
    if (limits.running_jobs > 0) parts.push_back(fmt::format("running {}", limits.running_jobs));
    for (const std::string& part : parts) u.limits += (u.limits.empty() ? "" : ", ") + part;
    reply.users.push_back(std::move(u));
  }
  std::stable_sort(
      reply.users.begin(), reply.users.end(),
      [](const api::ShareUser& a, const api::ShareUser& b) { return a.factor > b.factor; });
  return reply;
}

Result<api::LogsReply> ApiHandlers::Handle(const Identity& caller,
                                           const api::LogsRequest& request) {
  auto job = JobForOwner(caller, request.job, "read its output");
  if (!job.ok()) return job.status();
  api::LogsReply reply;
  reply.job = job->id();
  reply.state = job->state;
  const Attempt* a = job->current();
  if (request.attempt) {
    const auto asked = std::find_if(job->attempts.begin(), job->attempts.end(),
                                    [&](const Attempt& x) { return x.number == *request.attempt; });
    if (asked == job->attempts.end())
      return NotFound(fmt::format("job {} has no attempt {} (it has {})", job->id(),
                                  *request.attempt, job->attempts.size()));
    a = &*asked;
  }
  if (a) {
    reply.attempt = a->number;
    // Paths only: the client reads them as the user, so the kernel checks who may.
    const AttemptFiles files = c_.launcher.Files(job->id(), a->number);
    reply.stdout_path = files.stdout_path;
    reply.stderr_path = files.stderr_path;
  }
  return reply;
}

Result<api::GpusReply> ApiHandlers::Handle(const Identity&, const api::GpusRequest&) {
  const Scheduler& scheduler = c_.controller.scheduler();
  // Every GPU's SMACT risk is shown, whatever the policy reads.
  const ClusterView view =
      scheduler.View(WindowReads{SummaryDepth::kAll, SummaryDepth::kLast, SummaryDepth::kLast});
  api::GpusReply reply;
  reply.backend = c_.gpus.name();
  const auto& sample = c_.latest_sample;
  for (size_t g = 0; g < scheduler.gpu_count(); ++g) {
    const GpuInfo& info = scheduler.gpu_info(static_cast<GpuIndex>(g));
    api::GpuInfoReply r;
    r.index = static_cast<int>(g);
    r.uuid = info.uuid;
    r.name = info.model;
    r.memory_total = info.capacity;
    r.free_for_placement = view.gpus[g].free_for_placement;
    r.mode = std::string(ToString(view.gpus[g].mode));
    r.smact_risk = view.gpus[g].smact.empty ? -1.0 : view.gpus[g].smact.Risk();
    if (sample && g < sample->devices.size()) {
      const DeviceSample& s = sample->devices[g];
      r.memory_used = s.memory_used;
      r.smact = s.smact;
      r.smocc = s.smocc;
      r.utilization = s.utilization;
      r.activity_source = ToString(s.activity_source);
      if (s.activity_source == ActivitySource::kUtilization) {
        // Placement reads the utilization as SM activity here: show that figure, and say why.
        r.smact = s.utilization;
        r.activity_note = c_.gpus.activity_note();
      }
      r.power_watts = s.power_watts;
      r.energy_joules = s.energy_joules;
      r.sample_age_s = std::chrono::duration<double>(c_.clock.WallNow() - sample->wall).count();
      if (!s.ok) r.sample_error = s.error;
    }
    for (const auto& [id, job] : c_.controller.live_jobs()) {
      const JobRecord* rec = scheduler.job(id);
      if (!rec || rec->state != JobState::kRunning) continue;
      const auto on = std::find(rec->gpus.begin(), rec->gpus.end(), static_cast<GpuIndex>(g));
      if (on == rec->gpus.end()) continue;
      const size_t slot = static_cast<size_t>(on - rec->gpus.begin());
      r.jobs.push_back(
          api::GpuJobInfo{id, job.spec.name, job.owner.user,
                          job.current() ? std::string(ToString(job.current()->mode)) : "",
                          c_.controller.CurrentPeak(job),
                          slot < rec->current_use.size() ? rec->current_use[slot] : Bytes(0),
                          scheduler.Reservation(*rec)});
    }
    // The mode the GPU serves its jobs in now, as they run (a job placed for MPS runs plainly
    // where MPS could not start); an idle GPU's is what it offers the next job.
    if (!r.jobs.empty()) {
      const auto runs = [&](std::string_view mode) {
        return std::any_of(r.jobs.begin(), r.jobs.end(),
                           [&](const api::GpuJobInfo& j) { return j.mode == mode; });
      };
      r.mode = runs("exclusive") ? "exclusive" : runs("mps") ? "mps" : "plain";
    }
    reply.gpus.push_back(std::move(r));
  }
  return reply;
}

Result<api::EventsReply> ApiHandlers::Handle(const Identity& caller,
                                             const api::EventsRequest& request) {
  auto events = c_.store.RecentEvents(std::clamp(request.limit, 1, api::kMaxRecentEvents));
  if (!events.ok()) return events.status();
  // Each job looked up once: its owner decides who sees the details, as in the queue.
  std::map<JobId, std::optional<Job>> jobs;
  api::EventsReply reply;
  for (const JobEvent& e : *events) {
    api::RecentEvent out{e.job, "", "", ToEpochSeconds(e.time), e.kind, e.detail, false};
    if (e.job == 0) {
      if (caller.uid != 0) continue;  // colod's own: may name other users' jobs and paths
      out.user = "colod";
    } else {
      auto [it, inserted] = jobs.try_emplace(e.job);
      if (inserted) {
        auto found = c_.controller.Find(e.job);
        if (found.ok()) it->second = std::move(*found);
      }
      const std::optional<Job>& job = it->second;
      if (job) {
        out.user = job->owner.user;
        out.name = job->spec.name;
      }
      if (!job || !MaySeeDetails(caller, *job)) {
        out.detail.clear();
        out.redacted = true;
      }
    }
    reply.events.push_back(std::move(out));
  }
  return reply;
}

Result<api::HistoryReply> ApiHandlers::Handle(const Identity& caller,
                                              const api::HistoryRequest& request) {
  HistoryQuery query;
  query.limit = std::clamp(request.limit, 1, api::kMaxHistoryPage);
  query.before = request.before;
  if (!request.all) query.uid = caller.uid;
  auto page = c_.store.History(query);
  if (!page.ok()) return page.status();
  api::HistoryReply reply;
  for (const Job& job : page->jobs) reply.jobs.push_back(Summarize(job, caller));
  reply.next = page->next;
  return reply;
}

// Jobs one report holds at most; a longer range says it was cut.
constexpr size_t kMaxReportJobs = 20000;
// What one user's report may hold and how often one may ask: a report is read and encoded on the
// event loop (about 0.15 ms per job), so these bound the stall any one user can cause.
constexpr size_t kMaxReportJobsPerUser = 2000;
constexpr size_t kReportsPerWindow = 5;
constexpr Duration kReportWindow = Seconds(10);

Result<api::RunReportReply> ApiHandlers::Handle(const Identity& caller,
                                                const api::RunReportRequest& request) {
  if (caller.uid != 0) {
    const TimePoint now = c_.clock.Now();
    std::deque<TimePoint>& recent = recent_reports_[caller.uid];
    while (!recent.empty() && now - recent.front() >= kReportWindow) recent.pop_front();
    if (recent.size() >= kReportsPerWindow) {
      return ResourceExhausted(fmt::format(
          "at most {} reports in {:.0f} s per user; ask again in {:.1f} s", kReportsPerWindow,
          ToSeconds(kReportWindow), ToSeconds(kReportWindow - (now - recent.front()))));
    }
    recent.push_back(now);
  }
  const size_t max_jobs = caller.uid == 0 ? kMaxReportJobs : kMaxReportJobsPerUser;
  api::RunReportReply reply;
  reply.until = request.until > 0 ? request.until : ToEpochSeconds(c_.clock.WallNow());
  reply.since = request.since;
  if (!(reply.since < reply.until))
    return InvalidArgument(fmt::format(
        "the report's start ({:.0f}) must be before its end ({:.0f})", reply.since, reply.until));
  reply.backend = c_.gpus.name();
  reply.policy = c_.policy;
  for (size_t g = 0; g < c_.gpus.devices().size(); ++g) {
    const DeviceInfo& d = c_.gpus.devices()[g];
    reply.gpus.push_back(api::RunGpu{static_cast<int>(g), d.uuid, d.name, d.memory_total});
  }
  if (c_.history) {
    auto series = c_.history->Read(reply.since, reply.until, request.max_points);
    if (series.ok()) {
      reply.bucket_seconds = series->bucket_seconds;
      for (const GpuHistoryPoint& p : series->gpus)
        reply.gpu_points.push_back(api::RunGpuPoint{p.time, p.gpu, p.memory_used, p.smact, p.smocc,
                                                    p.drama, p.power_watts, p.energy_joules});
      for (const JobHistoryPoint& p : series->jobs)
        reply.job_points.push_back(api::RunJobPoint{p.time, p.job, p.gpu, p.memory});
      for (const QueueHistoryPoint& p : series->queue)
        reply.queue_points.push_back(api::RunQueuePoint{p.time, p.queued, p.running});
    } else {
      reply.history_error = series.status().message();
    }
    const HistoryWriteStats stats = c_.history->stats();
    reply.history_points = stats.points;
    reply.history_flushes = stats.flushes;
    reply.history_write_seconds = stats.write_seconds;
    if (reply.history_error.empty()) reply.history_error = stats.last_error;
  } else {
    reply.history_error = c_.history_problem && !c_.history_problem->empty()
                              ? *c_.history_problem
                              : "colod keeps no history (history.enabled is false)";
  }
  // Both within what WallTime holds: the request's fields are bounded (RunReportRequest).
  auto ended = c_.store.EndedBetween(FromEpochSeconds(reply.since).value_or(WallTime()),
                                     FromEpochSeconds(reply.until).value_or(WallTime()), max_jobs);
  if (!ended.ok()) return ended.status();
  std::vector<const Job*> jobs;
  for (const Job& job : *ended) jobs.push_back(&job);
  for (const auto& [id, job] : c_.controller.live_jobs()) {
    if (job.live() && ToEpochSeconds(job.submitted) < reply.until) jobs.push_back(&job);
  }
  if (jobs.size() > max_jobs) {
    jobs.resize(max_jobs);
    reply.jobs_truncated = true;
  }
  for (const Job* job : jobs) {
    api::RunJob run{Summarize(*job, caller), Detail(*job).attempt_list};
    // Which GPUs and when are everyone's to see (the queue shows them); what ended an attempt
    // may quote the job's output, and is its owner's.
    if (!MaySeeDetails(caller, *job)) {
      for (api::AttemptInfo& a : run.attempts) {
        a.detail.clear();
        a.pid = 0;
        a.exit_code.reset();
        a.exit_signal.reset();
      }
    }
    reply.jobs.push_back(std::move(run));
  }
  return reply;
}

}  // namespace colo

// JobController as an engine's host (TenantHost): the runs Slurm starts on this node ask for
// their GPUs, end, and go back to Slurm's queue through here. What a tenant is to colod is
// TenantRunner's (tenant_runner.h); the bridge that talks to Slurm is slurm_bridge.h.
#include <fmt/format.h>

#include "common/strings.h"
#include "common/text.h"
#include "daemon/job_controller.h"

namespace colo {

const Job* JobController::FindTenant(uint32_t slurm_job) const {
  const std::optional<JobId> id = tenants_.Find(slurm_job);
  return id ? FindLive(*id) : nullptr;
}

std::vector<const Job*> JobController::Tenants() const {
  std::vector<const Job*> jobs;
  for (JobId id : tenants_.live()) {
    if (const Job* job = FindLive(id)) jobs.push_back(job);
  }
  return jobs;
}

Result<api::SlurmAttachReply> JobController::AttachTenant(const TenantRequest& request) {
  if (const Job* live = FindTenant(request.slurm_job)) {
    if (live->external->restarts >= request.restarts) return TenantReply(*live);
    // A run of it whose end never reached colod (colod was down): Slurm has started it again.
    EndTenant(request.slurm_job, AttemptEnd{ProcessEnd{true, 0, /*known=*/false}, "", ""});
  } else if (auto ended = tenants_.EndedReply(request.slurm_job, request.restarts)) {
    return *ended;
  }
  if (request.owner.user.empty())
    return PermissionDenied(
        fmt::format("Slurm job {} runs as uid {}, which has no entry in the passwd database",
                    request.slurm_job, request.owner.uid));
  Job job;
  job.owner = request.owner;
  job.external =
      ExternalRun{"slurm", request.slurm_job, request.restarts, request.earlier_ooms, {}};
  job.spec.owner = request.owner.user;
  job.spec.command = {fmt::format("(Slurm job {})", request.slurm_job)};
  job.spec.name =
      TruncateUtf8(request.name.empty() ? fmt::format("slurm-{}", request.slurm_job) : request.name,
                   kMaxNameBytes);
  job.spec.gpus = request.gpus;
  job.spec.booked_gpus = request.booked_gpus;
  job.spec.threads = request.threads;
  for (GpuIndex g : request.booked_gpus) {
    if (g >= 0 && static_cast<size_t>(g) < scheduler_.gpu_count())
      job.external->gpu_uuids.push_back(scheduler_.gpu_info(g).uuid);
  }
  job.context.source = fmt::format("slurm {}", request.slurm_job);
  if (request.memory) {
    // The user's declared need is the limit; an out-of-memory crash of an earlier run raised it.
    const Bytes need = std::max(*request.memory, request.raised_need.value_or(Bytes(0)));
    job.spec.memory = MemoryNeed{need, MemorySource::kDeclared, 0.0};
    job.spec.sharing = request.share;
  } else {
    // Whole GPUs from Slurm: nobody shares them.
    job.spec.sharing = SharingPreference::kExclusive;
  }
  if (Status placeable = scheduler_.CheckPlaceable(Planned(job)); !placeable.ok()) {
    return api::SlurmAttachReply{
        api::SlurmPlacement::kFailed, 0, {}, {}, "cannot run on this node: " + placeable.message()};
  }
  job.state = JobState::kQueued;
  job.submitted = clock_.WallNow();
  const std::string booked = Join(job.external->gpu_uuids, ",");
  JobEvent attached = Event(
      0, "submitted",
      fmt::format("Slurm job {} (run {}) of {}: {} GPU(s){}, memory {}", request.slurm_job,
                  request.restarts, job.owner.user, job.spec.gpus,
                  booked.empty() ? "" : " booked by Slurm: " + booked,
                  job.spec.memory.known() ? FormatBytes(job.spec.memory.Upper()) : "whole GPUs"));
  if (Status stored = store_.Insert(job, {attached}); !stored.ok()) {
    counters_.store_failures++;
    return Unavailable("the Slurm job could not be stored on this node: " + stored.message());
  }
  attached.job = job.id();
  Log(attached);
  const JobId id = job.id();
  const int ooms = request.earlier_ooms;
  job.state = ooms > 0 ? JobState::kRecovering : JobState::kQueued;
  if (Status queued = scheduler_.Submit(Planned(job), PriorAttempts{0, ooms, std::nullopt});
      !queued.ok()) {
    job.state = JobState::kFailed;
    job.reason = TruncateUtf8(queued.message(), kMaxDetailBytes);
    job.finished = clock_.WallNow();
    Persist(job, {Event(id, "failed", job.reason)});
    return api::SlurmAttachReply{api::SlurmPlacement::kFailed, id, {}, {}, job.reason};
  }
  AddLive(std::move(job));
  tenants_.WaitUntil(id, clock_.Now() + options_.tenant_wait_limit);
  // At once, so that a job that fits starts without waiting for colod's next turn.
  PlacementPass();
  const Job* now = FindLive(id);
  if (!now) {
    if (auto ended = tenants_.EndedReply(request.slurm_job, request.restarts)) return *ended;
    return api::SlurmAttachReply{api::SlurmPlacement::kFailed, id, {}, {}, "ended at once"};
  }
  return TenantReply(*now);
}

api::SlurmAttachReply JobController::TenantReply(const Job& job) const {
  api::SlurmAttachReply reply;
  reply.job = job.id();
  switch (job.state) {
    case JobState::kRunning: {
      reply.state = api::SlurmPlacement::kPlaced;
      const Attempt* attempt = job.current();
      if (!attempt) break;
      std::vector<std::string> mps;
      if (attempt->mode == SharingMode::kMps && options_.mps_env) {
        auto env = options_.mps_env(attempt->thread_percent, attempt->memory_limit,
                                    static_cast<int>(attempt->gpu_uuids.size()));
        if (env.ok()) mps = *std::move(env);
      }
      AttemptEnv env = EnvOf(job, *attempt, std::move(mps));
      reply.env = std::move(env.colo);
      // Its steps' own values win: a step's environment is its owner's to choose.
      reply.env_defaults = std::move(env.frameworks.set);
      break;
    }
    case JobState::kQueued:
    case JobState::kRecovering: {
      reply.state = api::SlurmPlacement::kWaiting;
      reply.reason = WaitReason(job);
      break;
    }
    case JobState::kRequeued:
      reply.state = api::SlurmPlacement::kRequeue;
      reply.reason = job.reason;
      break;
    default:
      reply.state = api::SlurmPlacement::kFailed;
      reply.reason = job.reason.empty() ? std::string(ToString(job.state)) : job.reason;
      break;
  }
  return reply;
}

void JobController::HandBack(Job& job, TenantHandback handback, std::vector<JobEvent> events) {
  const JobId id = job.id();
  // It leaves this node's queue: left there, it would stay at the head, never launched (it is
  // no longer live), keeping a GPU for itself behind a launch grace renewed at every pass.
  scheduler_.Drop(id);
  job.state = JobState::kRequeued;
  job.reason = TruncateUtf8("given back to Slurm: " + handback.reason, kMaxDetailBytes);
  job.finished = clock_.WallNow();
  job.env.clear();
  events.push_back(Event(id, "requeued", job.reason));
  const bool stored = Persist(job, std::move(events));
  // Slurm hears of it once its record is stored (at a later turn, where the store failed now).
  tenants_.HandBack(std::move(handback), stored);
  if (stored) ForgetIfDone(id);
}

std::optional<JobId> JobController::EndTenant(uint32_t slurm_job, const AttemptEnd& end) {
  const std::optional<JobId> found = tenants_.Find(slurm_job);
  if (!found) return std::nullopt;
  const JobId id = *found;
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  Job& job = it->second;
  if (!job.live()) return id;  // ended, waiting to be stored
  if (job.state == JobState::kRunning && job.current()) {
    FinishAttempt(job, end);
    return id;
  }
  // It ended before colod placed it (Slurm cancelled it, or its time ran out).
  scheduler_.Drop(id);
  job.state = JobState::kCancelled;
  job.reason = "Slurm ended the job before it was placed here";
  job.finished = clock_.WallNow();
  job.env.clear();
  Persist(job, {Event(id, "cancelled", job.reason)});
  ForgetIfDone(id);
  return id;
}

}  // namespace colo

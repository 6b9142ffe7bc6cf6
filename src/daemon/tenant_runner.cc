#include "daemon/tenant_runner.h"

#include <fmt/format.h>

namespace colo {

Status TenantRunner::MayControl(const Job& job, std::string_view what) const {
  // Slurm runs its processes and owns its place in the cluster's queue.
  const uint32_t id = job.external->id;
  if (what == "cancel")
    return FailedPrecondition(
        fmt::format("job {} is Slurm job {}: cancel it with scancel {}", job.id(), id, id));
  return FailedPrecondition(
      fmt::format("job {} is Slurm job {}: use scontrol {} {}", job.id(), id, what, id));
}

std::string TenantRunner::Describe(const Job& job, const Attempt&) const {
  return fmt::format("Slurm job {}", job.external->id);
}

void TenantRunner::Track(const Job& job) {
  live_[job.external->id] = job.id();
}

std::optional<JobId> TenantRunner::Find(uint32_t slurm_job) const {
  const auto it = live_.find(slurm_job);
  return it == live_.end() ? std::nullopt : std::optional<JobId>(it->second);
}

void TenantRunner::Forget(const Job& job, api::SlurmAttachReply reply) {
  deadlines_.erase(job.id());
  const ExternalRun& run = *job.external;
  const auto it = live_.find(run.id);
  if (it == live_.end() || it->second != job.id()) return;  // a later run took the entry
  live_.erase(it);
  constexpr size_t kEndedKept = 4096;
  if (ended_.size() >= kEndedKept) ended_.erase(ended_.begin());
  ended_[run.id] = Ended{run.restarts, std::move(reply)};
}

std::optional<api::SlurmAttachReply> TenantRunner::EndedReply(uint32_t slurm_job,
                                                              int restarts) const {
  const auto it = ended_.find(slurm_job);
  if (it == ended_.end() || it->second.restarts < restarts) return std::nullopt;
  return it->second.reply;
}

std::vector<JobId> TenantRunner::live() const {
  std::vector<JobId> ids;
  for (const auto& [slurm_job, id] : live_) ids.push_back(id);
  return ids;
}

std::vector<JobId> TenantRunner::TakeOverdue(TimePoint now) {
  std::vector<JobId> overdue;
  for (auto it = deadlines_.begin(); it != deadlines_.end();) {
    if (now >= it->second) {
      overdue.push_back(it->first);
      it = deadlines_.erase(it);
    } else {
      ++it;
    }
  }
  return overdue;
}

std::optional<TimePoint> TenantRunner::NextDeadline() const {
  std::optional<TimePoint> next;
  for (const auto& [id, deadline] : deadlines_) {
    if (!next || deadline < *next) next = deadline;
  }
  return next;
}

void TenantRunner::HandBack(TenantHandback handback, bool stored) {
  if (stored)
    ready_.push_back(std::move(handback));
  else
    unsent_[handback.job] = std::move(handback);
}

void TenantRunner::Stored(JobId job) {
  if (auto it = unsent_.find(job); it != unsent_.end()) {
    ready_.push_back(std::move(it->second));
    unsent_.erase(it);
  }
}

std::vector<TenantHandback> TenantRunner::TakeHandbacks() {
  std::vector<TenantHandback> taken;
  taken.swap(ready_);
  return taken;
}

}  // namespace colo

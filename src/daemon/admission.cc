#include "daemon/admission.h"

#include <fmt/format.h>

#include <algorithm>

namespace colo {

Admission::Admission(JobStore& store, AdmissionOptions options)
    : store_(store), options_(options) {}

Status Admission::MayAdd(const Identity& who, size_t jobs) const {
  if (who.uid == 0) return Status::Ok();
  const auto it = live_per_user_.find(who.uid);
  const int live = it == live_per_user_.end() ? 0 : it->second;
  if (live + static_cast<int64_t>(jobs) <= options_.max_live_jobs_per_user) return Status::Ok();
  if (jobs == 1) {
    return ResourceExhausted(fmt::format(
        "{} has {} jobs waiting or running, the most one user may have; submit more when some "
        "have ended",
        who.user, live));
  }
  return ResourceExhausted(
      fmt::format("{} has {} jobs waiting or running; {} more would pass the most one user may "
                  "have ({})",
                  who.user, live, jobs, options_.max_live_jobs_per_user));
}

Status Admission::CheckArray(const Identity& who, const api::ArraySpec& array) const {
  if (array.tasks.empty() || static_cast<int>(array.tasks.size()) > options_.max_array_size)
    return InvalidArgument(fmt::format("array: 1 to {} tasks (limits.max_array_size), not {}",
                                       options_.max_array_size, array.tasks.size()));
  return MayAdd(who, array.tasks.size());
}

void Admission::Count(const Job& job) {
  live_per_user_[job.owner.uid]++;
}

void Admission::Uncount(const Job& job) {
  if (--live_per_user_[job.owner.uid] <= 0) live_per_user_.erase(job.owner.uid);
  if (job.array) arrays_changed_ = true;
  dependencies_changed_ = true;  // it ended: jobs may wait for it
}

Result<std::vector<api::Dependency>> Admission::DependenciesOf(
    const std::vector<api::Dependency>& asked, const std::map<JobId, Job>& live) const {
  if (asked.size() > api::kMaxDependencies)
    return InvalidArgument(fmt::format("dependencies: at most {} jobs", api::kMaxDependencies));
  std::vector<api::Dependency> deps;
  for (const api::Dependency& dep : asked) {
    if (!live.count(dep.job)) {
      auto stored = store_.Find(dep.job);
      if (!stored.ok()) return Unavailable("dependencies: " + stored.status().message());
      if (!*stored) return InvalidArgument(fmt::format("dependencies: no job {}", dep.job));
    }
    if (std::find(deps.begin(), deps.end(), dep) == deps.end()) deps.push_back(dep);
  }
  return deps;
}

std::string Admission::HeldReason(const Job& job, bool in_scheduler) {
  if (!job.live() || job.state == JobState::kRunning) return "";
  if (job.held) return "held: colo release " + std::to_string(job.id());
  if (job.dependencies.empty()) {
    if (Throttled(job) && !in_scheduler)
      return fmt::format("array {}: at most {} of its tasks at once", job.array->job,
                         job.array->limit);
    return "";
  }
  std::string deps;
  for (const api::Dependency& d : job.dependencies)
    deps += fmt::format("{}{}:{}", deps.empty() ? "" : ",", ToString(d.kind), d.job);
  return "dependency " + deps;
}

std::optional<bool> Admission::Met(const api::Dependency& dep, const std::map<JobId, Job>& live,
                                   std::string& why) const {
  JobState state;
  if (const auto it = live.find(dep.job); it != live.end()) {
    if (it->second.live()) return std::nullopt;
    state = it->second.state;
  } else {
    auto stored = store_.Find(dep.job);
    if (!stored.ok()) return std::nullopt;  // looked at again at a later turn
    if (!*stored) {
      why = fmt::format("job {} is gone", dep.job);
      return false;
    }
    if ((*stored)->live()) return std::nullopt;
    state = (*stored)->state;
  }
  const bool succeeded = state == JobState::kSucceeded;
  bool met = true;
  if (dep.kind == api::DependencyKind::kAfterOk) met = succeeded;
  if (dep.kind == api::DependencyKind::kAfterNotOk) met = !succeeded;
  if (!met)
    why = fmt::format("{}:{} but job {} ended {}", ToString(dep.kind), dep.job, dep.job,
                      ToString(state));
  return met;
}

std::vector<Admission::DependencyChange> Admission::ReviewDependencies(
    const std::map<JobId, Job>& live) {
  dependencies_changed_ = false;
  std::vector<DependencyChange> changes;
  for (const auto& [id, job] : live) {
    if (job.state == JobState::kRunning || !job.live() || job.dependencies.empty()) continue;
    DependencyChange change{id, {}, ""};
    for (const api::Dependency& dep : job.dependencies) {
      const std::optional<bool> met = Met(dep, live, change.never);
      if (!met) {
        change.left.push_back(dep);
      } else if (!*met) {
        break;
      }
    }
    if (change.never.empty() && change.left.size() == job.dependencies.size()) continue;
    changes.push_back(std::move(change));
  }
  return changes;
}

std::vector<JobId> Admission::ArrayTurns(const std::map<JobId, Job>& live,
                                         const std::function<bool(JobId)>& in_scheduler) {
  arrays_changed_ = false;
  std::map<JobId, int> admitted;  // by array: tasks queued in the scheduler or running
  std::vector<JobId> waiting;
  for (const auto& [id, job] : live) {
    if (!Throttled(job) || !job.live()) continue;
    if (job.state == JobState::kRunning || in_scheduler(id)) {
      admitted[job.array->job]++;
    } else if (!WaitsOutside(job)) {
      waiting.push_back(id);
    }
  }
  std::vector<JobId> turns;
  for (JobId id : waiting) {  // in id order: the array's tasks in order
    const Job& job = live.at(id);
    int& queued = admitted[job.array->job];
    if (queued >= job.array->limit) continue;
    queued++;
    turns.push_back(id);
  }
  return turns;
}

}  // namespace colo

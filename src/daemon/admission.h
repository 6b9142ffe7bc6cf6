// Everything between a job's submission and the scheduler's queue: whether a waiting job may
// enter the queue yet (its hold, its dependencies, its array's cap) and how many jobs one user may
// have live. Admission decides; the controller stores what it decides and queues the jobs it lets
// in (as Ray's DependencyManager answers with the tasks that became ready). Slurm's habits live
// here, and fair-share order among users will.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "api/types.h"
#include "common/status.h"
#include "daemon/job.h"
#include "daemon/job_store.h"

namespace colo {

struct AdmissionOptions {
  // Jobs one user may have waiting or running at once (root: no limit): one user's flood of
  // submissions cannot fill colod's memory and disk or bury everyone else's jobs.
  int max_live_jobs_per_user = 10000;
  // Tasks one job array may have (submit --array).
  int max_array_size = 1000;
};

class Admission {
 public:
  Admission(JobStore& store, AdmissionOptions options);

  // Whether `who` may have `jobs` more jobs live: ResourceExhausted, saying how many they have.
  Status MayAdd(const Identity& who, size_t jobs) const;
  // Whether an array of this size may be submitted by `who`.
  Status CheckArray(const Identity& who, const api::ArraySpec& array) const;
  // A job became live, or a live one left memory.
  void Count(const Job& job);
  void Uncount(const Job& job);

  // The dependencies a new job waits for: each must name a job colod has or had (one that never
  // existed could only ever cancel it); repeats are dropped. Unavailable when the store cannot
  // say.
  Result<std::vector<api::Dependency>> DependenciesOf(const std::vector<api::Dependency>& asked,
                                                      const std::map<JobId, Job>& live) const;

  // Held, or waiting for dependencies: kept out of the scheduler's queues.
  static bool WaitsOutside(const Job& job) { return job.held || !job.dependencies.empty(); }
  // A task of a capped array enters the scheduler's queue only when its array's turn comes
  // (ArrayTurns).
  static bool Throttled(const Job& job) { return job.array && job.array->limit > 0; }
  // Why a waiting job is not in the scheduler's queue (held, its dependencies, its array's cap);
  // empty when it is, or has no such reason.
  static std::string HeldReason(const Job& job, bool in_scheduler);

  // Something waiting jobs depend on changed: a job ended, or one was released, requeued or
  // submitted with dependencies; an array's task ended, was held or submitted.
  void DependenciesChanged() { dependencies_changed_ = true; }
  void ArraysChanged() { arrays_changed_ = true; }
  bool dependencies_changed() const { return dependencies_changed_; }
  bool arrays_changed() const { return arrays_changed_; }

  // A waiting job whose dependencies changed: those still to be met, or why one never can be
  // (Slurm's kill_invalid_depend: such a job is cancelled, DependencyNeverSatisfied).
  struct DependencyChange {
    JobId job = 0;
    std::vector<api::Dependency> left;
    std::string never;  // set: cancel the job with this reason
  };
  // Looks at every live job's dependencies again; a dependency whose job colod cannot read now is
  // looked at again at a later turn.
  std::vector<DependencyChange> ReviewDependencies(const std::map<JobId, Job>& live);
  // The tasks of capped arrays whose turn came, in id order (an array's tasks in order): as many
  // as leave each array at its cap of tasks queued or running.
  std::vector<JobId> ArrayTurns(const std::map<JobId, Job>& live,
                                const std::function<bool(JobId)>& in_scheduler);

 private:
  // Whether a dependency is met (true), can never be (false, `why` says so) or not yet (nullopt).
  std::optional<bool> Met(const api::Dependency& dep, const std::map<JobId, Job>& live,
                          std::string& why) const;

  JobStore& store_;
  AdmissionOptions options_;
  std::map<unsigned, int> live_per_user_;  // by uid
  bool dependencies_changed_ = false;
  bool arrays_changed_ = false;
};

}  // namespace colo

// JobController: learning from earlier runs. The rule is core's (core/run_learning.h, the one
// the simulator runs); this part reads the runs from the store, keeps what a job learned in its
// stored estimate and tells the scheduler the waiting jobs' better needs.
#include <fmt/format.h>

#include "daemon/job_controller.h"

namespace colo {

ModelRuns JobController::RunsOf(const std::string& signature) const {
  if (signature.empty()) return {};
  auto runs = store_.EarlierRuns(signature, options_.history_runs);
  if (!runs.ok()) {
    Log(Event(0, "store-error", "earlier runs could not be read: " + runs.status().message()));
    return {};
  }
  return *std::move(runs);
}

SmactSource JobController::SmactSourceOf(const Job& job) {
  if (job.estimate && job.estimate->learned && job.estimate->learned->solo_smact >= 0)
    return SmactSource::kLearned;
  if (job.estimate && job.estimate->predicted_smact >= 0) return SmactSource::kPredicted;
  return job.spec.expected_smact >= 0 ? SmactSource::kUser : SmactSource::kUnknown;
}

void JobController::TakeLesson(Job& job, const Lesson& lesson) {
  if (!job.estimate) return;
  // Without a --time, backfill's reservations count on how long the model's runs took.
  if (lesson.run_time) job.spec.expected_run = *lesson.run_time;
  if (!lesson.memory && !lesson.smact) return;
  std::optional<api::JobEstimate::Learned>& learned = job.estimate->learned;
  if (!learned) learned = api::JobEstimate::Learned{};
  if (lesson.memory) {
    job.spec.memory = lesson.memory->need();
    learned->runs = lesson.memory->runs;
    learned->peak = lesson.memory->highest;
    learned->upper = lesson.memory->upper;
  }
  if (lesson.smact) {
    job.spec.expected_smact = *lesson.smact;
    learned->solo_smact = *lesson.smact;
  }
}

// A run ended that measured something: queued jobs of the same model were planned before it was
// known, and now plan with it (their estimate's margin is usually wider than what the run showed;
// their SM activity was unknown or an older runs' mean). Those waiting or running count on the
// run time the runs show, in the scheduler and the job (stored with its next change).
void JobController::RefineQueuedJobs(const Job& finished) {
  if (!finished.estimate || finished.estimate->signature.empty()) return;
  const std::string& signature = finished.estimate->signature;
  std::vector<JobId> waiting, timed;
  for (const auto& [id, job] : live_) {
    if (!job.estimate || job.estimate->signature != signature) continue;
    if (job.state == JobState::kQueued && job.attempts.empty()) waiting.push_back(id);
    if (job.state == JobState::kQueued || job.state == JobState::kRunning) timed.push_back(id);
  }
  if (timed.empty()) return;
  const ModelRuns runs = RunsOf(signature);
  if (const auto run_time = LearnRunTime(runs.run_times)) {
    for (JobId id : timed) {
      if (scheduler_.UpdateExpectedRun(id, *run_time).ok())
        live_.at(id).spec.expected_run = *run_time;
    }
  }
  for (JobId id : waiting) {
    Job& job = live_.at(id);
    const MemoryNeed before = job.spec.memory;
    const Lesson lesson = Learn(runs, before, job.spec.expected_smact, SmactSourceOf(job));
    // What the scheduler takes is what the job plans with.
    Lesson taken;
    std::vector<JobEvent> events;
    if (lesson.memory && scheduler_.UpdateNeed(id, lesson.memory->need()).ok()) {
      taken.memory = lesson.memory;
      events.push_back(Event(
          id, "estimate",
          fmt::format("refined by {} earlier run(s) of the same model: plans with {} (was {})",
                      lesson.memory->runs, FormatBytes(lesson.memory->need().Upper()),
                      before.known() ? FormatBytes(before.Upper()) : "nothing")));
    }
    if (lesson.smact && scheduler_.UpdateExpectedSmact(id, *lesson.smact).ok()) {
      taken.smact = lesson.smact;
      events.push_back(SmactEvent(id, *lesson.smact));
    }
    TakeLesson(job, taken);
    if (!events.empty()) Persist(job, std::move(events));
  }
}

JobEvent JobController::SmactEvent(JobId id, double smact) const {
  return Event(id, "smact",
               fmt::format("learned from earlier runs of the same model alone on a GPU: SM "
                           "activity {:.2f}, for its MPS thread share and the utilization gate",
                           smact));
}

}  // namespace colo

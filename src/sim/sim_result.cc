#include "sim/sim_result.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/check.h"
#include "common/stats.h"

namespace colo::sim {
namespace {

// The nearest-rank percentile q of `values`, which it reorders. Asked in ascending q, each is a
// selection among the values from the previous one's place (`from`) on, all at least as large
// as those before it: no sort.
double Percentile(std::vector<double>& values, double q, size_t& from) {
  if (values.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  const size_t at = std::min(values.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(values.begin() + static_cast<std::ptrdiff_t>(from),
                   values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
  from = at;
  return values[at];
}
}  // namespace

JobResult EndedResult(const SimJob& job, const Ended& end, std::string reason) {
  JobResult r;
  r.id = job.trace->id;
  r.name = job.trace->name;
  r.server = job.server;
  r.submit_s = ToSeconds(job.trace->submit);
  r.state = end.state;
  r.attempts = end.attempts + job.prior_attempts;
  r.ooms = end.ooms + job.prior_ooms;
  r.reason = std::move(reason);
  if (end.ever_started) r.start_s = ToSeconds(end.first_started);
  if (job.prior_attempts > 0) r.start_s = job.first_start_s;  // its first start, elsewhere
  if (IsTerminal(end.state)) r.end_s = ToSeconds(end.finished);
  return r;
}

JobResult RejectedResult(const SimJob& job) {
  JobResult r;
  r.id = job.trace->id;
  r.name = job.trace->name;
  r.server = job.server;
  r.submit_s = ToSeconds(job.trace->submit);
  r.state = JobState::kFailed;
  r.reason = "rejected: " + job.reason;
  return r;
}

namespace {

// The result of a job the run left waiting or running.
JobResult UnfinishedResult(const EngineState& state, const ClusterQueue* cluster,
                           const SimJob& job) {
  const JobRecord* record =
      job.server < 0 ? nullptr
                     : state.servers[static_cast<size_t>(job.server)].scheduler->job(job.trace->id);
  if (record == nullptr) {
    // Still in the cluster queue when nothing more could happen.
    COLO_CHECK(cluster && job.queued);
    JobResult r = EndedResult(job, Ended{}, "never placed: waiting in the cluster queue");
    r.state = JobState::kFailed;
    r.start_s = job.first_start_s;
    return r;
  }
  JobResult r = EndedResult(job, EndedOf(*record), record->end_reason);
  if (!IsTerminal(record->state)) {
    // Nothing more could happen to it: the trace ended with the job still waiting.
    r.state = JobState::kFailed;
    r.reason = record->last_wait ? "never placed: " + record->last_wait->Reason() : "never placed";
  }
  return r;
}

}  // namespace

SimResult ResultOf(EngineState& state, const ClusterQueue* cluster, const RunCounts& counts,
                   Timeline timeline) {
  const std::vector<TraceJob>& trace = state.trace.jobs;
  SimResult result;
  Metrics& m = result.metrics;
  m.label = state.spec.label;
  m.estimator = state.spec.estimator;
  m.jobs = static_cast<int>(trace.size());
  m.rejected = state.rejected;
  result.jobs = std::move(state.results);
  for (size_t i = 0; i < trace.size(); ++i)
    if (state.jobs.live(i)) result.jobs[i] = UnfinishedResult(state, cluster, state.jobs[i]);
  // By owner, the sum of its succeeded jobs' slowdowns and their count: summed by the owner's
  // interned text (one pointer per name, so no text is compared per job), read in name order.
  std::unordered_map<const std::string*, std::pair<double, int>> by_owner;
  double first_submit = trace.empty() ? 0 : ToSeconds(trace.front().submit);
  double last_end = first_submit;
  for (size_t i = 0; i < trace.size(); ++i) {
    const JobResult& r = result.jobs[i];
    if (r.state == JobState::kSucceeded) {
      ++m.succeeded;
      auto& [sum, count] = by_owner[&trace[i].owner.str()];
      sum += (r.end_s - r.submit_s) / std::max(1.0, ToSeconds(trace[i].profile.duration));
      ++count;
    } else {
      ++m.failed;
    }
    if (r.end_s >= 0) last_end = std::max(last_end, r.end_s);
  }
  m.total_time_s = last_end - first_submit;
  // The succeeded jobs' waits, execution and completion times, one measure at a time in one
  // vector: at a million jobs, three side by side would hold 16 bytes a job more at the peak.
  std::vector<double> values;
  values.reserve(static_cast<size_t>(m.succeeded));
  const auto of_succeeded = [&](double (*measure)(const JobResult&)) -> std::vector<double>& {
    values.clear();
    for (const JobResult& r : result.jobs)
      if (r.state == JobState::kSucceeded) values.push_back(measure(r));
    return values;
  };
  // Each mean summed in the jobs' order, then its percentiles selected in ascending order.
  size_t from = 0;
  m.wait_avg_s = Mean(of_succeeded([](const JobResult& r) { return r.start_s - r.submit_s; }));
  m.wait_p50_s = Percentile(values, 0.5, from);
  m.wait_p95_s = Percentile(values, 0.95, from);
  m.wait_p99_s = Percentile(values, 0.99, from);
  from = 0;
  m.exec_avg_s = Mean(of_succeeded([](const JobResult& r) { return r.end_s - r.start_s; }));
  m.exec_p50_s = Percentile(values, 0.5, from);
  m.exec_p95_s = Percentile(values, 0.95, from);
  from = 0;
  m.jct_avg_s = Mean(of_succeeded([](const JobResult& r) { return r.end_s - r.submit_s; }));
  m.jct_p50_s = Percentile(values, 0.5, from);
  m.jct_p95_s = Percentile(values, 0.95, from);
  m.jct_p99_s = Percentile(values, 0.99, from);
  std::map<std::string_view, std::pair<double, int>> slowdowns;
  for (const auto& [owner, totals] : by_owner) slowdowns.emplace(*owner, totals);
  std::vector<double> per_user;
  double all_sum = 0;
  int all_count = 0;
  for (const auto& [owner, totals] : slowdowns) {
    per_user.push_back(totals.first / totals.second);
    all_sum += totals.first;
    all_count += totals.second;
    if (per_user.back() > m.worst_user_slowdown) {
      m.worst_user_slowdown = per_user.back();
      m.worst_user = owner;
    }
  }
  m.users = static_cast<int>(per_user.size());
  m.mean_slowdown = all_count > 0 ? all_sum / all_count : 0;
  m.jain_slowdown = JainIndex(per_user);
  if (cluster) {
    m.requeues = cluster->requeues();
    m.rounds = cluster->rounds();
    m.dispatch_checks = cluster->dispatch_checks();
    m.dispatch_violations = cluster->dispatch_violations();
  }
  m.oom_crashes = counts.oom_crashes;
  m.preemptions = counts.preemptions;
  m.lost_gpu_hours = counts.lost_gpu_seconds / 3600.0;
  const TimePoint end = AtSeconds(last_end);
  const double span = std::max(1e-9, last_end - first_submit);
  double energy = 0, smact = 0, memory = 0;
  for (SimGpu& gpu : state.gpus) {
    gpu.IntegrateTo(end);
    energy += gpu.energy_j;
    const double gpu_smact = gpu.smact_seconds / span;
    const double gpu_memory = gpu.memory_byte_seconds / span / static_cast<double>(1 << 30);
    m.gpu_smact.push_back(gpu_smact);
    m.gpu_memory_gib.push_back(gpu_memory);
    smact += gpu_smact;
    memory += gpu_memory / state.options.server.capacity.gib();
  }
  m.energy_mj = energy / 1e6;
  m.mean_smact = state.gpus.empty() ? 0 : smact / static_cast<double>(state.gpus.size());
  m.mean_memory_frac = state.gpus.empty() ? 0 : memory / static_cast<double>(state.gpus.size());
  m.events = counts.events;
  m.passes = state.passes;
  result.timeline = std::move(timeline);
  return result;
}

}  // namespace colo::sim

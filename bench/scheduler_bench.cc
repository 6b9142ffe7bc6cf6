// Scheduler latency: 64 GPUs (8 servers x 8), 1,000 jobs queued, a steady stream of completions.
// Each completion triggers one placement pass; we time every pass. A pass makes one decision per
// job it looks at (the placements plus the head that then waits), so the time per decision is the
// pass time divided by its decisions; we report p50/p99 of both per policy.
// Run: ./build/bench/colo_bench [passes]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/clock.h"
#include "common/rng.h"
#include "core/scheduler.h"
#include "policies/registry.h"

namespace colo {
namespace {

void BenchPolicy(const std::string& spec, int passes) {
  auto policy = MakePolicy(spec);
  ManualClock clock;
  SchedulerConfig config;
  Scheduler scheduler(clock, **policy, config);
  for (int i = 0; i < 64; ++i) {
    GpuInfo info;
    info.capacity = GiB(80);
    info.node = i / 8;
    scheduler.AddGpu(info);
  }
  Rng rng(5);
  JobId next = 1;
  auto submit = [&] {
    JobSpec job;
    job.id = next++;
    job.owner = "u";
    job.gpus = rng.Uniform() < 0.9 ? 1 : 2;
    job.memory = MemoryNeed{GiBf(rng.Uniform(2, 30)), MemorySource::kEstimated, 0.05};
    job.expected_smact = rng.Uniform(0.1, 0.9);
    (void)scheduler.Submit(job);
  };
  for (int i = 0; i < 1000; ++i) submit();
  std::vector<JobId> running;
  std::vector<double> latencies, per_decision;
  latencies.reserve(static_cast<size_t>(passes));
  per_decision.reserve(static_cast<size_t>(passes));
  int64_t decisions = 0;
  for (int pass = 0; pass < passes; ++pass) {
    clock.Advance(Seconds(1));
    for (int g = 0; g < 64; ++g) {
      scheduler.OnGpuSample(GpuSample{g, clock.Now(), GiB(static_cast<int64_t>(rng.Below(40))),
                                      rng.Uniform(0, 0.9), -1, -1, true});
    }
    if (!running.empty()) {
      const size_t victim = rng.Below(running.size());
      scheduler.OnJobExit(running[victim], JobExit{ExitKind::kSuccess, ""});
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(victim));
      submit();
    }
    const auto begin = std::chrono::steady_clock::now();
    const auto launches = scheduler.Schedule();
    const auto end = std::chrono::steady_clock::now();
    const double micros = std::chrono::duration<double, std::micro>(end - begin).count();
    const auto made =
        static_cast<int64_t>(launches.size()) + 1;  // placements + the head that waits
    latencies.push_back(micros);
    per_decision.push_back(micros / static_cast<double>(made));
    decisions += made;
    for (const auto& l : launches) running.push_back(l.job);
  }
  std::sort(latencies.begin(), latencies.end());
  std::sort(per_decision.begin(), per_decision.end());
  auto pct = [](const std::vector<double>& sorted, double q) {
    return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))];
  };
  std::printf(
      "%-16s queue %4zu  running %3zu  decisions/pass %.2f  decision p50 %5.1f us  p99 %6.1f us  "
      "pass p50 %5.1f us  p99 %6.1f us  max %6.1f us\n",
      spec.c_str(), scheduler.main_queue().size(), running.size(),
      static_cast<double>(decisions) / passes, pct(per_decision, 0.5), pct(per_decision, 0.99),
      pct(latencies, 0.5), pct(latencies, 0.99), latencies.back());
}

}  // namespace
}  // namespace colo

int main(int argc, char** argv) {
  const int passes = argc > 1 ? std::atoi(argv[1]) : 20000;
  std::printf("scheduler latency, 64 GPUs (8x8), 1000 queued jobs, %d passes per policy\n", passes);
  for (const auto& info : colo::KnownPolicies()) colo::BenchPolicy(info.name, passes);
  return 0;
}

// Scheduler pass latency: 64 GPUs (8 servers x 8), 1,000 jobs queued, a steady stream of
// completions. Each completion triggers one placement pass; we time every pass and report p50/p99
// per policy. Run: ./build/bench/colo_bench [passes]
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
  std::vector<double> latencies;
  latencies.reserve(static_cast<size_t>(passes));
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
    latencies.push_back(std::chrono::duration<double, std::micro>(end - begin).count());
    decisions +=
        static_cast<int64_t>(launches.size()) + 1;  // the placements plus the head that waits
    for (const auto& l : launches) running.push_back(l.job);
  }
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double q) {
    return latencies[std::min(latencies.size() - 1, static_cast<size_t>(q * latencies.size()))];
  };
  std::printf(
      "%-16s passes %6d  queue %4zu  running %3zu  decisions/pass %.2f  pass p50 %6.1f us  p99 "
      "%6.1f us  max %6.1f us\n",
      spec.c_str(), passes, scheduler.main_queue().size(), running.size(),
      static_cast<double>(decisions) / passes, pct(0.5), pct(0.99), latencies.back());
}

}  // namespace
}  // namespace colo

int main(int argc, char** argv) {
  const int passes = argc > 1 ? std::atoi(argv[1]) : 20000;
  std::printf("scheduler pass latency, 64 GPUs (8x8), 1000 queued jobs\n");
  for (const auto& info : colo::KnownPolicies()) colo::BenchPolicy(info.name, passes);
  return 0;
}

// Scheduler latency: 64 GPUs (8 servers x 8), 1,000 jobs queued, a steady stream of completions.
// Each completion triggers one placement pass; we time every pass. A pass makes one decision per
// job it looks at (the placements plus the head that then waits), so the time per decision is the
// pass time divided by its decisions; we report p50/p99 of both per policy, in wall time and in
// the CPU time of this thread (which a busy machine's preemptions do not inflate).
// Run: ./build/bin/colo_bench [passes [policy...]]   (every known policy when none is named)
// Instructions per pass, reproducible on any host (only Scheduler::Schedule is counted):
//   valgrind --tool=callgrind --toggle-collect='colo::Scheduler::Schedule()'
//     ./build/bin/colo_bench 2000 worst-fit   (one command line)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/cpu_time.h"
#include "common/rng.h"
#include "core/scheduler.h"
#include "policies/registry.h"

namespace colo {
namespace {

double ThreadCpuMicros() {
  return std::chrono::duration<double, std::micro>(ThreadCpuTime()).count();
}

int BenchPolicy(const std::string& spec, int passes) {
  auto policy = MakePolicy(spec);
  if (!policy.ok()) {
    std::fprintf(stderr, "colo_bench: %s\n", policy.status().message().c_str());
    return 1;
  }
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
    // Every job fits one of the 8-GPU servers: Submit cannot refuse it.
    const Status submitted = scheduler.Submit(job);
    if (!submitted.ok()) std::abort();
  };
  for (int i = 0; i < 1000; ++i) submit();
  std::vector<JobId> running;
  std::vector<double> latencies, per_decision, cpu, cpu_per_decision;
  for (auto* v : {&latencies, &per_decision, &cpu, &cpu_per_decision})
    v->reserve(static_cast<size_t>(passes));
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
    const double cpu_begin = ThreadCpuMicros();
    const auto begin = std::chrono::steady_clock::now();
    const auto launches = scheduler.Schedule();
    const auto end = std::chrono::steady_clock::now();
    const double cpu_micros = ThreadCpuMicros() - cpu_begin;
    const double micros = std::chrono::duration<double, std::micro>(end - begin).count();
    const auto made =
        static_cast<int64_t>(launches.size()) + 1;  // placements + the head that waits
    latencies.push_back(micros);
    per_decision.push_back(micros / static_cast<double>(made));
    cpu.push_back(cpu_micros);
    cpu_per_decision.push_back(cpu_micros / static_cast<double>(made));
    decisions += made;
    for (const auto& l : launches) running.push_back(l.job);
  }
  for (auto* v : {&latencies, &per_decision, &cpu, &cpu_per_decision})
    std::sort(v->begin(), v->end());
  auto pct = [](const std::vector<double>& sorted, double q) {
    return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))];
  };
  std::printf(
      "%-16s queue %4zu  running %3zu  decisions/pass %.2f  decision p50 %5.1f us  p99 %6.1f us "
      " pass p50 %5.1f us  p99 %6.1f us  max %6.1f us  |  cpu: decision p50 %5.1f us  p99 %6.1f "
      "us  pass p50 %5.1f us  p99 %6.1f us\n",
      spec.c_str(), scheduler.main_queue().size(), running.size(),
      static_cast<double>(decisions) / passes, pct(per_decision, 0.5), pct(per_decision, 0.99),
      pct(latencies, 0.5), pct(latencies, 0.99), latencies.back(), pct(cpu_per_decision, 0.5),
      pct(cpu_per_decision, 0.99), pct(cpu, 0.5), pct(cpu, 0.99));
  return 0;
}

}  // namespace
}  // namespace colo

int main(int argc, char** argv) {
  const int passes = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (passes < 1) {
    std::fprintf(stderr, "usage: colo_bench [passes [policy...]]\n");
    return 2;
  }
  std::vector<std::string> policies(argv + std::min(argc, 2), argv + argc);
  if (policies.empty())
    for (const auto& info : colo::KnownPolicies()) policies.push_back(info.name);
  std::printf("scheduler latency, 64 GPUs (8x8), 1000 queued jobs, %d passes per policy\n", passes);
  for (const auto& spec : policies)
    if (colo::BenchPolicy(spec, passes) != 0) return 1;
  return 0;
}

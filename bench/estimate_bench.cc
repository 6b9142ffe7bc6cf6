// The trace estimator's latency, per profile: what one answer costs once the trace is loaded
// (`estimate`: the replay through the caching-allocator model plus the calibration), what a job's
// first answer costs (`first`: read the trace file, parse it, replay), and the replay alone on the
// parsed trace (`replay`). One benchmark per summary given on the command line:
//
//   colo_estimate_bench [--benchmark_*] SUMMARY.json...
//
// bench/estimate/latency.sh runs it over the committed evaluation profiles.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/strings.h"
#include "estimate/caching_allocator.h"
#include "estimate/job_estimators.h"
#include "estimate/model_summary.h"

namespace colo {
namespace {

struct Profile {
  std::string name;
  ModelSummary summary;
  AllocationTrace trace;  // the summary's trace at its own batch
};

void Register(const Profile& p, const GpuCalibration& calibration) {
  JobDescription job;
  job.summary = &p.summary;
  job.batch = p.summary.batch;
  benchmark::RegisterBenchmark(("estimate/" + p.name).c_str(), [&p, job, calibration](
                                                                   benchmark::State& state) {
    auto estimator = MakeTraceEstimator(calibration);
    if (!estimator->Estimate(job).ok()) state.SkipWithError("the trace estimator has no answer");
    for (auto _ : state) benchmark::DoNotOptimize(estimator->Estimate(job));
    state.counters["events"] = static_cast<double>(p.trace.events.size());
  })->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(("first/" + p.name).c_str(), [job,
                                                             calibration](benchmark::State& state) {
    for (auto _ : state) {
      auto estimator = MakeTraceEstimator(calibration);  // an empty trace cache
      benchmark::DoNotOptimize(estimator->Estimate(job));
    }
  })->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(("replay/" + p.name).c_str(), [&p](benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(Replay(p.trace, {}));
    state.counters["events"] = benchmark::Counter(static_cast<double>(p.trace.events.size()),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  })->Unit(benchmark::kMicrosecond);
}

}  // namespace
}  // namespace colo

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  auto calibration = colo::LoadCalibration("");
  if (!calibration.ok()) {
    std::fprintf(stderr, "colo_estimate_bench: %s\n", calibration.status().message().c_str());
    return 1;
  }
  std::vector<std::unique_ptr<colo::Profile>> profiles;
  for (int i = 1; i < argc; ++i) {
    auto summary = colo::LoadModelSummary(argv[i]);
    if (!summary.ok()) {
      std::fprintf(stderr, "colo_estimate_bench: %s\n", summary.status().message().c_str());
      return 1;
    }
    const colo::TraceRef* ref = summary->TraceFor(summary->batch);
    if (ref == nullptr) {
      std::fprintf(stderr, "colo_estimate_bench: %s has no trace at its batch\n", argv[i]);
      return 1;
    }
    auto text = colo::ReadTextFile(ref->path, "allocation trace");
    if (!text.ok()) {
      std::fprintf(stderr, "colo_estimate_bench: %s\n", text.status().message().c_str());
      return 1;
    }
    auto trace = colo::ParseAllocationTrace(*text, ref->path);
    if (!trace.ok()) {
      std::fprintf(stderr, "colo_estimate_bench: %s\n", trace.status().message().c_str());
      return 1;
    }
    auto p = std::make_unique<colo::Profile>();
    p->name = std::filesystem::path(argv[i]).stem().string();
    p->summary = std::move(*summary);
    p->trace = std::move(*trace);
    profiles.push_back(std::move(p));
  }
  if (profiles.empty()) {
    std::fprintf(stderr, "usage: colo_estimate_bench [--benchmark_*] SUMMARY.json...\n");
    return 2;
  }
  for (const auto& p : profiles) colo::Register(*p, *calibration);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

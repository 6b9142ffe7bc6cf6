#include "daemon/metrics.h"

#include <fmt/format.h>

namespace colo {

std::string RenderMetrics(const JobController& controller, const GpuBackend& gpus,
                          const std::optional<GpuSnapshot>& latest) {
  std::string m;
  auto line = [&](const std::string& text) { m += text + "\n"; };
  const Scheduler& scheduler = controller.scheduler();
  line("# HELP colo_queue_jobs Jobs waiting, by queue.");
  line("# TYPE colo_queue_jobs gauge");
  line(fmt::format("colo_queue_jobs{{queue=\"main\"}} {}", scheduler.main_queue().size()));
  line(fmt::format("colo_queue_jobs{{queue=\"recovery\"}} {}", scheduler.recovery_queue().size()));
  int64_t running = 0;
  for (const auto& [id, job] : controller.live_jobs()) running += job.state == JobState::kRunning;
  line("# HELP colo_running_jobs Jobs running now.");
  line("# TYPE colo_running_jobs gauge");
  line(fmt::format("colo_running_jobs {}", running));
  struct Gauge {
    const char* name;
    const char* help;
    double (*get)(const DeviceSample&);
    // SM/DRAM activity: labelled with its source, and left out (not -1) where not known.
    bool activity = false;
  };
  const Gauge gauges[] = {
      {"colo_gpu_memory_used_bytes", "Memory in use on the GPU.",
       [](const DeviceSample& s) { return static_cast<double>(s.memory_used.count()); }},
      {"colo_gpu_memory_total_bytes", "Memory of the GPU.",
       [](const DeviceSample& s) { return static_cast<double>(s.memory_total.count()); }},
      {"colo_gpu_smact",
       "SM activity, 0..1, by source (gpm, dcgm, fake); absent where not known (see "
       "colo_gpu_activity_source).",
       [](const DeviceSample& s) { return s.smact; }, true},
      {"colo_gpu_smocc", "SM occupancy, 0..1, by source; absent where not known.",
       [](const DeviceSample& s) { return s.smocc; }, true},
      {"colo_gpu_drama", "DRAM activity, 0..1, by source; absent where not known.",
       [](const DeviceSample& s) { return s.drama; }, true},
      {"colo_gpu_power_watts", "Board power draw.",
       [](const DeviceSample& s) { return s.power_watts; }},
  };
  const auto& devices = gpus.devices();
  const size_t sampled = latest ? std::min(latest->devices.size(), devices.size()) : 0;
  for (const Gauge& g : gauges) {
    line(fmt::format("# HELP {} {}", g.name, g.help));
    line(fmt::format("# TYPE {} gauge", g.name));
    for (size_t i = 0; i < sampled; ++i) {
      const DeviceSample& s = latest->devices[i];
      if (!g.activity) {
        line(fmt::format("{}{{gpu=\"{}\",uuid=\"{}\"}} {}", g.name, i, devices[i].uuid, g.get(s)));
      } else if (g.get(s) >= 0 && s.activity_source != ActivitySource::kUtilization) {
        line(fmt::format("{}{{gpu=\"{}\",uuid=\"{}\",source=\"{}\"}} {}", g.name, i,
                         devices[i].uuid, ToString(s.activity_source), g.get(s)));
      }
    }
  }
  line(
      "# HELP colo_gpu_activity_source Where the GPU's SM activity comes from (gpm, dcgm, fake; "
      "utilization: neither GPM nor DCGM, placement uses NVML's utilization; none: not yet).");
  line("# TYPE colo_gpu_activity_source gauge");
  for (size_t i = 0; i < sampled; ++i) {
    line(fmt::format("colo_gpu_activity_source{{gpu=\"{}\",uuid=\"{}\",source=\"{}\"}} 1", i,
                     devices[i].uuid, ToString(latest->devices[i].activity_source)));
  }
  line("# HELP colo_gpu_energy_joules_total Energy the board used since the driver loaded.");
  line("# TYPE colo_gpu_energy_joules_total counter");
  for (size_t i = 0; i < sampled; ++i) {
    line(fmt::format("colo_gpu_energy_joules_total{{gpu=\"{}\",uuid=\"{}\"}} {}", i,
                     devices[i].uuid, latest->devices[i].energy_joules));
  }
  const ControllerCounters& c = controller.counters();
  const std::string policy(scheduler.policy().name());
  line("# HELP colo_placements_total Attempts started, by policy.");
  line("# TYPE colo_placements_total counter");
  line(fmt::format("colo_placements_total{{policy=\"{}\"}} {}", policy, c.placements));
  line("# HELP colo_oom_crashes_total Attempts that ended out of memory, by policy.");
  line("# TYPE colo_oom_crashes_total counter");
  line(fmt::format("colo_oom_crashes_total{{policy=\"{}\"}} {}", policy, c.oom_crashes));
  line("# HELP colo_oom_recoveries_total OOM-crashed jobs re-queued for another attempt.");
  line("# TYPE colo_oom_recoveries_total counter");
  line(fmt::format("colo_oom_recoveries_total{{policy=\"{}\"}} {}", policy, c.oom_recoveries));
  line(
      "# HELP colo_jobs_over_plan_total Attempts seen using more memory than planned while "
      "sharing without an MPS memory limit, by GPU.");
  line("# TYPE colo_jobs_over_plan_total counter");
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto it = c.over_plan.find(static_cast<GpuIndex>(i));
    line(fmt::format("colo_jobs_over_plan_total{{gpu=\"{}\",uuid=\"{}\"}} {}", i, devices[i].uuid,
                     it == c.over_plan.end() ? 0 : it->second));
  }
  line("# HELP colo_store_failures_total Changes the state database refused (full disk, I/O).");
  line("# TYPE colo_store_failures_total counter");
  line(fmt::format("colo_store_failures_total {}", c.store_failures));
  line("# HELP colo_scheduler_pass_seconds Time of one scheduling pass.");
  line("# TYPE colo_scheduler_pass_seconds histogram");
  int64_t cumulative = 0;
  for (size_t b = 0; b < std::size(ControllerCounters::kPassBuckets); ++b) {
    cumulative += c.pass_buckets[b];
    line(fmt::format("colo_scheduler_pass_seconds_bucket{{le=\"{}\"}} {}",
                     ControllerCounters::kPassBuckets[b], cumulative));
  }
  line(fmt::format("colo_scheduler_pass_seconds_bucket{{le=\"+Inf\"}} {}", c.passes));
  line(fmt::format("colo_scheduler_pass_seconds_sum {}", c.pass_seconds));
  line(fmt::format("colo_scheduler_pass_seconds_count {}", c.passes));
  return m;
}

}  // namespace colo

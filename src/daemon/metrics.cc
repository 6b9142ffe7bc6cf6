#include "daemon/metrics.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace colo {
namespace {

// A label value as the text format wants it: backslash, quote and newline escaped. Job names
// are the user's, so they may hold anything.
std::string Escape(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

double ProcessCpuSeconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

class Writer {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  // A missing value (negative or not finite: the GPU cannot say) is an absent series.
  void Sample(std::string_view name, std::string_view labels, double value) {
    if (!std::isfinite(value) || value < 0) return;
    text_ += labels.empty() ? fmt::format("{} {}\n", name, value)
                            : fmt::format("{}{{{}}} {}\n", name, labels, value);
  }
  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

void Histogram(Writer& w, std::string_view name, std::string_view help,
               const ControllerCounters::Histogram& h) {
  w.Family(name, "histogram", help);
  int64_t cumulative = 0;
  for (size_t b = 0; b < h.bounds.size(); ++b) {
    cumulative += h.buckets[b];
    w.Sample(fmt::format("{}_bucket", name), fmt::format("le=\"{}\"", h.bounds[b]),
             static_cast<double>(cumulative));
  }
  w.Sample(fmt::format("{}_bucket", name), "le=\"+Inf\"", static_cast<double>(h.count));
  w.Sample(fmt::format("{}_sum", name), "", h.sum);
  w.Sample(fmt::format("{}_count", name), "", static_cast<double>(h.count));
}

}  // namespace

std::string RenderMetrics(const JobController& controller, const GpuBackend& gpus,
                          const std::optional<GpuSnapshot>& latest) {
  Writer w;
  const Scheduler& scheduler = controller.scheduler();
  const std::string host = Escape(Hostname());
  w.Family("colo_build_info", "gauge", "colod's version and GPU backend; always 1.");
  w.Sample("colo_build_info",
           fmt::format("version=\"{}\",api=\"{}\",backend=\"{}\",Hostname=\"{}\"", COLO_VERSION,
                       api::kVersion, Escape(gpus.name()), host),
           1);

  w.Family("colo_queue_jobs", "gauge", "Jobs waiting, by queue.");
  w.Sample("colo_queue_jobs", "queue=\"main\"", static_cast<double>(scheduler.main_queue().size()));
  w.Sample("colo_queue_jobs", "queue=\"recovery\"",
           static_cast<double>(scheduler.recovery_queue().size()));
  int64_t running = 0;
  double oldest_wait = 0;
  const WallTime now = controller.now();
  for (const auto& [id, job] : controller.live_jobs()) {
    running += job.state == JobState::kRunning;
    if (job.state == JobState::kQueued || job.state == JobState::kRecovering)
      oldest_wait =
          std::max(oldest_wait, std::chrono::duration<double>(now - job.submitted).count());
  }
  w.Family("colo_running_jobs", "gauge", "Jobs running now.");
  w.Sample("colo_running_jobs", "", static_cast<double>(running));
  w.Family("colo_queue_oldest_wait_seconds", "gauge",
           "How long the longest-waiting job has waited since it was submitted; 0: none waits.");
  w.Sample("colo_queue_oldest_wait_seconds", "", oldest_wait);

  // Per GPU, with dcgm-exporter's labels so that dashboards can join the two.
  const auto& devices = gpus.devices();
  std::vector<std::string> gpu_labels;
  for (size_t i = 0; i < devices.size(); ++i) {
    gpu_labels.push_back(fmt::format("gpu=\"{}\",UUID=\"{}\",modelName=\"{}\",Hostname=\"{}\"", i,
                                     Escape(devices[i].uuid), Escape(devices[i].name), host));
  }
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
      {"colo_gpu_sm_active_ratio",
       "SM activity, 0..1, labelled by source (gpm, dcgm, fake); absent where not known (see "
       "colo_gpu_activity_source).",
       [](const DeviceSample& s) { return s.smact; }, true},
      {"colo_gpu_sm_occupancy_ratio", "SM occupancy, 0..1, by source; absent where not known.",
       [](const DeviceSample& s) { return s.smocc; }, true},
      {"colo_gpu_dram_active_ratio",
       "DRAM bandwidth utilization, 0..1, by source; absent where not known.",
       [](const DeviceSample& s) { return s.drama; }, true},
      {"colo_gpu_utilization_ratio",
       "NVML's coarse utilization (a kernel ran in the interval), 0..1; absent where unknown.",
       [](const DeviceSample& s) { return s.utilization; }},
      {"colo_gpu_power_watts", "Board power draw; absent where unknown.",
       [](const DeviceSample& s) { return s.power_watts; }},
  };
  const size_t sampled = latest ? std::min(latest->devices.size(), devices.size()) : 0;
  w.Family("colo_gpu_memory_total_bytes", "gauge", "Memory of the GPU.");
  for (size_t i = 0; i < devices.size(); ++i)
    w.Sample("colo_gpu_memory_total_bytes", gpu_labels[i],
             static_cast<double>(devices[i].memory_total.count()));
  for (const Gauge& g : gauges) {
    w.Family(g.name, "gauge", g.help);
    for (size_t i = 0; i < sampled; ++i) {
      const DeviceSample& s = latest->devices[i];
      if (!g.activity) {
        // A failed memory query leaves used and total at 0: unknown, not empty.
        const bool memory = std::string_view(g.name) == "colo_gpu_memory_used_bytes";
        if (memory && s.memory_total == Bytes(0)) continue;
        w.Sample(g.name, gpu_labels[i], g.get(s));
      } else if (s.activity_source != ActivitySource::kUtilization) {
        w.Sample(g.name,
                 fmt::format("{},source=\"{}\"", gpu_labels[i], ToString(s.activity_source)),
                 g.get(s));
      }
    }
  }
  // What sampling the GPUs costs colod, per kind of driver call: the figures that say where its
  // own CPU goes on real GPUs.
  const std::vector<CallCost> costs = gpus.call_costs();
  if (!costs.empty()) {
    w.Family("colo_gpu_backend_calls_total", "counter",
             "Driver calls colod made to sample the GPUs, by kind of call.");
    for (const CallCost& c : costs)
      w.Sample("colo_gpu_backend_calls_total", fmt::format("call=\"{}\"", c.call),
               static_cast<double>(c.calls));
    w.Family("colo_gpu_backend_cpu_seconds_total", "counter",
             "CPU time colod's sampling thread spent in those calls, by kind of call.");
    for (const CallCost& c : costs)
      w.Sample("colo_gpu_backend_cpu_seconds_total", fmt::format("call=\"{}\"", c.call),
               c.cpu_seconds);
  }
  w.Family("process_cpu_seconds_total", "counter",
           "User and system CPU time colod has spent, all its threads together.");
  w.Sample("process_cpu_seconds_total", "", ProcessCpuSeconds());

  w.Family("colo_gpu_activity_source", "gauge",
           "Where the GPU's SM activity comes from (gpm, dcgm, fake; utilization: neither GPM "
           "nor DCGM, placement uses NVML's utilization; none: not yet); always 1.");
  for (size_t i = 0; i < sampled; ++i) {
    w.Sample("colo_gpu_activity_source",
             fmt::format("{},source=\"{}\"", gpu_labels[i],
                         ToString(latest->devices[i].activity_source)),
             1);
  }
  w.Family("colo_gpu_energy_joules_total", "counter",
           "Energy the board used since the driver loaded; absent where unknown.");
  for (size_t i = 0; i < sampled; ++i)
    w.Sample("colo_gpu_energy_joules_total", gpu_labels[i], latest->devices[i].energy_joules);
  // Only the free memory is read here.
  const ClusterView view =
      scheduler.View(WindowReads{SummaryDepth::kLast, SummaryDepth::kLast, SummaryDepth::kLast});
  w.Family("colo_gpu_free_for_placement_bytes", "gauge",
           "Memory a new job could be placed in on the GPU (its capacity less every job's "
           "reservation).");
  for (size_t i = 0; i < std::min(view.gpus.size(), devices.size()); ++i)
    w.Sample("colo_gpu_free_for_placement_bytes", gpu_labels[i],
             static_cast<double>(view.gpus[i].free_for_placement.count()));

  // Per job: live jobs only, so the series end with the job.
  w.Family("colo_job_info", "gauge", "A live job: its user, name and state; always 1.");
  for (const auto& [id, job] : controller.live_jobs()) {
    w.Sample("colo_job_info",
             fmt::format("job=\"{}\",user=\"{}\",name=\"{}\",state=\"{}\",Hostname=\"{}\"", id,
                         Escape(job.owner.user), Escape(job.spec.name), ToString(job.state), host),
             1);
  }
  struct JobGauge {
    const char* name;
    const char* help;
  };
  const JobGauge job_gauges[] = {
      {"colo_job_memory_planned_bytes", "What placement plans a running job to use per GPU."},
      {"colo_job_memory_reserved_bytes", "What the running job holds on the GPU for placement."},
      {"colo_job_memory_used_bytes", "What the running job's processes use on the GPU now."},
  };
  for (size_t k = 0; k < std::size(job_gauges); ++k) {
    w.Family(job_gauges[k].name, "gauge", job_gauges[k].help);
    for (const auto& [id, job] : controller.live_jobs()) {
      const JobRecord* r = scheduler.job(id);
      if (!r || r->state != JobState::kRunning) continue;
      for (size_t e = 0; e < r->gpus.size(); ++e) {
        const size_t g = static_cast<size_t>(r->gpus[e]);
        if (g >= gpu_labels.size()) continue;
        if (k == 0 && !r->need.known()) continue;            // no plan: no series
        if (k == 2 && e >= r->current_use.size()) continue;  // not seen yet: no series
        const Bytes value = k == 0   ? r->need.Upper()
                            : k == 1 ? scheduler.Reservation(*r)
                                     : r->current_use[e];
        w.Sample(
            job_gauges[k].name,
            fmt::format("job=\"{}\",user=\"{}\",{}", id, Escape(job.owner.user), gpu_labels[g]),
            static_cast<double>(value.count()));
      }
    }
  }

  const ControllerCounters& c = controller.counters();
  Histogram(w, "colo_job_wait_seconds", "From submission to the start of a job's first attempt.",
            c.wait);
  Histogram(w, "colo_job_completion_seconds", "From submission to the end of a job (any end).",
            c.completion);
  const std::string policy = Escape(scheduler.policy().name());
  w.Family("colo_placements_total", "counter", "Attempts started, by policy.");
  w.Sample("colo_placements_total", fmt::format("policy=\"{}\"", policy),
           static_cast<double>(c.placements));
  w.Family("colo_oom_crashes_total", "counter", "Attempts that ended out of memory, by policy.");
  w.Sample("colo_oom_crashes_total", fmt::format("policy=\"{}\"", policy),
           static_cast<double>(c.oom_crashes));
  w.Family("colo_oom_recoveries_total", "counter",
           "Out-of-memory crashes re-queued with a larger need, by what the need was raised "
           "from: the framework's own figures (framework) or what colod saw (observed).");
  for (const char* reason : {"framework", "observed"}) {
    const auto it = c.oom_recoveries_by_reason.find(reason);
    w.Sample("colo_oom_recoveries_total",
             fmt::format("policy=\"{}\",reason=\"{}\"", policy, reason),
             static_cast<double>(it == c.oom_recoveries_by_reason.end() ? 0 : it->second));
  }
  w.Family("colo_preemptions_total", "counter",
           "Running jobs signalled to make room for a user under their share.");
  w.Sample("colo_preemptions_total", "", static_cast<double>(c.preemptions));
  w.Family("colo_jobs_over_plan_total", "counter",
           "Attempts seen using more memory than planned while sharing without an MPS memory "
           "limit, by GPU.");
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto it = c.over_plan.find(static_cast<GpuIndex>(i));
    w.Sample("colo_jobs_over_plan_total", gpu_labels[i],
             static_cast<double>(it == c.over_plan.end() ? 0 : it->second));
  }
  w.Family("colo_store_failures_total", "counter",
           "Changes the state database refused (full disk, I/O).");
  w.Sample("colo_store_failures_total", "", static_cast<double>(c.store_failures));
  Histogram(w, "colo_scheduler_pass_seconds", "Time of one scheduling pass.", c.pass);
  return w.Take();
}

}  // namespace colo

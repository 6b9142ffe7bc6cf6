#include "cli/run_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <set>

#include "cli/job_table.h"
#include "common/stats.h"
#include "common/text.h"

namespace colo {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

double Gib(Bytes b) {
  return static_cast<double>(b.count()) / kGiB;
}

std::string Size(double gib) {
  return fmt::format("{:.1f} GiB", gib);
}

// The notable things that happened to one job, from its attempts and how it ended.
void AddEvents(const api::RunJob& job, const std::string& name, std::vector<NotableEvent>& out) {
  const api::JobSummary& s = job.summary;
  const auto add = [&](double time, std::string kind, std::string what) {
    out.push_back({time, name, s.user, std::move(kind), std::move(what)});
  };
  for (size_t i = 0; i < job.attempts.size(); ++i) {
    const api::AttemptInfo& a = job.attempts[i];
    const api::AttemptInfo* next = i + 1 < job.attempts.size() ? &job.attempts[i + 1] : nullptr;
    std::string gpus;
    for (int g : a.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    if (a.exit_kind == "out-of-memory") {
      std::string then = next ? fmt::format("; attempt {} started at {}", next->number,
                                            LocalTimeText(next->started, "%H:%M:%S"))
                         : s.state == JobState::kRecovering ? "; waits to run again"
                                                            : "; it ran no more";
      add(a.ended, "out-of-memory",
          fmt::format("attempt {} ran out of GPU memory on GPU {} (planned {}, peak {}){}",
                      a.number, gpus, Size(Gib(a.memory_limit)), Size(Gib(a.peak)), then));
    } else if (a.exit_kind == "cancelled" && next) {
      add(a.ended, "requeued",
          fmt::format("attempt {} was stopped and queued again as attempt {}", a.number,
                      next->number));
    }
    if (a.over_plan)
      add(a.ended > 0 ? a.ended : a.started, "over-plan",
          fmt::format("attempt {} used {}, more than its {} plan (shared without an MPS limit)",
                      a.number, Size(Gib(a.peak)), Size(Gib(a.memory_limit))));
  }
  switch (s.state) {
    case JobState::kTimeout:
      add(s.finished, "timeout",
          fmt::format("stopped at its time limit ({}) after {}", TimeLimitText(s.time_limit_s),
                      DurationText(s.finished - s.started)));
      break;
    case JobState::kRequeued:
      add(s.finished, "requeued", "handed back to Slurm's queue");
      break;
    case JobState::kLost:
      add(s.finished, "lost", "ended while colod was down; how is not known");
      break;
    case JobState::kFailed:
      // The event's kind says it failed; its text says how, where the viewer may know.
      add(s.finished, "failed",
          s.redacted         ? "how it ended is its owner's"
          : s.reason.empty() ? "no reason was recorded"
                             : Printable(s.reason));
      break;
    default:
      break;
  }
}

}  // namespace

std::string DurationText(double seconds) {
  if (seconds < 120) return fmt::format("{:.0f} s", seconds);
  if (seconds < 7200) return fmt::format("{:.0f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

double ReportStart(const api::RunReportReply& run) {
  double start = run.until;
  for (const api::RunGpuPoint& p : run.gpu_points) start = std::min(start, p.time);
  for (const api::RunJob& j : run.jobs) start = std::min(start, j.summary.submitted);
  return std::max(start, run.since);
}

RunSummary Summarize(const api::RunReportReply& run) {
  RunSummary out;
  out.since = ReportStart(run);
  out.until = run.until;
  const auto clipped = [&](double from, double to) {
    return std::max(0.0, std::min(to, out.until) - std::max(from, out.since));
  };
  std::map<std::string, UserRow> users;
  std::map<std::string, std::vector<double>> waits;
  std::map<std::string, std::pair<double, double>> memory;  // peak, plan (GiB)
  std::vector<std::vector<std::pair<double, double>>> busy(run.gpus.size());
  std::vector<std::set<JobId>> jobs_on(run.gpus.size());
  for (const api::RunJob& job : run.jobs) {
    const api::JobSummary& s = job.summary;
    UserRow& u = users[s.user];
    u.user = s.user;
    ++u.jobs;
    switch (s.state) {
      case JobState::kSucceeded:
        ++u.completed;
        break;
      case JobState::kFailed:
      case JobState::kLost:
        ++u.failed;
        break;
      case JobState::kCancelled:
        ++u.cancelled;
        break;
      case JobState::kTimeout:
        ++u.timeouts;
        break;
      case JobState::kRunning:
        ++u.running;
        break;
      default:
        ++u.waiting;
    }
    const std::string name = JobIdText(s);
    JobRow row{name,
               s.name,
               s.user,
               StateWord(s.state),
               s.redacted ? "" : s.reason,
               s.submitted,
               0,
               s.finished,
               {},
               static_cast<int>(job.attempts.size()),
               0,
               0,
               s.redacted};
    for (const api::AttemptInfo& a : job.attempts) {
      if (a.started <= 0) continue;
      if (row.started == 0) {
        row.started = a.started;
        waits[s.user].push_back(a.started - s.submitted);
      }
      const double end = a.ended > 0 ? a.ended : run.until;
      const double hours = clipped(a.started, end) / 3600;
      u.gpu_hours += hours * static_cast<double>(a.gpus.size());
      if (a.exit_kind == "out-of-memory") ++u.out_of_memory;
      if (a.memory_limit > Bytes(0) && a.peak > Bytes(0)) {
        memory[s.user].first += Gib(a.peak);
        memory[s.user].second += Gib(a.memory_limit);
        u.planned_unused_gib_hours += std::max(0.0, Gib(a.memory_limit) - Gib(a.peak)) * hours *
                                      static_cast<double>(a.gpus.size());
      }
      for (int g : a.gpus) {
        if (g < 0 || static_cast<size_t>(g) >= busy.size()) continue;
        busy[static_cast<size_t>(g)].push_back(
            {std::max(a.started, run.since), std::min(end, run.until)});
        jobs_on[static_cast<size_t>(g)].insert(s.id);
      }
      row.gpus = a.gpus;
      row.planned_gib = Gib(a.memory_limit);
      row.peak_gib = Gib(a.peak);
    }
    AddEvents(job, name, out.events);
    out.jobs.push_back(std::move(row));
  }
  for (auto& [user, row] : users) {
    if (!waits[user].empty()) {
      row.wait_mean_s = Mean(waits[user]);
      row.wait_p95_s = NearestRank(waits[user], 0.95);
    }
    if (memory[user].second > 0)
      row.memory_used_of_planned = memory[user].first / memory[user].second;
    out.gpu_hours += row.gpu_hours;
    out.users.push_back(row);
  }
  std::stable_sort(out.users.begin(), out.users.end(),
                   [](const UserRow& a, const UserRow& b) { return a.gpu_hours > b.gpu_hours; });
  std::stable_sort(out.jobs.begin(), out.jobs.end(),
                   [](const JobRow& a, const JobRow& b) { return a.submitted > b.submitted; });
  std::stable_sort(out.events.begin(), out.events.end(),
                   [](const NotableEvent& a, const NotableEvent& b) { return a.time < b.time; });

  const double range = std::max(1e-9, out.until - out.since);
  for (size_t g = 0; g < run.gpus.size(); ++g) {
    GpuRow row;
    row.index = run.gpus[g].index;
    row.name = run.gpus[g].name;
    row.memory_total_gib = Gib(run.gpus[g].memory_total);
    std::vector<double> smact, used, power;
    std::optional<double> first, last;
    for (const api::RunGpuPoint& p : run.gpu_points) {
      if (p.gpu != run.gpus[g].index) continue;
      if (p.smact) smact.push_back(*p.smact);
      if (p.memory_used) used.push_back(*p.memory_used / kGiB);
      if (p.power_watts) power.push_back(*p.power_watts);
      if (p.energy_joules) {
        if (!first) first = *p.energy_joules;
        last = *p.energy_joules;
      }
    }
    if (!smact.empty()) row.smact_mean = Mean(smact);
    if (!used.empty()) row.memory_used_mean_gib = Mean(used);
    if (!power.empty()) row.power_mean_watts = Mean(power);
    if (first && *last >= *first) row.energy_kwh = (*last - *first) / 3.6e6;
    // The union of its jobs' intervals.
    auto& spans = busy[g];
    std::sort(spans.begin(), spans.end());
    double covered = 0, reach = out.since;
    for (const auto& [from, to] : spans) {
      const double start = std::max(from, reach);
      if (to > start) covered += to - start;
      reach = std::max(reach, to);
    }
    row.busy_share = covered / range;
    row.jobs = static_cast<int>(jobs_on[g].size());
    out.gpus.push_back(row);
  }
  return out;
}

std::string FormatRunSummary(const RunSummary& s, size_t max_events) {
  const auto maybe = [](const std::optional<double>& v, double scale, const char* format) {
    return v ? fmt::format(fmt::runtime(format), *v * scale) : std::string("-");
  };
  std::string out = fmt::format("{} to {}: {} jobs, {:.3f} GPU-hours\n\n", WallTimeText(s.since),
                                WallTimeText(s.until), s.jobs.size(), s.gpu_hours);
  out += fmt::format("{:<12} {:>5} {:>5} {:>4} {:>4} {:>4} {:>4} {:>9} {:>9} {:>9} {:>8}\n", "USER",
                     "JOBS", "CD", "F", "CA", "TO", "OOM", "GPU-HOURS", "WAIT-MEAN", "WAIT-P95",
                     "MEM-USED");
  for (const UserRow& u : s.users) {
    out += fmt::format(
        "{:<12} {:>5} {:>5} {:>4} {:>4} {:>4} {:>4} {:>9.3f} {:>9} {:>9} {:>8}\n",
        FitColumns(u.user, 12), u.jobs, u.completed, u.failed, u.cancelled, u.timeouts,
        u.out_of_memory, u.gpu_hours, maybe(u.wait_mean_s, 1.0 / 60, "{:.1f}m"),
        maybe(u.wait_p95_s, 1.0 / 60, "{:.1f}m"), maybe(u.memory_used_of_planned, 100, "{:.0f}%"));
  }
  out +=
      "  (MEM-USED: the GPU memory its jobs' attempts used at their peak, of what they "
      "planned)\n\n";
  out += fmt::format("{:>3} {:<20} {:>6} {:>6} {:>10} {:>7} {:>9} {:>5}\n", "GPU", "NAME", "BUSY",
                     "SMACT", "MEM-MEAN", "POWER", "ENERGY", "JOBS");
  for (const GpuRow& g : s.gpus) {
    out += fmt::format(
        "{:>3} {:<20} {:>5.0f}% {:>6} {:>10} {:>7} {:>9} {:>5}\n", g.index, FitColumns(g.name, 20),
        100 * g.busy_share, maybe(g.smact_mean, 100, "{:.0f}%"),
        maybe(g.memory_used_mean_gib, 1, "{:.1f} GiB"), maybe(g.power_mean_watts, 1, "{:.0f} W"),
        maybe(g.energy_kwh, 1, "{:.3f} kWh"), g.jobs);
  }
  if (!s.events.empty()) {
    out +=
        fmt::format("\nNotable events ({}{}):\n", s.events.size(),
                    s.events.size() > max_events ? fmt::format(", the latest {}", max_events) : "");
    const size_t first = s.events.size() > max_events ? s.events.size() - max_events : 0;
    for (size_t i = first; i < s.events.size(); ++i) {
      const NotableEvent& e = s.events[i];
      out += fmt::format("  {} job {} ({}) {}: {}\n", WallTimeText(e.time), e.job,
                         Printable(e.user), e.kind, Printable(e.what));
    }
  }
  return out;
}

}  // namespace colo

// What a recorded run (colod's history over a time range, as `colo report` reads it) tells the
// people who ask about a GPU server: per user, the jobs, GPU-hours, waits and how much of the
// GPU memory they planned their jobs used; per GPU, how busy it was; each job in a row; and the
// events worth a look (out-of-memory recoveries, time limits, jobs over their plan, requeues,
// failures). `colo report` prints it, and its HTML report draws it over wall-clock time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/types.h"

namespace colo {

struct UserRow {
  std::string user;
  int jobs = 0, completed = 0, failed = 0, cancelled = 0, timeouts = 0, waiting = 0, running = 0;
  int out_of_memory = 0;                          // attempts that ran out of GPU memory
  double gpu_hours = 0;                           // within the range
  std::optional<double> wait_mean_s, wait_p95_s;  // of its jobs that started
  // Of its attempts with a plan and a peak: peak over plan, summed (how much of what it planned
  // its jobs used).
  std::optional<double> memory_used_of_planned;
  double planned_unused_gib_hours = 0;  // plan less peak, by the hour, per GPU
};

struct GpuRow {
  int index = 0;
  std::string name;
  double memory_total_gib = 0;
  std::optional<double> smact_mean, memory_used_mean_gib, power_mean_watts, energy_kwh;
  double busy_share = 0;  // of the range, the time a job ran on it
  int jobs = 0;           // jobs that ran on it
};

struct JobRow {
  std::string job;  // ARRAY_TASK for a task of an array
  std::string name, user, state, reason;
  double submitted = 0, started = 0, ended = 0;  // wall times; 0: not yet
  std::vector<int> gpus;                         // of its latest attempt
  int attempts = 0;
  double planned_gib = 0, peak_gib = 0;  // per GPU, its latest attempt's
  bool redacted = false;
};

struct NotableEvent {
  double time = 0;
  std::string job, user;
  std::string kind;  // out-of-memory, timeout, over-plan, requeued, lost, failed
  std::string what;
};

struct RunSummary {
  double since = 0, until = 0;
  std::vector<UserRow> users;  // most GPU-hours first
  std::vector<GpuRow> gpus;
  std::vector<JobRow> jobs;          // newest submission first
  std::vector<NotableEvent> events;  // oldest first
  double gpu_hours = 0;
};

// A span of time as people read it: 45 s, 12 min, 3.5 h.
std::string DurationText(double seconds);
// Where the report's time starts: its --since, or when it asked for everything colod kept, the
// first sample or submission in it.
double ReportStart(const api::RunReportReply& run);
RunSummary Summarize(const api::RunReportReply& run);

// The summary for a terminal: the range, per user, per GPU, and the latest notable events.
std::string FormatRunSummary(const RunSummary& summary, size_t max_events = 15);

}  // namespace colo

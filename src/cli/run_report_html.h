// The HTML report of a real run (`colo report -o run.html`): what an administrator and a user ask
// of a GPU server over a time range, over wall-clock time. Per user: jobs, GPU-hours, waits and
// the GPU memory their jobs used of what they planned. Per GPU: its jobs as bars, its memory by
// job, its SM activity and power. The queue, the notable events (out-of-memory recoveries, time
// limits, jobs over their plan, requeues, failures) and every job with its user. Self-contained
// (Chart.js embedded) and checked in a browser by its own script, as the simulator's report is.
#pragma once

#include <string>

#include "api/types.h"
#include "cli/run_summary.h"

namespace colo {

// `description`: one sentence saying what was recorded (server, range, policy).
std::string RunReportHtml(const api::RunReportReply& run, const RunSummary& summary,
                          const std::string& description);

}  // namespace colo

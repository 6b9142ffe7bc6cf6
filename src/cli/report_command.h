// `colo report`: a run as colod recorded it (GPU samples, job memory and placement, the queue),
// summed up per user, per GPU and in notable events (run_summary.h), drawn over wall-clock time
// (run_report_html.h), exported as CSV, or given in the simulator's JSON shape so that
// `colo sim --compare-with` can put it beside a simulation.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "api/types.h"
#include "sim/simulator.h"

namespace colo {

struct ReportCommandOptions {
  std::string since, until;  // -2h, 90m (ago), seconds since the epoch, or 2024-05-01T12:00
  std::string output;        // .html (default), .json or .csv
  std::string csv_dir;
  bool json = false;
  int max_points = 2000;
};

void AddReportCommand(CLI::App& app, ReportCommandOptions& options);
int RunReportCommand(const ReportCommandOptions& options, const std::string& socket);

// The time --since and --until name, in seconds since the epoch; `now` likewise.
Result<double> ParseReportTime(const std::string& text, double now);
// A recorded run as the simulator's result: metrics, jobs and a timeline whose times are seconds
// since `origin`.
SimResult RunToSimResult(const api::RunReportReply& run, double origin);

}  // namespace colo

// Presenting simulation results and real runs (colo report gives a run recorded by colod the same
// shape): a comparison table for the terminal, JSON (and back, for --compare-with), CSV, and a
// self-contained HTML report drawn with Chart.js, embedded at build time so that it opens
// offline: per-policy bars, wait and JCT distributions, and per run a GPU job timeline, memory,
// SMACT, power and queue length over one time axis shared by every run, and a table of jobs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/simulator.h"

namespace colo {

struct ReportContext {
  ReportContext() = default;
  ReportContext(std::string trace_name, std::string server_name, int server_count,
                uint64_t run_seed)
      : trace(std::move(trace_name)),
        server(std::move(server_name)),
        servers(server_count),
        seed(run_seed) {}

  std::string trace;
  std::string server;
  int servers = 1;
  uint64_t seed = 1;
  // Set for a real run: the heading and the sentence that says what was recorded (else the
  // trace, server and seed are described).
  std::string title;
  std::string description;
  // How the runs' gates were set (the memory margin, the SMACT threshold), stated in the report.
  std::string gates;
};

// Chart.js 3, minified, as every HTML report embeds it (from libjs-chart.js at build time).
std::string ChartJsSource();
// What every report's script shares: Chart.js's defaults for reports, and the check each script
// ends with, coloCheckCharts(charts, errors): that each chart drew something and how small the
// smallest plot is, stated in the page's title.
std::string ChartCheckScript();
// Text for HTML: < > & and " as entities.
std::string HtmlEscape(std::string_view text);

// Ratios are to the run labelled `baseline` when present (normally "exclusive").
std::string FormatTable(const std::vector<SimResult>& results, const std::string& baseline);
std::string ToJson(const ReportContext& context, const std::vector<SimResult>& results,
                   bool with_jobs);
// Reads what ToJson wrote (with or without jobs): the runs' metrics and job results, no timeline.
Result<std::vector<SimResult>> FromJson(std::string_view text);
std::string ToCsv(const std::vector<SimResult>& results);
std::string ToHtml(const ReportContext& context, const std::vector<SimResult>& results,
                   const std::string& baseline);

}  // namespace colo

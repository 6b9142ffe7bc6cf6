// Presenting simulation results: a comparison table for the terminal, JSON, CSV, and a
// self-contained HTML report (inline SVG, no scripts or servers) with per-GPU timelines and
// per-policy bar charts.
#pragma once

#include <string>
#include <vector>

#include "sim/simulator.h"

namespace colo {

struct ReportContext {
  std::string trace;
  std::string server;
  int servers = 1;
  uint64_t seed = 1;
};

// Ratios are to the run labelled `baseline` when present (normally "exclusive").
std::string FormatTable(const std::vector<SimResult>& results, const std::string& baseline);
std::string ToJson(const ReportContext& context, const std::vector<SimResult>& results,
                   bool with_jobs);
std::string ToCsv(const std::vector<SimResult>& results);
std::string ToHtml(const ReportContext& context, const std::vector<SimResult>& results,
                   const std::string& baseline);

}  // namespace colo

// `colo estimate SUMMARY --batch B`: every memory estimator's answer for one model, and the one
// colo would plan with. `colo submit --estimate-from` uses the same code.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "estimate/job_estimators.h"
#include "estimate/smact_model.h"

namespace colo {

struct EstimateCommandOptions {
  std::string summary;
  int batch = 0;
  std::vector<std::string> estimators;
  std::string gpu, weights, paper_weights, declared;
  int repeat = 1;
  bool json = false;
};

struct EstimateReport {
  std::shared_ptr<ModelSummary> summary;
  int batch = 0;
  std::vector<NamedEstimate> estimates;
  // The job's SM activity alone on the GPU, when the profile counted FLOPs and the GPU's
  // calibration has a fitted model; otherwise why not.
  std::optional<SmactPrediction> smact;
  std::string smact_unavailable;
  std::vector<std::string> warnings;  // EstimateWarnings: which estimate, and why that one
};

void AddEstimateCommand(CLI::App& app, EstimateCommandOptions& options);
Result<EstimateReport> RunEstimates(const EstimateCommandOptions& options);
nlohmann::json ToJson(const EstimateReport& report);
int RunEstimateCommand(const EstimateCommandOptions& options);

}  // namespace colo

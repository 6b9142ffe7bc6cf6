#include "cli/estimate_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "estimate/model_summary.h"

namespace colo {

void AddEstimateCommand(CLI::App& app, EstimateCommandOptions& o) {
  auto* cmd = app.add_subcommand(
      "estimate",
      "every memory estimator's answer for a model summary (colo-profile's or torchsummary's)");
  cmd->add_option("summary", o.summary, "model summary: colo-profile JSON or torchsummary text")
      ->required();
  cmd->add_option("--batch", o.batch, "batch size (default: the summary's)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option(
         "--estimator", o.estimators,
         "horus, gpumemnet[:BUCKET], gpumemnet-paper, trace, history, declared (repeatable; "
         "default all)")
      // One name per --estimator, so that `--estimator NAME FILE` leaves FILE to the summary.
      ->allow_extra_args(false);
  cmd->add_option("--gpu", o.gpu,
                  "GPU model whose calibration the trace estimator uses (e.g. H200)");
  cmd->add_option("--gpumemnet-weights", o.weights,
                  "GPUMemNet weights (default: the shipped file)");
  cmd->add_option("--gpumemnet-paper-weights", o.paper_weights,
                  "weights of the published GPUMemNet method (default: the shipped file)");
  cmd->add_option("--mem", o.declared, "the memory the user declares, e.g. 12GiB");
  cmd->add_option("--repeat", o.repeat, "answer N times and report the median latency")
      ->check(CLI::Range(1, 100000));
  cmd->add_flag("--json", o.json, "JSON instead of a table");
}

Result<EstimateReport> RunEstimates(const EstimateCommandOptions& o) {
  auto summary = LoadModelSummary(o.summary);
  if (!summary.ok()) return summary.status();
  EstimateReport report;
  report.summary = std::make_shared<ModelSummary>(std::move(*summary));
  JobDescription job;
  job.summary = report.summary.get();
  job.batch = o.batch > 0 ? o.batch : report.summary->batch;
  if (job.batch <= 0) {
    return InvalidArgument(
        fmt::format("{}: the summary names no batch size; give --batch", o.summary));
  }
  if (!o.declared.empty()) {
    auto bytes = ParseBytes(o.declared);
    if (!bytes.ok()) return InvalidArgument("--mem: " + bytes.status().message());
    job.declared = *bytes;
  }
  report.batch = job.batch;
  EstimateOptions options;
  options.names = o.estimators;
  options.gpu = o.gpu;
  options.gpumemnet_weights = o.weights;
  options.gpumemnet_paper_weights = o.paper_weights;
  auto estimators = MakeEstimators(options);
  if (!estimators.ok()) return estimators.status();
  for (auto& [name, estimator] : *estimators) {
    NamedEstimate e{name, Unavailable(""), 0};
    if (!estimator.ok()) {
      e.estimate = estimator.status();
    } else {
      // The median of --repeat answers: the first also reads and parses the trace file.
      std::vector<double> micros;
      for (int i = 0; i < std::max(1, o.repeat); ++i) {
        const auto start = std::chrono::steady_clock::now();
        e.estimate = (*estimator)->Estimate(job);
        micros.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count());
      }
      std::nth_element(micros.begin(), micros.begin() + micros.size() / 2, micros.end());
      e.micros = micros[micros.size() / 2];
    }
    report.estimates.push_back(std::move(e));
  }
  report.warnings = EstimateWarnings(report.estimates);
  auto calibration = LoadCalibration(o.gpu);
  if (!calibration.ok()) {
    report.smact_unavailable = calibration.status().message();
  } else if (!calibration->smact) {
    report.smact_unavailable = fmt::format("no SMACT model for {}", calibration->gpu);
  } else if (auto smact = PredictSoloSmact(*report.summary, job.batch, *calibration->smact);
             smact.ok()) {
    report.smact = *smact;
  } else {
    report.smact_unavailable = smact.status().message();
  }
  return report;
}

nlohmann::json ToJson(const EstimateReport& r) {
  nlohmann::json out{{"summary", r.summary->origin},
                     {"model", r.summary->model},
                     {"family", r.summary->Family()},
                     {"batch", r.batch},
                     {"signature", fmt::format("{:016x}", r.summary->Signature())},
                     {"unknown_layer_types", r.summary->unknown_layer_types}};
  auto& list = out["estimates"] = nlohmann::json::array();
  for (const auto& e : r.estimates) {
    nlohmann::json j{{"estimator", e.estimator}, {"micros", e.micros}};
    if (e.estimate.ok()) {
      j["peak"] = e.estimate->peak.count();
      j["lower"] = e.estimate->lower.count();
      j["upper"] = e.estimate->upper.count();
      j["method"] = e.estimate->method;
      j["detail"] = e.estimate->detail;
    } else {
      j["error"] = e.estimate.status().message();
    }
    list.push_back(std::move(j));
  }
  if (const NamedEstimate* best = BestEstimate(r.estimates)) out["best"] = best->estimator;
  out["warnings"] = r.warnings;
  if (r.smact) {
    out["solo_smact"] = {{"predicted", r.smact->smact},
                         {"gpu_seconds_per_step", r.smact->gpu_seconds},
                         {"host_seconds_per_step", r.smact->host_seconds}};
  } else {
    out["solo_smact"] = {{"error", r.smact_unavailable}};
  }
  return out;
}

int RunEstimateCommand(const EstimateCommandOptions& o) {
  auto report = RunEstimates(o);
  if (!report.ok()) {
    fmt::print(stderr, "colo estimate: {}\n", report.status().message());
    return 1;
  }
  for (const auto& warning : report->warnings) {
    fmt::print(stderr, "colo estimate: warning: {}\n", warning);
  }
  if (o.json) {
    fmt::print("{}\n", ToJson(*report).dump(1));
    return 0;
  }
  const ModelSummary& s = *report->summary;
  fmt::print("{} ({}, {}): {} parameters, {} activations per sample, batch {}\n", s.origin,
             s.format, s.Family(), s.parameters, s.activations_per_sample, report->batch);
  if (!s.unknown_layer_types.empty()) {
    fmt::print("unknown layer types (counted by their parameters and outputs only): {}\n",
               Join(s.unknown_layer_types, ", "));
  }
  // As wide as the longest name ("gpumemnet-paper:transformer4transformer").
  size_t width = 16;
  for (const auto& e : report->estimates) width = std::max(width, e.estimator.size());
  fmt::print("{:<{}} {:>10} {:>10} {:>10} {:>9}  {}\n", "ESTIMATOR", width, "PEAK", "LOWER",
             "UPPER", "TIME", "HOW");
  for (const auto& e : report->estimates) {
    const std::string time = fmt::format("{:.0f}us", e.micros);
    if (e.estimate.ok()) {
      fmt::print("{:<{}} {:>10} {:>10} {:>10} {:>9}  {}\n", e.estimator, width,
                 FormatBytes(e.estimate->peak), FormatBytes(e.estimate->lower),
                 FormatBytes(e.estimate->upper), time, e.estimate->detail);
    } else {
      fmt::print("{:<{}} {:>10} {:>10} {:>10} {:>9}  {}\n", e.estimator, width, "-", "-", "-", "-",
                 e.estimate.status().message());
    }
  }
  if (const NamedEstimate* best = BestEstimate(report->estimates)) {
    fmt::print("colo plans with {}: {} (the upper bound of the best available estimate)\n",
               best->estimator, FormatBytes(best->estimate->upper));
  } else {
    fmt::print(
        "no estimator could answer: colo would rely on recovery from out-of-memory crashes\n");
  }
  if (report->smact) {
    fmt::print(
        "solo SM activity {:.2f} predicted (a step: {:.1f} ms on the GPU, {:.1f} ms to "
        "launch)\n",
        report->smact->smact, report->smact->gpu_seconds * 1e3, report->smact->host_seconds * 1e3);
  } else {
    fmt::print("solo SM activity: not predicted ({})\n", report->smact_unavailable);
  }
  return 0;
}

}  // namespace colo

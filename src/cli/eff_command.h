// `colo eff N` (like Slurm's seff): how well a job, or every task of an array, used what it was
// planned: GPU memory planned against its peak, its GPUs' SM activity and energy while it ran
// (from colod's recorded history, as `colo report` reads it), GPU-hours and attempts, and a
// one-line verdict with the --mem to ask for next time.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/types.h"
#include "cli/client_commands.h"

namespace colo {

struct Efficiency {
  std::string job;  // as colo names it: 42, 42_3, or "42 (array, 8 tasks)"
  std::string name, user;
  std::vector<std::string> states;  // "COMPLETED" or, for an array, "6 COMPLETED, 2 FAILED"
  int tasks = 1;
  int attempts = 0, out_of_memory = 0;
  int gpus = 0;       // per job (per task)
  Bytes planned;      // the largest plan any attempt ran under, per GPU; 0: none known
  Bytes peak;         // the largest peak any attempt reached, per GPU; 0: none seen
  Bytes median_peak;  // over the tasks (an array), per GPU
  double gpu_hours = 0;
  // Over its GPUs' samples while it ran; absent without recorded history.
  std::optional<double> smact_mean, smact_p95, energy_wh;
  bool shared = false;       // another job ran on one of its GPUs at some time
  std::string history_note;  // why the GPU figures are missing, if they are
  std::string verdict;
};

// The figures from each job's detail (every task of an array, or the one job) and what colod
// recorded over their time (nullptr: none); `now` ends attempts still running.
Efficiency Evaluate(const std::string& label, const std::vector<api::JobDetail>& jobs,
                    const api::RunReportReply* recorded, double now);
std::string FormatEfficiency(const Efficiency& e);

void AddEffCommand(CLI::App& app, ClientOptions& options);
int RunEffCommand(const ClientOptions& options);

}  // namespace colo

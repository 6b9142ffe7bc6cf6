// `colo sim`: replay a trace on simulated servers under one or more placement policies.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace colo {

struct SimCommandOptions {
  std::string trace = "thesis-90";
  std::string server = "a100x4";
  int servers = 1;
  std::string cluster = "queue";
  std::string node_choice = "most-free";
  int queue_depth = 100;
  std::string policy;
  std::string compare;
  std::string estimator = "oracle";
  std::string sharing = "mps";
  std::string recovery = "adaptive";
  uint64_t seed = 1;
  size_t jobs = 1000;
  double rate = 42;
  int users = 1;
  bool backfill = false;
  std::string order = "fifo";  // the main queue's order: fifo or fair-share
  std::string half_life = "7d";
  std::string max_age = "7d";
  std::string preempt_after;  // empty: no preemption
  double weight_fair_share = 10000, weight_age = 1000;
  int backfill_depth = 16;
  int user_gpus = 0;  // what one user may hold at once (0: no limit)
  int user_running = 0;
  int window = 30;
  double grace_s = 30;
  std::string margin = "2GiB";
  std::string gpu_free;    // leave only this much free on every GPU (others hold the rest)
  double idle_watts = -1;  // a GPU's power while no job computes on it; < 0: the server's
  double smact_max = 0.8;
  std::string power;  // "ACTIVE,LINEAR,QUADRATIC" watts: the power model fitted to another GPU
  bool json = false;
  bool csv = false;
  bool with_jobs = false;
  std::string report;
  std::string compare_with;  // a JSON file of colo sim --json or colo report --json
  bool list_workloads = false;
  bool list_policies = false;
  bool calibration = false;
  bool timings = false;
  bool describe = false;
  bool show_policy = false;
};

void AddSimCommand(CLI::App& app, SimCommandOptions& options);
// Returns the process exit code; prints results to stdout and problems to stderr.
int RunSimCommand(const SimCommandOptions& options);

}  // namespace colo

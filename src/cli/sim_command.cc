#include "cli/sim_command.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <tuple>

#include "common/cpu_time.h"
#include "common/strings.h"
#include "policies/registry.h"
#include "sim/interference.h"
#include "sim/report.h"
#include "sim/simulator.h"

namespace colo {
namespace {

// The side-by-side comparison `make demo` runs: the thesis' configurations and colo's defaults.
const std::vector<std::string> kThesisComparison = {
    "exclusive",
    "round-robin:share=plain,est=none,gates=none,recovery=thesis",
    "round-robin:est=none,gates=none,recovery=thesis",
    "worst-fit:est=none,gates=none,recovery=thesis",
    "worst-fit:est=none,gates=none,margin=5GiB,smact=0.8,grace=on,recovery=thesis",
    "least-utilized:est=none,gates=none,margin=5GiB,smact=0.8,grace=on,recovery=thesis",
    "first-fit",
    "best-fit",
    "worst-fit",
    "least-utilized",
    "consolidate",
    "worst-fit:est=bucket:8GiB",
    "worst-fit:est=none",
    // colo's own estimate (the trace replay): 2.0% median and 6.2% p90 absolute error on the
    // estimation benchmark, a log-normal error of sigma 0.04; it plans with peak x e^sigma.
    "worst-fit:est=noisy:0.04",
};

std::vector<std::string> SplitSpecs(const std::string& list) {
  // Commas separate specs, but a spec's own settings use commas too: a new spec starts at a comma
  // followed by a known policy name.
  std::vector<std::string> specs;
  std::string current;
  for (const std::string& part : Split(list, ',')) {
    const std::string name(Trim(part.substr(0, part.find(':'))));
    const bool is_policy = IsPolicyName(name);
    // "worst-fit" or "worst-fit:k=v" starts a spec; "k=v" continues the current one.
    const bool starts_spec =
        is_policy && (part.find('=') == std::string::npos || part.find(':') != std::string::npos);
    if (starts_spec) {
      if (!current.empty()) specs.push_back(current);
      current = std::string(Trim(part));
    } else {
      current += "," + std::string(Trim(part));
    }
  }
  if (!current.empty()) specs.push_back(current);
  return specs;
}

int PrintCalibration() {
  const auto rows = CalibrationTable(InterferenceModel{}, PowerModel{});
  fmt::print(
      "Interference and power models against the H100 measurements (measured -> predicted, "
      "error)\n");
  fmt::print("{:<22} {:>4} {:>9}  {:>22}  {:>22}  {:>22}\n", "set", "jobs", "mode",
             "throughput gain", "SMACT", "power W");
  double worst_gain = 0, worst_power = 0;
  for (const auto& r : rows) {
    auto err = [](double m, double p) { return 100.0 * (p - m) / m; };
    worst_gain = std::max(worst_gain, std::abs(err(r.measured_gain, r.predicted_gain)));
    worst_power = std::max(worst_power, std::abs(err(r.measured_watts, r.predicted_watts)));
    fmt::print(
        "{:<22} {:>4} {:>9}  {:5.2f} -> {:5.2f} {:+6.1f}%  {:5.3f} -> {:5.3f} {:+6.1f}%  {:5.0f} "
        "-> {:5.0f} {:+6.1f}%\n",
        r.set, r.jobs, ToString(r.mode), r.measured_gain, r.predicted_gain,
        err(r.measured_gain, r.predicted_gain), r.measured_smact, r.predicted_smact,
        err(r.measured_smact, r.predicted_smact), r.measured_watts, r.predicted_watts,
        err(r.measured_watts, r.predicted_watts));
  }
  fmt::print("worst error: throughput {:.1f}%, power {:.1f}%\n", worst_gain, worst_power);
  return 0;
}

}  // namespace

void AddSimCommand(CLI::App& app, SimCommandOptions& o) {
  CLI::App* sim =
      app.add_subcommand("sim", "replay a job trace on simulated GPU servers and compare policies");
  sim->add_option(
         "--trace", o.trace,
         "thesis-90, thesis-60, synthetic, carma:SCRIPT, philly:LOG.json, or a colo CSV file")
      ->capture_default_str();
  sim->add_option("--server", o.server,
                  "server profile: a100x4, h100x8, h200x8 (xN sets the GPU count)")
      ->capture_default_str();
  sim->add_option("--servers", o.servers, "number of identical servers")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  sim->add_option("--cluster", o.cluster,
                  "how jobs reach servers: queue (one cluster queue, a job goes to a server only "
                  "when it can start there; backfill), fifo (the same in strict order) or "
                  "per-server (each job sent to a server on arrival, as before)")
      ->capture_default_str();
  sim->add_option("--node-choice", o.node_choice,
                  "which server that can start a job gets it: most-free (planned memory) or "
                  "best-fit (the least free, Slurm's native choice)")
      ->capture_default_str();
  sim->add_option("--queue-depth", o.queue_depth,
                  "waiting jobs the cluster queue looks at per round (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000000));
  sim->add_option("--policy", o.policy,
                  "one policy spec, e.g. worst-fit or least-utilized:margin=5GiB");
  sim->add_option("--compare", o.compare,
                  "policy specs separated by commas, or 'thesis' for the thesis comparison set");
  sim->add_option("--estimator", o.estimator,
                  "oracle, none, declared, noisy:SIGMA[:BIAS], bucket:SIZE")
      ->capture_default_str();
  sim->add_option("--sharing", o.sharing, "how collocated jobs share a GPU: mps or plain")
      ->capture_default_str();
  sim->add_option("--recovery", o.recovery, "OOM recovery: adaptive or thesis")
      ->capture_default_str();
  sim->add_option("--seed", o.seed, "seed for generated traces and noisy estimators")
      ->capture_default_str();
  sim->add_option("--jobs", o.jobs, "jobs in a synthetic trace")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{10'000'000}));
  sim->add_option("--rate", o.rate, "synthetic arrivals per hour (whole cluster)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e7));
  sim->add_option("--users", o.users, "distinct owners in a synthetic trace")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  sim->add_flag("--backfill", o.backfill,
                "EASY backfill: the waiting head gets a reservation (from running jobs' run times) "
                "and later jobs start only where they cannot delay it");
  sim->add_option("--order", o.order,
                  "the queue's order: fifo, or fair-share (by each user's decayed usage against "
                  "an equal share, and age)")
      ->capture_default_str();
  sim->add_option("--half-life", o.half_life, "fair share: usage halves over this long")
      ->capture_default_str();
  sim->add_option("--weight-fair-share", o.weight_fair_share,
                  "fair share: the weight of the fair-share factor in a job's priority")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  sim->add_option("--weight-age", o.weight_age,
                  "fair share: the weight of the age factor (waited / --max-age, at most 1)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  sim->add_option("--max-age", o.max_age, "fair share: the wait at which the age factor is 1")
      ->capture_default_str();
  sim->add_option("--preempt-after", o.preempt_after,
                  "fair share: the head of a server's queue, its owner under their share, that "
                  "has waited this long has jobs of users over their share preempted (each "
                  "saves a checkpoint and runs on from it later), as colod's "
                  "fairness.preempt_after");
  sim->add_option("--backfill-depth", o.backfill_depth, "later jobs backfill looks at per pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  sim->add_option("--user-gpus", o.user_gpus, "GPUs one user may hold at once (0: no limit)")
      ->check(CLI::Range(0, 1 << 20));
  sim->add_option("--user-running", o.user_running, "jobs one user may run at once (0: no limit)")
      ->check(CLI::Range(0, 1 << 20));
  sim->add_option("--window", o.window, "samples in the utilization window")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  sim->add_option("--grace", o.grace_s, "launch grace in seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  sim->add_option("--margin", o.margin, "memory margin of the memory gate")->capture_default_str();
  sim->add_option("--gpu-free", o.gpu_free,
                  "memory left free on every GPU, the rest held by processes colo does not manage "
                  "(another tenant), e.g. 12GiB; default: an idle GPU's");
  sim->add_option("--idle-watts", o.idle_watts,
                  "a GPU's power while no job computes on it (default: the server profile's)")
      ->check(CLI::Range(0.0, 2000.0));
  sim->add_option("--smact-max", o.smact_max, "SMACT threshold of the utilization gate")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sim->add_option("--power", o.power,
                  "power model A,L,Q: watts above idle at SM activity s are A + L*s + Q*s^2 "
                  "(default: the H100 fit, scaled by TDP)");
  sim->add_flag("--json", o.json, "print JSON instead of the table");
  sim->add_flag("--csv", o.csv, "print CSV instead of the table");
  sim->add_flag("--with-jobs", o.with_jobs, "include every job's result in --json");
  sim->add_option("--report", o.report, "write an HTML report to this path");
  sim->add_option("--compare-with", o.compare_with,
                  "put the runs of this JSON file (colo report --json of a real run, or colo sim "
                  "--json) beside the simulated ones");
  sim->add_flag("--list-workloads", o.list_workloads, "print the workload catalogue and exit");
  sim->add_flag("--list-policies", o.list_policies, "print the policies and exit");
  sim->add_flag("--calibration", o.calibration,
                "print the interference/power fit to the H100 measurements");
  sim->add_flag("--timings", o.timings, "print wall and CPU time and jobs/s per policy to stderr");
  sim->add_flag("--describe", o.describe,
                "print how much the trace asks of the servers (its load) and exit");
  sim->add_flag("--show-policy", o.show_policy,
                "print how each policy spec reads (its gates, and the estimator, sharing, "
                "recovery and learning it sets), as colod --check-config does, and exit");
}

int RunSimCommand(const SimCommandOptions& o) {
  if (o.calibration) return PrintCalibration();
  if (o.list_policies) {
    for (const auto& p : KnownPolicies()) {
      std::string aliases;
      for (const auto& a : p.aliases) aliases += (aliases.empty() ? " (" : ", ") + a;
      if (!aliases.empty()) aliases += ")";
      fmt::print("{:<16}{:<14} {}\n", p.name, aliases, p.summary);
    }
    fmt::print("{:<16}{:<14} {}\n", "shards", "",
               "simulator only: Slurm's shard GRES, n=4 jobs per GPU by count, no memory known");
    return 0;
  }
  if (o.list_workloads) {
    fmt::print("{:<36} {:>6} {:>4} {:>9} {:>6} {:>10} {:>8}\n", "workload", "class", "gpus",
               "solo_min", "smact", "peak_MiB", "warmup_s");
    for (const auto& w : ThesisCatalogue()) {
      fmt::print("{:<36} {:>6} {:>4} {:>9.1f} {:>6.2f} {:>10.0f} {:>8.0f}\n", w.name,
                 ToString(w.cls), w.gpus, ToSeconds(w.duration) / 60, w.smact, w.peak.mib(),
                 ToSeconds(w.warmup));
    }
    return 0;
  }
  std::vector<std::string> specs;
  if (!o.policy.empty() && !o.compare.empty()) {
    fmt::print(stderr, "colo sim: give --policy or --compare, not both\n");
    return 2;
  }
  if (o.compare == "thesis" || (o.policy.empty() && o.compare.empty()))
    specs = kThesisComparison;
  else if (!o.compare.empty())
    specs = SplitSpecs(o.compare);
  else
    specs = {o.policy};
  auto margin = ParseBytes(o.margin);
  auto recovery = ParseRecoveryMode(o.recovery);
  if (!margin.ok() || !recovery.ok()) {
    fmt::print(stderr, "colo sim: {}\n",
               !margin.ok() ? margin.status().message() : recovery.status().message());
    return 2;
  }
  // What each run does where its spec says nothing.
  RunSpec defaults;
  defaults.estimator = o.estimator;
  defaults.recovery = *recovery;
  defaults.policy.gates.memory_margin = *margin;
  defaults.policy.gates.smact_max = o.smact_max;
  if (o.sharing == "plain" || o.sharing == "streams")
    defaults.sharing = SharingMode::kPlain;
  else if (o.sharing != "mps") {
    fmt::print(stderr, "colo sim: --sharing takes mps or plain, not '{}'\n", o.sharing);
    return 2;
  }
  // Every spec is read before anything runs: a typo in the last is not found an hour in.
  std::vector<RunSpec> runs;
  for (const std::string& text : specs) {
    auto spec = ParseRunSpec(text, defaults);
    if (!spec.ok()) {
      fmt::print(stderr, "colo sim: {}\n", spec.status().message());
      return 2;
    }
    runs.push_back(*std::move(spec));
  }
  if (o.show_policy) {
    for (const RunSpec& run : runs) fmt::print("{}\n", Describe(run.policy));
    return 0;
  }
  auto server = FindServer(o.server);
  if (!server.ok()) {
    fmt::print(stderr, "colo sim: {}\n", server.status().message());
    return 2;
  }
  if (!o.gpu_free.empty()) {
    auto free = ParseBytes(o.gpu_free);
    if (!free.ok() || *free <= Bytes(0) || *free > server->capacity - server->baseline_used) {
      fmt::print(stderr, "colo sim: --gpu-free: {}\n",
                 free.ok()
                     ? fmt::format("must be more than 0 and at most the {} an idle {} has free",
                                   FormatBytes(server->capacity - server->baseline_used),
                                   server->gpu_model)
                     : free.status().message());
      return 2;
    }
    server->baseline_used = server->capacity - *free;
  }
  if (o.idle_watts >= 0) server->idle_watts = o.idle_watts;
  SyntheticOptions synthetic;
  synthetic.jobs = o.jobs;
  synthetic.seed = o.seed;
  synthetic.jobs_per_hour = o.rate;
  synthetic.users = o.users;
  synthetic.max_gpus = server->gpus;
  auto trace = LoadTrace(o.trace, synthetic);
  if (!trace.ok()) {
    fmt::print(stderr, "colo sim: {}\n", trace.status().message());
    return 2;
  }
  for (const std::string& note : trace->notes) fmt::print(stderr, "colo sim: note: {}\n", note);
  if (o.describe) {
    const TraceLoad load = DescribeLoad(*trace);
    const double gpus = static_cast<double>(o.servers) * server->gpus;
    std::string mix;
    for (size_t g = 1; g < load.jobs_by_gpus.size(); ++g) {
      if (load.jobs_by_gpus[g] == 0) continue;
      mix += fmt::format(
          "{}{} GPU{}: {:.1f}%", mix.empty() ? "" : ", ", g, g == 1 ? "" : "s",
          100.0 * static_cast<double>(load.jobs_by_gpus[g]) / static_cast<double>(load.jobs));
    }
    fmt::print("trace {}: {} jobs submitted over {:.1f} h ({})\n", trace->name, load.jobs,
               load.span_s / 3600, mix);
    fmt::print(
        "{:.0f} GPU-hours run alone; while the jobs arrive they keep {:.0f} GPUs busy on "
        "average if each starts on arrival: {:.2f}x the {} x {} GPUs\n",
        load.gpu_hours, load.mean_demand_gpus, load.mean_demand_gpus / gpus, o.servers,
        server->gpus);
    return 0;
  }
  auto cluster = ParseClusterMode(o.cluster);
  auto node_choice = ParseNodeChoice(o.node_choice);
  if (!cluster.ok() || !node_choice.ok()) {
    fmt::print(stderr, "colo sim: {}\n",
               !cluster.ok() ? "--cluster: " + cluster.status().message()
                             : "--node-choice: " + node_choice.status().message());
    return 2;
  }
  SimOptions options;
  options.server = *server;
  options.servers = o.servers;
  options.cluster = *cluster;
  options.node_choice = *node_choice;
  options.queue_depth = o.queue_depth;
  options.seed = o.seed;
  options.scheduler.backfill = o.backfill;
  auto order = ParseQueueOrder(o.order);
  if (!order.ok()) {
    fmt::print(stderr, "colo sim: --order: {}\n", order.status().message());
    return 2;
  }
  Duration half_life, max_age;
  for (auto [flag, text, out] : {std::tuple{"--half-life", &o.half_life, &half_life},
                                 std::tuple{"--max-age", &o.max_age, &max_age}}) {
    auto parsed = ParseDuration(*text);
    if (!parsed.ok() || *parsed <= Duration::zero()) {
      fmt::print(stderr, "colo sim: {}: {}\n", flag,
                 parsed.ok() ? std::string("must be positive") : parsed.status().message());
      return 2;
    }
    *out = *parsed;
  }
  if (*order == QueueOrder::kFairShare && *cluster != ClusterMode::kPerServer) {
    fmt::print(stderr,
               "colo sim: --order fair-share orders each server's own queue, as colod does; the "
               "cluster queue (--cluster {}) keeps arrival order: add --cluster per-server\n",
               ToString(*cluster));
    return 2;
  }
  if (!o.preempt_after.empty()) {
    auto after = ParseDuration(o.preempt_after);
    if (!after.ok()) {
      fmt::print(stderr, "colo sim: --preempt-after: {}\n", after.status().message());
      return 2;
    }
    if (*order != QueueOrder::kFairShare) {
      fmt::print(stderr,
                 "colo sim: --preempt-after stops jobs of users over their share: add --order "
                 "fair-share\n");
      return 2;
    }
    // A trace says nothing of checkpoints: every job is taken to resume from one.
    options.scheduler.fairness.preempt = true;
    options.scheduler.fairness.preempt_after = *after;
    options.scheduler.fairness.preemptible = Preemptible::kAll;
  }
  options.scheduler.fairness.order = *order;
  options.scheduler.fairness.half_life = half_life;
  options.scheduler.fairness.max_age = max_age;
  options.scheduler.fairness.weight_fair_share = o.weight_fair_share;
  options.scheduler.fairness.weight_age = o.weight_age;
  options.scheduler.backfill_depth = o.backfill_depth;
  options.scheduler.user_limits.gpus = o.user_gpus;
  options.scheduler.user_limits.running_jobs = o.user_running;
  options.scheduler.window_samples = o.window;
  options.scheduler.launch_grace = SecondsF(o.grace_s);
  options.record_timeline = !o.report.empty();
  if (!o.power.empty()) {
    auto power = ParsePowerModel(o.power);
    if (!power.ok()) {
      fmt::print(stderr, "colo sim: {}\n", power.status().message());
      return 2;
    }
    options.power = *power;
  }

  std::vector<SimResult> results;
  for (const RunSpec& run : runs) {
    const std::string& text = run.label;
    const auto begin = std::chrono::steady_clock::now();
    const auto cpu_begin = ThreadCpuTime();
    auto result = Simulate(*trace, run, options);
    const double cpu = std::chrono::duration<double>(ThreadCpuTime() - cpu_begin).count();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (!result.ok()) {
      fmt::print(stderr, "colo sim: {}: {}\n", text, result.status().message());
      return 2;
    }
    if (o.timings) {
      // The thread's CPU time beside the wall time: on a shared machine the wall time also
      // counts what the machine gave to other work.
      const double jobs = static_cast<double>(trace->jobs.size());
      fmt::print(stderr,
                 "{}: {} jobs in {:.3f} s wall = {:.0f} jobs/s, {:.3f} s CPU = {:.0f} jobs/s ({} "
                 "events, {} passes, {} rounds)\n",
                 text, trace->jobs.size(), wall, jobs / wall, cpu, jobs / cpu,
                 result->metrics.events, result->metrics.passes, result->metrics.rounds);
    }
    results.push_back(std::move(*result));
  }
  if (!o.compare_with.empty()) {
    std::ifstream in(o.compare_with);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) {
      fmt::print(stderr, "colo sim: --compare-with: cannot read '{}'\n", o.compare_with);
      return 2;
    }
    auto other = FromJson(text);
    if (!other.ok()) {
      fmt::print(stderr, "colo sim: --compare-with {}: {}\n", o.compare_with,
                 other.status().message());
      return 2;
    }
    for (SimResult& r : *other) results.push_back(std::move(r));
  }
  ReportContext context;
  context.trace = trace->name;
  context.server = server->name;
  context.servers = o.servers;
  context.seed = o.seed;
  context.gates = fmt::format(
      "memory margin {}, SMACT at most {} (unless a policy's name says "
      "otherwise)",
      o.margin, o.smact_max);
  const std::string baseline = "exclusive";
  if (o.json)
    fmt::print("{}", ToJson(context, results, o.with_jobs));
  else if (o.csv)
    fmt::print("{}", ToCsv(results));
  else {
    fmt::print("trace {} ({} jobs) on {} x {}, cluster {}\n", trace->name, trace->jobs.size(),
               o.servers, server->name, ToString(options.cluster));
    fmt::print("{}", FormatTable(results, baseline));
  }
  if (!o.report.empty()) {
    const std::filesystem::path path(o.report);
    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    std::ofstream out(path);
    out << ToHtml(context, results, baseline);
    if (!out) {
      fmt::print(stderr, "colo sim: cannot write report '{}'\n", o.report);
      return 1;
    }
    fmt::print(stderr, "report: {}\n", std::filesystem::absolute(path).string());
  }
  return 0;
}

}  // namespace colo

// Job traces the simulator replays, and the readers that build them: colo's CSV, CARMA's submission
// scripts with .rad files, Microsoft Philly's cluster_job_log, the thesis' 90/60-task traces and a
// seeded generator with Philly's statistics. Every reader reports bad input as "FILE:LINE:
// problem".
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "sim/interned.h"
#include "sim/workloads.h"

namespace colo {

// The memory lines of a CARMA task file (MiB on lines 8-11; absent where the file says 40000, its
// "not known", or has no such line): what CARMA's oracle and estimator policies plan with.
struct TaskFileMemory {
  std::optional<Bytes> measured, horus, faketensor, gpumemnet;
};

// A million-job trace is held whole while it runs: a job's names are ids in one table (Interned)
// and its task file's lines, which only CARMA's traces have, are held apart.
struct TraceJob {
  int64_t id = 0;
  Duration submit{0};  // since the trace start
  Interned name;
  Interned owner{"user"};
  SoloProfile profile;  // profile.gpus is the GPU count
  std::optional<Bytes> declared;
  std::shared_ptr<const TaskFileMemory> task_file;  // jobs of a carma: trace
};

struct Trace {
  std::string name;
  std::vector<TraceJob> jobs;      // ordered by submit time, ids 1..n
  std::vector<std::string> notes;  // what a reader assumed (a missing task file, a guessed model)
};

// The thesis' traces: Philly arrival gaps (first 90 non-failed jobs of 2017-12-20) mapped onto
// table 6.2's workloads with the thesis' mix (90: 65/27/8% light/medium/heavy; 60: 83/17%
// medium/heavy).
Trace ThesisTrace(int tasks);

// colo's CSV. Header names the columns; see docs/formats.md.
Result<Trace> ParseColoCsv(const std::string& text, const std::string& origin);
Result<Trace> ReadColoCsv(const std::string& path);

// CARMA's submit script: "sleep N" lines advance time, "... submit.py --task FILE.rad" submits.
// A task path that does not exist is looked for under the script's directory and its parents (by
// its trailing components: CARMA's scripts name /home/... or repository-relative paths). The model
// comes from the script the task's command runs (CARMA's workloads/*.py), epochs and batch from
// its command line; a task file CARMA does not publish is replayed from its name (a note says so).
Result<Trace> ReadCarmaScript(const std::string& path);

// The catalogued model CARMA's training script `script` (its file name without .py, any case)
// trains, and on which data set; nullopt for a script CARMA does not have.
struct CarmaModel {
  std::string model, data;
};
std::optional<CarmaModel> CarmaModelOfScript(std::string_view script);

struct PhillyOptions {
  std::vector<std::string> statuses = {"Pass"};
  size_t max_jobs = 0;  // 0: all
  uint64_t seed = 1;    // picks each job's solo profile class (Philly does not name models)
};
Result<Trace> ParsePhillyJson(const std::string& text, const std::string& origin,
                              const PhillyOptions& options);
Result<Trace> ReadPhillyJson(const std::string& path, const PhillyOptions& options);

struct SyntheticOptions {
  size_t jobs = 1000;
  uint64_t seed = 1;
  double jobs_per_hour = 42;  // Philly's mean arrival rate
  double arrival_cv = 2.2;    // Philly's burstiness (coefficient of variation of inter-arrivals)
  int users = 1;
  int max_gpus = 8;
};
// Philly-like: 1/2/4/8-GPU mix, log-normal durations (median 19 min, mean 3.6 h), hyper-exponential
// arrivals with the given CV; memory and SMACT from the catalogue with the 90-task trace's class
// mix. With several users, each burst of arrivals is one user's (a sweep), its user drawn with
// Zipf's weights (user0 the heaviest).
Trace SyntheticPhilly(const SyntheticOptions& options);

// "thesis-90", "thesis-60", "synthetic", "carma:SCRIPT", "philly:FILE.json", or a CSV path.
Result<Trace> LoadTrace(const std::string& source, const SyntheticOptions& synthetic);

// How much a trace asks of a cluster.
struct TraceLoad {
  size_t jobs = 0;
  double span_s = 0;     // first to last submission
  double gpu_hours = 0;  // every job's GPUs times its solo duration
  // GPUs busy on average between the first and the last submission if every job started on
  // arrival and ran alone (jobs still running at the last submission count until then): what a
  // cluster of that many GPUs would have to give at once, on average, while the trace arrives.
  double mean_demand_gpus = 0;
  std::vector<size_t> jobs_by_gpus;  // [g]: jobs asking for g GPUs
};
TraceLoad DescribeLoad(const Trace& trace);

}  // namespace colo

// What the daemon keeps about a job beyond the scheduler's view: who submitted it, how to run it,
// and each attempt's process. Stored as one JSON document per job, so the schema can grow.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model.h"

namespace colo {

struct AttemptRecord {
  int number = 0;
  int pid = 0;             // the shim: session leader and process group of the attempt
  uint64_t pid_start = 0;  // its start time in clock ticks since boot, to recognise it again
  std::vector<int> gpus;   // scheduler indices
  std::vector<std::string> gpu_uuids;
  std::string mode;  // mps | plain | exclusive
  int thread_percent = 100;
  int64_t memory_limit = 0;  // bytes per GPU given to MPS; 0: none
  double started = 0;        // wall-clock seconds since the epoch
  double ended = 0;
  std::string exit_kind;  // empty while running
  std::string detail;
  int64_t peak = 0;  // highest per-GPU memory seen, bytes
  std::string stdout_path, stderr_path, exit_path;
};

struct JobRecordDoc {
  JobSpec spec;
  unsigned uid = 0, gid = 0;
  std::string workdir;
  std::vector<std::string> env;  // NAME=value, as the submitter had it
  std::string state = "queued";
  std::string reason;
  double submitted = 0, finished = 0;
  bool cancel_requested = false;
  std::vector<AttemptRecord> attempts;
  std::string source;  // "cli", "script job.sh", "rad task.rad"
  int threads = 0;     // MPS thread percentage the user asked for; 0: the policy's choice
  // The memory estimate the job was submitted with (colo submit --estimate-from): estimator,
  // peak/lower/upper bytes, detail, and the model signature that links runs of the same job.
  nlohmann::json estimate = nullptr;

  const AttemptRecord* current() const { return attempts.empty() ? nullptr : &attempts.back(); }
  AttemptRecord* current() { return attempts.empty() ? nullptr : &attempts.back(); }
};

nlohmann::json ToJson(const JobSpec& spec);
Result<JobSpec> JobSpecFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const AttemptRecord& a);
nlohmann::json ToJson(const JobRecordDoc& r);
Result<JobRecordDoc> JobRecordFromJson(const nlohmann::json& j);

}  // namespace colo

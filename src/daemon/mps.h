// The MPS control daemon colod owns: its own pipe and log directories, started on demand,
// health-checked, restarted, and stopped when colod stops. colod never changes the GPUs' compute
// mode; MPS runs in the default mode beside non-MPS processes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace colo {

struct MpsSettings {
  std::string control = "nvidia-cuda-mps-control";
  std::string pipe_dir, log_dir;
};

class MpsDaemon {
 public:
  explicit MpsDaemon(MpsSettings settings) : settings_(std::move(settings)) {}
  ~MpsDaemon();

  // Starts the control daemon if it is not answering. Fails with the reason (binary missing,
  // no GPU, permissions) so the caller can fall back to plain sharing.
  Status EnsureRunning();
  bool Healthy();
  void Stop();
  bool started() const { return started_; }

  // The environment a job needs to be an MPS client with these limits. `memory_limit` per GPU
  // ordinal as the job sees them (0, 1, ...); 0 means no limit.
  std::vector<std::string> ClientEnv(int thread_percent, Bytes memory_limit, int gpus) const;

 private:
  // Sends one command to the control daemon; returns its answer.
  Result<std::string> Command(const std::string& command);

  MpsSettings settings_;
  bool started_ = false;
};

}  // namespace colo

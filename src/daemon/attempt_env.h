// What colod gives the processes of an attempt, whoever starts them (colod's launcher, or an
// outside engine's steps): one builder for every AttemptRunner.
#pragma once

#include <string>
#include <vector>

#include "daemon/framework_env.h"
#include "daemon/job.h"

namespace colo {

struct AttemptEnv {
  // NAME=value colod decides: the GPUs (by UUID, which no renumbering changes), the job's and the
  // attempt's ids, an array task's ids, the plan per GPU (COLO_GPU_MEMORY: its MPS limit, or its
  // budget when sharing plainly), and the MPS client settings.
  std::vector<std::string> colo;
  // The frameworks' sharing settings (framework_env.h): colod adds them where the job does not
  // set the variable itself.
  FrameworkEnv frameworks;
};

// `largest`: the largest GPU of the attempt (its capacity and CUDA context); `mps`: the MPS
// client settings, empty when the attempt runs without MPS; `own_env`: the job's environment,
// whose values of the frameworks' variables stay (empty: the engine's steps decide theirs).
AttemptEnv MakeAttemptEnv(const Job& job, const Attempt& attempt, const GpuInfo& largest,
                          std::vector<std::string> mps, const std::vector<std::string>& own_env);

// The job's own environment without what colod decides for an attempt (its GPUs, its MPS
// server, colo's ids), then the attempt's.
std::vector<std::string> ProcessEnvironment(const Job& job, const AttemptEnv& env);

// CUDA_VISIBLE_DEVICES for an attempt: its GPUs by UUID.
std::string VisibleDevices(const Attempt& attempt);

}  // namespace colo

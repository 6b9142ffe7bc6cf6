// The workload catalogue (thesis table 6.2) and the server profiles the simulator models.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "sim/interned.h"

namespace colo {

enum class WorkloadClass : uint8_t { kLight, kMedium, kHeavy };
std::string_view ToString(WorkloadClass c);

// How a job behaves when it has its GPU(s) to itself.
struct SoloProfile {
  Interned name;
  Duration duration{0};  // wall time alone, warm-up included
  double smact = 0.2;    // SM activity alone, 0..1
  Bytes peak;          // peak memory per GPU as nvidia-smi/NVML reports it (CUDA context included)
  Duration warmup{0};  // time from launch until the peak is reached
  // The head of the run spent on the CPU before the first training step (interpreter, imports,
  // building the model): no SM activity, and co-runners do not slow it down. Part of `duration`.
  Duration startup{0};
  int gpus = 1;
  int batch = 0;
  int epochs = 1;  // the epochs `duration` covers
  WorkloadClass cls = WorkloadClass::kLight;
  // In thesis table 6.2 (the built-in and generated traces draw only from those); false for the
  // models only CARMA's task files name.
  bool in_table_6_2 = true;
};

// Thesis table 6.2 (A100-40GB), with solo SMACT and warm-up assigned per class (the README's
// "Models" section says how).
const std::vector<SoloProfile>& ThesisCatalogue();
// By exact name, e.g. "resnet50-imagenet-bs64".
const SoloProfile* FindWorkload(std::string_view name);
// By model name and batch as found in a command line or file name ("resnet50", 64); the closest
// batch of that model when the exact one is not catalogued. With `data` ("cifar100"), only that
// model on that data set; with `epochs`, the variant of that many epochs when there is one.
const SoloProfile* MatchWorkload(std::string_view model, int batch, std::string_view data = {},
                                 int epochs = 0);

struct ServerProfile {
  std::string name;
  std::string gpu_model;
  int gpus = 4;
  Bytes capacity;
  Bytes baseline_used;  // what an idle GPU already shows as used (driver, other tenants)
  double idle_watts = 0;
  double tdp_watts = 0;
};

// "a100x4" (the thesis' DGX Station), "h100x8", "h100x1", "h200x8"; a trailing "xN" sets the count.
Result<ServerProfile> FindServer(std::string_view name);

}  // namespace colo

// A training job's SM activity alone on a GPU, predicted before it runs from its profile (FLOPs,
// activations, parameters and layers per step) with numbers fitted per GPU model
// (bench/estimate/smact_fit.py). MPS thread shares and the utilization gate need it; a job's own
// earlier runs, once there are some, replace the prediction.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "estimate/model_summary.h"

namespace colo {

// One step keeps the GPU busy for gpu = FLOPs / rate(precision) + bytes / bandwidth, where bytes
// are twice what the step allocates (each byte written and read at least once) plus the
// parameters' traffic (weights, gradients, optimizer state); the host issues it in host = ops x
// host_per_op, the ops counted as the allocations per step of the profile's trace (nearly every
// op allocates its output). Eager frameworks launch ahead, so the two overlap: a step takes
// max(gpu, host), and the SMs are active fill x gpu / max(gpu, host) of it (fill: how much of the
// GPU the kernels occupy while they run). bench/estimate/smact_fit.py fits the five numbers.
struct SmactModel {
  double fp32_flops_per_second = 0;
  double amp_flops_per_second = 0;
  double bytes_per_second = 0;
  double host_seconds_per_op = 0;
  double fill = 0;
  double bytes_per_parameter = 0;

  static Result<SmactModel> FromJson(const std::string& text, const std::string& origin);
};

struct SmactPrediction {
  double smact = 0;         // 0..1
  double gpu_seconds = 0;   // per step
  double host_seconds = 0;  // per step
};

// kUnavailable when the profile recorded no FLOPs or no trace (torchsummary files, older
// profiles).
Result<SmactPrediction> PredictSoloSmact(const ModelSummary& summary, int batch,
                                         const SmactModel& model);

}  // namespace colo

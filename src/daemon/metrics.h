// colod's metrics in the Prometheus text format: queues, running jobs, per-GPU memory, SM
// activity, power and energy, placements and out-of-memory recoveries by policy, and how long
// placement passes take.
#pragma once

#include <optional>
#include <string>

#include "daemon/api_handlers.h"
#include "daemon/job_controller.h"
#include "gpu/gpu.h"

namespace colo {

std::string RenderMetrics(const JobController& controller, const GpuBackend& gpus,
                          const std::optional<GpuSnapshot>& latest);

}  // namespace colo

#include "core/placement.h"

#include <fmt/format.h>

namespace colo {

PlacementRequest RequestFor(const JobSpec& spec, const MemoryNeed& need, bool require_idle) {
  PlacementRequest r;
  r.job = spec.id;
  r.owner = spec.owner;
  r.gpus = spec.gpus;
  r.memory = need;
  r.memory_need = need.Upper();
  r.sharing = spec.sharing;
  r.expected_smact = spec.expected_smact;
  r.threads = spec.threads;
  r.booked = !spec.booked_gpus.empty();
  // Who shares a booked job's GPUs was decided where they were booked.
  r.require_idle = require_idle && !r.booked;
  return r;
}

std::string_view ToString(Gate g) {
  switch (g) {
    case Gate::kPass:
      return "ok";
    case Gate::kUnhealthy:
      return "unhealthy";
    case Gate::kMigBusy:
      return "mig-busy";
    case Gate::kExclusiveHeld:
      return "exclusive-held";
    case Gate::kNotIdle:
      return "not-idle";
    case Gate::kModeMismatch:
      return "mode";
    case Gate::kOtherUser:
      return "other-user";
    case Gate::kLaunchGrace:
      return "launch-grace";
    case Gate::kMemory:
      return "memory";
    case Gate::kUtilization:
      return "utilization";
    case Gate::kNode:
      return "node";
    case Gate::kEarmarked:
      return "earmarked";
  }
  return "?";
}

std::string Wait::Reason() const {
  // Name the gate that stopped the most GPUs.
  int counts[static_cast<int>(Gate::kEarmarked) + 1] = {};
  for (const auto& v : per_gpu) counts[static_cast<int>(v.gate)]++;
  int top = 0;
  for (int g = 1; g <= static_cast<int>(Gate::kEarmarked); ++g) {
    if (counts[g] > counts[top]) top = g;
  }
  return fmt::format("{} of {} GPUs blocked, mostly by {}", per_gpu.size(), gpus_considered,
                     ToString(static_cast<Gate>(top)));
}

std::string GateVerdict::Describe() const {
  switch (gate) {
    case Gate::kPass:
      return "fits";
    case Gate::kUnhealthy:
      return "GPU is unhealthy";
    case Gate::kMigBusy:
      return "MIG instance already runs a job";
    case Gate::kExclusiveHeld:
      return "runs a job that holds the GPU exclusively";
    case Gate::kNotIdle:
      return fmt::format("needs an idle GPU, {} job(s) running", static_cast<int>(value));
    case Gate::kModeMismatch:
      return "GPU sharing mode does not match the job's preference";
    case Gate::kOtherUser:
      return "MPS is serving another user's jobs on this GPU";
    case Gate::kLaunchGrace:
      return fmt::format("launch grace: a job started here moments ago, {:.0f}s left", value);
    case Gate::kMemory:
      return fmt::format("memory: {:.1f} GiB free for placement, needs {:.1f} GiB (incl. margin)",
                         value / (1 << 30), limit / (1 << 30));
    case Gate::kUtilization:
      return fmt::format("utilization: SMACT {:.2f} over threshold {:.2f}", value, limit);
    case Gate::kNode:
      return fmt::format("its server has only {:.0f} usable GPU(s), job needs {:.0f}", value,
                         limit);
    case Gate::kEarmarked:
      return "kept free for the job at the head of the queue";
  }
  return "?";
}

}  // namespace colo

#include "daemon/attempt_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace colo {
namespace {

bool StartsWithAny(const std::string& text, std::initializer_list<std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](std::string_view p) { return text.compare(0, p.size(), p) == 0; });
}

}  // namespace

std::string VisibleDevices(const Attempt& attempt) {
  std::string visible;
  for (const std::string& uuid : attempt.gpu_uuids) visible += (visible.empty() ? "" : ",") + uuid;
  return visible;
}

AttemptEnv MakeAttemptEnv(const Job& job, const Attempt& attempt, const GpuInfo& largest,
                          std::vector<std::string> mps, const std::vector<std::string>& own_env) {
  AttemptEnv env;
  env.colo = {"CUDA_VISIBLE_DEVICES=" + VisibleDevices(attempt),
              fmt::format("COLO_JOB_ID={}", job.id()),
              fmt::format("COLO_ATTEMPT={}", attempt.number),
              fmt::format("COLO_RESTART_COUNT={}", Restarts(job))};
  if (job.array) {
    env.colo.push_back(fmt::format("COLO_ARRAY_JOB_ID={}", job.array->job));
    env.colo.push_back(fmt::format("COLO_ARRAY_TASK_ID={}", job.array->task));
  }
  if (attempt.memory_limit > Bytes(0))
    env.colo.push_back(fmt::format("COLO_GPU_MEMORY={}", attempt.memory_limit.count()));
  env.colo.insert(env.colo.end(), std::make_move_iterator(mps.begin()),
                  std::make_move_iterator(mps.end()));
  FrameworkPlan plan;
  plan.sharing = attempt.mode != SharingMode::kExclusive;
  // The memory it was placed with: its MPS limit, or its plan when sharing plainly.
  plan.planned = attempt.memory_limit;
  plan.capacity = largest.capacity;
  plan.cuda_context = largest.cuda_context;
  // No estimate is made for expandable segments today (colo estimate replays the allocator
  // without them), so PyTorch keeps its default, the allocator the plan was made for.
  plan.expandable_segments = false;
  env.frameworks = DeriveFrameworkEnv(plan, own_env);
  return env;
}

std::vector<std::string> ProcessEnvironment(const Job& job, const AttemptEnv& env) {
  std::vector<std::string> out;
  for (const std::string& e : job.env) {
    // colo decides which GPUs and which MPS server the job talks to.
    if (StartsWithAny(e, {"CUDA_VISIBLE_DEVICES=", "CUDA_MPS_",
                          "COLO_JOB_ID=", "COLO_ATTEMPT=", "COLO_RESTART_COUNT=",
                          "COLO_GPU_MEMORY=", "COLO_ARRAY_JOB_ID=", "COLO_ARRAY_TASK_ID="}))
      continue;
    out.push_back(e);
  }
  out.insert(out.end(), env.colo.begin(), env.colo.end());
  out.insert(out.end(), env.frameworks.set.begin(), env.frameworks.set.end());
  return out;
}

}  // namespace colo

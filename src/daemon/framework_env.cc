#include "daemon/framework_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace colo {
namespace {

bool Sets(const std::vector<std::string>& env, std::string_view name) {
  return std::any_of(env.begin(), env.end(), [&](const std::string& e) {
    return e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=';
  });
}

// XLA_PYTHON_CLIENT_MEM_FRACTION for a plan: the pool JAX preallocates is a fraction of the
// GPU's whole memory, and its CUDA context comes on top of it, so the pool is the plan less the
// context (at least half the plan, should the plan be smaller than two contexts). Rounded down
// to a thousandth, so that the pool never exceeds the plan; at least one thousandth.
std::string MemFraction(const FrameworkPlan& plan) {
  const Bytes pool = std::max(plan.planned - plan.cuda_context, plan.planned.Scaled(0.5));
  const double fraction =
      static_cast<double>(pool.count()) / static_cast<double>(plan.capacity.count());
  const double thousandths = std::clamp(std::floor(fraction * 1000), 1.0, 1000.0);
  return fmt::format("{:.3f}", thousandths / 1000);
}

}  // namespace

FrameworkEnv DeriveFrameworkEnv(const FrameworkPlan& plan,
                                const std::vector<std::string>& job_env) {
  FrameworkEnv out;
  if (!plan.sharing) return out;
  std::vector<std::pair<std::string, std::string>> wanted;
  // JAX takes one of its two variables: the fraction when the plan is known (it preallocates
  // exactly that, so its use shows from the first sample and cannot outgrow the plan unseen:
  // it fails in its own process, which colod recovers with a larger need), else no
  // preallocation. A job that sets either one has chosen for itself.
  const bool jax_chosen = Sets(job_env, "XLA_PYTHON_CLIENT_MEM_FRACTION") ||
                          Sets(job_env, "XLA_PYTHON_CLIENT_PREALLOCATE");
  if (plan.planned > Bytes(0) && plan.capacity > Bytes(0)) {
    wanted.emplace_back("XLA_PYTHON_CLIENT_MEM_FRACTION", MemFraction(plan));
  } else {
    wanted.emplace_back("XLA_PYTHON_CLIENT_PREALLOCATE", "false");
  }
  wanted.emplace_back("TF_FORCE_GPU_ALLOW_GROWTH", "true");
  if (plan.expandable_segments)
    wanted.emplace_back("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True");
  for (const auto& [name, value] : wanted) {
    const bool jax = name.starts_with("XLA_PYTHON_CLIENT_");
    if (jax ? jax_chosen : Sets(job_env, name)) {
      if (jax) {
        for (std::string_view n :
             {"XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_PREALLOCATE"})
          if (Sets(job_env, n)) out.kept.emplace_back(n);
      } else {
        out.kept.push_back(name);
      }
      continue;
    }
    out.set.push_back(name + "=" + value);
  }
  return out;
}

}  // namespace colo

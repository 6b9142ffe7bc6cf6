#include "sim/shard_policy.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/strings.h"

namespace colo {

ShardPolicy::ShardPolicy(int shards_per_gpu)
    : shards_(shards_per_gpu), name_(fmt::format("shards:n={}", shards_per_gpu)) {}

int ShardPolicy::FreeShards(const GpuView& gpu) const {
  if (!gpu.healthy || gpu.holds_exclusive) return 0;
  return std::max(0, shards_ - gpu.job_count);
}

PlacementDecision ShardPolicy::Place(const ClusterView& view,
                                     const PlacementRequest& request) const {
  if (request.gpus < 1) return Infeasible{"a job needs at least one GPU"};
  int nodes = 0;
  for (const GpuView& g : view.gpus) nodes = std::max(nodes, g.node + 1);
  thread_local std::vector<const GpuView*> passing;
  passing.clear();
  Wait wait;
  for (const GpuView& g : view.gpus) {
    if (FreeShards(g) > 0) {
      passing.push_back(&g);
    } else {
      wait.per_gpu.push_back(GateVerdict{g.index, g.healthy ? Gate::kNotIdle : Gate::kUnhealthy,
                                         static_cast<double>(g.job_count),
                                         static_cast<double>(shards_)});
    }
  }
  std::sort(passing.begin(), passing.end(), [&](const GpuView* a, const GpuView* b) {
    const int fa = FreeShards(*a), fb = FreeShards(*b);
    return fa != fb ? fa > fb : a->index < b->index;
  });
  std::vector<std::vector<GpuIndex>> per_node(static_cast<size_t>(nodes));
  for (const GpuView* g : passing) {
    auto& chosen = per_node[static_cast<size_t>(g->node)];
    chosen.push_back(g->index);
    if (static_cast<int>(chosen.size()) == request.gpus) {
      Placed placed;
      placed.gpus = chosen;
      placed.mode = SharingMode::kPlain;
      placed.thread_percent = 100;
      return placed;
    }
  }
  int largest = 0;
  for (const auto& n : per_node) largest = std::max(largest, static_cast<int>(n.size()));
  std::vector<int> gpus_per_node(static_cast<size_t>(nodes), 0);
  for (const GpuView& g : view.gpus) gpus_per_node[static_cast<size_t>(g.node)]++;
  if (std::none_of(gpus_per_node.begin(), gpus_per_node.end(),
                   [&](int n) { return n >= request.gpus; })) {
    return Infeasible{
        fmt::format("needs {} GPUs on one server; no server has that many", request.gpus)};
  }
  for (const GpuView* g : passing) {
    wait.per_gpu.push_back(GateVerdict{g->index, Gate::kNode, static_cast<double>(largest),
                                       static_cast<double>(request.gpus)});
  }
  std::sort(wait.per_gpu.begin(), wait.per_gpu.end(),
            [](const GateVerdict& a, const GateVerdict& b) { return a.gpu < b.gpu; });
  wait.gpus_considered = static_cast<int>(view.gpus.size());
  return wait;
}

}  // namespace colo

// The "Slurm with shards" baseline: a GPU is cut into a fixed number of shards (Slurm's `shard`
// GRES) and every job takes one shard on each GPU it uses. Nothing is known of memory: jobs share a
// GPU by count alone, time-sliced (shards start no MPS server), and co-located jobs whose peaks add
// up to more than the GPU crash out of memory.
#pragma once

#include <string>

#include "common/status.h"
#include "core/placement.h"

namespace colo {

class ShardPolicy final : public PlacementPolicy {
 public:
  explicit ShardPolicy(int shards_per_gpu);
  std::string_view name() const override { return name_; }
  // The GPUs with the most free shards (ties: lowest index), all on one server; a GPU holding an
  // exclusive job or unhealthy has none.
  PlacementDecision Place(const ClusterView& view, const PlacementRequest& request) const override;
  int shards_per_gpu() const { return shards_; }
  // Shards of this GPU no job holds.
  int FreeShards(const GpuView& gpu) const;

 private:
  int shards_;
  std::string name_;
};

}  // namespace colo

// What Slurm booked for a job on this node, and what colod makes of it: the tenant it runs (on
// exactly the GPUs Slurm gave the job, with the memory and sharing the booking stands for) or why
// the job cannot run here; and, when a run goes back to Slurm's queue, what its next run books.
// Decisions only: reading Slurm's records is slurm_commands.h's, talking to colod's queue the
// bridge's (slurm_bridge.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.h"
#include "common/status.h"
#include "common/units.h"
#include "daemon/slurm_gpus.h"
#include "daemon/tenant_runner.h"

namespace colo {

// What Slurm booked for a job on each of its nodes, from its per-node GRES request.
struct SlurmBooking {
  int whole_gpus = 0;  // gres:gpu:N
  int64_t shards = 0;  // gres:shard:K, all of one GPU
  // An mps:P request job_submit.lua booked as shards notes P in the job's Comment (colo:mps=P).
  int mps_percent = 0;
};
SlurmBooking ParseBooking(std::string_view tres_per_node, std::string_view comment);
// The indexes of a gres_detail entry: "gpu:2(IDX:0-1)" -> {0, 1}, "shard:7(IDX:3)" -> {3}.
std::vector<int> ParseGresIndexes(std::string_view detail);
// `tres_per_node` with its shard count made `shards` (unchanged when it has none).
std::string WithShards(const std::string& tres_per_node, int64_t shards);

// What Slurm's record of a job says it booked on this node.
struct RecordedBooking {
  std::vector<int> gpus;      // the GPUs it gave the job here, by their index in gres.conf
  std::string tres_per_node;  // e.g. gres:gpu:1 or gres:shard:12
  std::string comment;        // the job's Comment (an mps percentage job_submit.lua noted)
};

// The tenant a run's first attach places, or why it cannot run here. The GPUs are the ones
// slurmd's prolog named (`prolog`: slurmd's own environment, which the job's user cannot set),
// else those of Slurm's `record`; never the step's. A colo job (the prolog carries its options)
// plans with what it asked for at submission; any other job with what Slurm booked (whole GPUs,
// shards, an mps percentage), within which a colo step whose prolog colod missed may ask for
// less. `gpus` maps Slurm's GPU indexes to colod's. The tenant's owner is the caller's to set.
Result<TenantRequest> BookTenant(const api::SlurmAttachRequest& step,
                                 const api::SlurmRunRequest* prolog, const RecordedBooking* record,
                                 const SlurmGpuMap& gpus, Bytes shard_size);

// The shards a need of `need` per GPU books: whole shards, rounded up.
int64_t ShardsFor(Bytes need, Bytes shard_size);

// What a requeued job's record becomes for its next run (`scontrol update` fields): kept off
// `avoid_node` as well as the nodes its user excluded, unless its user named its nodes (excluding
// one of them would leave it pending for ever); its shards made `shards` where it books shards
// (whole GPUs stay whole). Empty: nothing to change.
std::vector<std::string> RerunChanges(std::string_view tres_per_node,
                                      std::string_view excluded_nodes,
                                      std::string_view required_nodes, int64_t shards,
                                      const std::string& avoid_node);

}  // namespace colo

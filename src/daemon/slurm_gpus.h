// Slurm's GPUs of this node, as colod knows them. Slurm books GPU memory per GPU, as `shard`s
// bound to each GPU's device file in gres.conf (docs/slurm-design.md), and tells a job's prolog
// which GPUs it got by their index among the node's gres.conf GPUs (SLURM_JOB_GPUS). colod runs
// the job on those very GPUs: this is how an index becomes one of colod's GPUs, and how colod
// checks that what gres.conf books of a GPU fits in it.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "core/model.h"
#include "gpu/gpu.h"

namespace colo {

struct DaemonConfig;

// One GPU of this node as slurmd has it (`slurmd -G`): its index, device file and shards.
struct SlurmGpu {
  int index = 0;
  std::string file;  // e.g. /dev/nvidia3
  int64_t shards = 0;
};

// Parses what `slurmd -G` prints ("slurmd: Gres Name=gpu Type=(null) Count=1 Index=0 ID=...
// File=/dev/nvidia0 ..." and the same for shard), by index. Lines of other GRES are skipped.
std::map<int, SlurmGpu> ParseSlurmdGres(std::string_view text);

// The N of a device file /dev/nvidiaN (its minor number by the driver's naming); -1 otherwise.
int NvidiaMinor(std::string_view file);

// Which of colod's GPUs (by the scheduler's index, the order of `devices`) each Slurm GPU index
// is, and what colod found wrong on the way.
struct SlurmGpuMap {
  std::map<int, GpuIndex> by_slurm_index;
  std::vector<std::string> problems;  // one line each; empty: every GPU matches
  // Of those, the GPUs gres.conf books past their memory: Slurm would send jobs there that
  // cannot all fit (the node is drained until that is mended).
  std::vector<std::string> overbooked;
};

// From slurmd's GPUs: each file's /dev/nvidiaN names the GPU whose minor number is N, and its
// shards must fit in that GPU, less `margin`. Without slurmd's list (`gres` empty), Slurm's index
// i is the GPU with the i-th lowest minor number, as gres.conf lists /dev/nvidia[0-N] in order.
SlurmGpuMap MapSlurmGpus(const std::map<int, SlurmGpu>& gres,
                         const std::vector<DeviceInfo>& devices, Bytes shard_size, Bytes margin);

// gres.conf lines booking `devices` for Slurm (`colod --slurm-gres`): per GPU its gpu line, with
// Cores= every one of the node's `cores` (Slurm 22.05 can give a whole-GPU job a GPU with shards
// in use when its gpu lines have none), and its shards (its memory less the config's margin, in
// shards of slurm.shard_size); the slurm.conf node line's Gres= as a comment.
Result<std::string> GresConfLines(const std::vector<DeviceInfo>& devices,
                                  const DaemonConfig& config, int cores);

// The shards a GPU of `capacity` books: its memory less `margin`, in whole shards.
int64_t ShardsOf(Bytes capacity, Bytes shard_size, Bytes margin);

}  // namespace colo

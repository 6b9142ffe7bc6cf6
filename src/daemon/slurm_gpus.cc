#include "daemon/slurm_gpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "common/strings.h"
#include "daemon/config.h"

namespace colo {

std::map<int, SlurmGpu> ParseSlurmdGres(std::string_view text) {
  std::map<int, SlurmGpu> gpus;
  for (const std::string& line : Split(std::string(text), '\n')) {
    std::map<std::string, std::string> fields;
    for (const std::string& word : Split(line, ' ')) {
      const size_t eq = word.find('=');
      if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    const auto name = fields.find("Name");
    if (name == fields.end() || (name->second != "gpu" && name->second != "shard")) continue;
    auto index = ParseInt(fields["Index"]);
    auto count = ParseInt(fields["Count"]);
    if (!index.ok() || *index < 0 || *index > 1023 || !count.ok() || *count < 0) continue;
    SlurmGpu& gpu = gpus[static_cast<int>(*index)];
    gpu.index = static_cast<int>(*index);
    if (gpu.file.empty()) gpu.file = fields["File"];
    if (name->second == "shard") gpu.shards = *count;
  }
  return gpus;
}

int NvidiaMinor(std::string_view file) {
  const size_t slash = file.rfind('/');
  std::string_view base = slash == std::string_view::npos ? file : file.substr(slash + 1);
  constexpr std::string_view kPrefix = "nvidia";
  if (!base.starts_with(kPrefix) || base.size() == kPrefix.size() || base.size() > 10) return -1;
  int minor = 0;
  for (char c : base.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return -1;
    minor = minor * 10 + (c - '0');
  }
  return minor;
}

int64_t ShardsOf(Bytes capacity, Bytes shard_size, Bytes margin) {
  if (shard_size <= Bytes(0) || capacity <= margin) return 0;
  return (capacity - margin).count() / shard_size.count();
}

SlurmGpuMap MapSlurmGpus(const std::map<int, SlurmGpu>& gres,
                         const std::vector<DeviceInfo>& devices, Bytes shard_size, Bytes margin) {
  SlurmGpuMap map;
  std::map<int, GpuIndex> by_minor;
  for (size_t i = 0; i < devices.size(); ++i) {
    // A MIG instance is not a GPU Slurm's gpu lines name.
    if (devices[i].mig_index < 0 && devices[i].minor >= 0)
      by_minor[devices[i].minor] = static_cast<GpuIndex>(i);
  }
  if (gres.empty()) {
    int slurm_index = 0;
    for (const auto& [minor, gpu] : by_minor) map.by_slurm_index[slurm_index++] = gpu;
    if (by_minor.size() != devices.size())
      map.problems.push_back(
          "some GPUs have no minor number (MIG instances?): Slurm's GPU indexes name only the "
          "others");
    return map;
  }
  std::set<GpuIndex> taken;
  for (const auto& [index, gpu] : gres) {
    const int minor = NvidiaMinor(gpu.file);
    const auto found = by_minor.find(minor);
    if (found == by_minor.end()) {
      map.problems.push_back(fmt::format(
          "gres.conf's GPU {} ({}) is none of this node's GPUs (their device files are /dev/"
          "nvidiaN, N their minor number)",
          index, gpu.file.empty() ? "no File=" : gpu.file));
      continue;
    }
    if (!taken.insert(found->second).second) {
      map.problems.push_back(fmt::format("gres.conf names {} twice", gpu.file));
      continue;
    }
    map.by_slurm_index[index] = found->second;
    const DeviceInfo& device = devices[static_cast<size_t>(found->second)];
    const int64_t fits = ShardsOf(device.memory_total, shard_size, margin);
    if (gpu.shards > fits) {
      map.overbooked.push_back(fmt::format(
          "gres.conf books {} shards of {} on {}, which takes {} ({} less the margin of {})",
          gpu.shards, FormatBytes(shard_size), gpu.file, fits, FormatBytes(device.memory_total),
          FormatBytes(margin)));
      map.problems.push_back(map.overbooked.back());
    }
  }
  return map;
}

Result<std::string> GresConfLines(const std::vector<DeviceInfo>& devices,
                                  const DaemonConfig& config, int cores) {
  auto margin = ParseBytes(config.memory_margin);
  if (!margin.ok()) return InvalidArgument("gates.memory_margin: " + margin.status().message());
  std::string out = fmt::format(
      "# gres.conf lines for this node's GPUs (colod --slurm-gres): each GPU's memory less the "
      "margin of {}, in shards of {} (job_submit.lua's SHARD_MIB = {}).\n",
      FormatBytes(*margin), FormatBytes(config.slurm_shard_size),
      config.slurm_shard_size.count() >> 20);
  int gpus = 0;
  int64_t shards = 0;
  for (const DeviceInfo& d : devices) {
    if (d.mig_index >= 0) continue;
    if (d.minor < 0)
      return FailedPrecondition(fmt::format("GPU {} ({}) has no minor number", d.index, d.uuid));
    const std::string file = fmt::format("/dev/nvidia{}", d.minor);
    const int64_t count = ShardsOf(d.memory_total, config.slurm_shard_size, *margin);
    out += fmt::format("Name=gpu File={} Cores=0-{}\n", file, std::max(cores, 1) - 1);
    out += fmt::format("Name=shard Count={} File={}\n", count, file);
    ++gpus;
    shards += count;
  }
  out += fmt::format("# slurm.conf, this node's line: NodeName=... Gres=gpu:{},shard:{}\n", gpus,
                     shards);
  return out;
}

}  // namespace colo

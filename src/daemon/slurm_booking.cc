#include "daemon/slurm_booking.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/strings.h"

namespace colo {

std::string WithShards(const std::string& tres, int64_t shards) {
  std::string out;
  for (std::string item : Split(tres, ',')) {
    for (std::string_view prefix : {"gres:shard:", "gres/shard:", "shard:"}) {
      if (item.rfind(prefix, 0) == 0) item = "gres:shard:" + std::to_string(shards);
    }
    if (!item.empty()) out += (out.empty() ? "" : ",") + item;
  }
  return out;
}

std::vector<int> ParseGresIndexes(std::string_view detail) {
  std::vector<int> out;
  const size_t open = detail.find("(IDX:");
  if (open == std::string_view::npos) return out;
  std::string_view list = detail.substr(open + 5);
  list = list.substr(0, list.find(')'));
  for (const std::string& item : Split(std::string(list), ',')) {
    const size_t dash = item.find('-');
    auto first = ParseInt(item.substr(0, dash));
    auto last = dash == std::string::npos ? first : ParseInt(item.substr(dash + 1));
    if (!first.ok() || !last.ok() || *first < 0 || *last < *first || *last > 1023) return {};
    for (int64_t i = *first; i <= *last && out.size() < 64; ++i) out.push_back(static_cast<int>(i));
  }
  return out;
}

SlurmBooking ParseBooking(std::string_view tres, std::string_view comment) {
  SlurmBooking booking;
  for (const std::string& item : Split(std::string(tres), ',')) {
    const std::vector<std::string> parts = Split(item, ':');
    // gres:NAME:COUNT or gres:NAME:TYPE:COUNT
    if (parts.size() < 3 || (parts[0] != "gres" && parts[0] != "gres/")) continue;
    auto count = ParseInt(parts.back());
    if (!count.ok() || *count <= 0 || *count > (int64_t{1} << 40)) continue;
    if (parts[1] == "gpu") booking.whole_gpus += static_cast<int>(std::min<int64_t>(*count, 64));
    if (parts[1] == "shard") booking.shards += *count;
  }
  constexpr std::string_view kMpsNote = "colo:mps=";
  if (const size_t at = comment.find(kMpsNote); at != std::string_view::npos && booking.shards) {
    int percent = 0;
    for (char c : comment.substr(at + kMpsNote.size())) {
      if (c < '0' || c > '9' || percent > 100) break;
      percent = percent * 10 + (c - '0');
    }
    if (percent >= 1 && percent <= 100) booking.mps_percent = percent;
  }
  return booking;
}

Result<TenantRequest> BookTenant(const api::SlurmAttachRequest& request,
                                 const api::SlurmRunRequest* prolog, const RecordedBooking* record,
                                 const SlurmGpuMap& gpus, Bytes shard_size) {
  const bool colo_job = prolog && prolog->share;
  // Only a colo job's prolog says all it booked; any other job's booking is Slurm's record's.
  if (!colo_job && !record)
    return InvalidArgument("what Slurm booked for the job is not known: its record was not read");
  TenantRequest tenant;
  tenant.slurm_job = request.job;
  tenant.name = request.name;
  tenant.restarts = request.restarts;
  // The GPUs slurmd gave the job here: the prolog's word (slurmd's own environment), else
  // Slurm's record. Never the step's: its environment is its user's.
  const std::vector<int>& slurm_gpus = prolog ? prolog->slurm_gpus : record->gpus;
  if (slurm_gpus.empty()) {
    return InvalidArgument(
        "Slurm booked no GPU of this node for the job (ask with --colo-mem, --gres=gpu:N or "
        "--gres=shard:N; is job_submit.lua installed?)");
  }
  for (int index : slurm_gpus) {
    const auto it = gpus.by_slurm_index.find(index);
    if (it == gpus.by_slurm_index.end())
      return InvalidArgument(fmt::format(
          "Slurm gave the job GPU {} of this node, which colod does not know (see colod's log "
          "for how gres.conf's GPUs match this node's)",
          index));
    tenant.booked_gpus.push_back(it->second);
  }
  tenant.gpus = static_cast<int>(tenant.booked_gpus.size());
  if (colo_job) {
    // A colo job: what it asked for at submission, from which job_submit.lua booked one GPU's
    // shards, or whole GPUs (exclusive, of unknown need, or several).
    if (prolog->gpus != tenant.gpus)
      return InvalidArgument(
          fmt::format("the job asked colo for {} GPU(s) per node but Slurm gave it {} here (is "
                      "job_submit.lua installed?)",
                      prolog->gpus, tenant.gpus));
    tenant.memory = prolog->memory;
    const bool shares =
        tenant.gpus == 1 && prolog->memory && *prolog->share != SharingPreference::kExclusive;
    tenant.share = shares ? *prolog->share : SharingPreference::kExclusive;
    return tenant;
  }
  // Slurm's record says what was booked: a plain shard or mps job, whole GPUs, or a colo job
  // whose prolog colod missed (its step's own numbers then count only within the booking).
  const SlurmBooking booking = ParseBooking(record->tres_per_node, record->comment);
  const bool colo_step = !prolog && (request.memory || request.share != SharingPreference::kAny);
  if (booking.shards > 0) {
    if (tenant.gpus != 1)
      return InvalidArgument(
          fmt::format("Slurm gave the job {} GPUs here for its shards", tenant.gpus));
    const Bytes booked(booking.shards * shard_size.count());
    tenant.memory = booked;
    if (colo_step && request.memory) tenant.memory = std::min(*request.memory, booked);
    tenant.share = SharingPreference::kPlain;  // as Slurm's shards share a GPU: time-sliced
    if (colo_step && request.share != SharingPreference::kExclusive) tenant.share = request.share;
    if (booking.mps_percent > 0) {
      tenant.share = SharingPreference::kMps;
      tenant.threads = booking.mps_percent;
    }
    return tenant;
  }
  if (booking.whole_gpus > 0) {
    if (colo_step && request.memory) tenant.memory = request.memory;
    tenant.share = SharingPreference::kExclusive;
    return tenant;
  }
  return InvalidArgument(
      "Slurm booked no GPU for the job (ask with --colo-mem, --gres=gpu:N or --gres=shard:N)");
}

int64_t ShardsFor(Bytes need, Bytes shard_size) {
  if (need <= Bytes(0) || shard_size <= Bytes(0)) return 0;
  return (need.count() + shard_size.count() - 1) / shard_size.count();
}

std::vector<std::string> RerunChanges(std::string_view tres_per_node,
                                      std::string_view excluded_nodes,
                                      std::string_view required_nodes, int64_t shards,
                                      const std::string& avoid_node) {
  std::vector<std::string> changes;
  if (!avoid_node.empty() && required_nodes.empty()) {
    std::vector<std::string> excluded = Split(std::string(excluded_nodes), ',');
    std::erase(excluded, std::string());
    if (std::find(excluded.begin(), excluded.end(), avoid_node) == excluded.end())
      excluded.push_back(avoid_node);
    changes.push_back("ExcNodeList=" + Join(excluded, ","));
  }
  if (shards > 0 && ParseBooking(tres_per_node, "").shards > 0)
    changes.push_back("TresPerNode=" + WithShards(std::string(tres_per_node), shards));
  return changes;
}

}  // namespace colo

#include "policies/registry.h"

#include <fmt/format.h>

#include "common/strings.h"

namespace colo {
namespace {

struct Entry {
  PolicyInfo info;
  Chooser chooser;
  bool idle_only;
};

const std::vector<Entry>& Entries() {
  static const std::vector<Entry> entries = {
      {{"exclusive", {}, "idle GPUs only: the conventional whole-GPU baseline"},
       Chooser::kFirstFit,
       true},
      {{"round-robin", {"rr"}, "cycle over GPUs, starting after the previous placement"},
       Chooser::kRoundRobin,
       false},
      {{"first-fit", {"ff"}, "the lowest-numbered GPU that passes the gates"},
       Chooser::kFirstFit,
       false},
      {{"best-fit", {"bf"}, "the GPU with the least memory left (tight packing)"},
       Chooser::kBestFit,
       false},
      {{"worst-fit", {"magm", "wf"}, "the GPU with the most available memory (MAGM)"},
       Chooser::kWorstFit,
       false},
      {{"least-utilized", {"lug"}, "the GPU with the lowest SM activity (LUG)"},
       Chooser::kLeastUtilized,
       false},
      {{"consolidate", {"mug"}, "busiest GPUs first, keep idle GPUs idle (MUG)"},
       Chooser::kConsolidate,
       false},
  };
  return entries;
}

Result<bool> ParseSwitch(const std::string& key, const std::string& value) {
  if (value == "on" || value == "true" || value == "1" || value == "yes") return true;
  if (value == "off" || value == "false" || value == "0" || value == "no") return false;
  return InvalidArgument(fmt::format("setting '{}' takes on/off, not '{}'", key, value));
}

Status ApplySetting(const std::string& key, const std::string& value, GateConfig& gates) {
  if (key == "gates") {
    if (value == "none") {
      gates.memory = gates.utilization = gates.launch_grace = false;
      return Status::Ok();
    }
    if (value == "all") {
      gates.memory = gates.utilization = gates.launch_grace = true;
      return Status::Ok();
    }
    return InvalidArgument(fmt::format("gates takes none or all, not '{}'", value));
  }
  if (key == "margin") {
    auto bytes = ParseBytes(value);
    if (!bytes.ok()) return bytes.status();
    gates.memory = true;
    gates.memory_margin = *bytes;
    return Status::Ok();
  }
  if (key == "smact") {
    auto number = ParseDouble(value);
    if (!number.ok() || *number < 0 || *number > 1) {
      return InvalidArgument(fmt::format("smact takes a fraction in [0, 1], not '{}'", value));
    }
    gates.utilization = true;
    gates.smact_max = *number;
    return Status::Ok();
  }
  if (key == "stat") {
    if (value == "last")
      gates.stat = UtilizationStat::kLast;
    else if (value == "mean")
      gates.stat = UtilizationStat::kMean;
    else if (value == "risk")
      gates.stat = UtilizationStat::kRisk;
    else
      return InvalidArgument(fmt::format("stat takes last, mean or risk, not '{}'", value));
    return Status::Ok();
  }
  auto flag = ParseSwitch(key, value);
  if (!flag.ok()) return flag.status();
  if (key == "memory")
    gates.memory = *flag;
  else if (key == "utilization")
    gates.utilization = *flag;
  else if (key == "grace")
    gates.launch_grace = *flag;
  else if (key == "compound")
    gates.compound = *flag;
  else if (key == "same-user")
    gates.same_user_mps = *flag;
  else if (key == "exclusive-first")
    gates.exclusive_first = *flag;
  else {
    return InvalidArgument(fmt::format(
        "unknown policy setting '{}' (use gates, margin, smact, stat, memory, utilization, grace, "
        "compound, same-user, exclusive-first)",
        key));
  }
  return Status::Ok();
}

}  // namespace

const std::vector<PolicyInfo>& KnownPolicies() {
  static const std::vector<PolicyInfo> infos = [] {
    std::vector<PolicyInfo> out;
    for (const auto& e : Entries()) out.push_back(e.info);
    return out;
  }();
  return infos;
}

Result<std::unique_ptr<GatedPolicy>> MakePolicy(const std::string& spec,
                                                const GateConfig& defaults) {
  const auto colon = spec.find(':');
  const std::string name(Trim(spec.substr(0, colon)));
  const Entry* found = nullptr;
  for (const auto& e : Entries()) {
    if (e.info.name == name) found = &e;
    for (const auto& alias : e.info.aliases) {
      if (alias == name) found = &e;
    }
  }
  if (!found) {
    std::string names;
    for (const auto& e : Entries()) names += (names.empty() ? "" : ", ") + e.info.name;
    return InvalidArgument(fmt::format("unknown policy '{}' (known: {})", name, names));
  }
  GateConfig gates = defaults;
  gates.idle_only = found->idle_only;
  if (colon != std::string::npos) {
    for (const std::string& setting : Split(spec.substr(colon + 1), ',')) {
      const auto eq = setting.find('=');
      if (eq == std::string::npos) {
        return InvalidArgument(
            fmt::format("policy setting '{}' in '{}' is not key=value", setting, spec));
      }
      COLO_RETURN_IF_ERROR(ApplySetting(std::string(Trim(setting.substr(0, eq))),
                                        std::string(Trim(setting.substr(eq + 1))), gates));
    }
  }
  return std::make_unique<GatedPolicy>(spec, found->chooser, gates);
}

}  // namespace colo

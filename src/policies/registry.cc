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

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void ApplyCarmaPreset(GateConfig& gates) {
  gates.memory = gates.utilization = gates.launch_grace = true;
  gates.grace_from_process = true;
  gates.quantiles = QuantileMethod::kLinear;
  gates.compound = true;
  gates.stat = UtilizationStat::kRisk;
  gates.smact_max = 0.80;
  gates.smocc_max = 0.45;
  gates.drama_max = 0.40;
  gates.exclusive_first = true;
  gates.free_reserve = MiB(512);
  gates.memory_margin = GiB(2);
}

Status ApplySetting(const std::string& key, const std::string& value, GateConfig& gates) {
  if (key == "preset") {
    if (Lower(value) != "carma")
      return InvalidArgument(fmt::format("preset takes carma, not '{}'", value));
    ApplyCarmaPreset(gates);
    return Status::Ok();
  }
  if (key == "reserve") {
    auto bytes = ParseBytes(value);
    if (!bytes.ok()) return bytes.status();
    gates.free_reserve = *bytes;
    return Status::Ok();
  }
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
  if (key == "quantiles") {
    if (value == "linear")
      gates.quantiles = QuantileMethod::kLinear;
    else if (value == "nearest-rank")
      gates.quantiles = QuantileMethod::kNearestRank;
    else
      return InvalidArgument(
          fmt::format("quantiles takes linear or nearest-rank, not '{}'", value));
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
  else if (key == "grace-from-process")
    gates.grace_from_process = *flag;
  else if (key == "compound")
    gates.compound = *flag;
  else if (key == "same-user")
    gates.same_user_mps = *flag;
  else if (key == "exclusive-first")
    gates.exclusive_first = *flag;
  else {
    return InvalidArgument(fmt::format(
        "unknown policy setting '{}' (use preset, gates, margin, reserve, smact, stat, quantiles, "
        "memory, "
        "utilization, grace, grace-from-process, compound, same-user, exclusive-first)",
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

std::optional<CarmaPolicy> FindCarmaPolicy(std::string_view name) {
  std::string key = Lower(Trim(name));
  // The estimator, as a suffix ("est-magm-horus", "magm+horus") or prefix ("horus-magm").
  std::string estimator;
  for (const char* est : {"horus", "faketensor", "gpumemnet", "oracle", "none"}) {
    for (const char* sep : {"-", "+", "_"}) {
      const std::string suffix = std::string(sep) + est, prefix = std::string(est) + sep;
      if (key.size() > suffix.size() && key.ends_with(suffix)) {
        estimator = est;
        key.resize(key.size() - suffix.size());
      } else if (key.size() > prefix.size() && key.starts_with(prefix) &&
                 std::string_view(est) != "oracle") {
        estimator = est;
        key = key.substr(prefix.size());
      }
      if (!estimator.empty()) break;
    }
    if (!estimator.empty()) break;
  }
  if (key.starts_with("est-")) key = key.substr(4);
  // CARMA's placement orders (its policy names) and the thesis' short labels.
  static const std::pair<const char*, const char*> kOrders[] = {
      {"ff", "first-fit"},       {"bf", "best-fit"},    {"magm", "worst-fit"}, {"wf", "worst-fit"},
      {"lug", "least-utilized"}, {"rr", "round-robin"}, {"mug", "consolidate"}};
  auto order = [&](std::string_view label) -> const char* {
    for (const auto& [short_name, policy] : kOrders)
      if (label == short_name) return policy;
    return nullptr;
  };
  const std::string oracle_gates = ":preset=carma";
  const char* policy = nullptr;
  std::string settings, line;
  if (key.starts_with("oracle-") && (policy = order(key.substr(7)))) {
    settings = oracle_gates;
    line = "oracle";
  } else if (key.size() >= 3 && key[0] == 'o' && (policy = order(key.substr(1))) && key != "omug" &&
             key != "orr") {
    settings = oracle_gates;  // the thesis' OFF, OBF, OWF, OLUG, OMAGM
    line = "oracle";
  } else if (key == "or-rr") {
    policy = "round-robin";
    settings = ":preset=carma,memory=off,utilization=off";
    line = "none";
  } else if (key.starts_with("or-") && (policy = order(key.substr(3)))) {
    settings = ":preset=carma,margin=5GiB";
    line = "none";
  } else if (!estimator.empty() && (policy = order(key))) {
    settings = oracle_gates;  // EST-MAGM-Horus, MAGM+Horus
  } else if (Lower(Trim(name)).starts_with("est-") && (policy = order(key))) {
    settings = oracle_gates;
    line = "oracle";  // CARMA's `estimator: None` reads line 8
  } else {
    return std::nullopt;
  }
  if (!estimator.empty()) {
    if (line == "none" && estimator != "none") return std::nullopt;  // OR- plans without memory
    line = estimator;
  }
  return CarmaPolicy{std::string(policy) + settings, line == "none" ? "none" : "rad:" + line};
}

bool IsPolicyName(std::string_view name) {
  const std::string key = Lower(Trim(name));
  for (const auto& e : Entries()) {
    if (e.info.name == key) return true;
    for (const auto& alias : e.info.aliases)
      if (alias == key) return true;
  }
  return FindCarmaPolicy(name).has_value();
}

Result<std::unique_ptr<GatedPolicy>> MakePolicy(const std::string& spec_text,
                                                const GateConfig& defaults) {
  std::string spec = spec_text;
  {
    const auto colon = spec.find(':');
    if (auto carma = FindCarmaPolicy(spec.substr(0, colon))) {
      spec = carma->spec + (colon == std::string::npos ? "" : "," + spec.substr(colon + 1));
    }
  }
  const auto colon = spec.find(':');
  const std::string name = Lower(Trim(spec.substr(0, colon)));
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
    return InvalidArgument(fmt::format(
        "unknown policy '{}' (known: {}; and CARMA's oracle-FF|BF|MAGM|LUG|RR, OR-RR|MAGM|LUG, "
        "EST-MAGM|LUG[-Horus|-FakeTensor|-GPUMemNet], OFF, OBF, OWF, OLUG)",
        Trim(spec.substr(0, colon)), names));
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
  return std::make_unique<GatedPolicy>(spec_text, found->chooser, gates);
}

}  // namespace colo

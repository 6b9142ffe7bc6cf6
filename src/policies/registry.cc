#include "policies/registry.h"

#include <fmt/format.h>

#include "common/check.h"
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

const Entry* FindEntry(const std::string& name) {
  for (const auto& e : Entries()) {
    if (e.info.name == name) return &e;
    for (const auto& alias : e.info.aliases) {
      if (alias == name) return &e;
    }
  }
  return nullptr;
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
  return key == "shards" || FindEntry(key) || FindCarmaPolicy(name).has_value();
}

namespace {

Result<bool> ParseOnOff(const std::string& key, const std::string& value) {
  if (value == "on") return true;
  if (value == "off") return false;
  return InvalidArgument(fmt::format("{} takes on or off, not '{}'", key, value));
}

// The settings a spec may make besides the gates: true when `key` was one of them.
Result<bool> ApplyPlanSetting(const std::string& key, const std::string& value, PolicySpec& spec) {
  if (key == "est") {
    if (value.empty()) return InvalidArgument("est takes an estimator (est=oracle, est=none, ...)");
    spec.estimator = value;
  } else if (key == "share") {
    if (value == "mps")
      spec.sharing = SharingMode::kMps;
    else if (value == "plain" || value == "streams")
      spec.sharing = SharingMode::kPlain;
    else
      return InvalidArgument(fmt::format("share takes mps or plain, not '{}'", value));
  } else if (key == "learn") {
    auto on = ParseOnOff(key, value);
    if (!on.ok()) return on.status();
    spec.learn = *on;
  } else if (key == "recovery") {
    auto mode = ParseRecoveryMode(value);
    if (!mode.ok()) return mode.status();
    spec.recovery = *mode;
  } else {
    return false;
  }
  return true;
}

// The spec's settings after its name, in order; `shards` takes n= where a policy takes gates.
Status ApplySettings(std::string_view settings, const std::string& text, PolicySpec& spec) {
  for (const std::string& raw : Split(std::string(settings), ',')) {
    const std::string setting(Trim(raw));
    if (setting.empty()) continue;
    const auto eq = setting.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument(
          fmt::format("policy setting '{}' in '{}' is not key=value", setting, text));
    }
    const std::string key(Trim(setting.substr(0, eq)));
    const std::string value(Trim(setting.substr(eq + 1)));
    auto plan = ApplyPlanSetting(key, value, spec);
    if (!plan.ok()) {
      return Status(plan.status().code(), setting + ": " + plan.status().message());
    }
    if (*plan) continue;
    if (spec.name == "shards") {
      if (key != "n") {
        return InvalidArgument(
            fmt::format("unknown shards setting '{}' in '{}' (use n=SHARDS_PER_GPU)", key, text));
      }
      auto number = ParseInt(value);
      if (!number.ok() || *number < 1 || *number > 64) {
        return InvalidArgument(
            fmt::format("shards: n takes a whole number in [1, 64], not '{}'", value));
      }
      spec.shards = static_cast<int>(*number);
      continue;
    }
    if (Status applied = ApplySetting(key, value, spec.gates); !applied.ok()) {
      return Status(applied.code(), setting + ": " + applied.message());
    }
  }
  return Status::Ok();
}

std::string_view ToString(UtilizationStat stat) {
  switch (stat) {
    case UtilizationStat::kLast:
      return "last";
    case UtilizationStat::kMean:
      return "mean";
    case UtilizationStat::kRisk:
      break;
  }
  return "risk";
}

}  // namespace

Result<PolicySpec> ParsePolicySpec(std::string_view text, const GateConfig& defaults) {
  PolicySpec spec;
  spec.text = std::string(Trim(text));
  if (spec.text.empty()) return InvalidArgument("empty policy spec");
  const auto colon = spec.text.find(':');
  const std::string written(Trim(spec.text.substr(0, colon)));
  const std::string settings = colon == std::string::npos ? "" : spec.text.substr(colon + 1);
  spec.gates = defaults;
  // A CARMA name carries its policy, its gates, its estimator and CARMA's recovery (alone on an
  // idle GPU); the spec's own settings still override each.
  std::string carma_settings;
  std::string name = Lower(written);
  if (auto carma = FindCarmaPolicy(written)) {
    const auto carma_colon = carma->spec.find(':');
    name = carma->spec.substr(0, carma_colon);
    carma_settings = carma_colon == std::string::npos ? "" : carma->spec.substr(carma_colon + 1);
    spec.estimator = carma->estimator;
    spec.recovery = RecoveryMode::kThesis;
  }
  if (name == "shards") {
    spec.name = name;
    spec.shards = 4;
    spec.gates = GateConfig{};  // it has none: jobs share a GPU by count
  } else {
    const Entry* found = FindEntry(name);
    if (!found) {
      std::string names;
      for (const auto& e : Entries()) names += (names.empty() ? "" : ", ") + e.info.name;
      return InvalidArgument(fmt::format(
          "unknown policy '{}' (known: {}; and CARMA's oracle-FF|BF|MAGM|LUG|RR, OR-RR|MAGM|LUG, "
          "EST-MAGM|LUG[-Horus|-FakeTensor|-GPUMemNet], OFF, OBF, OWF, OLUG; colo sim also has "
          "shards[:n=N])",
          written, names));
    }
    spec.name = found->info.name;
    spec.chooser = found->chooser;
    spec.gates.idle_only = found->idle_only;
  }
  COLO_RETURN_IF_ERROR(ApplySettings(carma_settings, spec.text, spec));
  COLO_RETURN_IF_ERROR(ApplySettings(settings, spec.text, spec));
  return spec;
}

std::unique_ptr<GatedPolicy> MakePolicy(const PolicySpec& spec) {
  COLO_CHECK(spec.shards == 0);  // the shards baseline is colo sim's to build
  return std::make_unique<GatedPolicy>(spec.text, spec.chooser, spec.gates);
}

Result<std::unique_ptr<GatedPolicy>> MakePolicy(const std::string& text,
                                                const GateConfig& defaults) {
  auto spec = ParsePolicySpec(text, defaults);
  if (!spec.ok()) return spec.status();
  if (spec->shards > 0)
    return InvalidArgument(fmt::format("'{}' is colo sim's Slurm-shards baseline", spec->text));
  return MakePolicy(*spec);
}

std::string SpecText(const PolicySpec& spec) {
  std::vector<std::string> settings;
  const auto on = [](bool flag) { return flag ? "on" : "off"; };
  if (spec.shards > 0) {
    settings.push_back(fmt::format("n={}", spec.shards));
  } else {
    const GateConfig& g = spec.gates;
    // Each value as its key reads it back exactly, fractions as written.
    // (margin= and smact= turn their gates on: the switches come after them.)
    settings = {"margin=" + FormatExactBytes(g.memory_margin),
                "reserve=" + FormatExactBytes(g.free_reserve),
                fmt::format("smact={}", g.smact_max),
                fmt::format("memory={}", on(g.memory)),
                fmt::format("utilization={}", on(g.utilization)),
                fmt::format("stat={}", ToString(g.stat)),
                fmt::format("compound={}", on(g.compound)),
                fmt::format("quantiles={}",
                            g.quantiles == QuantileMethod::kLinear ? "linear" : "nearest-rank"),
                fmt::format("grace={}", on(g.launch_grace)),
                fmt::format("grace-from-process={}", on(g.grace_from_process)),
                fmt::format("same-user={}", on(g.same_user_mps)),
                fmt::format("exclusive-first={}", on(g.exclusive_first))};
  }
  if (spec.estimator) settings.push_back("est=" + *spec.estimator);
  if (spec.sharing)
    settings.push_back(
        fmt::format("share={}", *spec.sharing == SharingMode::kPlain ? "plain" : "mps"));
  if (spec.recovery) settings.push_back(fmt::format("recovery={}", ToString(*spec.recovery)));
  if (spec.learn) settings.push_back(fmt::format("learn={}", on(*spec.learn)));
  return spec.name + ":" + Join(settings, ",");
}

std::string Describe(const PolicySpec& spec) {
  std::string out;
  if (spec.shards > 0) {
    out = fmt::format("shards: {} per GPU, no memory known", spec.shards);
  } else {
    const GateConfig& g = spec.gates;
    const std::string_view quantiles =
        g.quantiles == QuantileMethod::kLinear ? "linear" : "nearest-rank";
    std::vector<std::string> gates;
    if (g.idle_only) gates.push_back("idle GPUs only");
    if (g.memory) {
      gates.push_back(fmt::format("memory (margin {}{})", FormatBytes(g.memory_margin),
                                  g.free_reserve > Bytes(0)
                                      ? fmt::format(", {} held back", FormatBytes(g.free_reserve))
                                      : ""));
    }
    if (g.utilization && g.compound) {
      gates.push_back(fmt::format(
          "utilization (smact >= {:.2f} and (smocc >= {:.2f} or drama >= {:.2f}) refused, {} of "
          "the window, {} quantiles)",
          g.smact_max, g.smocc_max, g.drama_max, ToString(g.stat), quantiles));
    } else if (g.utilization) {
      gates.push_back(fmt::format("utilization (smact <= {:.2f}, {} of the window, {} quantiles)",
                                  g.smact_max, ToString(g.stat), quantiles));
    }
    if (g.launch_grace)
      gates.push_back(g.grace_from_process ? "launch grace from the job's process"
                                           : "launch grace");
    if (g.same_user_mps) gates.push_back("one MPS user per GPU");
    if (g.exclusive_first) gates.push_back("exclusive first");
    out = fmt::format("{}: gates {}", spec.name, gates.empty() ? "none" : Join(gates, ", "));
  }
  if (spec.estimator) out += fmt::format("; estimator {}", *spec.estimator);
  if (spec.sharing) out += fmt::format("; sharing {}", ToString(*spec.sharing));
  if (spec.recovery) out += fmt::format("; recovery {}", ToString(*spec.recovery));
  if (spec.learn) out += fmt::format("; learn {}", *spec.learn ? "on" : "off");
  return out;
}

}  // namespace colo

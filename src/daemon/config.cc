#include "daemon/config.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "api/client.h"
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

#include "common/resource_limits.h"
#include "common/strings.h"
#include "policies/registry.h"

namespace colo {
namespace {

// Key checking: a typo is an error, not a silent default. The keys are those EffectiveSettings
// prints (one list of the settings: a key read but not printed is refused, and tests catch it).
const std::map<std::string, std::set<std::string>>& KnownKeys() {
  static const auto* known = [] {
    auto* keys = new std::map<std::string, std::set<std::string>>;
    for (const auto& [name, value] : EffectiveSettings(DaemonConfig{})) {
      const size_t dot = name.find('.');
      (*keys)[name.substr(0, dot)].insert(name.substr(dot + 1));
    }
    return keys;
  }();
  return *known;
}

Result<SharingMode> ParseMode(const std::string& text) {
  if (text == "mps") return SharingMode::kMps;
  if (text == "plain") return SharingMode::kPlain;
  if (text == "exclusive") return SharingMode::kExclusive;
  return InvalidArgument(fmt::format("'{}' is not mps, plain or exclusive", text));
}

}  // namespace

SchedulerConfig DaemonSchedulerDefaults() {
  SchedulerConfig config;
  config.backfill = true;
  // Slurm's bf_max_job_test is 500: under fair share the next jobs are often one user's sweep of
  // jobs alike, and 16 would look no further than them (colo sim, 10,000 jobs of 20 users on
  // 2 x h100x8 at --rate 4: the mean JCT of fair share with backfill falls from 99.5 h to 16.9 h).
  config.backfill_depth = 100;
  config.fairness.order = QueueOrder::kFairShare;
  // Only jobs submitted --requeue are preempted: their users said they can take it.
  config.fairness.preempt = true;
  return config;
}

// The resources a propagate_limits value names, or why it names none.
Result<std::set<int>> ParsePropagatedLimits(const std::string& text) {
  std::set<int> resources;
  if (text == "none") return resources;
  if (text == "all") {
    for (const ResourceKind& kind : kResourceKinds) resources.insert(kind.resource);
    return resources;
  }
  for (const std::string& name : Split(text, ',')) {
    const auto resource = ResourceNamed(Trim(name));
    if (!resource) {
      std::string names;
      for (const ResourceKind& kind : kResourceKinds)
        names += (names.empty() ? "" : ", ") + std::string(kind.name);
      return InvalidArgument(fmt::format(
          "'{}' is not a resource (\"all\", \"none\", or a list of {})", Trim(name), names));
    }
    resources.insert(*resource);
  }
  return resources;
}

std::set<int> DaemonConfig::PropagatedLimits() const {
  auto resources = ParsePropagatedLimits(propagate_limits);  // checked when the config was read
  return resources.ok() ? *resources : std::set<int>{};
}

Result<GateConfig> DaemonConfig::GateDefaults() const {
  GateConfig gates;
  auto margin = ParseBytes(memory_margin);
  if (!margin.ok()) return InvalidArgument("gates.memory_margin: " + margin.status().message());
  gates.memory_margin = *margin;
  if (!(smact_max >= 0 && smact_max <= 1))
    return InvalidArgument(
        fmt::format("gates.smact_max must be a fraction in [0, 1], not {}", smact_max));
  gates.smact_max = smact_max;
  gates.compound = compound;
  gates.exclusive_first = exclusive_first;
  return gates;
}

Result<PolicySpec> DaemonConfig::Policy() const {
  auto gates = GateDefaults();
  if (!gates.ok()) return gates.status();
  auto spec = ParsePolicySpec(policy, *gates);
  if (!spec.ok()) return spec.status();
  if (spec->shards > 0) {
    return InvalidArgument(fmt::format(
        "'{}' is colo sim's baseline of Slurm's shard GRES; colod places with colo's policies",
        spec->text));
  }
  // colod plans with what each job declares, what its client estimated from the user's profile
  // and what earlier runs taught; a spec may only ask for that (CARMA's measured task-file line,
  // which colo submit TASK.rad declares first) or for no memory number at all.
  if (spec->estimator && *spec->estimator != "rad:oracle" && *spec->estimator != "none") {
    return InvalidArgument(fmt::format(
        "'{}' plans with the estimator {}, which only colo sim has{}; colod plans with what each "
        "job declares or its client estimated (use colo sim to judge it, or a spec without est=)",
        spec->text, *spec->estimator,
        spec->estimator->starts_with("rad:") ? " (a line of CARMA's task files)" : ""));
  }
  return spec;
}

Result<DaemonConfig> ParseConfig(const std::string& text, const std::string& origin) {
  toml::parse_result parsed = toml::parse(text, origin);
  if (!parsed) {
    const auto& e = parsed.error();
    return InvalidArgument(fmt::format("{}:{}:{}: {}", origin, e.source().begin.line,
                                       e.source().begin.column, e.description()));
  }
  const toml::table& root = parsed.table();
  DaemonConfig c;
  std::string problem;
  auto fail = [&](const std::string& message) {
    if (problem.empty()) problem = fmt::format("{}: {}", origin, message);
  };
  for (const auto& [table_key, node] : root) {
    const std::string table(table_key.str());
    auto known = KnownKeys().find(table);
    if (known == KnownKeys().end()) {
      fail(fmt::format("unknown section [{}]", table));
      continue;
    }
    if (!node.is_table()) {
      fail(fmt::format("[{}] must be a table", table));
      continue;
    }
    for (const auto& [key, value] : *node.as_table()) {
      if (!known->second.count(std::string(key.str())))
        fail(fmt::format("unknown key {}.{}", table, key.str()));
    }
  }
  auto str = [&](const char* table, const char* key, std::string& out) {
    const auto node = root[table][key];
    if (!node) return;
    if (auto v = node.value<std::string>())
      out = *v;
    else
      fail(fmt::format("{}.{} must be a string", table, key));
  };
  auto num = [&](const char* table, const char* key, auto& out) {
    const auto node = root[table][key];
    if (!node) return;
    if (auto v = node.value<double>())
      out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
    else
      fail(fmt::format("{}.{} must be a number", table, key));
  };
  auto flag = [&](const char* table, const char* key, bool& out) {
    const auto node = root[table][key];
    if (!node) return;
    if (auto v = node.value<bool>())
      out = *v;
    else
      fail(fmt::format("{}.{} must be true or false", table, key));
  };
  // A string value read through one of colo's parsers (durations, sizes, modes).
  auto read_parsed = [&](const char* table, const char* key, auto parse, auto& out) {
    std::string text_value;
    str(table, key, text_value);
    if (text_value.empty()) return;
    auto value = parse(text_value);
    if (!value.ok())
      fail(fmt::format("{}.{}: {}", table, key, value.status().message()));
    else
      out = *value;
  };
  auto duration = [&](const char* table, const char* key, Duration& out) {
    read_parsed(table, key, ParseDuration, out);
  };
  // A size, or "none" (also 0) for none.
  auto size_or_none = [&](const char* table, const char* key, Bytes& out) {
    std::string text_value;
    str(table, key, text_value);
    if (text_value == "none" || text_value == "0") {
      out = Bytes(0);
    } else if (!text_value.empty()) {
      auto bytes = ParseBytes(text_value);
      if (!bytes.ok())
        fail(fmt::format("{}.{}: {} (or \"none\")", table, key, bytes.status().message()));
      else
        out = *bytes;
    }
  };

  str("scheduler", "policy", c.policy);
  duration("scheduler", "sample_interval", c.scheduler.sample_interval);
  num("scheduler", "window", c.scheduler.window_samples);
  duration("scheduler", "launch_grace", c.scheduler.launch_grace);
  duration("scheduler", "steady_after", c.scheduler.steady_after);
  duration("scheduler", "settle_timeout", c.scheduler.settle_timeout);
  read_parsed(
      "scheduler", "recovery", [](const std::string& t) { return ParseRecoveryMode(t); },
      c.scheduler.recovery);
  num("scheduler", "max_oom_retries", c.scheduler.max_oom_retries);
  num("scheduler", "oom_growth", c.scheduler.oom_growth);
  num("scheduler", "oom_limit_growth", c.scheduler.oom_limit_growth);
  read_parsed("scheduler", "oom_extra", ParseBytes, c.scheduler.oom_extra);
  flag("scheduler", "backfill", c.scheduler.backfill);
  num("scheduler", "backfill_depth", c.scheduler.backfill_depth);

  read_parsed("fairness", "order", ParseQueueOrder, c.scheduler.fairness.order);
  duration("fairness", "half_life", c.scheduler.fairness.half_life);
  num("fairness", "weight_fair_share", c.scheduler.fairness.weight_fair_share);
  num("fairness", "weight_age", c.scheduler.fairness.weight_age);
  duration("fairness", "max_age", c.scheduler.fairness.max_age);
  flag("fairness", "preempt", c.scheduler.fairness.preempt);
  duration("fairness", "preempt_after", c.scheduler.fairness.preempt_after);
  read_parsed("fairness", "preemptible", ParsePreemptible, c.scheduler.fairness.preemptible);
  duration("fairness", "max_notice", c.scheduler.fairness.max_notice);
  // A table of terms: share (where `with_share`) and the limits, each optional.
  auto terms = [&](const std::string& key, const toml::node& node, bool with_share,
                   UserTerms& out) {
    const toml::table* table = node.as_table();
    if (!table) return fail(key + " must be a table");
    for (const auto& [name, value] : *table) {
      const std::string field(name.str());
      const std::string where = key + "." + field;
      if (field == "share" && with_share) {
        const auto v = value.value<double>();
        if (!v || !(*v > 0 && *v <= 1e6))
          fail(where + " must be a number above 0");
        else
          out.share = *v;
      } else if (field == "gpus" || field == "running_jobs") {
        const auto v = value.value<int64_t>();
        if (!v || *v < 0 || *v > (1 << 20))
          fail(where + " must be a whole number, 0 or more");
        else
          (field == "gpus" ? out.limits.gpus : out.limits.running_jobs) = static_cast<int>(*v);
      } else if (field == "gpu_memory") {
        const auto v = value.value<std::string>();
        auto bytes =
            v ? ParseBytes(*v) : Result<Bytes>(InvalidArgument("a size such as \"80GiB\""));
        if (!bytes.ok())
          fail(where + ": " + bytes.status().message());
        else
          out.limits.gpu_memory = *bytes;
      } else {
        fail(fmt::format("unknown key {} (use {}gpus, gpu_memory or running_jobs)", where,
                         with_share ? "share, " : ""));
      }
    }
  };
  if (const auto limits = root["fairness"]["limits"]; limits) {
    UserTerms defaults{1, c.scheduler.user_limits};
    terms("fairness.limits", *limits.node(), false, defaults);
    c.scheduler.user_limits = defaults.limits;
  }
  for (auto [section, out] : {std::pair{"users", &c.user_terms}, {"groups", &c.group_terms}}) {
    const auto node = root["fairness"][section];
    if (!node) continue;
    const toml::table* table = node.as_table();
    if (!table) {
      fail(fmt::format("fairness.{} must be a table", section));
      continue;
    }
    for (const auto& [name, value] : *table) {
      // Each gets the default limits, then its own.
      UserTerms granted{1, c.scheduler.user_limits};
      terms(fmt::format("fairness.{}.{}", section, name.str()), value, true, granted);
      (*out)[std::string(name.str())] = granted;
    }
  }

  str("gates", "memory_margin", c.memory_margin);
  num("gates", "smact_max", c.smact_max);
  flag("gates", "compound", c.compound);
  flag("gates", "exclusive_first", c.exclusive_first);

  read_parsed("sharing", "default", ParseMode, c.default_mode);
  {
    std::string context = "auto";
    str("sharing", "cuda_context", context);
    if (context != "auto") {
      auto bytes = ParseBytes(context);
      if (!bytes.ok())
        fail("sharing.cuda_context: " + bytes.status().message() + " (or \"auto\")");
      else
        c.cuda_context = *bytes;
    }
  }
  if (const toml::table* gpus = root["sharing"]["gpus"].as_table()) {
    for (const auto& [gpu, value] : *gpus) {
      const std::string key = fmt::format("sharing.gpus.{}", gpu.str());
      auto v = value.value<std::string>();
      if (!v) {
        fail(key + " must be a string");
        continue;
      }
      auto m = ParseMode(*v);
      if (!m.ok())
        fail(key + ": " + m.status().message());
      else
        c.per_gpu[std::string(gpu.str())] = *m;
    }
  }

  flag("mps", "enabled", c.mps_enabled);
  str("mps", "control", c.mps_control);
  str("mps", "pipe_dir", c.mps_pipe_dir);
  str("mps", "log_dir", c.mps_log_dir);
  duration("mps", "health_interval", c.mps_health_interval);
  str("paths", "state_dir", c.state_dir);
  str("paths", "socket", c.socket);
  str("paths", "shim", c.shim);
  str("paths", "jobs_dir", c.jobs_dir);
  duration("jobs", "cancel_grace", c.cancel_grace);
  duration("jobs", "timeout_grace", c.timeout_grace);
  duration("jobs", "leftover_grace", c.leftover_grace);
  size_or_none("jobs", "log_limit", c.log_limit);
  str("jobs", "propagate_limits", c.propagate_limits);
  if (auto limits = ParsePropagatedLimits(c.propagate_limits); !limits.ok())
    fail("jobs.propagate_limits: " + limits.status().message());
  {
    std::string cgroups = c.cgroups ? "auto" : "off";
    str("jobs", "cgroups", cgroups);
    if (cgroups != "auto" && cgroups != "off")
      fail(fmt::format("jobs.cgroups must be \"auto\" or \"off\", not \"{}\"", cgroups));
    c.cgroups = cgroups == "auto";
  }
  flag("metrics", "enabled", c.metrics_enabled);
  str("metrics", "address", c.metrics_address);
  num("metrics", "port", c.metrics_port);
  num("metrics", "max_clients", c.metrics_max_clients);
  flag("history", "enabled", c.history_enabled);
  duration("history", "retention", c.history_retention);
  duration("history", "flush_interval", c.history_flush_interval);
  num("limits", "max_request_bytes", c.max_request_bytes);
  num("limits", "max_clients", c.max_clients);
  num("limits", "max_clients_per_user", c.max_clients_per_user);
  num("limits", "max_jobs_per_user", c.max_jobs_per_user);
  num("limits", "max_array_size", c.max_array_size);
  duration("limits", "idle_timeout", c.idle_timeout);
  size_or_none("limits", "database_reserve", c.database_reserve);
  str("slurm", "node", c.slurm_node);
  str("slurm", "bin_dir", c.slurm_bin_dir);
  str("slurm", "slurmd", c.slurm_slurmd);
  str("slurm", "conf", c.slurm_conf);
  duration("slurm", "wait_limit", c.slurm_wait_limit);
  duration("slurm", "reconcile_interval", c.slurm_reconcile_interval);
  read_parsed("slurm", "shard_size", ParseBytes, c.slurm_shard_size);
  duration("slurm", "busy_wait", c.scheduler.booked_busy_wait);
  flag("slurm", "direct_submit", c.slurm_direct_submit);

  if (!problem.empty()) return InvalidArgument(problem);
  if (c.scheduler.fairness.half_life <= Duration::zero() ||
      c.scheduler.fairness.max_age <= Duration::zero())
    return InvalidArgument(origin + ": fairness.half_life and fairness.max_age must be positive");
  if (c.scheduler.fairness.preempt_after < Duration::zero() ||
      c.scheduler.fairness.max_notice < Duration::zero())
    return InvalidArgument(origin +
                           ": fairness.preempt_after and fairness.max_notice must be 0 or "
                           "more");
  if (!(c.scheduler.fairness.weight_fair_share >= 0) || !(c.scheduler.fairness.weight_age >= 0))
    return InvalidArgument(origin +
                           ": fairness.weight_fair_share and fairness.weight_age must be "
                           "0 or more");
  if (c.scheduler.window_samples < 1)
    return InvalidArgument(origin + ": scheduler.window must be ≥ 1");
  if (!(c.scheduler.oom_growth >= 1 && c.scheduler.oom_growth <= 10) ||
      !(c.scheduler.oom_limit_growth >= 1 && c.scheduler.oom_limit_growth <= 10))
    return InvalidArgument(
        origin + ": scheduler.oom_growth and scheduler.oom_limit_growth must be between 1 and 10");
  if (c.scheduler.sample_interval <= Duration::zero())
    return InvalidArgument(origin + ": scheduler.sample_interval must be positive");
  if (c.slurm_shard_size < MiB(1) || c.slurm_shard_size > GiB(1024))
    return InvalidArgument(origin + ": slurm.shard_size must be between 1MiB and 1TiB");
  if (c.scheduler.booked_busy_wait < Duration::zero())
    return InvalidArgument(origin + ": slurm.busy_wait must not be negative");
  if (c.max_clients < 1 || c.max_clients_per_user < 1 || c.metrics_max_clients < 1 ||
      c.max_jobs_per_user < 1)
    return InvalidArgument(origin +
                           ": limits.max_clients, limits.max_clients_per_user and "
                           "metrics.max_clients must be at least 1");
  if (c.max_array_size < 1 || c.max_array_size > static_cast<int>(api::kMaxArrayTasks))
    return InvalidArgument(fmt::format("{}: limits.max_array_size must be between 1 and {}", origin,
                                       api::kMaxArrayTasks));
  if (c.max_request_bytes < 4096 || c.max_request_bytes > (size_t{64} << 20))
    return InvalidArgument(origin + ": limits.max_request_bytes must be 4096..67108864");
  if (c.idle_timeout <= Duration::zero())
    return InvalidArgument(origin + ": limits.idle_timeout must be positive");
  if (c.history_retention < Seconds(3600) || c.history_flush_interval <= Duration::zero() ||
      c.history_flush_interval > Seconds(600))
    return InvalidArgument(origin +
                           ": history.retention must be at least 1h and history.flush_interval "
                           "more than 0 and at most 10m");
  if (c.metrics_port < 1 || c.metrics_port > 65535)
    return InvalidArgument(origin + ": metrics.port must be 1..65535");
  // The policy spec must resolve now, not at the first placement.
  if (auto policy = c.Policy(); !policy.ok())
    return InvalidArgument(
        fmt::format("{}: scheduler.policy/gates: {}", origin, policy.status().message()));
  return c;
}

Result<DaemonConfig> LoadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot read config {}", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path);
}

namespace {
std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    else
      out += c;
  }
  return out + "\"";
}
std::string Flag(bool b) {
  return b ? "true" : "false";
}
std::string Secs(Duration d) {
  return Quoted(fmt::format("{}s", ToSeconds(d)));
}
std::string Mode(SharingMode m) {
  return Quoted(std::string(ToString(m)));
}
std::string Number(double v) {
  return fmt::format("{}", v);
}
std::string Size(Bytes b) {
  return Quoted(fmt::format("{}B", b.count()));
}
// A user's or group's terms as an inline table: the share (where `with_share`) and the limits.
std::string Terms(const UserTerms& t, bool with_share) {
  std::string out = "{ ";
  if (with_share) out += fmt::format("share = {}, ", Number(t.share));
  return out + fmt::format("gpus = {}, gpu_memory = {}, running_jobs = {} }}", t.limits.gpus,
                           Size(t.limits.gpu_memory), t.limits.running_jobs);
}
std::string TermsTable(const std::map<std::string, UserTerms>& entries) {
  std::string out = "{";
  for (const auto& [name, terms] : entries)
    out += fmt::format("{}{} = {}", out.size() > 1 ? ", " : " ", Quoted(name), Terms(terms, true));
  return out + (entries.empty() ? "}" : " }");
}
}  // namespace

std::vector<std::pair<std::string, std::string>> EffectiveSettings(const DaemonConfig& c) {
  const SchedulerConfig& s = c.scheduler;
  std::string gpus = "{";
  for (const auto& [gpu, mode] : c.per_gpu)
    gpus += fmt::format("{}{} = {}", gpus.size() > 1 ? ", " : " ", Quoted(gpu), Mode(mode));
  gpus += c.per_gpu.empty() ? "}" : " }";
  return {
      {"scheduler.policy", Quoted(c.policy)},
      {"scheduler.sample_interval", Secs(s.sample_interval)},
      {"scheduler.window", Number(s.window_samples)},
      {"scheduler.launch_grace", Secs(s.launch_grace)},
      {"scheduler.steady_after", Secs(s.steady_after)},
      {"scheduler.settle_timeout", Secs(s.settle_timeout)},
      {"scheduler.recovery", Quoted(std::string(ToString(s.recovery)))},
      {"scheduler.max_oom_retries", Number(s.max_oom_retries)},
      {"scheduler.oom_growth", Number(s.oom_growth)},
      {"scheduler.oom_limit_growth", Number(s.oom_limit_growth)},
      {"scheduler.oom_extra", Quoted(FormatExactBytes(s.oom_extra))},
      {"scheduler.backfill", Flag(s.backfill)},
      {"scheduler.backfill_depth", Number(s.backfill_depth)},
      {"fairness.order", Quoted(std::string(ToString(s.fairness.order)))},
      {"fairness.half_life", Secs(s.fairness.half_life)},
      {"fairness.weight_fair_share", Number(s.fairness.weight_fair_share)},
      {"fairness.weight_age", Number(s.fairness.weight_age)},
      {"fairness.max_age", Secs(s.fairness.max_age)},
      {"fairness.preempt", Flag(s.fairness.preempt)},
      {"fairness.preempt_after", Secs(s.fairness.preempt_after)},
      {"fairness.preemptible", Quoted(std::string(ToString(s.fairness.preemptible)))},
      {"fairness.max_notice", Secs(s.fairness.max_notice)},
      {"fairness.limits", Terms(UserTerms{1, s.user_limits}, false)},
      {"fairness.users", TermsTable(c.user_terms)},
      {"fairness.groups", TermsTable(c.group_terms)},
      {"gates.memory_margin", Quoted(c.memory_margin)},
      {"gates.smact_max", Number(c.smact_max)},
      {"gates.compound", Flag(c.compound)},
      {"gates.exclusive_first", Flag(c.exclusive_first)},
      {"sharing.default", Mode(c.default_mode)},
      {"sharing.cuda_context", Quoted(c.cuda_context ? FormatExactBytes(*c.cuda_context) : "auto")},
      {"sharing.gpus", gpus},
      {"mps.enabled", Flag(c.mps_enabled)},
      {"mps.control", Quoted(c.mps_control)},
      {"mps.pipe_dir", Quoted(c.mps_pipe_dir)},
      {"mps.log_dir", Quoted(c.mps_log_dir)},
      {"mps.health_interval", Secs(c.mps_health_interval)},
      {"paths.state_dir", Quoted(c.state_dir)},
      {"paths.socket", Quoted(c.socket)},
      {"paths.shim", Quoted(c.shim)},
      {"paths.jobs_dir", Quoted(c.jobs_dir)},
      {"jobs.cancel_grace", Secs(c.cancel_grace)},
      {"jobs.timeout_grace", Secs(c.timeout_grace)},
      {"jobs.cgroups", Quoted(c.cgroups ? "auto" : "off")},
      {"jobs.leftover_grace", Secs(c.leftover_grace)},
      {"jobs.log_limit",
       Quoted(c.log_limit > Bytes(0) ? fmt::format("{}B", c.log_limit.count()) : "none")},
      {"jobs.propagate_limits", Quoted(c.propagate_limits)},
      {"history.enabled", Flag(c.history_enabled)},
      {"history.retention", Secs(c.history_retention)},
      {"history.flush_interval", Secs(c.history_flush_interval)},
      {"metrics.enabled", Flag(c.metrics_enabled)},
      {"metrics.address", Quoted(c.metrics_address)},
      {"metrics.port", Number(c.metrics_port)},
      {"metrics.max_clients", Number(c.metrics_max_clients)},
      {"limits.max_request_bytes", Number(static_cast<double>(c.max_request_bytes))},
      {"limits.max_clients", Number(c.max_clients)},
      {"limits.max_clients_per_user", Number(c.max_clients_per_user)},
      {"limits.idle_timeout", Secs(c.idle_timeout)},
      {"limits.database_reserve",
       Quoted(c.database_reserve > Bytes(0) ? fmt::format("{}B", c.database_reserve.count())
                                            : "none")},
      {"limits.max_jobs_per_user", Number(c.max_jobs_per_user)},
      {"limits.max_array_size", Number(c.max_array_size)},
      {"slurm.node", Quoted(c.slurm_node)},
      {"slurm.bin_dir", Quoted(c.slurm_bin_dir)},
      {"slurm.slurmd", Quoted(c.slurm_slurmd)},
      {"slurm.conf", Quoted(c.slurm_conf)},
      {"slurm.wait_limit", Secs(c.slurm_wait_limit)},
      {"slurm.reconcile_interval", Secs(c.slurm_reconcile_interval)},
      {"slurm.shard_size", Quoted(FormatExactBytes(c.slurm_shard_size))},
      {"slurm.busy_wait", Secs(c.scheduler.booked_busy_wait)},
      {"slurm.direct_submit", Flag(c.slurm_direct_submit)},
  };
}

namespace {

// The settings a reload takes, each with how it is taken: the connection pools read their limits
// at every new connection and request.
struct LiveSetting {
  std::string_view key;
  void (*take)(DaemonConfig& running, const DaemonConfig& next);
};
constexpr LiveSetting kLiveSettings[] = {
    {"limits.max_clients",
     [](DaemonConfig& to, const DaemonConfig& from) { to.max_clients = from.max_clients; }},
    {"limits.max_clients_per_user",
     [](DaemonConfig& to, const DaemonConfig& from) {
       to.max_clients_per_user = from.max_clients_per_user;
     }},
    {"limits.idle_timeout",
     [](DaemonConfig& to, const DaemonConfig& from) { to.idle_timeout = from.idle_timeout; }},
    {"limits.max_request_bytes",
     [](DaemonConfig& to, const DaemonConfig& from) {
       to.max_request_bytes = from.max_request_bytes;
     }},
    {"metrics.max_clients",
     [](DaemonConfig& to, const DaemonConfig& from) {
       to.metrics_max_clients = from.metrics_max_clients;
     }},
};

}  // namespace

bool AppliesLive(const std::string& key) {
  return std::any_of(std::begin(kLiveSettings), std::end(kLiveSettings),
                     [&](const LiveSetting& s) { return s.key == key; });
}

void TakeLiveSettings(DaemonConfig& running, const DaemonConfig& next) {
  for (const LiveSetting& s : kLiveSettings) s.take(running, next);
}

// A user's terms: their own entry, else the first group (by name) that lists them or is their
// primary group, else a default user's (share 1, [fairness.limits]).
UserTerms TermsFromConfig(const DaemonConfig& config, const std::string& user) {
  if (const auto own = config.user_terms.find(user); own != config.user_terms.end())
    return own->second;
  if (!config.group_terms.empty()) {
    std::vector<char> buffer(16384);
    passwd pw{};
    passwd* found_user = nullptr;
    const bool known =
        getpwnam_r(user.c_str(), &pw, buffer.data(), buffer.size(), &found_user) == 0 && found_user;
    const gid_t primary = known ? pw.pw_gid : static_cast<gid_t>(-1);
    std::vector<char> group_buffer(1 << 16);
    for (const auto& [name, terms] : config.group_terms) {
      group g{};
      group* found = nullptr;
      if (getgrnam_r(name.c_str(), &g, group_buffer.data(), group_buffer.size(), &found) != 0 ||
          !found)
        continue;
      if (known && g.gr_gid == primary) return terms;
      for (char** member = g.gr_mem; member && *member; ++member) {
        if (user == *member) return terms;
      }
    }
  }
  return UserTerms{1.0, config.scheduler.user_limits};
}

std::string DaemonSocketPath() {
  if (const char* explicit_path = std::getenv("COLO_SOCKET"); explicit_path && *explicit_path)
    return explicit_path;
  return geteuid() == 0 ? api::kSystemSocketPath : api::PersonalSocketPath();
}

void ApplyDefaultPaths(DaemonConfig& c, const std::string& program_dir) {
  if (c.state_dir.empty()) {
    if (geteuid() == 0) {
      c.state_dir = "/var/lib/colo";
    } else if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) {
      c.state_dir = fmt::format("{}/colo", xdg);
    } else if (const char* home = std::getenv("HOME"); home && *home) {
      c.state_dir = fmt::format("{}/.local/state/colo", home);
    } else {
      c.state_dir = fmt::format("/tmp/colo-{}/state", geteuid());
    }
  }
  if (c.socket.empty()) c.socket = DaemonSocketPath();
  if (c.shim.empty()) c.shim = program_dir + "/colo-shim";
  if (c.jobs_dir.empty()) c.jobs_dir = c.state_dir + "/jobs";
  if (c.mps_pipe_dir.empty()) c.mps_pipe_dir = c.state_dir + "/mps/pipe";
  if (c.mps_log_dir.empty()) c.mps_log_dir = c.state_dir + "/mps/log";
}

}  // namespace colo

// Placement policies by name. Both the daemon and the simulator read policy specs and build
// policies only through here, so that one spec means the same in both.
//
// A policy spec is a name with optional settings: "worst-fit", "round-robin:gates=none",
// "least-utilized:margin=5GiB,smact=0.8", "magm:compound=on,exclusive-first=on",
// "magm:preset=carma", "OR-LUG", "worst-fit:est=none,recovery=thesis".
//
// preset=carma sets CARMA's gates: the compound rule (smact >= 0.8 and (smocc >= 0.45 or
// drama >= 0.40), on the window's risk blend), exclusive-first, 512 MiB held back from free memory
// and a 2 GiB margin over the need, launch grace on, counted from when the job's process appears on
// the GPU (grace-from-process=on), the windows' median and p95 interpolated as pandas does
// (quantiles=linear). Settings after it override it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/placement.h"
#include "core/scheduler.h"
#include "policies/gated_policy.h"

namespace colo {

struct PolicyInfo {
  std::string name;
  std::vector<std::string> aliases;
  std::string summary;
};

// Every policy name colo knows, in a stable order.
const std::vector<PolicyInfo>& KnownPolicies();

// A policy spec as read: what it names and every setting it makes. The gates start from the
// driver's defaults (colod's [gates], colo sim's --margin and --smact-max); a CARMA name's own
// settings come next; the spec's settings after the name come last and win.
struct PolicySpec {
  std::string text;  // as given, trimmed
  std::string name;  // colo's policy ("worst-fit"), or "shards"
  Chooser chooser = Chooser::kWorstFit;
  GateConfig gates;
  // "shards[:n=N]": Slurm's shard GRES, N per GPU, no memory known (a baseline of colo sim only).
  int shards = 0;
  // What the spec says besides the gates; unset: the driver's own default.
  std::optional<std::string> estimator;  // est=ESTIMATOR, or a CARMA name's task-file line
  std::optional<SharingMode> sharing;    // share=mps|plain
  std::optional<RecoveryMode> recovery;  // recovery=adaptive|thesis (a CARMA name: thesis)
  std::optional<bool> learn;             // learn=on|off
};

// Reads a spec. Names are case-insensitive; CARMA's names (see CarmaPolicy) are accepted too.
// Unknown names or settings give an error listing what is accepted.
Result<PolicySpec> ParsePolicySpec(std::string_view text, const GateConfig& defaults = {});

// The policy a spec names (not the shards baseline, which colo sim builds itself).
std::unique_ptr<GatedPolicy> MakePolicy(const PolicySpec& spec);
// ParsePolicySpec, then the policy.
Result<std::unique_ptr<GatedPolicy>> MakePolicy(const std::string& spec,
                                                const GateConfig& defaults = {});

// The spec with every setting it makes written out: ParsePolicySpec reads it back to the same
// spec whatever the defaults, so a run recorded by colod is simulated with colod's very policy.
std::string SpecText(const PolicySpec& spec);

// How a spec reads, on one line: the policy, its gates and whatever else it sets. colod's
// --check-config and `colo sim --show-policy` print it, so either tells what the other runs.
std::string Describe(const PolicySpec& spec);

// A policy name as CARMA's configuration (and the thesis' tables) spell it, in colo's terms.
//   oracle-FF|BF|MAGM|LUG|RR (thesis: OFF, OBF, OWF/OMAGM, OLUG): the task file's measured peak
//     (line 8) + 2 GiB must fit in free - 512 MiB, and CARMA's compound utilization rule.
//   OR-RR: recovery only (no memory number, no gates); OR-MAGM, OR-LUG: free - 512 MiB >= 5 GiB and
//     the compound rule.
//   EST-MAGM, EST-LUG: as oracle-, with the estimator's line; a suffix picks it (EST-MAGM-Horus,
//     EST-LUG+GPUMemNet; lines 9, 10, 11; default line 8 as CARMA's `estimator: None`). Also
//     written MAGM+Horus, Horus-MAGM, LUG-FakeTensor.
// Every one is exclusive-first with recovery on an idle GPU (the `carma` preset).
struct CarmaPolicy {
  std::string spec;       // what MakePolicy receives: colo's policy with preset=carma and gates
  std::string estimator;  // the simulator's estimator: rad:oracle|horus|faketensor|gpumemnet|none
};
std::optional<CarmaPolicy> FindCarmaPolicy(std::string_view name);

// Whether `name` names a policy (colo's, an alias, CARMA's or colo sim's shards), in any case.
bool IsPolicyName(std::string_view name);

}  // namespace colo

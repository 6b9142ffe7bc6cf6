// Placement policies by name. Both the daemon and the simulator build policies only through here.
//
// A policy spec is a name with optional settings: "worst-fit", "round-robin:gates=none",
// "least-utilized:margin=5GiB,smact=0.8", "magm:compound=on,exclusive-first=on",
// "magm:preset=carma".
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
#include "policies/gated_policy.h"

namespace colo {

struct PolicyInfo {
  std::string name;
  std::vector<std::string> aliases;
  std::string summary;
};

// Every policy name colo knows, in a stable order.
const std::vector<PolicyInfo>& KnownPolicies();

// Builds a policy from a spec. Names are case-insensitive; CARMA's names (see CarmaPolicy) are
// accepted too. Unknown names or settings give an error listing what is accepted.
Result<std::unique_ptr<GatedPolicy>> MakePolicy(const std::string& spec,
                                                const GateConfig& defaults = {});

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

// Whether `name` names a policy (colo's, an alias or CARMA's), in any case.
bool IsPolicyName(std::string_view name);

}  // namespace colo

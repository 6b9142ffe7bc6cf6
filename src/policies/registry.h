// Placement policies by name. Both the daemon and the simulator build policies only through here.
//
// A policy spec is a name with optional settings: "worst-fit", "round-robin:gates=none",
// "least-utilized:margin=5GiB,smact=0.8", "magm:compound=on,exclusive-first=on".
#pragma once

#include <memory>
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

// Builds a policy from a spec. Unknown names or settings give an error listing what is accepted.
Result<std::unique_ptr<GatedPolicy>> MakePolicy(const std::string& spec,
                                                const GateConfig& defaults = {});

}  // namespace colo

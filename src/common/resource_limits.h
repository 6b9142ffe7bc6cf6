// The resource limits a job takes from its submitter (Slurm's PropagateResourceLimits): by the
// name Slurm gives each, lower case, and the setrlimit resource it is.
#pragma once

#include <sys/resource.h>

#include <optional>
#include <string_view>

namespace colo {

struct ResourceKind {
  std::string_view name;
  int resource;  // RLIMIT_*
};

inline constexpr ResourceKind kResourceKinds[] = {
    {"as", RLIMIT_AS},           {"core", RLIMIT_CORE},       {"cpu", RLIMIT_CPU},
    {"data", RLIMIT_DATA},       {"fsize", RLIMIT_FSIZE},     {"memlock", RLIMIT_MEMLOCK},
    {"nofile", RLIMIT_NOFILE},   {"nproc", RLIMIT_NPROC},     {"rss", RLIMIT_RSS},
    {"stack", RLIMIT_STACK},
};

// The setrlimit resource called `name`; nullopt for a name not in kResourceKinds.
inline std::optional<int> ResourceNamed(std::string_view name) {
  for (const ResourceKind& kind : kResourceKinds) {
    if (kind.name == name) return kind.resource;
  }
  return std::nullopt;
}

}  // namespace colo

#include "core/recovery.h"

#include <fmt/format.h>

#include <algorithm>

namespace colo {
namespace {

// Within this share of its limit an attempt counts as having reached it: the failing allocation
// comes on top of what the process holds, and the figures are rounded.
constexpr double kAtLimit = 0.9;

}  // namespace

RaisedNeed RaiseNeedAfterOutOfMemory(const OutOfMemoryFacts& f, const OutOfMemoryGrowth& g) {
  const OutOfMemoryEvidence& e = f.evidence;
  // What the attempt proved it needs at least: the peak colod saw, or what the framework held
  // plus the allocation it could not make (a message is exact where 1-s samples miss the end).
  const Bytes held = e.in_use.value_or(f.observed_peak);
  const Bytes reached = std::max(f.observed_peak, held + e.requested.value_or(Bytes(0)));
  std::string figures;
  if (e.in_use || e.requested) {
    figures = fmt::format("{}{} + {}tried {}", e.in_use ? "" : "peak seen ",
                          FormatBytes(e.in_use.value_or(f.observed_peak)),
                          e.in_use ? "" : (e.framework.empty() ? "" : e.framework + " "),
                          FormatBytes(e.requested.value_or(Bytes(0))));
    if (e.in_use)
      figures = fmt::format("{}in use {}", e.framework.empty() ? "" : e.framework + " ", figures);
  } else {
    figures = fmt::format("peak seen {}", FormatBytes(f.observed_peak));
  }
  RaisedNeed raised;
  // Limit-bound: it failed where its limit was, so nothing says how far above the limit its need
  // is. Under an MPS limit with no figures from the framework it is taken as limit-bound too: a
  // peak between two samples goes unseen, and the limit is what makes allocations fail there.
  raised.limit_bound =
      f.limit > Bytes(0) && (reached >= f.limit.Scaled(kAtLimit) || (f.hard_limit && !e.in_use));
  Bytes need;
  if (raised.limit_bound) {
    // Geometric growth: a need above its plan is off by a factor more often than by an amount
    // (a batch, a resolution or a sequence length the plan did not see; activations scale with
    // them), so a fixed step takes many crashes (3.0 -> 4.3 -> 5.7 -> 7.3 GiB for a ResNet-50
    // declared at 3 GiB that needs 7.1 GiB). x2.4 covers a need of up to 2.4 times the limit in
    // one step and 5.8 times in two. What it over-provisions is bounded: the reservation settles
    // to the observed peak once the job is steady, and the job's later runs plan with the peak
    // this run shows (history).
    need = std::max(reached, f.limit).Scaled(g.limit_growth) + g.extra;
    raised.basis = fmt::format("{} at the {} limit: limit-bound, x{:g} + {}", figures,
                               FormatBytes(f.limit), g.limit_growth, FormatBytes(g.extra));
  } else {
    // Below its limit: the GPU itself ran full (neighbours over their plans) or the job's
    // figures tell how far it got; a little above the larger of both is enough.
    need = std::max(f.planned, reached).Scaled(g.growth) + g.extra;
    raised.basis =
        fmt::format("{}{}: x{:g} + {}", figures,
                    f.limit > Bytes(0) ? " below the " + FormatBytes(f.limit) + " limit" : "",
                    g.growth, FormatBytes(g.extra));
  }
  if (e.profile_upper > need) {
    need = e.profile_upper;
    raised.basis += fmt::format("; the profile's upper bound {}", FormatBytes(e.profile_upper));
  }
  if (f.capacity > Bytes(0) && need > f.capacity) {
    need = f.capacity;
    raised.basis += "; capped at the largest GPU";
  }
  raised.need = need;
  return raised;
}

Bytes AttemptLimit(Bytes reservation, Bytes room, bool failed_at_its_limit) {
  return failed_at_its_limit ? std::max(reservation, room) : reservation;
}

}  // namespace colo

// The need an out-of-memory crash leaves a job with: one rule, shared by colod and the simulator
// through the scheduler, so that both recover alike.
#pragma once

#include <string>

#include "common/units.h"
#include "core/model.h"

namespace colo {

struct OutOfMemoryGrowth {
  // A job that failed below its limit: new need = max(plan, what it reached) x growth + extra.
  double growth = 1.1;
  // A job that failed at its limit: new need = max(limit, what it reached) x limit_growth + extra.
  double limit_growth = 2.4;
  Bytes extra = MiB(512);
};

// What an attempt that ended out of memory went through.
struct OutOfMemoryFacts {
  Bytes planned;            // the need it was placed with (upper bound); 0: unknown
  Bytes limit;              // the memory it was given: its MPS limit or its reservation; 0: none
  bool hard_limit = false;  // an MPS memory limit was in force (allocations past it fail)
  Bytes observed_peak;      // the highest per-GPU use colod saw (MPS context included)
  OutOfMemoryEvidence evidence;
  Bytes capacity;  // of the largest GPU: no need goes above it
};

struct RaisedNeed {
  Bytes need;
  bool limit_bound = false;
  std::string basis;  // why, for the job's events: the figures and the rule used
};

RaisedNeed RaiseNeedAfterOutOfMemory(const OutOfMemoryFacts& facts,
                                     const OutOfMemoryGrowth& growth);

// The memory limit (MPS limit, framework setting) an attempt runs under, given the reservation
// it is placed with and the room its GPUs have for it (their memory not reserved for other jobs
// nor held by processes colod does not manage, the least over its GPUs). A job that failed at its
// own limit has shown only that its need lies somewhere above that limit: the figures it printed
// bound its need from below, and a raised need can fall short again however it is grown (a
// ResNet-50 declared at 3 GiB whose step peaks at 13.9 GiB took 3.0 -> 8.1 -> 20.4 GiB under
// limits at its need). Its retry therefore runs under the room of its GPUs, so that it fails
// again only if those GPUs truly run full, while placement keeps planning with the raised need
// (and with what the attempt is seen to use as it grows). Any other attempt runs under its
// reservation.
Bytes AttemptLimit(Bytes reservation, Bytes room, bool failed_at_its_limit);

}  // namespace colo

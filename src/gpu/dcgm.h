// SM activity, SM occupancy and DRAM activity from DCGM's profiling fields, for GPUs that have no
// GPM (Ampere: A100, A30; Hopper reads them through NVML's GPM instead). libdcgm is opened with
// dlopen, so colo builds and runs without DCGM; its few declarations are our own.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace colo {

struct DcgmReading {
  double smact = -1, smocc = -1, drama = -1;  // 0..1; negative: DCGM has no value (yet)
};

class DcgmProfiler {
 public:
  virtual ~DcgmProfiler() = default;
  // "hostengine" (a running nv-hostengine) or "embedded" (DCGM inside colod).
  virtual std::string mode() const = 0;
  // The latest values DCGM holds for a GPU (its DCGM id, which is its NVML index).
  virtual DcgmReading Read(unsigned gpu) = 0;
};

// Loads libdcgm ($COLO_DCGM_LIBRARY, else libdcgm.so.4, then libdcgm.so.3), connects to a running
// nv-hostengine on this host or, when none answers, starts DCGM embedded, and watches
// DCGM_FI_PROF_SM_ACTIVE, _SM_OCCUPANCY and _DRAM_ACTIVE on `gpus` every `interval`. An error
// says what is missing (no library, no profiling support).
Result<std::unique_ptr<DcgmProfiler>> OpenDcgm(const std::vector<unsigned>& gpus,
                                               Duration interval);

}  // namespace colo

// Reading GPUs: the devices a server has and one sample of each. The daemon talks to this
// interface only; the NVML backend reads real GPUs, the fake backend serves tests and demos.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace colo {

// A placement target as the hardware reports it: a whole GPU or an existing MIG instance.
struct DeviceInfo {
  int index = 0;       // NVML index of the GPU (the parent, for a MIG instance)
  int mig_index = -1;  // index of the MIG instance within its GPU; -1 for a whole GPU
  std::string uuid;    // what CUDA_VISIBLE_DEVICES takes ("GPU-…" or "MIG-…")
  int minor = -1;      // the N of the GPU's /dev/nvidiaN (NVML's minor number); -1: unknown
  std::string name;    // "NVIDIA H100 80GB HBM3"
  Bytes memory_total;
  bool gpm_supported = false;  // SM activity and occupancy through GPM (Hopper and newer)
};

// Where a sample's SM activity, occupancy and DRAM activity came from.
enum class ActivitySource {
  kNone,         // not known (yet)
  kGpm,          // NVML's GPM (Hopper and newer)
  kDcgm,         // DCGM's profiling fields (GPUs without GPM, e.g. A100)
  kUtilization,  // neither: NVML's coarse "a kernel ran" utilization stands in for SM activity
  kFake,         // fake GPUs
};
inline const char* ToString(ActivitySource s) {
  switch (s) {
    case ActivitySource::kGpm:
      return "gpm";
    case ActivitySource::kDcgm:
      return "dcgm";
    case ActivitySource::kUtilization:
      return "utilization";
    case ActivitySource::kFake:
      return "fake";
    case ActivitySource::kNone:
      break;
  }
  return "none";
}

struct ProcessMemory {
  int pid = 0;
  Bytes used;
};

// One reading of one placement target. Negative numbers mean "not available".
struct DeviceSample {
  Bytes memory_used;
  Bytes memory_total;
  double utilization = -1;  // NVML's coarse "a kernel ran" utilization, 0..1
  double smact = -1;        // GPM SM activity, 0..1
  double smocc = -1;        // GPM SM occupancy, 0..1
  double drama = -1;        // GPM DRAM bandwidth utilization, 0..1
  ActivitySource activity_source = ActivitySource::kNone;  // of smact, smocc and drama
  double power_watts = -1;
  double energy_joules = -1;  // the board's running total since the driver loaded
  // The processes using the device; processes_read is false where they were not read (not asked
  // for: SampleAll's with_processes, or the query failed), and then says nothing of them.
  std::vector<ProcessMemory> processes;
  bool processes_read = true;
  bool ok = true;
  std::string error;  // why the sample is incomplete, if it is
};

// What reading the devices has cost so far, per kind of driver call: how many were made and the
// CPU time of the thread that made them.
struct CallCost {
  std::string call;
  int64_t calls = 0;
  double cpu_seconds = 0;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual std::string name() const = 0;
  virtual const std::vector<DeviceInfo>& devices() const = 0;
  // One sample of every device, in the order of devices(). The processes of device i are listed
  // only where with_processes[i] is true: the process query is among the driver's slowest calls,
  // and only a device running jobs needs it. May block on the driver; the daemon calls it from a
  // thread of its own.
  virtual std::vector<DeviceSample> SampleAll(const std::vector<bool>& with_processes) = 0;
  // Thread-safe; empty where the backend does not count.
  virtual std::vector<CallCost> call_costs() const { return {}; }
  // Why some GPU's SM activity is only NVML's utilization (no GPM, and DCGM could not be used);
  // empty when every GPU has a real source.
  virtual std::string activity_note() const { return ""; }
};

// Loads libnvidia-ml at run time. Fails with a message naming what is missing (no library, no
// driver, no GPU) so colod can say so and suggest --fake-gpus.
Result<std::unique_ptr<GpuBackend>> OpenNvml();

}  // namespace colo

// The part of NVML's ABI colo uses, declared here rather than taken from the CUDA toolkit's
// nvml.h: checked against NVML's documented ABI, all of it stable across the 5xx drivers. The
// NVML backend calls it through dlopen; the fake NVML of the tests implements it.
#pragma once

namespace colo::nvml {

using nvmlReturn_t = int;
using nvmlDevice_t = struct NvmlDevice*;
using nvmlGpmSample_t = struct NvmlGpmSample*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kInsufficientSize = 7;

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlProcessInfo_t {  // the layout the _v3 process queries fill
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
struct nvmlGpmSupport_t {
  unsigned int version;
  unsigned int isSupportedDevice;
};
struct nvmlGpmMetric_t {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};
// The driver fills only the first numMetrics entries; the array is sized generously so a newer
// driver's larger maximum can never write past it.
struct nvmlGpmMetricsGet_t {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[512];
};
constexpr unsigned int kGpmSupportVersion = 1;
constexpr unsigned int kGpmMetricsGetVersion = 1;
constexpr unsigned int kGpmSmUtil = 2;       // SM activity, percent (DCGM's SMACT)
constexpr unsigned int kGpmSmOccupancy = 3;  // percent (DCGM's SMOCC)
constexpr unsigned int kGpmDramBwUtil = 10;  // percent (DCGM's DRAMA)
constexpr nvmlReturn_t kNotSupported = 3;

}  // namespace colo::nvml

// The NVML backend. libnvidia-ml is opened with dlopen so colo builds and runs without the CUDA
// toolkit; the few declarations it needs are our own (gpu/nvml_abi.h).
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "common/clock.h"
#include "common/cpu_time.h"
#include "gpu/dcgm.h"
#include "gpu/energy_counter.h"
#include "gpu/gpu.h"
#include "gpu/nvml_abi.h"

namespace colo {
namespace {

// NVML's own names, as its ABI has them.
using namespace nvml;

struct NvmlApi {
  void* library = nullptr;
  nvmlReturn_t (*Init)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*GetCount)(unsigned int*) = nullptr;
  nvmlReturn_t (*GetHandleByIndex)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*GetName)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*GetUuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*GetMinorNumber)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*GetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*GetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*GetPowerUsage)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*GetTotalEnergyConsumption)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*GetComputeRunningProcesses)(nvmlDevice_t, unsigned int*,
                                             nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*GetMigMode)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*GetMaxMigDeviceCount)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*GetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*GpmQueryDeviceSupport)(nvmlDevice_t, nvmlGpmSupport_t*) = nullptr;
  nvmlReturn_t (*GpmSampleAlloc)(nvmlGpmSample_t*) = nullptr;
  nvmlReturn_t (*GpmSampleFree)(nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*GpmSampleGet)(nvmlDevice_t, nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*GpmMetricsGet)(nvmlGpmMetricsGet_t*) = nullptr;

  std::string Error(nvmlReturn_t r) const {
    return ErrorString ? ErrorString(r) : fmt::format("NVML error {}", r);
  }
};

template <typename F>
bool Bind(void* library, const char* symbol, F*& out) {
  out = reinterpret_cast<F*>(dlsym(library, symbol));
  return out != nullptr;
}

// The driver calls a sample makes, for CallCost.
enum class Call {
  kMemory,
  kProcesses,
  kUtilization,
  kPower,
  kEnergy,
  kGpmSample,
  kGpmMetrics,
  kDcgm
};
constexpr const char* kCallNames[] = {"memory", "processes",  "utilization", "power",
                                      "energy", "gpm_sample", "gpm_metrics", "dcgm"};
constexpr size_t kCalls = std::size(kCallNames);

// How often the board's energy counter is read; between reads the power samples carry it
// (gpu/energy_counter.h says why).
constexpr Duration kEnergyReadEvery = std::chrono::seconds(10);

class NvmlGpus : public GpuBackend {
 public:
  struct Target {
    nvmlDevice_t handle = nullptr;
    // GPM metrics are rates between two samples: two buffers, taken in turn, for the device's
    // whole life (allocated at its first reading).
    nvmlGpmSample_t gpm[2] = {nullptr, nullptr};
    int gpm_latest = -1;  // the buffer holding the latest sample; -1 before the first
    EnergyCounter energy{kEnergyReadEvery};
  };

  NvmlGpus(NvmlApi api, std::vector<DeviceInfo> devices, std::vector<Target> targets,
           std::unique_ptr<DcgmProfiler> dcgm, std::string activity_note)
      : api_(api),
        devices_(std::move(devices)),
        targets_(std::move(targets)),
        dcgm_(std::move(dcgm)),
        activity_note_(std::move(activity_note)),
        metrics_get_(std::make_unique<nvmlGpmMetricsGet_t>()) {}
  ~NvmlGpus() override {
    for (auto& t : targets_) {
      for (nvmlGpmSample_t sample : t.gpm)
        if (sample) api_.GpmSampleFree(sample);
    }
  }

  std::string name() const override { return dcgm_ ? "nvml+dcgm " + dcgm_->mode() : "nvml"; }
  std::string activity_note() const override { return activity_note_; }
  const std::vector<DeviceInfo>& devices() const override { return devices_; }

  std::vector<DeviceSample> SampleAll(const std::vector<bool>& with_processes) override {
    std::vector<DeviceSample> out;
    out.reserve(devices_.size());
    for (size_t i = 0; i < devices_.size(); ++i)
      out.push_back(
          Sample(devices_[i], targets_[i], i < with_processes.size() && with_processes[i]));
    return out;
  }

  std::vector<CallCost> call_costs() const override {
    std::vector<CallCost> out;
    for (size_t c = 0; c < kCalls; ++c) {
      out.push_back(
          CallCost{kCallNames[c], costs_[c].calls.load(std::memory_order_relaxed),
                   static_cast<double>(costs_[c].nanos.load(std::memory_order_relaxed)) / 1e9});
    }
    return out;
  }

 private:
  // Makes one driver call, counting it and the CPU time it took (the driver may spin while the
  // GPU's firmware answers: that is colod's CPU too).
  template <typename F>
  auto Timed(Call call, F&& f) {
    Cost& cost = costs_[static_cast<size_t>(call)];
    const auto began = ThreadCpuTime();
    auto result = f();
    cost.nanos.fetch_add((ThreadCpuTime() - began).count(), std::memory_order_relaxed);
    cost.calls.fetch_add(1, std::memory_order_relaxed);
    return result;
  }

  DeviceSample Sample(const DeviceInfo& info, Target& target, bool with_processes) {
    DeviceSample s;
    auto note = [&](const char* what, nvmlReturn_t r) {
      s.ok = false;
      if (!s.error.empty()) s.error += "; ";
      s.error += fmt::format("{}: {}", what, api_.Error(r));
    };
    nvmlMemory_t memory{};
    if (nvmlReturn_t r =
            Timed(Call::kMemory, [&] { return api_.GetMemoryInfo(target.handle, &memory); });
        r == kSuccess) {
      s.memory_total = Bytes(static_cast<int64_t>(memory.total));
      s.memory_used = Bytes(static_cast<int64_t>(memory.used));
    } else {
      note("memory", r);
    }
    s.processes_read = false;
    if (with_processes) ReadProcesses(target.handle, s, note);
    if (info.mig_index < 0) {
      nvmlUtilization_t util{};
      if (Timed(Call::kUtilization,
                [&] { return api_.GetUtilizationRates(target.handle, &util); }) == kSuccess)
        s.utilization = util.gpu / 100.0;
      unsigned int milliwatts = 0;
      if (Timed(Call::kPower, [&] { return api_.GetPowerUsage(target.handle, &milliwatts); }) ==
          kSuccess)
        s.power_watts = milliwatts / 1000.0;
      const TimePoint now = clock_.Now();
      unsigned long long millijoules = 0;
      if (target.energy.Due(now) && Timed(Call::kEnergy, [&] {
                                      return api_.GetTotalEnergyConsumption(target.handle,
                                                                            &millijoules);
                                    }) == kSuccess)
        s.energy_joules =
            target.energy.Read(now, static_cast<double>(millijoules) / 1000.0, s.power_watts);
      else
        s.energy_joules = target.energy.Carry(now, s.power_watts);
      if (info.gpm_supported) {
        ReadGpm(target, s);
        if (s.smact >= 0) s.activity_source = ActivitySource::kGpm;
      } else if (dcgm_) {
        const DcgmReading r =
            Timed(Call::kDcgm, [&] { return dcgm_->Read(static_cast<unsigned>(info.index)); });
        s.smact = r.smact;
        s.smocc = r.smocc;
        s.drama = r.drama;
        if (s.smact >= 0) s.activity_source = ActivitySource::kDcgm;
      } else if (s.utilization >= 0) {
        s.activity_source = ActivitySource::kUtilization;
      }
    }
    return s;
  }

  template <typename Note>
  void ReadProcesses(nvmlDevice_t handle, DeviceSample& s, Note& note) {
    // One buffer for every device and sample (the sampling thread's alone).
    if (process_infos_.empty()) process_infos_.resize(16);
    for (int tries = 0; tries < 4; ++tries) {
      unsigned int count = static_cast<unsigned int>(process_infos_.size());
      const nvmlReturn_t r = Timed(Call::kProcesses, [&] {
        return api_.GetComputeRunningProcesses(handle, &count, process_infos_.data());
      });
      if (r == kInsufficientSize) {
        process_infos_.resize(count + 16);  // processes may start between the two calls
        continue;
      }
      if (r != kSuccess) {
        note("processes", r);
        return;
      }
      for (unsigned int i = 0; i < count; ++i) {
        // NVML reports "not available" as the all-ones value (e.g. without permission).
        const auto used = process_infos_[i].usedGpuMemory;
        s.processes.push_back({static_cast<int>(process_infos_[i].pid),
                               Bytes(used == ~0ULL ? 0 : static_cast<int64_t>(used))});
      }
      s.processes_read = true;
      return;
    }
    note("processes", kInsufficientSize);
  }

  void ReadGpm(Target& target, DeviceSample& s) {
    for (nvmlGpmSample_t& sample : target.gpm) {
      if (!sample && api_.GpmSampleAlloc(&sample) != kSuccess) return;
    }
    const int current = target.gpm_latest == 0 ? 1 : 0;
    nvmlGpmSample_t sample = target.gpm[current];
    if (Timed(Call::kGpmSample, [&] { return api_.GpmSampleGet(target.handle, sample); }) !=
        kSuccess)
      return;
    if (target.gpm_latest >= 0) {
      nvmlGpmMetricsGet_t& get = *metrics_get_;
      // The driver fills only the first numMetrics entries; their outputs are cleared each time.
      std::memset(&get, 0, offsetof(nvmlGpmMetricsGet_t, metrics) + 3 * sizeof(nvmlGpmMetric_t));
      get.version = kGpmMetricsGetVersion;
      get.numMetrics = 3;
      get.sample1 = target.gpm[target.gpm_latest];
      get.sample2 = sample;
      get.metrics[0].metricId = kGpmSmUtil;
      get.metrics[1].metricId = kGpmSmOccupancy;
      get.metrics[2].metricId = kGpmDramBwUtil;
      if (Timed(Call::kGpmMetrics, [&] { return api_.GpmMetricsGet(&get); }) == kSuccess) {
        auto fraction = [](const nvmlGpmMetric_t& m) {
          return m.nvmlReturn == kSuccess ? std::clamp(m.value / 100.0, 0.0, 1.0) : -1.0;
        };
        s.smact = fraction(get.metrics[0]);
        s.smocc = fraction(get.metrics[1]);
        s.drama = fraction(get.metrics[2]);
      }
    }
    target.gpm_latest = current;
  }

  struct Cost {
    std::atomic<int64_t> calls{0};
    std::atomic<int64_t> nanos{0};
  };

  NvmlApi api_;
  SystemClock clock_;
  std::vector<DeviceInfo> devices_;
  std::vector<Target> targets_;
  std::unique_ptr<DcgmProfiler> dcgm_;  // for the whole GPUs without GPM
  std::string activity_note_;
  // Scratch of the sampling thread, kept between samples: the GPM metrics request (20 KB) and
  // the process list.
  std::unique_ptr<nvmlGpmMetricsGet_t> metrics_get_;
  std::vector<nvmlProcessInfo_t> process_infos_;
  std::array<Cost, kCalls> costs_;
};

}  // namespace

Result<std::unique_ptr<GpuBackend>> OpenNvml() {
  std::vector<std::string> candidates;
  if (const char* explicit_path = std::getenv("COLO_NVML_LIBRARY")) {
    candidates.push_back(explicit_path);
  }
  candidates.insert(
      candidates.end(),
      {"libnvidia-ml.so.1", "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
       "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1"});
  NvmlApi api;
  std::string tried;
  for (const auto& path : candidates) {
    api.library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.library) break;
    tried += fmt::format("\n  {}: {}", path, dlerror());
  }
  if (!api.library) {
    return Unavailable(
        "cannot load NVML (libnvidia-ml.so.1): is the NVIDIA driver installed? Tried:" + tried +
        "\nUse --fake-gpus N to run without GPUs.");
  }
  void* lib = api.library;
  const bool bound =
      Bind(lib, "nvmlInit_v2", api.Init) && Bind(lib, "nvmlErrorString", api.ErrorString) &&
      Bind(lib, "nvmlDeviceGetCount_v2", api.GetCount) &&
      Bind(lib, "nvmlDeviceGetHandleByIndex_v2", api.GetHandleByIndex) &&
      Bind(lib, "nvmlDeviceGetName", api.GetName) && Bind(lib, "nvmlDeviceGetUUID", api.GetUuid) &&
      Bind(lib, "nvmlDeviceGetMemoryInfo", api.GetMemoryInfo) &&
      Bind(lib, "nvmlDeviceGetUtilizationRates", api.GetUtilizationRates) &&
      Bind(lib, "nvmlDeviceGetPowerUsage", api.GetPowerUsage) &&
      Bind(lib, "nvmlDeviceGetTotalEnergyConsumption", api.GetTotalEnergyConsumption) &&
      Bind(lib, "nvmlDeviceGetComputeRunningProcesses_v3", api.GetComputeRunningProcesses);
  if (!bound) return Unavailable(fmt::format("NVML is too old: {}", dlerror()));
  // Optional: MIG (Ampere+) and GPM (Hopper+, driver 520+).
  Bind(lib, "nvmlDeviceGetMigMode", api.GetMigMode);
  Bind(lib, "nvmlDeviceGetMinorNumber", api.GetMinorNumber);
  Bind(lib, "nvmlDeviceGetMaxMigDeviceCount", api.GetMaxMigDeviceCount);
  Bind(lib, "nvmlDeviceGetMigDeviceHandleByIndex", api.GetMigDeviceHandleByIndex);
  const bool gpm = Bind(lib, "nvmlGpmQueryDeviceSupport", api.GpmQueryDeviceSupport) &&
                   Bind(lib, "nvmlGpmSampleAlloc", api.GpmSampleAlloc) &&
                   Bind(lib, "nvmlGpmSampleFree", api.GpmSampleFree) &&
                   Bind(lib, "nvmlGpmSampleGet", api.GpmSampleGet) &&
                   Bind(lib, "nvmlGpmMetricsGet", api.GpmMetricsGet);

  if (nvmlReturn_t r = api.Init(); r != kSuccess) {
    return Unavailable(
        fmt::format("NVML did not initialise: {} (is the driver loaded?)", api.Error(r)));
  }
  unsigned int count = 0;
  if (nvmlReturn_t r = api.GetCount(&count); r != kSuccess)
    return Unavailable(fmt::format("NVML cannot count GPUs: {}", api.Error(r)));
  if (count == 0) return Unavailable("NVML sees no GPU");

  std::vector<DeviceInfo> devices;
  std::vector<NvmlGpus::Target> targets;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t handle = nullptr;
    if (nvmlReturn_t r = api.GetHandleByIndex(i, &handle); r != kSuccess)
      return Unavailable(fmt::format("GPU {}: {}", i, api.Error(r)));
    std::array<char, 128> name{}, uuid{};
    api.GetName(handle, name.data(), name.size());
    api.GetUuid(handle, uuid.data(), uuid.size());
    nvmlMemory_t memory{};
    api.GetMemoryInfo(handle, &memory);
    nvmlGpmSupport_t support{kGpmSupportVersion, 0};
    const bool has_gpm =
        gpm && api.GpmQueryDeviceSupport(handle, &support) == kSuccess && support.isSupportedDevice;

    unsigned int mig_current = 0, mig_pending = 0;
    const bool mig = api.GetMigMode &&
                     api.GetMigMode(handle, &mig_current, &mig_pending) == kSuccess &&
                     mig_current == 1;
    if (mig && api.GetMaxMigDeviceCount && api.GetMigDeviceHandleByIndex) {
      // Existing MIG instances are the placement targets; colo never changes the layout.
      unsigned int max = 0;
      api.GetMaxMigDeviceCount(handle, &max);
      for (unsigned int m = 0; m < max; ++m) {
        nvmlDevice_t mig_handle = nullptr;
        if (api.GetMigDeviceHandleByIndex(handle, m, &mig_handle) != kSuccess) continue;
        std::array<char, 128> mig_uuid{};
        api.GetUuid(mig_handle, mig_uuid.data(), mig_uuid.size());
        nvmlMemory_t mig_memory{};
        api.GetMemoryInfo(mig_handle, &mig_memory);
        DeviceInfo d;
        d.index = static_cast<int>(i);
        d.mig_index = static_cast<int>(m);
        d.uuid = mig_uuid.data();
        d.name = fmt::format("{} MIG {}", name.data(), m);
        d.memory_total = Bytes(static_cast<int64_t>(mig_memory.total));
        devices.push_back(d);
        targets.push_back({mig_handle});
      }
      continue;
    }
    DeviceInfo d;
    d.index = static_cast<int>(i);
    d.uuid = uuid.data();
    unsigned int minor = 0;
    if (api.GetMinorNumber && api.GetMinorNumber(handle, &minor) == kSuccess)
      d.minor = static_cast<int>(minor);
    d.name = name.data();
    d.memory_total = Bytes(static_cast<int64_t>(memory.total));
    d.gpm_supported = has_gpm;
    devices.push_back(d);
    targets.push_back({handle});
  }
  // GPUs without GPM (Ampere) read SM activity, occupancy and DRAM activity from DCGM, where it
  // is installed; else only NVML's utilization stands in, and colo says so.
  std::vector<unsigned> without_gpm;
  for (const DeviceInfo& d : devices)
    if (d.mig_index < 0 && !d.gpm_supported) without_gpm.push_back(static_cast<unsigned>(d.index));
  std::unique_ptr<DcgmProfiler> dcgm;
  std::string note;
  if (!without_gpm.empty()) {
    auto opened = OpenDcgm(without_gpm, Seconds(1));
    if (opened.ok())
      dcgm = std::move(*opened);
    else
      note = "no GPM on this GPU and " + opened.status().message();
  }
  return std::unique_ptr<GpuBackend>(std::make_unique<NvmlGpus>(
      api, std::move(devices), std::move(targets), std::move(dcgm), std::move(note)));
}

}  // namespace colo

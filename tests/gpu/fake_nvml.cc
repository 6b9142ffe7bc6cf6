// A fake libnvidia-ml for tests and measurements. colod loads it as it loads the real one (dlopen,
// $COLO_NVML_LIBRARY), so the NVML backend runs as it does on real GPUs, with no GPU: what the
// devices report comes from colo's fake GPUs, and every call is counted.
//
//   COLO_FAKE_NVML_GPUS     how many GPUs (default 8), all with GPM
//   COLO_FAKE_NVML_DIR      their processes and SM activity, in the form of colod --fake-gpu-dir
//                           (a file named by a pid: lines "GPU BYTES"; "smact-GPU": 0..1)
//   COLO_FAKE_NVML_COUNTS   a file rewritten at each round of samples with the calls made so far,
//                           one "call count" a line ("processes.GPU" per GPU; "gpm_samples_live":
//                           GPM samples allocated and not freed)
//   COLO_FAKE_NVML_SPIN_US  "call=microseconds,...": such a call spins that long on the CPU, as a
//                           driver waiting for the GPU's firmware would (call names as colod's
//                           colo_gpu_backend_calls_total labels them)
//
// A round begins at GPU 0's memory query, the first call of each of colod's samples: the fake
// GPUs are read then, once, and every call of the round answers from that reading.
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/fake_gpus.h"
#include "gpu/nvml_abi.h"

namespace colo::nvml {
struct NvmlDevice {
  unsigned index;
};
struct NvmlGpmSample {
  unsigned device = 0;
  double smact = -1, smocc = -1, drama = -1;
};
}  // namespace colo::nvml

namespace {

using namespace colo::nvml;

struct Fake {
  Fake() {
    const char* gpus = std::getenv("COLO_FAKE_NVML_GPUS");
    const int count = gpus ? std::atoi(gpus) : 8;
    const char* dir = std::getenv("COLO_FAKE_NVML_DIR");
    backend =
        std::make_unique<colo::FakeGpus>(count > 0 ? count : 8, colo::GiB(80), dir ? dir : "");
    for (int i = 0; i < count; ++i) devices.push_back(NvmlDevice{static_cast<unsigned>(i)});
    all_processes.assign(devices.size(), true);
    if (const char* path = std::getenv("COLO_FAKE_NVML_COUNTS")) counts_path = path;
    if (const char* spins = std::getenv("COLO_FAKE_NVML_SPIN_US")) {
      // "processes=4500,gpm_sample=300"
      std::string text = spins;
      for (size_t begin = 0; begin < text.size();) {
        const size_t end = std::min(text.find(',', begin), text.size());
        const std::string item = text.substr(begin, end - begin);
        const size_t eq = item.find('=');
        if (eq != std::string::npos) spin_us[item.substr(0, eq)] = std::atol(item.c_str() + eq + 1);
        begin = end + 1;
      }
    }
  }

  // Counts the call and spins as long as it is told to.
  void Call(const std::string& name) {
    std::lock_guard lock(mutex);
    counts[name]++;
    const auto spin = spin_us.find(name);
    if (spin == spin_us.end()) return;
    timespec began{}, now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &began);
    const long long until = began.tv_sec * 1000000000LL + began.tv_nsec + spin->second * 1000LL;
    do {
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    } while (now.tv_sec * 1000000000LL + now.tv_nsec < until);
  }

  // A new round: the fake GPUs read once, the counts written out.
  void NewRound() {
    std::lock_guard lock(mutex);
    round = backend->SampleAll(all_processes);
    if (counts_path.empty()) return;
    const std::string temporary = counts_path + ".new";
    if (FILE* f = std::fopen(temporary.c_str(), "w")) {
      for (const auto& [name, n] : counts) std::fprintf(f, "%s %lld\n", name.c_str(), n);
      std::fprintf(f, "gpm_samples_live %lld\n", gpm_samples_live.load());
      std::fclose(f);
      std::rename(temporary.c_str(), counts_path.c_str());
    }
  }

  colo::DeviceSample Reading(const NvmlDevice* device) {
    std::lock_guard lock(mutex);
    if (round.empty()) round = backend->SampleAll(all_processes);
    return round.at(device->index);
  }

  std::unique_ptr<colo::FakeGpus> backend;
  std::vector<NvmlDevice> devices;
  std::vector<bool> all_processes;
  std::string counts_path;
  std::map<std::string, long> spin_us;
  std::mutex mutex;
  std::map<std::string, long long> counts;
  std::vector<colo::DeviceSample> round;
  std::atomic<long long> gpm_samples_live{0};
};

Fake& Instance() {
  static Fake fake;
  return fake;
}

bool Valid(nvmlDevice_t device) {
  const auto& devices = Instance().devices;
  return device && device >= devices.data() && device < devices.data() + devices.size();
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  Instance().Call("init");
  return kSuccess;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  return r == kSuccess ? "Success" : r == kNotSupported ? "Not Supported" : "Unknown Error";
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(Instance().devices.size());
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  auto& devices = Instance().devices;
  if (index >= devices.size()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &devices[index];
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  if (!Valid(device)) return 2;
  std::snprintf(name, length, "Fake NVML GPU");
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  if (!Valid(device)) return 2;
  std::snprintf(uuid, length, "GPU-fake-nvml-%04u", device->index);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (!Valid(device)) return 2;
  Fake& fake = Instance();
  if (device->index == 0) fake.NewRound();
  fake.Call("memory");
  const colo::DeviceSample s = fake.Reading(device);
  memory->total = static_cast<unsigned long long>(s.memory_total.count());
  memory->used = static_cast<unsigned long long>(s.memory_used.count());
  memory->free = memory->total - memory->used;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  if (!Valid(device)) return 2;
  Instance().Call("utilization");
  const colo::DeviceSample s = Instance().Reading(device);
  utilization->gpu = static_cast<unsigned int>(s.utilization * 100);
  utilization->memory = 0;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  if (!Valid(device)) return 2;
  Instance().Call("power");
  *milliwatts = static_cast<unsigned int>(Instance().Reading(device).power_watts * 1000);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                 unsigned long long* millijoules) {
  if (!Valid(device)) return 2;
  Instance().Call("energy");
  *millijoules = static_cast<unsigned long long>(Instance().Reading(device).energy_joules * 1000);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  if (!Valid(device)) return 2;
  Fake& fake = Instance();
  fake.Call("processes");
  fake.Call("processes." + std::to_string(device->index));
  const colo::DeviceSample s = fake.Reading(device);
  const unsigned int room = *count;
  *count = static_cast<unsigned int>(s.processes.size());
  if (s.processes.size() > room) return kInsufficientSize;
  for (size_t i = 0; i < s.processes.size(); ++i) {
    infos[i] =
        nvmlProcessInfo_t{static_cast<unsigned int>(s.processes[i].pid),
                          static_cast<unsigned long long>(s.processes[i].used.count()), ~0u, ~0u};
  }
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t, unsigned int*, unsigned int*) {
  return kNotSupported;
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* support) {
  if (!Valid(device)) return 2;
  support->isSupportedDevice = 1;
  return kSuccess;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  Instance().Call("gpm_sample_alloc");
  *sample = new NvmlGpmSample;
  Instance().gpm_samples_live++;
  return kSuccess;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  Instance().Call("gpm_sample_free");
  delete sample;
  Instance().gpm_samples_live--;
  return kSuccess;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  if (!Valid(device) || !sample) return 2;
  Instance().Call("gpm_sample");
  const colo::DeviceSample s = Instance().Reading(device);
  *sample = NvmlGpmSample{device->index, s.smact, s.smocc, s.drama};
  return kSuccess;
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* get) {
  Instance().Call("gpm_metrics");
  if (!get->sample1 || !get->sample2 || get->sample1->device != get->sample2->device) return 2;
  for (unsigned int i = 0; i < get->numMetrics && i < std::size(get->metrics); ++i) {
    nvmlGpmMetric_t& m = get->metrics[i];
    const NvmlGpmSample& now = *get->sample2;
    const double value = m.metricId == kGpmSmUtil        ? now.smact
                         : m.metricId == kGpmSmOccupancy ? now.smocc
                         : m.metricId == kGpmDramBwUtil  ? now.drama
                                                         : -1;
    m.nvmlReturn = value >= 0 ? kSuccess : kNotSupported;
    m.value = value * 100;
  }
  return kSuccess;
}

}  // extern "C"

// Fake GPUs for tests and demos (`colod --fake-gpus N`): they report the processes, memory and
// utilization that tests set, and power and energy that follow the utilization.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "gpu/gpu.h"

namespace colo {

class FakeGpus : public GpuBackend {
 public:
  explicit FakeGpus(int count, Bytes capacity = GiB(80));

  std::string name() const override { return "fake"; }
  const std::vector<DeviceInfo>& devices() const override { return devices_; }
  std::vector<DeviceSample> SampleAll() override;

  // What the next samples report. Thread-safe: tests drive it while colod samples.
  void SetProcessMemory(int device, int pid, Bytes used);
  void RemoveProcess(int pid);
  void SetUtilization(int device, double smact);
  // Makes SampleAll block until released, as a hung driver call would.
  void Hang(bool hang);

 private:
  std::vector<DeviceInfo> devices_;
  std::mutex mutex_;
  std::condition_variable released_;
  bool hung_ = false;
  std::vector<std::map<int, Bytes>> processes_;
  std::vector<double> smact_;
  std::vector<double> energy_;
};

}  // namespace colo

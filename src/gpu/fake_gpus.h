// Fake GPUs for tests and demos (`colod --fake-gpus N`): they report the processes, memory and
// utilization that tests set, and power and energy that follow the utilization. A test that runs
// the real colod sets them through a directory (`--fake-gpu-dir`): a file named by a pid holds
// lines "GPU BYTES", the memory that process uses on that GPU while it runs, a file
// "smact-GPU" the GPU's SM activity (0..1), and a file "nogpm-GPU" makes that GPU one without GPM
// or DCGM: only its utilization is known.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "gpu/gpu.h"

namespace colo {

class FakeGpus : public GpuBackend {
 public:
  explicit FakeGpus(int count, Bytes capacity = GiB(80), std::string state_dir = "");
  // One fake GPU of each capacity (GPUs of different sizes on one server).
  explicit FakeGpus(const std::vector<Bytes>& capacities, std::string state_dir = "");

  std::string name() const override { return "fake"; }
  const std::vector<DeviceInfo>& devices() const override { return devices_; }
  std::vector<DeviceSample> SampleAll(const std::vector<bool>& with_processes) override;
  std::string activity_note() const override {
    return "a fake GPU without GPM or DCGM (its nogpm file)";
  }

  // What the next samples report. Thread-safe: tests drive it while colod samples.
  void SetProcessMemory(int device, int pid, Bytes used);
  void RemoveProcess(int pid);
  void SetUtilization(int device, double smact);
  // Makes SampleAll block until released, as a hung driver call would.
  void Hang(bool hang);

 private:
  // What the files in state_dir_ say, added to what tests set in process.
  void ReadStateDir(std::vector<std::map<int, Bytes>>& processes, std::vector<double>& smact,
                    std::vector<bool>& without_activity) const;

  std::vector<DeviceInfo> devices_;
  std::string state_dir_;
  std::mutex mutex_;
  std::condition_variable released_;
  bool hung_ = false;
  std::vector<std::map<int, Bytes>> processes_;
  std::vector<double> smact_;
  std::vector<double> energy_;
};

}  // namespace colo

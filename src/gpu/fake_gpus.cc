#include "gpu/fake_gpus.h"

#include <fmt/format.h>

namespace colo {

FakeGpus::FakeGpus(int count, Bytes capacity)
    : processes_(static_cast<size_t>(count)),
      smact_(static_cast<size_t>(count), 0.0),
      energy_(static_cast<size_t>(count), 0.0) {
  for (int i = 0; i < count; ++i) {
    DeviceInfo d;
    d.index = i;
    d.uuid = fmt::format("GPU-fake-{:04d}", i);
    d.name = "Fake GPU";
    d.memory_total = capacity;
    d.gpm_supported = true;
    devices_.push_back(d);
  }
}

std::vector<DeviceSample> FakeGpus::SampleAll() {
  std::unique_lock lock(mutex_);
  released_.wait(lock, [&] { return !hung_; });
  std::vector<DeviceSample> out;
  for (size_t i = 0; i < devices_.size(); ++i) {
    DeviceSample s;
    s.memory_total = devices_[i].memory_total;
    for (const auto& [pid, used] : processes_[i]) {
      s.processes.push_back({pid, used});
      s.memory_used += used;
    }
    s.smact = smact_[i];
    s.smocc = smact_[i] / 2;
    s.utilization = smact_[i] > 0 ? 1.0 : 0.0;
    // Same shape as the H100 power model: idle 71 W, about 500 W at SMACT 0.8.
    s.power_watts = 71 + 536 * smact_[i];
    energy_[i] += s.power_watts;  // one sample per second in the demos
    s.energy_joules = energy_[i];
    out.push_back(std::move(s));
  }
  return out;
}

void FakeGpus::SetProcessMemory(int device, int pid, Bytes used) {
  std::lock_guard lock(mutex_);
  processes_.at(static_cast<size_t>(device))[pid] = used;
}

void FakeGpus::RemoveProcess(int pid) {
  std::lock_guard lock(mutex_);
  for (auto& p : processes_) p.erase(pid);
}

void FakeGpus::SetUtilization(int device, double smact) {
  std::lock_guard lock(mutex_);
  smact_.at(static_cast<size_t>(device)) = smact;
}

void FakeGpus::Hang(bool hang) {
  {
    std::lock_guard lock(mutex_);
    hung_ = hang;
  }
  released_.notify_all();
}

}  // namespace colo

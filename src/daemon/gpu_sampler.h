// Samples every GPU on a thread of its own, so a driver call that hangs delays the next sample,
// never an answer or a placement. colod's loop takes the newest sample when it wakes.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gpu/gpu.h"

namespace colo {

struct GpuSampleSet {
  WallTime wall;
  TimePoint time;
  std::vector<DeviceSample> devices;
  uint64_t seq = 0;
};

class GpuSampler {
 public:
  // `notify` is called from the sampling thread after each sample (colod wakes its loop).
  GpuSampler(GpuBackend& gpus, const Clock& clock, Duration interval, std::function<void()> notify);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // The newest sample if it was not taken before.
  std::optional<GpuSampleSet> TakeNew();
  // Which devices' processes the next samples list (those running jobs); none until told.
  void ReadProcessesOf(const std::vector<bool>& devices);

 private:
  void Loop();

  GpuBackend& gpus_;
  const Clock& clock_;
  Duration interval_;
  std::function<void()> notify_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool exited_ = false;
  std::optional<GpuSampleSet> latest_;
  std::vector<bool> with_processes_;
  uint64_t taken_seq_ = 0;
  std::thread thread_;
};

}  // namespace colo

#include "daemon/gpu_sampler.h"

namespace colo {

GpuSampler::GpuSampler(GpuBackend& gpus, const Clock& clock, Duration interval,
                       std::function<void()> notify)
    : gpus_(gpus), clock_(clock), interval_(interval), notify_(std::move(notify)) {
  thread_ = std::thread([this] { Loop(); });
}

GpuSampler::~GpuSampler() {
  std::unique_lock lock(mutex_);
  stop_ = true;
  cv_.notify_all();
  // A sampler stuck in a driver call cannot be joined: after a bounded wait it is left to the
  // process exit (colod exits right after; tests release their fake hang first).
  if (cv_.wait_for(lock, std::chrono::seconds(2), [&] { return exited_; })) {
    lock.unlock();
    thread_.join();
  } else {
    lock.unlock();
    thread_.detach();
  }
}

std::optional<GpuSampleSet> GpuSampler::TakeNew() {
  std::lock_guard lock(mutex_);
  if (!latest_ || latest_->seq == taken_seq_) return std::nullopt;
  taken_seq_ = latest_->seq;
  return latest_;
}

void GpuSampler::ReadProcessesOf(const std::vector<bool>& devices) {
  std::lock_guard lock(mutex_);
  with_processes_ = devices;
}

void GpuSampler::Loop() {
  uint64_t seq = 0;
  std::vector<bool> with_processes;
  for (;;) {
    const auto began = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mutex_);
      with_processes = with_processes_;
    }
    std::vector<DeviceSample> samples = gpus_.SampleAll(with_processes);
    {
      std::lock_guard lock(mutex_);
      if (stop_) break;
      latest_ = GpuSampleSet{clock_.WallNow(), clock_.Now(), std::move(samples), ++seq};
    }
    if (notify_) notify_();
    std::unique_lock lock(mutex_);
    cv_.wait_until(lock, began + interval_, [&] { return stop_; });
    if (stop_) break;
  }
  std::lock_guard lock(mutex_);
  exited_ = true;
  cv_.notify_all();
}

}  // namespace colo

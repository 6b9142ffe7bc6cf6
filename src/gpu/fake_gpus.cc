#include "gpu/fake_gpus.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace colo {

FakeGpus::FakeGpus(int count, Bytes capacity, std::string state_dir)
    : FakeGpus(std::vector<Bytes>(static_cast<size_t>(std::max(count, 0)), capacity),
               std::move(state_dir)) {}

FakeGpus::FakeGpus(const std::vector<Bytes>& capacities, std::string state_dir)
    : state_dir_(std::move(state_dir)),
      processes_(capacities.size()),
      smact_(capacities.size(), 0.0),
      energy_(capacities.size(), 0.0) {
  for (size_t i = 0; i < capacities.size(); ++i) {
    DeviceInfo d;
    d.index = static_cast<int>(i);
    d.minor = d.index;
    d.uuid = fmt::format("GPU-fake-{:04d}", i);
    d.name = "Fake GPU";
    d.memory_total = capacities[i];
    d.gpm_supported = true;
    devices_.push_back(d);
  }
}

std::vector<DeviceSample> FakeGpus::SampleAll(const std::vector<bool>& with_processes) {
  std::unique_lock lock(mutex_);
  released_.wait(lock, [&] { return !hung_; });
  std::vector<std::map<int, Bytes>> processes = processes_;
  std::vector<double> smact = smact_;
  std::vector<bool> without_activity(devices_.size(), false);
  if (!state_dir_.empty()) ReadStateDir(processes, smact, without_activity);
  std::vector<DeviceSample> out;
  for (size_t i = 0; i < devices_.size(); ++i) {
    DeviceSample s;
    s.memory_total = devices_[i].memory_total;
    s.processes_read = i < with_processes.size() && with_processes[i];
    for (const auto& [pid, used] : processes[i]) {
      if (s.processes_read) s.processes.push_back({pid, used});
      s.memory_used += used;
    }
    s.utilization = smact[i] > 0 ? 1.0 : 0.0;
    if (without_activity[i]) {
      s.activity_source = ActivitySource::kUtilization;
    } else {
      s.smact = smact[i];
      s.smocc = smact[i] / 2;
      s.activity_source = ActivitySource::kFake;
    }
    // Same shape as the H100 power model: idle 71 W, about 500 W at SMACT 0.8.
    s.power_watts = 71 + 536 * smact[i];
    energy_[i] += s.power_watts;  // one sample per second in the demos
    s.energy_joules = energy_[i];
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// A small regular file beneath `dir`, read without following links or blocking on FIFOs (colod
// may run as root over a directory others write); "" for anything else.
std::string ReadSmallFile(int dir, const char* name) {
  const int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) text.assign(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace

void FakeGpus::ReadStateDir(std::vector<std::map<int, Bytes>>& processes,
                            std::vector<double>& smact, std::vector<bool>& without_activity) const {
  DIR* dir = opendir(state_dir_.c_str());
  if (!dir) return;
  int entries = 0;
  while (const dirent* entry = readdir(dir)) {
    if (++entries > 4096) break;  // a test writes a handful
    const std::string name = entry->d_name;
    if (name.empty() || name[0] == '.') continue;
    std::istringstream in(ReadSmallFile(dirfd(dir), name.c_str()));
    if (name.starts_with("nogpm-")) {
      const int gpu = std::atoi(name.c_str() + 6);
      if (gpu >= 0 && static_cast<size_t>(gpu) < without_activity.size())
        without_activity[static_cast<size_t>(gpu)] = true;
      continue;
    }
    if (name.starts_with("smact-")) {
      const int gpu = std::atoi(name.c_str() + 6);
      double value = 0;
      if (in >> value && gpu >= 0 && static_cast<size_t>(gpu) < smact.size())
        smact[static_cast<size_t>(gpu)] = std::clamp(value, 0.0, 1.0);
      continue;
    }
    const int pid = std::atoi(name.c_str());
    // A process that ended no longer uses its GPUs, whatever its file says.
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) continue;
    int gpu = 0;
    int64_t bytes = 0;
    while (in >> gpu >> bytes) {
      // At most the GPU's memory: nothing a real GPU could report is larger.
      if (gpu >= 0 && static_cast<size_t>(gpu) < processes.size() && bytes >= 0)
        processes[static_cast<size_t>(gpu)][pid] =
            std::min(Bytes(bytes), devices_[static_cast<size_t>(gpu)].memory_total);
    }
  }
  closedir(dir);
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

// The request handler of colod as a fuzz target: each input is a session of request lines, each
// from a caller the first byte of the line picks (root, two users, a uid with no name), answered
// by ApiHandlers over a real JobController and Scheduler on an in-memory store and a launcher that
// runs nothing. Every line must get exactly one reply that is valid JSON with "ok", and no input
// may crash, hang or corrupt the daemon's state (ASan, UBSan and the controller's own checks).
#include <nlohmann/json.hpp>

#include "api/codec.h"
#include "common/clock.h"
#include "daemon/api_handlers.h"
#include "daemon/fake_job_store.h"
#include "daemon/fake_launcher.h"
#include "fuzz_util.h"
#include "gpu/fake_gpus.h"
#include "policies/registry.h"

namespace colo {
namespace {

struct Daemon {
  ManualClock clock{TimePoint{} + Seconds(100), WallTime{} + std::chrono::hours(490000)};
  std::unique_ptr<PlacementPolicy> policy = [] {
    auto made = MakePolicy("worst-fit:margin=2GiB");
    if (!made.ok()) abort();
    return std::unique_ptr<PlacementPolicy>(std::move(*made));
  }();
  SchedulerConfig config = [] {
    SchedulerConfig c;
    c.launch_grace = Seconds(0);
    return c;
  }();
  Scheduler scheduler{clock, *policy, config};
  FakeJobStore store;
  FakeLauncher launcher;
  FakeGpus gpus{2, GiB(80)};
  std::optional<GpuSnapshot> latest;
  std::unique_ptr<JobController> controller;
  std::unique_ptr<ApiHandlers> handlers;

  Daemon() {
    for (const DeviceInfo& d : gpus.devices())
      scheduler.AddGpu(GpuInfo{d.uuid, d.name, d.memory_total, 0, false, SharingMode::kPlain,
                               Bytes(0), Bytes(0)});
    controller =
        std::make_unique<JobController>(clock, scheduler, store, launcher, ControllerOptions{});
    if (!controller->Recover().ok()) abort();
    handlers = std::make_unique<ApiHandlers>(
        HandlerContext{clock, *controller, store, launcher, gpus, latest, false});
  }
};

const Identity kCallers[] = {
    {0, 0, "root"}, {1001, 1001, "alice"}, {1002, 1002, "bob"}, {4242, 4242, ""}};

}  // namespace
}  // namespace colo

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace colo;
  // A fresh daemon per input, so a failure reproduces from its input alone.
  Daemon daemon;
  std::string_view input = fuzz::AsText(data, size);
  int lines = 0;
  while (!input.empty() && lines++ < 64) {
    const size_t newline = input.find('\n');
    std::string_view line = input.substr(0, newline);
    input = newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
    const Identity& caller = kCallers[line.empty() ? 0 : static_cast<uint8_t>(line[0]) % 4];
    if (!line.empty()) line.remove_prefix(1);
    const std::string reply = daemon.handlers->Handle(caller, line);
    if (!fuzz::IsValidUtf8(reply)) abort();
    const auto parsed = nlohmann::json::parse(reply, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("ok")) abort();
    if (reply.find('\n') != std::string::npos) abort();  // one reply, one line
    // Time passes and jobs come and go between requests, as in colod's loop.
    daemon.clock.Advance(Seconds(1));
    for (const auto& [id, job] : daemon.controller->live_jobs()) {
      if (job.state == JobState::kRunning && job.current() && (lines % 3 == 0))
        daemon.launcher.Succeed(id, job.current()->number);
    }
    daemon.controller->Tick();
  }
  return 0;
}

// colod: the collocation-aware GPU job manager daemon. Runs in the foreground (for systemd).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "daemon/config.h"
#include "daemon/daemon.h"
#include "gpu/fake_gpus.h"

int main(int argc, char** argv) {
  using namespace colo;
  CLI::App app{"colod: the colo daemon; runs jobs on shared GPUs"};
  std::string config_path, state_dir, socket, policy;
  int fake_gpus = 0;
  bool check_only = false;
  int metrics_port = 0;
  std::string slurm_node;
  app.add_option("-c,--config", config_path, "TOML config (see docs/colod.toml)");
  app.add_flag("--check-config", check_only,
               "validate the config, print the effective settings, exit");
  app.add_option("--fake-gpus", fake_gpus, "run with N fake GPUs instead of NVML (demos, tests)");
  std::string fake_gpu_dir;
  app.add_option("--fake-gpu-dir", fake_gpu_dir,
                 "tests: the fake GPUs report the per-process memory and SM activity written "
                 "here (gpu/fake_gpus.h)");
  app.add_option("--state-dir", state_dir, "where the database and job logs live");
  app.add_option("--socket", socket, "the API socket");
  app.add_option("--policy", policy, "placement policy spec (overrides the config)");
  app.add_option("--metrics-port", metrics_port, "serve Prometheus metrics on 127.0.0.1:PORT");
  app.add_option("--slurm-node", slurm_node,
                 "be the node layer of this Slurm node (its name in slurm.conf)");
  app.set_version_flag("--version", "colod 0.1.0");
  CLI11_PARSE(app, argc, argv);

  DaemonConfig config;
  if (!config_path.empty()) {
    auto loaded = LoadConfig(config_path);
    if (!loaded.ok()) {
      fmt::print(stderr, "colod: {}\n", loaded.status().message());
      return 2;
    }
    config = *loaded;
  }
  if (!state_dir.empty()) config.state_dir = state_dir;
  if (!socket.empty()) config.socket = socket;
  if (!policy.empty()) config.policy = policy;
  if (!slurm_node.empty()) config.slurm_node = slurm_node;
  if (const char* conf = getenv("SLURM_CONF"); conf && config.slurm_conf.empty())
    config.slurm_conf = conf;
  if (metrics_port) {
    config.metrics_enabled = true;
    config.metrics_port = metrics_port;
  }
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  ApplyDefaultPaths(config, ec ? "." : self.parent_path().string());
  if (check_only) {
    fmt::print(
        "config ok\n  policy      {}\n  state_dir   {}\n  socket      {}\n  shim        {}\n"
        "  sampling    every {:.1f} s, window {}\n  sharing     {} by default\n  mps         {}\n"
        "  metrics     {}\n  limits      {} connections, {} per user, idle {:.0f} s, requests up "
        "to {} "
        "bytes\n  processes   cgroups {}, leftovers get {:.0f} s after SIGTERM\n",
        config.PolicySpec(), config.state_dir, config.socket, config.shim,
        ToSeconds(config.scheduler.sample_interval), config.scheduler.window_samples,
        ToString(config.default_mode), config.mps_enabled ? config.mps_control : "disabled",
        config.metrics_enabled ? fmt::format("{}:{}", config.metrics_address, config.metrics_port)
                               : "off",
        config.max_clients, config.max_clients_per_user, ToSeconds(config.idle_timeout),
        config.max_request_bytes, config.cgroups ? "auto" : "off",
        ToSeconds(config.leftover_grace));
    return 0;
  }
  if (access(config.shim.c_str(), X_OK) != 0) {
    fmt::print(stderr, "colod: cannot execute the job shim {} (set paths.shim)\n", config.shim);
    return 2;
  }

  if (!fake_gpu_dir.empty() && fake_gpus <= 0) {
    fmt::print(stderr, "colod: --fake-gpu-dir is for --fake-gpus only\n");
    return 2;
  }
  std::unique_ptr<GpuBackend> gpus;
  if (fake_gpus > 0) {
    gpus = std::make_unique<FakeGpus>(fake_gpus, GiB(80), fake_gpu_dir);
    config.mps_enabled = false;  // fake GPUs have no MPS: jobs share them plainly
  } else {
    auto nvml = OpenNvml();
    if (!nvml.ok()) {
      fmt::print(stderr, "colod: {}\n", nvml.status().message());
      return 1;
    }
    gpus = std::move(*nvml);
  }
  for (const auto& d : gpus->devices()) {
    fmt::print(stderr, "colod: GPU {}{} {} {} {}{}\n", d.index,
               d.mig_index >= 0 ? fmt::format(" MIG {}", d.mig_index) : "", d.uuid, d.name,
               FormatBytes(d.memory_total), d.gpm_supported ? ", GPM SM activity" : "");
  }
  auto daemon = Daemon::Create(Daemon::Options{config, true}, *gpus);
  if (!daemon.ok()) {
    fmt::print(stderr, "colod: {}\n", daemon.status().message());
    return 1;
  }
  fmt::print(stderr, "colod: serving {} with policy {}\n", config.socket, config.PolicySpec());
  const Status result = (*daemon)->Run();
  fmt::print(stderr, "colod: stopping; running jobs keep running and are re-adopted at restart\n");
  return result.ok() ? 0 : 1;
}

// colod: the collocation-aware GPU job manager daemon. Runs in the foreground (for systemd).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/strings.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/slurm_gpus.h"
#include "docgen/program_docs.h"
#include "gpu/fake_gpus.h"

namespace {
// The node's CPU cores as Slurm counts them (distinct package and core ids in sysfs), or its
// online CPUs where sysfs does not say.
int CoreCount() {
  std::set<std::string> cores;
  for (unsigned cpu = 0; cpu < 4096; ++cpu) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", cpu);
    std::ifstream package(dir + "physical_package_id"), core(dir + "core_id");
    std::string p, c;
    if (!(package >> p) || !(core >> c)) break;
    cores.insert(p + ":" + c);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

// colod(8) beside its options.
colo::ManPage ColodManPage() {
  return colo::ManPage{
      "colod runs deep-learning training jobs that users submit with colo on this server's GPUs, "
      "as the users who submitted them, several to a GPU when their memory and SM activity "
      "allow. It runs as root for every local user (systemd unit colod.service, socket "
      "/run/colo/colod.sock) or as a user for that user alone (a personal daemon, socket "
      "$XDG_RUNTIME_DIR/colo/colod.sock). colod --check-config prints every effective setting as "
      "a config file.\n\n"
      "colod places each job with its policy and gates (memory planned with the job's peak, SM "
      "activity, a launch grace), starts it through colo-shim as its user in a session and "
      "cgroup of its own with its GPUs in CUDA_VISIBLE_DEVICES and, under MPS, its limits; it "
      "runs its own MPS control daemon. A job that runs out of GPU memory is queued again with a "
      "larger need. Every job is stored before it is acknowledged: kill -9 colod loses nothing, "
      "and a restarted colod takes back the jobs still running.",
      {{"colod --fake-gpus 2", "a personal colod with two fake GPUs: no GPU needed, to try colo"},
       {"colod --config /etc/colo/colod.toml --check-config",
        "check a config file and print every effective setting"},
       {"systemctl enable --now colod", "the system colod, as installed (make install)"},
       {"systemctl reload colod", "re-read the config (SIGHUP)"},
       {"colod --config /etc/colo/colod.toml --slurm-node gpu01",
        "the node layer of a Slurm node named gpu01 in slurm.conf"}},
      {{"XDG_STATE_HOME, HOME",
        "a personal colod's state: $XDG_STATE_HOME/colo, else ~/.local/state/colo"},
       {"XDG_RUNTIME_DIR", "a personal colod's socket: $XDG_RUNTIME_DIR/colo/colod.sock"},
       {"SLURM_CONF",
        "the Slurm configuration scontrol and squeue read, unless [slurm] conf is set"}},
      {{"/etc/colo/colod.toml",
        "the configuration as installed (PREFIX/etc/colo); every key with its default is in the "
        "sample, packaging/colod.toml in the source"},
       {"/var/lib/colo",
        "state (root): colo.db (the jobs, SQLite), history.db (colo report), "
        "jobs/N/ (each job's output, its owner's), mps/ (colod's MPS daemon)"},
       {"/run/colo/colod.sock", "the API socket (root), for every local user"},
       {"~/.local/state/colo, $XDG_RUNTIME_DIR/colo/colod.sock",
        "a personal colod's state and socket"},
       {"PREFIX/lib/systemd/system/colod.service", "the systemd unit"}},
      {{"0",
        "stopped by SIGTERM or SIGINT (running jobs keep running), or --check-config found the "
        "config good"},
       {"1",
        "could not start: no GPU or driver (see --fake-gpus), the state directory, the socket"},
       {"2", "a usage error or a bad config: the message names the option or the key"}},
      "colo(1), nvidia-smi(1), nvidia-cuda-mps-control(1), slurm.conf(5). The guides: docs/ in "
      "colo's source (admin.md, slurm-sites.md, metrics.md)."};
}
}  // namespace

int main(int argc, char** argv) {
  using namespace colo;
  CLI::App app{"colod: the colo daemon; runs jobs on shared GPUs", "colod"};
  std::string config_path, state_dir, socket, policy;
  int fake_gpus = 0;
  bool check_only = false;
  int metrics_port = 0;
  std::string slurm_node;
  app.add_option(
      "-c,--config", config_path,
      "TOML config file; every key is optional (the sample with every key and its "
      "default: PREFIX/etc/colo/colod.toml as installed, packaging/colod.toml in the source; "
      "colod --check-config prints them all)");
  app.add_flag("--check-config", check_only,
               "validate the config, print the effective settings, exit");
  app.add_option("--fake-gpus", fake_gpus, "run with N fake GPUs instead of NVML (demos, tests)")
      ->check(CLI::Range(1, 256));
  std::string fake_gpu_memory;
  app.add_option("--fake-gpu-memory", fake_gpu_memory,
                 "the fake GPUs' memory, one size per GPU (e.g. 80GiB,40GiB; default 80GiB each)");
  bool slurm_gres = false;
  app.add_flag("--slurm-gres", slurm_gres,
               "print the gres.conf lines that book this node's GPUs in Slurm (shards of "
               "slurm.shard_size, less gates.memory_margin), and exit");
  std::string fake_gpu_dir;
  app.add_option("--fake-gpu-dir", fake_gpu_dir,
                 "tests: the fake GPUs report the per-process memory and SM activity written "
                 "here (gpu/fake_gpus.h)");
  app.add_option("--state-dir", state_dir, "where the database and job logs live");
  app.add_option("--socket", socket, "the API socket");
  app.add_option("--policy", policy, "placement policy spec (overrides the config)");
  app.add_option("--metrics-port", metrics_port, "serve Prometheus metrics on 127.0.0.1:PORT")
      ->check(CLI::Range(1, 65535));
  app.add_option("--slurm-node", slurm_node,
                 "be the node layer of this Slurm node (its name in slurm.conf)");
  app.set_version_flag("--version", "colod 0.1.0");
  std::string generate;
  app.add_option("--generate", generate)
      ->check(CLI::IsMember(std::vector<std::string>(kDocFormats.begin(), kDocFormats.end())))
      ->group("");
  app.footer(
      "Signals: SIGTERM or SIGINT stop colod (running jobs keep running and are re-adopted at "
      "the next start); SIGHUP reloads the config file: the [limits] settings and "
      "metrics.max_clients take effect at once, every other change needs a restart (the log "
      "line says which).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end well; anything else is a usage error, exit 2 as documented.
    const int printed = app.exit(e);
    return printed == 0 ? 0 : 2;
  }

  if (!generate.empty()) {
    fmt::print("{}", GenerateDoc(app, generate, ColodManPage()));
    return 0;
  }
  // The effective config: the file, then the command line's overrides, then the defaults. A
  // reload (SIGHUP) makes it again the same way.
  auto effective = [&]() -> Result<DaemonConfig> {
    DaemonConfig config;
    if (!config_path.empty()) {
      auto loaded = LoadConfig(config_path);
      if (!loaded.ok()) return loaded.status();
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
    // The policy as colod will run it, whichever of the file and --policy named it.
    if (auto read = config.Policy(); !read.ok())
      return InvalidArgument("scheduler.policy: " + read.status().message());
    return config;
  };
  auto made = effective();
  if (!made.ok()) {
    fmt::print(stderr, "colod: {}\n", made.status().message());
    return 2;
  }
  DaemonConfig config = *made;
  if (check_only) {
    // A config file itself: every setting colod would run with, defaults included.
    fmt::print("# config ok ({}); every effective setting follows, as a config file\n",
               config_path.empty() ? "no config file: the defaults" : config_path);
    fmt::print("# placement policy: {}\n", Describe(*config.Policy()));
    std::string table;
    for (const auto& [key, value] : EffectiveSettings(config)) {
      const std::string this_table = key.substr(0, key.find('.'));
      if (this_table != table) fmt::print("{}[{}]\n", table.empty() ? "" : "\n", this_table);
      table = this_table;
      fmt::print("{} = {}\n", key.substr(key.find('.') + 1), value);
    }
    return 0;
  }
  if (access(config.shim.c_str(), X_OK) != 0) {
    fmt::print(stderr, "colod: cannot execute the job shim {} (set paths.shim)\n", config.shim);
    return 2;
  }

  if ((!fake_gpu_dir.empty() || !fake_gpu_memory.empty()) && fake_gpus <= 0) {
    fmt::print(stderr, "colod: --fake-gpu-dir and --fake-gpu-memory are for --fake-gpus only\n");
    return 2;
  }
  std::unique_ptr<GpuBackend> gpus;
  if (fake_gpus > 0) {
    std::vector<Bytes> sizes(static_cast<size_t>(fake_gpus), GiB(80));
    if (!fake_gpu_memory.empty()) {
      const std::vector<std::string> given = Split(fake_gpu_memory, ',');
      if (given.size() != sizes.size()) {
        fmt::print(stderr, "colod: --fake-gpu-memory gives {} sizes for {} fake GPUs\n",
                   given.size(), sizes.size());
        return 2;
      }
      for (size_t i = 0; i < given.size(); ++i) {
        auto size = ParseBytes(given[i]);
        if (!size.ok() || *size < GiB(1)) {
          fmt::print(stderr, "colod: --fake-gpu-memory: '{}' is not a size of 1GiB or more\n",
                     given[i]);
          return 2;
        }
        sizes[i] = *size;
      }
    }
    gpus = std::make_unique<FakeGpus>(sizes, fake_gpu_dir);
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
  if (slurm_gres) {
    auto lines = GresConfLines(gpus->devices(), config, CoreCount());
    if (!lines.ok()) {
      fmt::print(stderr, "colod: {}\n", lines.status().message());
      return 2;
    }
    fmt::print("{}", *lines);
    return 0;
  }
  auto daemon = Daemon::Create(Daemon::Options{config, true, effective}, *gpus);
  if (!daemon.ok()) {
    fmt::print(stderr, "colod: {}\n", daemon.status().message());
    return 1;
  }
  fmt::print(stderr, "colod: serving {} with policy {}\n", config.socket,
             Describe(*config.Policy()));
  const Status result = (*daemon)->Run();
  fmt::print(stderr, "colod: stopping; running jobs keep running and are re-adopted at restart\n");
  return result.ok() ? 0 : 1;
}

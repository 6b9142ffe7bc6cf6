#include "formats/slurm_options.h"

#include <fmt/format.h>

#include <optional>

#include "common/strings.h"
#include "common/text.h"

namespace colo {
namespace {

struct SlurmOption {
  std::string_view short_name;  // empty: none
  std::string_view long_name;
  bool takes_value;
  std::string_view hint;
};

// sbatch's options that colo has no counterpart for, and the few whose colo namesake means
// something else (--mem). The ones colo reads (-J, -G, --gres, -t, -o, -e, -a, -d, --signal,
// --requeue, --no-requeue) are not here.
constexpr SlurmOption kSlurmOptions[] = {
    {"-p", "--partition", true, "colo runs jobs on this server's GPUs: there are no partitions"},
    {"-A", "--account", true, "colo has no accounts"},
    {"-q", "--qos", true, "colo has no QOS; --priority orders your own waiting jobs"},
    {"-N", "--nodes", true, "a colo job runs on one server: ask for its GPUs with --gpus N"},
    {"-n", "--ntasks", true, "colo starts one command, which may start processes of its own"},
    {"", "--ntasks-per-node", true,
     "colo starts one command, which may start processes of its own"},
    {"-c", "--cpus-per-task", true, "colo does not allocate CPUs"},
    {"", "--mem", true,
     "Slurm's --mem is host memory; colo's --mem is GPU memory per GPU (#COLO --mem=12GiB)"},
    {"", "--mem-per-cpu", true, "colo does not allocate host memory"},
    {"", "--mem-per-gpu", true,
     "Slurm's --mem-per-gpu is host memory; colo's --mem is GPU memory per GPU"},
    {"", "--gpus-per-task", true, "ask for the job's GPUs with --gpus N"},
    {"", "--gpus-per-node", true, "ask for the job's GPUs with --gpus N"},
    {"", "--cpus-per-gpu", true, "colo does not allocate CPUs"},
    {"-C", "--constraint", true, "colo has no node features"},
    {"-w", "--nodelist", true, "colo runs jobs on this server only"},
    {"-x", "--exclude", true, "colo runs jobs on this server only"},
    {"", "--exclusive", false, "use --share exclusive for a GPU to the job alone"},
    {"", "--mail-type", true, "colo sends no mail; colo wait N returns when jobs end"},
    {"", "--mail-user", true, "colo sends no mail; colo wait N returns when jobs end"},
    {"", "--wrap", true, "give the command after --: colo submit [options] -- CMD ARGS"},
    {"-W", "--wait", false, "submit, then colo wait N"},
    {"", "--begin", true, "colo has no start times; --hold, then colo release N"},
    {"", "--deadline", true, "colo has no deadlines; --time limits a job's run"},
    {"", "--time-min", true, "colo has no minimum time; --time limits a job's run"},
    {"", "--open-mode", true,
     "-o/-e files are emptied when the job first starts and appended to by later attempts"},
    {"", "--comment", true, "colo keeps no comments; --name names the job"},
    {"-L", "--licenses", true, "colo has no licenses"},
    {"", "--reservation", true, "colo has no reservations"},
    {"-M", "--clusters", true, "colo serves this server only"},
    {"-i", "--input", true, "a colo job's stdin is /dev/null"},
    {"", "--nice", true, "not read from #SBATCH lines: give colo submit --nice N"},
    {"-D", "--chdir", true, "not read from #SBATCH lines: give colo submit -D DIR"},
    {"-H", "--hold", false, "not read from #SBATCH lines: give colo submit --hold"},
    {"", "--export", true, "not read from #SBATCH lines: give colo submit --export ..."},
    {"", "--priority", true, "not read from #SBATCH lines: give colo submit --priority N"},
    {"", "--get-user-env", false, "--export names the environment a job gets"},
    {"", "--uid", true, "a job runs as the user who submits it"},
    {"", "--gid", true, "a job runs with its user's groups"},
    {"-k", "--no-kill", false, "colo runs jobs on this server only"},
    {"-s", "--oversubscribe", false, "colo shares GPUs when memory and SM activity allow"},
    {"", "--spread-job", false, "colo runs jobs on this server only"},
    {"", "--switches", true, "colo runs jobs on this server only"},
    {"", "--test-only", false, "colo explain N says why a job waits"},
    {"", "--export-file", true, "--export NAME=value,... sets the job's environment"},
    {"-Q", "--quiet", false, "colo prints only the job's id with --parsable"},
    {"-v", "--verbose", false, "colo show N tells everything about a job"},
    {"", "--gpu-bind", true, "colod chooses the GPUs and sets CUDA_VISIBLE_DEVICES"},
    {"", "--gpu-freq", true, "colo does not set GPU clocks"},
    {"-m", "--distribution", true, "colo runs jobs on this server only"},
};

const SlurmOption* Find(std::string_view name) {
  const std::string_view key = name.substr(0, name.find('='));
  for (const SlurmOption& o : kSlurmOptions) {
    if (key == o.long_name || (!o.short_name.empty() && key == o.short_name)) return &o;
  }
  return nullptr;
}

Result<int> Count(std::string_view text, std::string_view what) {
  auto n = ParseInt(text);
  if (!n.ok() || *n < 1 || *n > 64)
    return InvalidArgument(
        fmt::format("{}: '{}' is not a number of GPUs (1..64)", what, Printable(text)));
  return static_cast<int>(*n);
}

}  // namespace

Result<int> ParseGpuGres(std::string_view text, std::string* type) {
  if (type) type->clear();
  std::optional<int> gpus;
  for (const std::string& gres : Split(text, ',')) {
    const std::vector<std::string> parts = Split(gres, ':');
    if (parts.empty() || parts[0] != "gpu") {
      return InvalidArgument(fmt::format(
          "--gres: colo has GPUs only (gpu, gpu:N or gpu:TYPE:N), not '{}'", Printable(gres)));
    }
    if (gpus) return InvalidArgument("--gres names gpu twice");
    if (parts.size() > 3)
      return InvalidArgument(
          fmt::format("--gres: '{}' is not gpu, gpu:N or gpu:TYPE:N", Printable(gres)));
    if (parts.size() == 1) {
      gpus = 1;
      continue;
    }
    // gpu:TYPE (one), gpu:N, gpu:TYPE:N
    const bool counted = parts.size() == 3 || ParseInt(parts[1]).ok();
    if (parts.size() == 3 || !counted) {
      if (type) *type = parts[1];
    }
    if (!counted) {
      gpus = 1;
      continue;
    }
    auto n = Count(parts.back(), "--gres");
    if (!n.ok()) return n.status();
    gpus = *n;
  }
  if (!gpus) return InvalidArgument("--gres: no gpu in it");
  return *gpus;
}

Result<int> ParseGpuCount(std::string_view text, std::string* type) {
  if (type) type->clear();
  const size_t colon = text.rfind(':');
  if (colon != std::string_view::npos && type) *type = std::string(text.substr(0, colon));
  return Count(colon == std::string_view::npos ? text : text.substr(colon + 1), "--gpus");
}

std::string_view SlurmOptionHint(std::string_view name) {
  const SlurmOption* o = Find(name);
  return o ? o->hint : std::string_view();
}

bool SlurmOptionTakesValue(std::string_view name) {
  const SlurmOption* o = Find(name);
  return o ? o->takes_value : false;
}

}  // namespace colo

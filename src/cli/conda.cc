#include "cli/conda.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "common/text.h"

namespace colo {

namespace fs = std::filesystem;

namespace {

// "/opt/conda/envs/tf/" and "/opt/conda/envs/./tf" name "/opt/conda/envs/tf".
fs::path Normal(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  return p.has_filename() || !p.has_relative_path() ? p : p.parent_path();
}

}  // namespace

Status FindCondaEnvironment(const std::string& listing, const std::string& environment) {
  // conda may print warnings (an outdated conda, a bad .condarc) before or after its answer.
  const size_t begin = listing.find('{');
  const size_t end = listing.rfind('}');
  nlohmann::json reply;
  if (begin != std::string::npos && end != std::string::npos && end > begin)
    reply = nlohmann::json::parse(listing.begin() + static_cast<std::ptrdiff_t>(begin),
                                  listing.begin() + static_cast<std::ptrdiff_t>(end) + 1, nullptr,
                                  /*allow_exceptions=*/false);
  if (!reply.is_object() || !reply.contains("envs") || !reply["envs"].is_array()) {
    return InvalidArgument(
        fmt::format("'conda env list --json' printed no list of environments: {}",
                    Printable(listing.substr(0, 200))));
  }
  // `base` is conda's own installation, always there (and listed first, under its own path).
  if (environment == "base") return Status::Ok();
  const bool by_path = environment.find('/') != std::string::npos;
  std::vector<std::string> names;
  for (const auto& entry : reply["envs"]) {
    if (!entry.is_string()) continue;
    const fs::path prefix = Normal(entry.get<std::string>());
    if (by_path ? prefix == Normal(environment) : prefix.filename() == environment)
      return Status::Ok();
    if (prefix.parent_path().filename() == "envs") names.push_back(prefix.filename().string());
  }
  std::sort(names.begin(), names.end());
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  return NotFound(fmt::format("conda has no environment '{}' (conda env list: {})",
                              Printable(environment), known.empty() ? "base only" : known));
}

Status CheckCondaEnvironment(const std::string& conda, const std::string& environment,
                             const std::vector<std::string>& env) {
  std::error_code ec;
  const std::string program = fs::absolute(conda, ec).string();
  auto run = RunCommand({program, "env", "list", "--json"}, env, std::chrono::seconds(60));
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return FailedPrecondition(fmt::format(
        "'{} env list --json' {} while checking for environment '{}': {}", Printable(program),
        run->timed_out ? "took more than 60 s"
                       : fmt::format("exited with status {}", run->exit_code),
        Printable(environment), Printable(run->output.substr(0, 500))));
  }
  return FindCondaEnvironment(run->output, environment);
}

}  // namespace colo

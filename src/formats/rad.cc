#include "formats/rad.h"

#include <fmt/format.h>

#include "common/strings.h"

namespace colo {
namespace {

constexpr int64_t kUnknownMiB = 40000;  // CARMA's "not known" marker

Result<std::optional<Bytes>> ParseMiB(const std::string& line, const std::string& origin, int index,
                                      const char* what) {
  const std::string_view field = Trim(line);
  if (field.empty()) return std::optional<Bytes>();
  auto value = ParseDouble(field);
  if (!value.ok() || *value < 0 || *value > 16 * 1024 * 1024) {
    return InvalidArgument(fmt::format("{}:{}: {} must be a memory size in MiB, got '{}'", origin,
                                       index + 1, what, field));
  }
  if (static_cast<int64_t>(*value) == kUnknownMiB) return std::optional<Bytes>();
  return std::optional<Bytes>(MiBf(*value));
}

}  // namespace

Result<RadTask> ParseRad(const std::string& text, const std::string& origin) {
  if (text.size() > (1 << 20)) return InvalidArgument(fmt::format("{}: larger than 1 MiB", origin));
  std::vector<std::string> lines = Split(text, '\n');
  for (auto& l : lines) l = std::string(Trim(l));
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.size() < 3) {
    return InvalidArgument(
        fmt::format("{}: has {} line(s); a task file needs at least the comment, environment and "
                    "command lines",
                    origin, lines.size()));
  }
  auto line = [&](size_t i) -> const std::string& {
    static const std::string kEmpty;
    return i < lines.size() ? lines[i] : kEmpty;
  };
  RadTask task;
  task.comment = line(0);
  task.environment = line(1);
  if (StartsWith(task.environment, "conda activate"))
    task.environment = std::string(Trim(task.environment.substr(14)));
  task.command = line(2);
  if (task.command.empty())
    return InvalidArgument(fmt::format("{}:3: the command line is empty", origin));
  task.summary_file = line(3);
  task.dataset = line(4);
  if (!line(5).empty()) {
    auto batch = ParseInt(line(5));
    if (!batch.ok() || *batch < 1 || *batch > 1'000'000) {
      return InvalidArgument(
          fmt::format("{}:6: batch size must be a positive integer, got '{}'", origin, line(5)));
    }
    task.batch = static_cast<int>(*batch);
  }
  if (!line(7).empty()) {
    auto gpus = ParseInt(line(7));
    if (!gpus.ok() || *gpus < 1 || *gpus > 64) {
      return InvalidArgument(
          fmt::format("{}:8: number of GPUs must be 1..64, got '{}'", origin, line(7)));
    }
    task.gpus = static_cast<int>(*gpus);
  }
  const struct {
    size_t index;
    const char* what;
    std::optional<Bytes>* out;
  } memory_lines[] = {{8, "measured peak", &task.measured_peak},
                      {9, "Horus estimate", &task.horus},
                      {10, "FakeTensor estimate", &task.faketensor},
                      {11, "GPUMemNet estimate", &task.gpumemnet}};
  for (const auto& m : memory_lines) {
    auto value = ParseMiB(line(m.index), origin, static_cast<int>(m.index), m.what);
    if (!value.ok()) return value.status();
    *m.out = *value;
  }
  return task;
}

}  // namespace colo

#include "common/units.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace colo {
namespace {

// Splits "12.5GiB" into 12.5 and "GiB". Fails on empty, non-numeric, non-finite or negative
// numbers.
Status SplitNumber(const std::string& text, double* number, std::string* unit) {
  if (text.empty()) return InvalidArgument("empty quantity");
  const char* begin = text.c_str();
  char* end = nullptr;
  *number = std::strtod(begin, &end);
  if (end == begin) return InvalidArgument(fmt::format("'{}' does not start with a number", text));
  if (!std::isfinite(*number)) return InvalidArgument(fmt::format("'{}' is not finite", text));
  if (*number < 0) return InvalidArgument(fmt::format("'{}' is negative", text));
  *unit = std::string(end);
  while (!unit->empty() && unit->front() == ' ') unit->erase(unit->begin());
  return Status::Ok();
}

}  // namespace

Result<Bytes> ParseBytes(const std::string& text) {
  double number = 0;
  std::string unit;
  COLO_RETURN_IF_ERROR(SplitNumber(text, &number, &unit));
  double scale = 0;
  // In any case, as Slurm takes 12g: every unit is binary, so GB and gib are GiB too.
  std::string lower = unit;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.empty() || lower == "m" || lower == "mib" || lower == "mb") {
    scale = 1 << 20;
  } else if (lower == "b") {
    scale = 1;
  } else if (lower == "k" || lower == "kib" || lower == "kb") {
    scale = 1 << 10;
  } else if (lower == "g" || lower == "gib" || lower == "gb") {
    scale = 1 << 30;
  } else if (lower == "t" || lower == "tib" || lower == "tb") {
    scale = static_cast<double>(int64_t{1} << 40);
  } else {
    return InvalidArgument(
        fmt::format("unknown memory unit '{}' in '{}' (use B, KiB, MiB, GiB, TiB)", unit, text));
  }
  const double bytes = number * scale;
  if (bytes > 1e18) return InvalidArgument(fmt::format("'{}' is absurdly large", text));
  return Bytes(static_cast<int64_t>(bytes + 0.5));
}

std::string FormatBytes(Bytes b) {
  const double abs = std::fabs(static_cast<double>(b.count()));
  if (abs >= double(1 << 30)) return fmt::format("{:.1f} GiB", b.gib());
  if (abs >= double(1 << 20)) return fmt::format("{:.0f} MiB", b.mib());
  return fmt::format("{} B", b.count());
}

std::string FormatDuration(Duration d) {
  const double seconds = ToSeconds(d);
  const double abs = std::fabs(seconds);
  if (abs < 60) return fmt::format("{:.0f} s", seconds);
  if (abs < 3600) return fmt::format("{:.0f} min", seconds / 60);
  if (abs < 86400) return fmt::format("{:.1f} h", seconds / 3600);
  return fmt::format("{:.1f} d", seconds / 86400);
}

std::string FormatExactBytes(Bytes b) {
  const int64_t n = b.count();
  constexpr std::pair<int, const char*> kUnits[] = {
      {40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}};
  for (const auto& [shift, unit] : kUnits) {
    const int64_t size = int64_t{1} << shift;
    if (n != 0 && n % size == 0) return fmt::format("{}{}", n / size, unit);
  }
  return fmt::format("{}B", n);
}

Result<Duration> ParseDuration(const std::string& text) {
  double number = 0;
  std::string unit;
  COLO_RETURN_IF_ERROR(SplitNumber(text, &number, &unit));
  double seconds = number;
  if (unit.empty() || unit == "s") {
  } else if (unit == "ms") {
    seconds = number / 1e3;
  } else if (unit == "m" || unit == "min") {
    seconds = number * 60;
  } else if (unit == "h") {
    seconds = number * 3600;
  } else if (unit == "d") {
    seconds = number * 86400;
  } else {
    return InvalidArgument(
        fmt::format("unknown time unit '{}' in '{}' (use ms, s, m, h, d)", unit, text));
  }
  if (seconds > 1e9) return InvalidArgument(fmt::format("'{}' is absurdly long", text));
  return SecondsF(seconds);
}

}  // namespace colo

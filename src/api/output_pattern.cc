#include "api/output_pattern.h"

#include <fmt/format.h>
#include <limits.h>

#include <charconv>

#include "common/text.h"

namespace colo::api {
namespace {

constexpr int kMaxWidth = 10;
// Slurm's %a outside an array: NO_VAL - 1.
constexpr std::string_view kNoArrayTask = "4294967294";

struct Code {
  int width = 0;
  char letter = '\0';
  size_t length = 0;  // bytes from the '%' on
};

// The code at pattern[at] == '%'; letter '\0' when it does not finish.
Code ReadCode(std::string_view pattern, size_t at) {
  Code code;
  size_t i = at + 1;
  const size_t digits_from = i;
  while (i < pattern.size() && pattern[i] >= '0' && pattern[i] <= '9' && i - digits_from < 3) ++i;
  if (i > digits_from)
    std::from_chars(pattern.data() + digits_from, pattern.data() + i, code.width);
  if (i < pattern.size()) code.letter = pattern[i];
  code.length = i + 1 - at;
  return code;
}

std::string Padded(std::string_view digits, int width) {
  if (static_cast<int>(digits.size()) >= width) return std::string(digits);
  return std::string(static_cast<size_t>(width) - digits.size(), '0') + std::string(digits);
}

}  // namespace

Status CheckOutputPattern(std::string_view pattern) {
  if (pattern.empty()) return InvalidArgument("an output file name is empty");
  if (pattern.size() > kMaxOutputPatternBytes)
    return InvalidArgument(
        fmt::format("an output file name is longer than {} bytes", kMaxOutputPatternBytes));
  if (pattern.find('\0') != std::string_view::npos)
    return InvalidArgument("an output file name holds a NUL byte");
  // Sent as JSON text and shown by colo show: a name must be itself there, not a replacement.
  if (Printable(pattern) != pattern || pattern.find('\t') != std::string_view::npos)
    return InvalidArgument(fmt::format(
        "output file name {} must be valid UTF-8 without control characters", Printable(pattern)));
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    const Code code = ReadCode(pattern, i);
    if (code.letter == '\0')
      return InvalidArgument(fmt::format("output file name '{}' ends inside a %-code", pattern));
    if (code.width > kMaxWidth)
      return InvalidArgument(
          fmt::format("output file name '{}': a %-code pads to at most {}", pattern, kMaxWidth));
    if (std::string_view("jAauxN%").find(code.letter) == std::string_view::npos) {
      return InvalidArgument(
          fmt::format("output file name '{}': %{} is not a code colo knows (%j %A %a %u %x %N %%)",
                      pattern, code.letter));
    }
    i += code.length - 1;
  }
  return Status::Ok();
}

std::string ExpandOutputPattern(std::string_view pattern, const OutputNames& names) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    const Code code = ReadCode(pattern, i);
    switch (code.letter) {
      case 'j':
        out += Padded(std::to_string(names.job), code.width);
        break;
      case 'A':
        out += Padded(std::to_string(names.array_job.value_or(names.job)), code.width);
        break;
      case 'a':
        out +=
            Padded(names.array_job ? std::to_string(names.array_task) : kNoArrayTask, code.width);
        break;
      case 'u':
        out += names.user;
        break;
      case 'x':
        out += names.name;
        break;
      case 'N':
        out += names.host;
        break;
      case '%':
        out += '%';
        break;
      default:  // not checked: copied as written
        out.append(pattern.substr(i, code.length));
        break;
    }
    i += code.length - 1;
  }
  if (out.size() >= PATH_MAX) out.resize(PATH_MAX - 1);
  return out;
}

}  // namespace colo::api

#include "common/strings.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace colo {

std::string_view Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.emplace_back(s.substr(start));
      return parts;
    }
    parts.emplace_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

Result<double> ParseDouble(std::string_view field) {
  const std::string text(Trim(field));
  if (text.empty()) return InvalidArgument("empty number");
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size())
    return InvalidArgument(fmt::format("'{}' is not a number", text));
  if (!std::isfinite(value)) return InvalidArgument(fmt::format("'{}' is not finite", text));
  return value;
}

Result<int64_t> ParseInt(std::string_view field) {
  const std::string_view text = Trim(field);
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return InvalidArgument(fmt::format("'{}' is not an integer", text));
  }
  return value;
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<std::string> ReadTextFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFound(what.empty() ? fmt::format("cannot read {}", path)
                                 : fmt::format("cannot read {} '{}'", what, path));
  }
  // One read into a buffer of the file's size (traces and weights are megabytes; a stream
  // buffer would copy them twice). Files of no known size (pipes, /proc) are read as a stream.
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.clear();
  in.seekg(0, std::ios::beg);
  std::string text;
  if (size > 0) {
    text.resize(static_cast<size_t>(size));
    in.read(text.data(), size);
    text.resize(static_cast<size_t>(in.gcount()));
  } else {
    std::ostringstream stream;
    stream << in.rdbuf();
    text = stream.str();
  }
  if (in.bad()) return Internal(fmt::format("error reading '{}'", path));
  return text;
}

}  // namespace colo

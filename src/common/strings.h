// Small text helpers shared by the parsers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace colo {

std::string_view Trim(std::string_view s);
std::vector<std::string> Split(std::string_view s, char sep);
bool StartsWith(std::string_view s, std::string_view prefix);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
std::string ToLower(std::string_view s);
// A whole file as text; NotFound("cannot read WHAT 'PATH'") (or "cannot read PATH") if it cannot be
// opened.
Result<std::string> ReadTextFile(const std::string& path, std::string_view what = "");
// Strict number parsing: the whole (trimmed) field must be a finite number.
Result<double> ParseDouble(std::string_view field);
Result<int64_t> ParseInt(std::string_view field);

}  // namespace colo

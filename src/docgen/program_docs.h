// A program's man page and its bash and zsh completions, generated from its CLI11 definition:
// the options and subcommands `--help` shows are the only source (hidden ones, in group "", are
// left out). Used at build time through `colo --generate FORMAT` and `colod --generate FORMAT`.
#pragma once

#include <CLI/CLI.hpp>
#include <array>
#include <string>
#include <string_view>

namespace colo {

constexpr std::array<std::string_view, 3> kDocFormats = {"man", "bash", "zsh"};

// `format`: one of kDocFormats. `description`: the man page's DESCRIPTION paragraph.
std::string GenerateDoc(const CLI::App& app, std::string_view format, std::string_view description);

}  // namespace colo

// A program's man page and its bash and zsh completions, generated from its CLI11 definition:
// the options and subcommands `--help` shows are the only source (hidden ones, in group "", are
// left out). Used at build time through `colo --generate FORMAT` and `colod --generate FORMAT`.
#pragma once

#include <CLI/CLI.hpp>
#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace colo {

constexpr std::array<std::string_view, 3> kDocFormats = {"man", "bash", "zsh"};

// What a man page says beside the options: its DESCRIPTION (paragraphs apart by a blank line),
// then EXAMPLES, ENVIRONMENT and FILES (each a term and what it means), EXIT STATUS and SEE
// ALSO; a section with nothing in it is left out.
struct ManPage {
  using Entries = std::vector<std::pair<std::string_view, std::string_view>>;
  std::string_view description;
  Entries examples;  // a command line, and what it does
  Entries environment;
  Entries files;
  Entries exit_status;  // a status, and when a command exits with it
  std::string_view see_also;
};

// `format`: one of kDocFormats; `page` only matters for "man".
std::string GenerateDoc(const CLI::App& app, std::string_view format, const ManPage& page);

}  // namespace colo

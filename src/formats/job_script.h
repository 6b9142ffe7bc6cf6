// Job scripts as `colo submit job.sh` reads them: the `#COLO --gpus=2 --mem=8GiB` directive lines
// at the top (read like #SBATCH lines: they end at the first command), the #SBATCH lines among
// them, and what runs a script that is not executable (its #! line, else /bin/sh). A script may
// hold any bytes: errors are a Status naming `origin`, the line and the directive, and quote what
// they found bounded and escaped.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace colo {

// What the directives asked for; unset where they said nothing (the command line's options and
// colod's defaults apply). Every value set has been checked.
struct ScriptDirectives {
  std::optional<int> gpus;            // 1..64
  std::optional<std::string> memory;  // as written ("8GiB"): ParseBytes reads it, 1 B..1 PiB
  std::optional<std::string> share;   // mps | plain | exclusive | any
  std::optional<std::string> name;    // ≤ 256 bytes of valid UTF-8, no control characters
  std::optional<int> threads;         // MPS active-thread percentage, 1..100
  std::optional<double> smact;        // SM activity when alone, 0..1 (as `colo submit --smact`)
  // As written (≤ 4096 bytes of plain text); `colo submit` reads each as its option of the same
  // name: output/error file patterns, time limit, array, dependencies.
  std::optional<std::string> output, error, time_limit, array, dependency, signal;
  std::optional<bool> requeue;  // --requeue (sbatch's --no-requeue: false)
  bool any = false;             // the script has at least one directive
  // "job.sh:4: #SBATCH --partition ignored: ..." for each #SBATCH option colo does not read.
  std::vector<std::string> warnings;
};

// The directives of a job script: `#COLO` lines before its first command, each with one or more
// `--key=value` words (a value may be quoted to hold blanks: --name="bert large"). A later
// directive overrides an earlier one; unknown directives and bad values are errors.
// `#SBATCH` lines among them are read as sbatch reads them (-J NAME, --job-name=NAME, -G N,
// --gpus=N, --gres=gpu:N, -t, -o, -e, -a, -d, --signal, --requeue and --no-requeue; a value
// attached or as the next word) for what
// the #COLO lines leave open; a bad value is an error, and every other option a warning naming
// it.
Result<ScriptDirectives> ParseJobScript(std::string_view text, std::string_view origin);

// The argv prefix that runs a script that is not executable: its interpreter and the script's
// path go after it. From the #! line as Linux reads it ("#!/bin/bash -e" gives {"/bin/bash",
// "-e"}: everything after the interpreter is one argument), or {"/bin/sh"} without one. An empty
// #! line or an interpreter that is not an absolute path is an error.
Result<std::vector<std::string>> ScriptInterpreter(std::string_view text, std::string_view origin);

}  // namespace colo

// Where a job's output is copied to, as `sbatch -o/-e` names it: a file name pattern that colod
// fills in when an attempt starts. The job's output is always kept by colod too (colo logs);
// these files are the user's own copy, written by the job's user.
//
//   %j  the job's id            %A  its array's id (outside an array: the job's own id)
//   %a  its array task's id (outside an array: 4294967294, as in Slurm)
//   %u  the user's name         %x  the job's name
//   %N  the host's short name   %%  a percent sign
// A number between % and the letter pads with zeros to that width, at most 10 (%4a: 0007).
// A relative path is taken from the job's working directory.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "core/model.h"

namespace colo::api {

constexpr size_t kMaxOutputPatternBytes = 4096;

struct OutputNames {
  JobId job = 0;
  std::optional<JobId> array_job;  // set for a task of an array
  int array_task = 0;
  std::string user, name, host;
};

// An error names the first thing wrong: an unknown or unfinished %-code, a width over 10, a NUL
// byte or another control character, bytes that are not UTF-8, an empty pattern or one longer
// than kMaxOutputPatternBytes.
Status CheckOutputPattern(std::string_view pattern);

// The file name for `names`; `pattern` has passed CheckOutputPattern (anything else is copied as
// it is). Never longer than what a path may be (PATH_MAX): the job's name is cut to fit.
std::string ExpandOutputPattern(std::string_view pattern, const OutputNames& names);

}  // namespace colo::api

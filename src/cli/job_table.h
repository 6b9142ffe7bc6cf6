// The job tables of `colo queue` and `colo history`: squeue-style format strings (%i, %.10j, ...)
// over api::JobSummary, the state codes they print and the help that lists both. One table of
// fields is the source of the columns, of --format and of its help.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.h"
#include "common/status.h"

namespace colo {

// The short code `colo queue` prints for a state (PD, R, CD, ...) and its word (PENDING, RUNNING,
// COMPLETED, ...): Slurm's where Slurm has the state, colo's own where it has none like it.
std::string StateCode(JobState state);
std::string StateWord(JobState state);
// The state a filter names: its code, its word or the API's name, in any case (pd, PENDING,
// queued).
std::optional<JobState> StateNamed(std::string_view text);
// One line per state: "  PD  PENDING     waiting for GPUs", for --help.
std::string StateLegend();
// A job as colo names it to people: ARRAY_TASK (42_0) for a task of an array, else its id.
std::string JobIdText(const api::JobSummary& job);
// The indices of the GPUs a job runs on, as colo gpus and colo top number them ("0,1"), or "-".
std::string GpuIndicesText(const api::JobSummary& job);
// A time limit as squeue shows it: [D-]H:MM:SS, or UNLIMITED for none (0).
std::string TimeLimitText(int64_t seconds);
// A wall time (seconds since the epoch) in local time, as strftime's `format` writes it.
std::string LocalTimeText(double t, const char* format);
// A wall time (seconds since the epoch) as local ISO time; "-" for none.
std::string WallTimeText(double t);
// One line per format code with its header and meaning, for --help.
std::string FormatCodesHelp();

// A parsed --format: literal text and fields, each with an optional width (squeue's rules:
// "%10j" left-justified in 10 columns, "%.10j" right-justified; a longer value is cut), or
// sacct's list of field names (JobID,State,Elapsed%20).
class JobFormat {
 public:
  static Result<JobFormat> Parse(const std::string& format);
  std::string Header() const;
  // `now`: seconds since the epoch, for the elapsed time of running jobs.
  std::string Row(const api::JobSummary& job, double now) const;

 private:
  struct Piece {
    std::string literal;  // text between fields
    char code = 0;        // 0: a literal piece
    int width = 0;        // 0: as wide as the value
    bool right = false;
    std::string header;  // a name given in the format (sacct's), else the field's own
  };
  static Result<JobFormat> ParseNames(const std::string& format);
  std::vector<Piece> pieces_;
  bool trim_end_ = false;  // a list of names pads every column but the line ends at its text
};

// The default columns (a Slurm column is added when a job came from Slurm).
std::string DefaultQueueFormat(bool slurm);
std::string DefaultHistoryFormat(bool slurm);

}  // namespace colo

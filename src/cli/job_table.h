// The job tables of `colo queue` and `colo history`: squeue-style format strings (%i, %.10j, ...)
// over api::JobSummary, the state codes they print and the help that lists both. One table of
// fields is the source of the columns, of --format and of its help.
#pragma once

#include <string>
#include <vector>

#include "api/types.h"
#include "common/status.h"

namespace colo {

// The short code `colo queue` prints for a state (PD, R, CD, ...).
std::string StateCode(JobState state);
// One line per state: "  PD  queued      waiting for GPUs", for --help.
std::string StateLegend();
// A wall time (seconds since the epoch) as local ISO time; "-" for none.
std::string WallTimeText(double t);
// One line per format code with its header and meaning, for --help.
std::string FormatCodesHelp();

// A parsed --format: literal text and fields, each with an optional width (squeue's rules:
// "%10j" left-justified in 10 columns, "%.10j" right-justified; a longer value is cut).
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
  };
  std::vector<Piece> pieces_;
};

// The default columns (a Slurm column is added when a job came from Slurm).
std::string DefaultQueueFormat(bool slurm);
std::string DefaultHistoryFormat(bool slurm);

}  // namespace colo

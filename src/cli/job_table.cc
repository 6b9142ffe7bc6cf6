#include "cli/job_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <functional>

#include "common/strings.h"
#include "common/text.h"
#include "common/units.h"

namespace colo {
namespace {

struct StateInfo {
  JobState state;
  const char* code;
  const char* meaning;
};
constexpr StateInfo kStates[] = {
    {JobState::kQueued, "PD", "waiting for GPUs (the reason says why)"},
    {JobState::kRunning, "R", "running"},
    {JobState::kRecovering, "RQ", "ran out of GPU memory; waits to run again with a larger need"},
    {JobState::kRequeued, "RQS", "handed back to Slurm, which runs it again"},
    {JobState::kSucceeded, "CD", "completed: exit code 0"},
    {JobState::kFailed, "F", "failed: another exit code, a signal, or out of memory too often"},
    {JobState::kCancelled, "CA", "cancelled"},
    {JobState::kLost, "LO", "ended while colod was down, without an exit status"},
    {JobState::kTimeout, "TO", "ended at its time limit (--time)"},
};

std::string ElapsedText(double seconds) {
  if (seconds < 0) seconds = 0;
  const auto s = static_cast<long long>(seconds);
  if (s >= 86400)
    return fmt::format("{}-{:02}:{:02}:{:02}", s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

std::string Indices(const api::JobSummary& j) {
  if (j.gpu_indices.empty()) return "-";
  std::vector<std::string> words;
  for (int g : j.gpu_indices) words.push_back(std::to_string(g));
  return Join(words, ",");
}

double Elapsed(const api::JobSummary& j, double now) {
  if (j.started <= 0) return 0;
  if (j.state == JobState::kRunning) return now - j.started;
  return j.finished > 0 ? j.finished - j.started : 0;
}

using Value = std::function<std::string(const api::JobSummary&, double now)>;
struct Field {
  char code;
  const char* header;
  const char* meaning;
  Value value;
};

// squeue's letters where squeue has the column; colo's own (exit code, peak, attempts) on letters
// squeue leaves free or uses for things a colo server has not.
const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      {'i', "JOBID", "job id; an array's task as ARRAYID_TASK",
       [](auto& j, double) {
         return j.array_job ? fmt::format("{}_{}", *j.array_job, j.array_task)
                            : std::to_string(j.id);
       }},
      {'j', "NAME", "job name", [](auto& j, double) { return j.name; }},
      {'u', "USER", "user", [](auto& j, double) { return j.user; }},
      {'t', "ST", "state, compact (see the states below)",
       [](auto& j, double) { return StateCode(j.state); }},
      {'T', "STATE", "state, spelled out",
       [](auto& j, double) {
         std::string s(ToString(j.state));
         std::transform(s.begin(), s.end(), s.begin(), ::toupper);
         return s;
       }},
      {'M', "TIME", "time used so far (running) or in all (ended), [D-]H:MM:SS",
       [](auto& j, double now) { return ElapsedText(Elapsed(j, now)); }},
      {'D', "NGPU", "number of GPUs the job asked for",
       [](auto& j, double) { return std::to_string(j.gpus); }},
      {'b', "GRES", "the GPUs asked for, as Slurm's gres (gpu:N)",
       [](auto& j, double) { return fmt::format("gpu:{}", j.gpus); }},
      {'N', "GPUS", "indices of the GPUs it runs on (as in colo gpus), or -",
       [](auto& j, double) { return Indices(j); }},
      {'R', "GPUS(REASON)", "running: GPU indices and sharing mode; waiting: (why it waits)",
       [](auto& j, double) {
         if (j.state == JobState::kRunning) return fmt::format("{} ({})", Indices(j), j.mode);
         return "(" + (j.reason.empty() ? std::string(ToString(j.state)) : j.reason) + ")";
       }},
      {'r', "REASON", "why it waits, or how it ended",
       [](auto& j, double) { return j.reason.empty() ? std::string("-") : j.reason; }},
      {'m', "MEM", "GPU memory per GPU it asked for (or was raised to)",
       [](auto& j, double) { return j.memory ? FormatBytes(*j.memory) : "unknown"; }},
      {'h', "SHARE", "how it shares a GPU: its mode when running, else what it asked for",
       [](auto& j, double) { return j.mode.empty() ? std::string(ToString(j.share)) : j.mode; }},
      {'Y', "PEAK", "peak GPU memory seen per GPU (its latest attempt)",
       [](auto& j, double) { return j.peak > Bytes(0) ? FormatBytes(j.peak) : std::string("-"); }},
      {'A', "ATTEMPTS", "attempts so far (more than 1: out-of-memory retries)",
       [](auto& j, double) { return std::to_string(j.attempts); }},
      {'X', "EXIT", "exit code:signal of its latest attempt (like sacct's ExitCode), or -",
       [](auto& j, double) {
         if (!j.exit_code && !j.exit_signal) return std::string("-");
         return fmt::format("{}:{}", j.exit_code.value_or(0), j.exit_signal.value_or(0));
       }},
      {'V', "SUBMIT", "submit time", [](auto& j, double) { return WallTimeText(j.submitted); }},
      {'S', "START", "start time of its latest attempt",
       [](auto& j, double) { return WallTimeText(j.started); }},
      {'e', "END", "end time", [](auto& j, double) { return WallTimeText(j.finished); }},
      {'w', "SLURM", "the Slurm job it belongs to, or -",
       [](auto& j, double) {
         return j.slurm_job ? std::to_string(*j.slurm_job) : std::string("-");
       }},
  };
  return fields;
}

const Field* FindField(char code) {
  for (const Field& f : Fields())
    if (f.code == code) return &f;
  return nullptr;
}

// Padded or cut to `width` (a cut value ends in "+"), after escaping for the terminal.
std::string Fit(const std::string& raw, int width, bool right) {
  if (width <= 0) return Printable(raw);
  const auto w = static_cast<size_t>(width);
  const std::string text = FitColumns(raw, w);
  return right ? fmt::format("{:>{}}", text, w) : fmt::format("{:<{}}", text, w);
}

}  // namespace

std::string WallTimeText(double t) {
  if (t <= 0) return "-";
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  return buffer;
}

std::string StateCode(JobState state) {
  for (const StateInfo& s : kStates)
    if (s.state == state) return s.code;
  return "?";
}

std::string StateLegend() {
  std::string out = "Job states (ST):\n";
  for (const StateInfo& s : kStates)
    out += fmt::format("  {:<4} {:<11} {}\n", s.code, ToString(s.state), s.meaning);
  return out;
}

std::string FormatCodesHelp() {
  std::string out =
      "--format codes (like squeue's; %10j: left-justified in 10 columns, %.10j: "
      "right-justified; %%: a percent sign):\n";
  for (const Field& f : Fields())
    out += fmt::format("  %{}  {:<13} {}\n", f.code, f.header, f.meaning);
  return out;
}

Result<JobFormat> JobFormat::Parse(const std::string& format) {
  JobFormat out;
  std::string literal;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      literal += format[i];
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '%') {
      literal += '%';
      ++i;
      continue;
    }
    Piece piece;
    size_t k = i + 1;
    if (k < format.size() && format[k] == '.') {
      piece.right = true;
      ++k;
    }
    while (k < format.size() && format[k] >= '0' && format[k] <= '9' && piece.width < 1000)
      piece.width = piece.width * 10 + (format[k++] - '0');
    if (k >= format.size())
      return InvalidArgument(fmt::format("--format: '{}' ends inside a field", format));
    if (!FindField(format[k]))
      return InvalidArgument(
          fmt::format("--format: unknown field %{} (colo queue --help lists them)",
                      Printable({&format[k], 1})));
    if (!literal.empty()) out.pieces_.push_back(Piece{std::move(literal), 0, 0, false});
    literal.clear();
    piece.code = format[k];
    out.pieces_.push_back(piece);
    i = k;
  }
  if (!literal.empty()) out.pieces_.push_back(Piece{std::move(literal), 0, 0, false});
  return out;
}

std::string JobFormat::Header() const {
  std::string line;
  for (const Piece& p : pieces_)
    line += p.code ? Fit(FindField(p.code)->header, p.width, p.right) : p.literal;
  return line;
}

std::string JobFormat::Row(const api::JobSummary& job, double now) const {
  std::string line;
  for (const Piece& p : pieces_)
    line += p.code ? Fit(FindField(p.code)->value(job, now), p.width, p.right) : p.literal;
  return line;
}

std::string DefaultQueueFormat(bool slurm) {
  return fmt::format("%.7i {}%18j %10u %.3t %.4D %.10m %.11M  %R", slurm ? "%.8w " : "");
}

std::string DefaultHistoryFormat(bool slurm) {
  return fmt::format("%.7i {}%18j %10u %.3t %.4D %.10m %.10Y %.8A %.6X %.11M  %e %r",
                     slurm ? "%.8w " : "");
}

}  // namespace colo

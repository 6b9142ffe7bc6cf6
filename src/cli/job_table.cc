#include "cli/job_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <functional>

#include "common/strings.h"
#include "common/text.h"
#include "common/units.h"

namespace colo {
namespace {

// Slurm's code and word where the state is Slurm's too; colo's own where Slurm has none like it
// (Slurm's RQ is a requeued job, colo's "requeued": handed back to Slurm's queue).
struct StateInfo {
  JobState state;
  const char* code;
  const char* word;
  const char* meaning;
};
constexpr StateInfo kStates[] = {
    {JobState::kQueued, "PD", "PENDING", "waiting for GPUs (the reason says why)"},
    {JobState::kRunning, "R", "RUNNING", "running"},
    {JobState::kRecovering, "RO", "RECOVERING",
     "ran out of GPU memory; waits to run again with a larger need (colo's own)"},
    {JobState::kRequeued, "RQ", "REQUEUED", "handed back to Slurm, which runs it again"},
    {JobState::kSucceeded, "CD", "COMPLETED", "completed: exit code 0"},
    {JobState::kFailed, "F", "FAILED",
     "failed: another exit code, a signal, or out of memory too often"},
    {JobState::kCancelled, "CA", "CANCELLED", "cancelled"},
    {JobState::kTimeout, "TO", "TIMEOUT", "ended at its time limit (--time)"},
    {JobState::kLost, "LO", "LOST",
     "ended while colod was down, without an exit status (colo's own)"},
};

const StateInfo* FindState(JobState state) {
  for (const StateInfo& s : kStates)
    if (s.state == state) return &s;
  return nullptr;
}

std::string ElapsedText(double seconds) {
  if (seconds < 0) seconds = 0;
  const auto s = static_cast<long long>(seconds);
  if (s >= 86400)
    return fmt::format("{}-{:02}:{:02}:{:02}", s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
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
  // sacct's and squeue --Format's names for it (colo's own where they have none), for a
  // --format of names: JobID,State,Elapsed%20. A name alone takes `width` columns.
  const char* names;
  int width;
  const char* meaning;
  Value value;
};

// squeue's letters where squeue has the column; colo's own (exit code, peak, attempts) on letters
// squeue leaves free or uses for things a colo server has not.
const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      {'i', "JOBID", "JobID JobIDRaw", 12, "job id; an array's task as ARRAYID_TASK",
       [](auto& j, double) { return JobIdText(j); }},
      {'j', "NAME", "JobName Name", 18, "job name", [](auto& j, double) { return j.name; }},
      {'u', "USER", "User UserName", 10, "user", [](auto& j, double) { return j.user; }},
      {'t', "ST", "ST StateCompact", 3, "state, compact (see the states below)",
       [](auto& j, double) { return StateCode(j.state); }},
      {'T', "STATE", "State", 10, "state, spelled out",
       [](auto& j, double) { return StateWord(j.state); }},
      {'M', "TIME", "Elapsed TimeUsed Time", 11,
       "time used so far (running) or in all (ended), [D-]H:MM:SS",
       [](auto& j, double now) { return ElapsedText(Elapsed(j, now)); }},
      {'l', "TIME_LIMIT", "Timelimit TimeLimit", 11, "its --time, [D-]H:MM:SS, or UNLIMITED",
       [](auto& j, double) { return TimeLimitText(j.time_limit_s); }},
      {'D', "NGPU", "NGPU NumGPUs", 4, "number of GPUs the job asked for",
       [](auto& j, double) { return std::to_string(j.gpus); }},
      {'b', "GRES", "ReqTRES AllocTRES ReqGRES AllocGRES Gres tres-per-node", 8,
       "the GPUs asked for, as Slurm's gres (gpu:N)",
       [](auto& j, double) { return fmt::format("gpu:{}", j.gpus); }},
      {'N', "GPUS", "NodeList GPUs", 8, "indices of the GPUs it runs on (as in colo gpus), or -",
       [](auto& j, double) { return GpuIndicesText(j); }},
      {'R', "GPUS(REASON)", "ReasonList", 20,
       "running: GPU indices and sharing mode; waiting: (why it waits)",
       [](auto& j, double) {
         if (j.state == JobState::kRunning)
           return fmt::format("{} ({})", GpuIndicesText(j), j.mode);
         return "(" + (j.reason.empty() ? std::string(ToString(j.state)) : j.reason) + ")";
       }},
      {'r', "REASON", "Reason", 24, "why it waits, or how it ended",
       [](auto& j, double) { return j.reason.empty() ? std::string("-") : j.reason; }},
      {'m', "MEM", "ReqMem Mem", 10, "GPU memory per GPU it asked for (or was raised to)",
       [](auto& j, double) { return j.memory ? FormatBytes(*j.memory) : "unknown"; }},
      {'h', "SHARE", "Share", 9,
       "how it shares a GPU: its mode when running, else what it asked for",
       [](auto& j, double) { return j.mode.empty() ? std::string(ToString(j.share)) : j.mode; }},
      {'Y', "PEAK", "MaxGPUMem Peak", 10, "peak GPU memory seen per GPU (its latest attempt)",
       [](auto& j, double) { return j.peak > Bytes(0) ? FormatBytes(j.peak) : std::string("-"); }},
      {'A', "ATTEMPTS", "Attempts Restarts", 8,
       "attempts so far (more than 1: out-of-memory retries)",
       [](auto& j, double) { return std::to_string(j.attempts); }},
      {'X', "EXIT", "ExitCode Exit", 8,
       "exit code:signal of its latest attempt (like sacct's ExitCode), or -",
       [](auto& j, double) {
         if (!j.exit_code && !j.exit_signal) return std::string("-");
         return fmt::format("{}:{}", j.exit_code.value_or(0), j.exit_signal.value_or(0));
       }},
      {'V', "SUBMIT", "Submit SubmitTime", 19, "submit time",
       [](auto& j, double) { return WallTimeText(j.submitted); }},
      {'S', "START", "Start StartTime", 19, "start time of its latest attempt",
       [](auto& j, double) { return WallTimeText(j.started); }},
      {'e', "END", "End EndTime", 19, "end time",
       [](auto& j, double) { return WallTimeText(j.finished); }},
      {'w', "SLURM", "SlurmJobID Slurm", 10, "the Slurm job it belongs to, or -",
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

std::string TimeLimitText(int64_t seconds) {
  return seconds > 0 ? ElapsedText(static_cast<double>(seconds)) : "UNLIMITED";
}

std::string JobIdText(const api::JobSummary& job) {
  return job.array_job ? fmt::format("{}_{}", *job.array_job, job.array_task)
                       : std::to_string(job.id);
}

std::string GpuIndicesText(const api::JobSummary& job) {
  if (job.gpu_indices.empty()) return "-";
  std::vector<std::string> words;
  for (int g : job.gpu_indices) words.push_back(std::to_string(g));
  return Join(words, ",");
}

std::string LocalTimeText(double t, const char* format) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buffer[64];
  return std::strftime(buffer, sizeof buffer, format, &tm) > 0 ? buffer : "";
}

std::string WallTimeText(double t) {
  return t <= 0 ? "-" : LocalTimeText(t, "%Y-%m-%dT%H:%M:%S");
}

std::string StateCode(JobState state) {
  const StateInfo* s = FindState(state);
  return s ? s->code : "?";
}

std::string StateWord(JobState state) {
  const StateInfo* s = FindState(state);
  return s ? s->word : "?";
}

std::optional<JobState> StateNamed(std::string_view text) {
  for (const StateInfo& s : kStates) {
    const std::string word = ToLower(text);
    if (word == ToLower(s.code) || word == ToLower(s.word) || word == ToString(s.state))
      return s.state;
  }
  return std::nullopt;
}

std::string StateLegend() {
  std::string out = "Job states (ST, STATE as in Slurm where Slurm has the state):\n";
  for (const StateInfo& s : kStates)
    out += fmt::format("  {:<3} {:<11} {}\n", s.code, s.word, s.meaning);
  return out;
}

std::string FormatCodesHelp() {
  std::string out =
      "--format: squeue's codes ('%.7i %20j %T': %10j left-justified in 10 columns, %.10j "
      "right-justified, %% a percent sign), or sacct's names (JobID,JobName%30,State; any of "
      "those after the code):\n";
  for (const Field& f : Fields())
    out += fmt::format("  %{}  {:<13} {} ({})\n", f.code, f.header, f.meaning, f.names);
  return out;
}

// sacct's --format: names with an optional %WIDTH, comma-separated (JobID,State,Elapsed%20).
Result<JobFormat> JobFormat::ParseNames(const std::string& format) {
  JobFormat out;
  for (const std::string& item : Split(format, ',')) {
    const std::string name(Trim(item.substr(0, item.find('%'))));
    const Field* field = nullptr;
    for (const Field& f : Fields()) {
      for (const std::string& known : Split(f.names, ' '))
        if (ToLower(known) == ToLower(name)) field = &f;
    }
    if (!field)
      return InvalidArgument(fmt::format(
          "--format: unknown field '{}' (a list of names such as JobID,State,Elapsed%20, or "
          "codes such as '%i %T %M'; colo history --help lists both)",
          Printable(name)));
    Piece piece;
    piece.code = field->code;
    piece.header = name;
    piece.width = std::max<int>(field->width, static_cast<int>(name.size()));
    if (const size_t percent = item.find('%'); percent != std::string::npos) {
      auto width = ParseInt(item.substr(percent + 1));
      if (!width.ok() || *width < 1 || *width > 1000)
        return InvalidArgument(
            fmt::format("--format: '{}' has a bad width (NAME%WIDTH)", Printable(item)));
      piece.width = static_cast<int>(*width);
    }
    if (!out.pieces_.empty()) out.pieces_.push_back(Piece{" ", 0, 0, false, ""});
    out.pieces_.push_back(piece);
  }
  out.trim_end_ = true;
  return out;
}

Result<JobFormat> JobFormat::Parse(const std::string& format) {
  // A format without %, or NAME%WIDTH items (JobID%20,State): sacct's list of names.
  const bool names = !format.empty() && format[0] != '%' &&
                     (format.find('%') == std::string::npos ||
                      std::all_of(format.begin(), format.end(), [](char c) {
                        return std::isalnum(static_cast<unsigned char>(c)) || c == '%' ||
                               c == ',' || c == '_' || c == '-' || c == ' ';
                      }));
  if (names) return ParseNames(format);
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
    if (!literal.empty()) out.pieces_.push_back(Piece{std::move(literal), 0, 0, false, ""});
    literal.clear();
    piece.code = format[k];
    out.pieces_.push_back(piece);
    i = k;
  }
  if (!literal.empty()) out.pieces_.push_back(Piece{std::move(literal), 0, 0, false, ""});
  return out;
}

std::string JobFormat::Header() const {
  std::string line;
  for (const Piece& p : pieces_)
    line += p.code ? Fit(p.header.empty() ? FindField(p.code)->header : p.header, p.width, p.right)
                   : p.literal;
  return trim_end_ ? std::string(line.substr(0, line.find_last_not_of(' ') + 1)) : line;
}

std::string JobFormat::Row(const api::JobSummary& job, double now) const {
  std::string line;
  for (const Piece& p : pieces_)
    line += p.code ? Fit(FindField(p.code)->value(job, now), p.width, p.right) : p.literal;
  return trim_end_ ? std::string(line.substr(0, line.find_last_not_of(' ') + 1)) : line;
}

std::string DefaultQueueFormat(bool slurm) {
  return fmt::format("%.7i {}%18j %10u %.3t %.4D %.10m %.11M  %R", slurm ? "%.8w " : "");
}

std::string DefaultHistoryFormat(bool slurm) {
  return fmt::format("%.7i {}%18j %10u %.3t %.4D %.10m %.10Y %.8A %.6X %.11M  %e %r",
                     slurm ? "%.8w " : "");
}

}  // namespace colo

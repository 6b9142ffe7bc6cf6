#include "cli/top_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <tuple>

#include "cli/job_table.h"
#include "common/strings.h"
#include "common/text.h"

namespace colo {

namespace {

// Escaped for the terminal and cut to `n` columns on a character boundary ('+' marks the cut).
std::string Cell(std::string_view s, size_t n) {
  return FitColumns(s, n);
}

// A whole line of at most `width` columns.
std::string Fit(const std::string& line, int width) {
  return width <= 0 ? "" : FitColumns(line, static_cast<size_t>(width));
}

std::string Gib(Bytes bytes) {
  return fmt::format("{:.1f}", bytes.count() / double(1LL << 30));
}

std::string Elapsed(double seconds) {
  const auto s = static_cast<long long>(std::max(seconds, 0.0));
  if (s >= 86400) return fmt::format("{}-{:02}:{:02}", s / 86400, s / 3600 % 24, s / 60 % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

std::string ClockTime(double t) {
  if (t <= 0) return "--:--:--";
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buffer[16];
  std::strftime(buffer, sizeof buffer, "%H:%M:%S", &tm);
  return buffer;
}

bool Waiting(JobState state) {
  return state == JobState::kQueued || state == JobState::kRecovering;
}

bool Matches(const api::JobSummary& job, const std::string& filter) {
  if (filter.empty()) return true;
  auto contains = [&](const std::string& text) {
    return std::search(text.begin(), text.end(), filter.begin(), filter.end(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) ==
                    std::tolower(static_cast<unsigned char>(b));
           }) != text.end();
  };
  return contains(job.user) || contains(job.name);
}

char JobLetter(size_t k, bool used) {
  if (k >= 26) return used ? '*' : '~';
  return static_cast<char>((used ? 'A' : 'a') + k);
}

void Add(std::vector<TopLine>& lines, int width, std::string text,
         LineStyle style = LineStyle::kNormal) {
  lines.push_back(TopLine{Fit(text, width), style});
}

// The GPU lines: one bar per GPU, then (where there is room) which job each letter is.
std::vector<TopLine> GpuLines(const TopSnapshot& s, int width, int room) {
  std::vector<TopLine> bars, legends;
  if (!s.gpus) return {TopLine{"GPUs: waiting for colod", LineStyle::kHeader}};
  const int fixed = 4 + 13 + 2 + 1 + 11 + 1 + 7 + 1 + 5;  // a bar line but its bar
  const int bar_width = std::clamp(width - fixed, 10, 100);
  for (const api::GpuInfoReply& g : s.gpus->gpus) {
    const Bytes used = g.memory_used.value_or(Bytes(0));
    std::string line =
        fmt::format("{:>3} {:<12} [{}] {:>11} {:>7} {:>5}", g.index, Cell(g.name, 12),
                    MemoryBar(g, bar_width), Gib(used) + "/" + Gib(g.memory_total) + "G",
                    g.smact < 0 ? "SM -" : fmt::format("SM {:.0f}%", 100 * g.smact),
                    g.power_watts < 0 ? "-" : fmt::format("{:.0f}W", g.power_watts));
    if (!g.sample_error.empty()) line += " !" + Printable(g.sample_error);
    bars.push_back(TopLine{Fit(line, width)});
    if (g.jobs.empty()) continue;
    std::string legend = "   ";
    for (size_t k = 0; k < g.jobs.size(); ++k) {
      const api::GpuJobInfo& j = g.jobs[k];
      legend +=
          fmt::format(" {}={} {} {} {}/{}G", JobLetter(k, true), JobIdOf(s, j.id), Cell(j.user, 8),
                      Cell(j.name, 12), Gib(j.used), Gib(std::max(j.reservation, j.used)));
    }
    legends.push_back(TopLine{Fit(legend, width)});
  }
  std::vector<TopLine> out;
  out.push_back(TopLine{Fit(fmt::format("{:>3} {:<12} {:<{}} {:>11} {:>7} {:>5}", "GPU", "NAME",
                                        "MEMORY (A: job A uses, a: reserved)", bar_width + 2,
                                        "USED/TOTAL", "SMACT", "POWER"),
                            width),
                        LineStyle::kHeader});
  const bool with_legends = static_cast<int>(1 + bars.size() + legends.size()) <= room;
  size_t legend = 0;
  for (size_t i = 0; i < bars.size(); ++i) {
    out.push_back(bars[i]);
    if (with_legends && !s.gpus->gpus[i].jobs.empty()) out.push_back(legends[legend]);
    if (!s.gpus->gpus[i].jobs.empty()) ++legend;
  }
  if (static_cast<int>(out.size()) > room) out.resize(static_cast<size_t>(std::max(room, 0)));
  return out;
}

std::string JobRow(const api::JobSummary& j, double now, bool selected, int width) {
  std::string where;
  if (j.state == JobState::kRunning) {
    where = fmt::format("{} ({})", GpuIndicesText(j), j.mode);  // as the bars above number them
  } else if (Waiting(j.state)) {
    where = "(" + j.reason + ")";
  }
  const double elapsed = j.state == JobState::kRunning ? now - j.started : 0;
  return Fit(
      fmt::format("{}{:>6} {:<8} {:<14} {:>2} {:>3} {:>6} {:>8}  {}", selected ? ">" : " ",
                  JobIdText(j), Cell(j.user, 8), Cell(j.name, 14), StateCode(j.state), j.gpus,
                  j.memory ? Gib(*j.memory) + "G" : "-", Elapsed(elapsed), Printable(where)),
      width);
}

std::vector<TopLine> HelpLines(int width) {
  std::vector<TopLine> out;
  for (const char* text :
       {"Keys", "  q          quit (also Ctrl-C)",
        "  s          sort jobs by id, user, memory, state",
        "  /          filter jobs by user or name (Enter keeps, Esc clears)",
        "  u          only my jobs / everyone's",
        "  c          cancel the selected job (yours; colod decides)", "  arrows j k select a job",
        "  ?          this help (any key closes it)", "",
        "GPU bars: A = memory job A uses, a = reserved for job A but not",
        "used yet, # = used by no job colod runs, . = free."}) {
    Add(out, width, text, text[0] == 'K' ? LineStyle::kHeader : LineStyle::kNormal);
  }
  return out;
}

}  // namespace

std::string_view ToString(TopSort sort) {
  switch (sort) {
    case TopSort::kId:
      return "id";
    case TopSort::kUser:
      return "user";
    case TopSort::kMemory:
      return "memory";
    case TopSort::kState:
      return "state";
  }
  return "id";
}

TopSort NextSort(TopSort sort) {
  switch (sort) {
    case TopSort::kId:
      return TopSort::kUser;
    case TopSort::kUser:
      return TopSort::kMemory;
    case TopSort::kMemory:
      return TopSort::kState;
    case TopSort::kState:
      break;
  }
  return TopSort::kId;
}

std::string JobIdOf(const TopSnapshot& s, JobId id) {
  if (s.queue) {
    for (const api::JobSummary& j : s.queue->jobs)
      if (j.id == id) return JobIdText(j);
  }
  return std::to_string(id);
}

std::vector<api::JobSummary> VisibleJobs(const TopSnapshot& snapshot, const TopViewState& state) {
  std::vector<api::JobSummary> jobs;
  if (!snapshot.queue) return jobs;
  for (const api::JobSummary& j : snapshot.queue->jobs) {
    if (state.mine_only && j.user != snapshot.me) continue;
    if (!Matches(j, state.filter)) continue;
    jobs.push_back(j);
  }
  auto key = [&](const api::JobSummary& j) {
    switch (state.sort) {
      case TopSort::kUser:
        return std::tuple(0, 0LL, j.user, j.id);
      case TopSort::kMemory:  // largest first; unknown last
        return std::tuple(0, j.memory ? -j.memory->count() : 1LL, std::string(), j.id);
      case TopSort::kState:  // running, then waiting, then the rest
        return std::tuple(j.state == JobState::kRunning ? 0
                          : Waiting(j.state)            ? 1
                                                        : 2,
                          0LL, std::string(), j.id);
      case TopSort::kId:
        break;
    }
    return std::tuple(0, 0LL, std::string(), j.id);
  };
  std::stable_sort(jobs.begin(), jobs.end(),
                   [&](const auto& a, const auto& b) { return key(a) < key(b); });
  return jobs;
}

JobId SelectedJob(const TopSnapshot& snapshot, const TopViewState& state) {
  const auto jobs = VisibleJobs(snapshot, state);
  for (const auto& j : jobs) {
    if (j.id == state.selected) return j.id;
  }
  return jobs.empty() ? 0 : jobs.front().id;
}

JobId MoveSelection(const TopSnapshot& snapshot, const TopViewState& state, int step) {
  const auto jobs = VisibleJobs(snapshot, state);
  if (jobs.empty()) return 0;
  const JobId current = SelectedJob(snapshot, state);
  long pos = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].id == current) pos = static_cast<long>(i);
  }
  pos = std::clamp(pos + step, 0L, static_cast<long>(jobs.size()) - 1);
  return jobs[static_cast<size_t>(pos)].id;
}

TopQueueAsk QueueToAsk(const TopSnapshot& snapshot, const TopViewState& state, int height) {
  TopQueueAsk ask;
  if (state.mine_only) ask.request.user = snapshot.me;
  const auto shown = VisibleJobs(snapshot, state);
  const auto selected = std::find_if(
      shown.begin(), shown.end(), [&](const api::JobSummary& j) { return j.id == state.selected; });
  const long needed =
      (selected == shown.end() ? 0 : selected - shown.begin()) + std::max(height, 1) + 1;
  ask.every_page =
      state.sort != TopSort::kId || !state.filter.empty() || needed > api::kMaxQueuePage;
  if (!ask.every_page) ask.request.limit = static_cast<int>(needed);
  return ask;
}

std::string MemoryBar(const api::GpuInfoReply& gpu, int width) {
  if (width <= 0) return "";
  std::string bar;
  const double total = static_cast<double>(std::max<int64_t>(gpu.memory_total.count(), 1));
  // A segment of `bytes` as cells (at least one when it is anything at all), never past the end.
  auto segment = [&](Bytes bytes, char c) {
    if (bytes <= Bytes(0)) return;
    auto cells = static_cast<int>(std::lround(bytes.count() / total * width));
    cells = std::max(cells, 1);
    cells = std::min(cells, width - static_cast<int>(bar.size()));
    if (cells > 0) bar.append(static_cast<size_t>(cells), c);
  };
  Bytes by_jobs;
  for (size_t k = 0; k < gpu.jobs.size(); ++k) {
    const api::GpuJobInfo& j = gpu.jobs[k];
    segment(j.used, JobLetter(k, true));
    segment(j.reservation - std::min(j.reservation, j.used), JobLetter(k, false));
    by_jobs += j.used;
  }
  if (gpu.memory_used && *gpu.memory_used > by_jobs) segment(*gpu.memory_used - by_jobs, '#');
  bar.append(static_cast<size_t>(width) - bar.size(), '.');
  return bar;
}

std::vector<TopLine> RenderTop(const TopSnapshot& snapshot, const TopViewState& state, int width,
                               int height) {
  std::vector<TopLine> lines;
  if (height <= 0 || width <= 0) return lines;
  std::string title =
      fmt::format("colo top  {}  sort:{}", Cell(snapshot.me, 16), ToString(state.sort));
  if (!state.filter.empty()) title += "  filter:" + Cell(state.filter, 20);
  if (state.mine_only) title += "  mine only";
  title += fmt::format("  every {:g}s  {}", state.interval, ClockTime(snapshot.now));
  const std::string keys = "  ?:help q:quit";
  if (static_cast<int>(title.size() + keys.size()) <= width) title += keys;
  Add(lines, width, title, LineStyle::kTitle);

  const int body = height - 2;  // the title and the status line
  if (state.help) {
    for (TopLine& l : HelpLines(width)) {
      if (static_cast<int>(lines.size()) > body) break;
      lines.push_back(std::move(l));
    }
  } else if (body > 0) {
    for (TopLine& l : GpuLines(snapshot, width, std::max(1, body / 2))) lines.push_back(l);
    const int rest = body - static_cast<int>(lines.size() - 1);
    const int event_rows = rest >= 8 ? std::max(3, rest * 2 / 5) : std::max(0, rest / 3);
    const int job_rows = rest - event_rows;

    // Jobs: a header, the rows (scrolled to keep the selection in view), the selected job's
    // reason or GPUs in full.
    const auto jobs = VisibleJobs(snapshot, state);
    const JobId selected = SelectedJob(snapshot, state);
    int running = 0, waiting = 0;
    if (snapshot.queue && snapshot.queue->next) {
      // Only the first page was asked for (QueueToAsk): colod counted the rest.
      running = snapshot.queue->running;
      waiting = snapshot.queue->waiting;
    } else {
      for (const auto& j : jobs) {
        running += j.state == JobState::kRunning;
        waiting += Waiting(j.state);
      }
    }
    if (job_rows > 0) {
      Add(lines, width,
          fmt::format("{:>7} {:<8} {:<14} {:>2} {:>3} {:>6} {:>8}  GPUS/REASON [{} R {} PD]",
                      "JOBID", "USER", "NAME", "ST", "GPU", "MEM", "TIME", running, waiting),
          LineStyle::kHeader);
    }
    const int list_rows = job_rows - 2;  // less the header and the selected job's line
    if (list_rows > 0) {
      long pos = 0;
      for (size_t i = 0; i < jobs.size(); ++i) {
        if (jobs[i].id == selected) pos = static_cast<long>(i);
      }
      const long first = std::max(0L, pos - list_rows + 1);
      int shown = 0;
      for (size_t i = static_cast<size_t>(first); i < jobs.size() && shown < list_rows;
           ++i, ++shown) {
        const bool is_selected = jobs[i].id == selected;
        Add(lines, width, JobRow(jobs[i], snapshot.now, is_selected, width),
            is_selected ? LineStyle::kSelected : LineStyle::kNormal);
      }
      if (jobs.empty()) {
        Add(lines, width, snapshot.queue ? "  no jobs" : "  waiting for colod");
        ++shown;
      }
      for (; shown < list_rows; ++shown) Add(lines, width, "");
    }
    if (job_rows > 1) {
      std::string about;
      for (const auto& j : jobs) {
        if (j.id != selected) continue;
        about = Waiting(j.state)
                    ? fmt::format("job {} waits: {}", JobIdText(j), Printable(j.reason))
                    : fmt::format("job {} {} on GPU {} ({})", JobIdText(j), ToString(j.state),
                                  GpuIndicesText(j), Printable(Join(j.gpu_uuids, ",")));
      }
      Add(lines, width, about);
    }

    // Recent events, newest first.
    if (event_rows > 0) Add(lines, width, "RECENT EVENTS", LineStyle::kHeader);
    int shown = 0;
    if (snapshot.events) {
      for (const api::RecentEvent& e : snapshot.events->events) {
        if (shown >= event_rows - 1) break;
        Add(lines, width,
            fmt::format("{} {:>6} {:<8} {:<10} {}", ClockTime(e.time), JobIdOf(snapshot, e.job),
                        Cell(e.user, 8), Cell(e.kind, 10),
                        e.redacted ? "(private)" : Printable(e.detail)));
        ++shown;
      }
    }
  }
  while (static_cast<int>(lines.size()) < height - 1) Add(lines, width, "");
  lines.resize(static_cast<size_t>(height - 1));

  // The status line: what the user is typing, else colod's state, else the last answer.
  TopLine status;
  if (state.input == TopInput::kFilter) {
    status = {"filter (user or name): " + Printable(state.filter) + "_", LineStyle::kNormal};
  } else if (state.input == TopInput::kConfirmCancel) {
    std::string name;
    for (const auto& j : VisibleJobs(snapshot, state)) {
      if (j.id == state.confirm_job) name = " (" + Cell(j.name, 24) + ")";
    }
    status = {fmt::format("cancel job {}{}? y/n", JobIdOf(snapshot, state.confirm_job), name),
              LineStyle::kAlert};
  } else if (!snapshot.unreachable.empty()) {
    status = {"colod unreachable, retrying: " + Printable(snapshot.unreachable), LineStyle::kAlert};
  } else if (!state.message.empty()) {
    status = {Printable(state.message), LineStyle::kAlert};
  } else {
    status = {"q quit  s sort  / filter  u mine  c cancel  j/k select  ? help", LineStyle::kNormal};
  }
  status.text = Fit(status.text, width);
  lines.push_back(std::move(status));
  return lines;
}

}  // namespace colo

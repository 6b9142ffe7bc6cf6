// `colo top`'s screen as a pure function: colod's replies and what the user chose (sort, filter,
// selection) in, lines of text out. No terminal here, so the layout is tested without one;
// top.cc draws the lines with ncurses and turns keys into changes of TopViewState.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/types.h"

namespace colo {

// What colod last said. A field is absent until its first answer; after colod goes away the last
// answers stay on screen under `unreachable`.
struct TopSnapshot {
  std::optional<api::GpusReply> gpus;
  std::optional<api::QueueReply> queue;
  std::optional<api::EventsReply> events;
  std::string me;           // who colod says the caller is
  std::string unreachable;  // non-empty: the last refresh failed, and why
  double now = 0;           // seconds since the epoch, for the jobs' run times
};

enum class TopSort { kId, kUser, kMemory, kState };
std::string_view ToString(TopSort sort);
TopSort NextSort(TopSort sort);

enum class TopInput {
  kNone,
  kFilter,         // typing the filter text after `/`
  kConfirmCancel,  // `c` was pressed: y cancels `confirm_job`
};

struct TopViewState {
  TopSort sort = TopSort::kId;
  std::string filter;  // matched against user and name
  bool mine_only = false;
  JobId selected = 0;  // 0: the first job shown
  bool help = false;
  TopInput input = TopInput::kNone;
  JobId confirm_job = 0;
  std::string message;  // the answer to the last action (colod's error, a cancel's result)
  double interval = 1;  // seconds between refreshes, shown in the title
};

enum class LineStyle { kNormal, kTitle, kHeader, kSelected, kAlert };
struct TopLine {
  std::string text;  // printable, at most the screen's width in bytes
  LineStyle style = LineStyle::kNormal;
};

// The live jobs shown, in the chosen order, after the filter and "mine only".
// A job as colo names it (a task of an array: ARRAY_TASK), from the queue it is in; its id when
// it is not there.
std::string JobIdOf(const TopSnapshot& snapshot, JobId id);

std::vector<api::JobSummary> VisibleJobs(const TopSnapshot& snapshot, const TopViewState& state);

// The job the selection is on (the first shown when `state.selected` is not among them); 0 when
// no job is shown.
JobId SelectedJob(const TopSnapshot& snapshot, const TopViewState& state);
// The job `step` rows below (negative: above) the selected one, clamped to the list.
JobId MoveSelection(const TopSnapshot& snapshot, const TopViewState& state, int step);

// What colo top asks colod for, no more than it can show: by id without a filter, the first jobs
// to a screen past the selection (one page); in another order, with a filter or far down the
// list, every page (each a request of its own). "Mine only" asks for the caller's jobs alone.
struct TopQueueAsk {
  api::QueueRequest request;
  bool every_page = false;
};
TopQueueAsk QueueToAsk(const TopSnapshot& snapshot, const TopViewState& state, int height);

// GPU `g`'s memory as a bar of `width` cells: each job's memory in use as its letter in upper
// case (A for the GPU's first job), what is reserved for it but not yet used in lower case, the
// rest of the GPU's memory in use (not by a job) as '#', free memory as '.'.
std::string MemoryBar(const api::GpuInfoReply& gpu, int width);

// Exactly `height` lines of at most `width` bytes each: the title, the GPUs, the jobs, the recent
// events and a status line (or the help). Legible from 80x24; smaller screens get what fits.
std::vector<TopLine> RenderTop(const TopSnapshot& snapshot, const TopViewState& state, int width,
                               int height);

}  // namespace colo

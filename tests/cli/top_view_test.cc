// colo top's screen without a terminal: the memory bars, the jobs' order, filter and selection,
// the recent events and the status line, at 80x24 and at sizes too small for everything.
#include "cli/top_view.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace colo {
namespace {

api::JobSummary Job(JobId id, std::string user, std::string name, JobState state,
                    std::optional<Bytes> memory, std::string reason = "") {
  api::JobSummary j;
  j.id = id;
  j.user = std::move(user);
  j.name = std::move(name);
  j.state = state;
  j.memory = memory;
  j.reason = std::move(reason);
  if (state == JobState::kRunning) {
    j.gpu_uuids = {"GPU-fake-0"};
    j.gpu_indices = {0};
    j.mode = "plain";
    j.started = 1000;
  }
  return j;
}

TopSnapshot Snapshot() {
  TopSnapshot s;
  s.me = "alice";
  s.now = 1060;
  api::GpusReply gpus;
  api::GpuInfoReply g;
  g.index = 0;
  g.name = "Fake GPU";
  g.memory_total = GiB(80);
  g.memory_used = GiB(30);
  g.smact = 0.45;
  g.power_watts = 120;
  // Job 1 uses 20 of its 40 GiB; job 2 uses all of its 10; 0 GiB used by no job.
  g.jobs.push_back({1, "train", "alice", "plain", GiB(20), GiB(20), GiB(40)});
  g.jobs.push_back({2, "eval", "bob", "plain", GiB(10), GiB(10), GiB(10)});
  gpus.gpus.push_back(g);
  api::GpuInfoReply idle;
  idle.index = 1;
  idle.name = "Fake GPU";
  idle.memory_total = GiB(80);
  gpus.gpus.push_back(idle);
  s.gpus = gpus;
  api::QueueReply queue;
  queue.jobs = {Job(1, "alice", "train", JobState::kRunning, GiB(40)),
                Job(2, "bob", "eval", JobState::kRunning, GiB(10)),
                Job(3, "bob", "big-sweep", JobState::kQueued, GiB(70),
                    "not enough memory: GPU 0 has 30.0 GiB free, needs 70.0 GiB"),
                Job(4, "alice", "tiny", JobState::kQueued, std::nullopt, "waiting for its turn")};
  s.queue = queue;
  api::EventsReply events;
  events.events.push_back({2, "bob", "eval", 1050, "started", "", true});
  events.events.push_back({1, "alice", "train", 1040, "started", "attempt 1 on GPU 0", false});
  s.events = events;
  return s;
}

std::string Screen(const std::vector<TopLine>& lines) {
  std::string out;
  for (const TopLine& l : lines) out += l.text + "\n";
  return out;
}

bool Has(const std::vector<TopLine>& lines, const std::string& text) {
  return Screen(lines).find(text) != std::string::npos;
}

TEST(TopView, MemoryBarSplitsUseAndReservationByJob) {
  const api::GpuInfoReply gpu = Snapshot().gpus->gpus[0];
  // 80 cells for 80 GiB: a cell per GiB.
  const std::string bar = MemoryBar(gpu, 80);
  ASSERT_EQ(bar.size(), 80u);
  EXPECT_EQ(bar, std::string(20, 'A') + std::string(20, 'a') + std::string(10, 'B') +
                     std::string(30, '.'));
  // Memory in use that no job accounts for is '#'.
  api::GpuInfoReply busy = gpu;
  busy.memory_used = GiB(40);
  EXPECT_EQ(MemoryBar(busy, 80).substr(50, 11), std::string(10, '#') + ".");
  // A sliver still shows; an overfull GPU stays within the bar.
  api::GpuInfoReply sliver = gpu;
  sliver.jobs = {{7, "x", "u", "plain", Bytes(1), Bytes(1 << 20), Bytes(1 << 20)}};
  sliver.memory_used = Bytes(1 << 20);
  EXPECT_EQ(MemoryBar(sliver, 10), "A.........");
  api::GpuInfoReply over = gpu;
  over.jobs[1].reservation = over.jobs[1].used = GiB(500);
  EXPECT_EQ(MemoryBar(over, 40).size(), 40u);
  EXPECT_EQ(MemoryBar(Snapshot().gpus->gpus[1], 5), ".....");
}

TEST(TopView, At80x24EverythingIsOnScreen) {
  const TopSnapshot s = Snapshot();
  const auto lines = RenderTop(s, TopViewState{}, 80, 24);
  ASSERT_EQ(lines.size(), 24u);
  for (const TopLine& l : lines) EXPECT_LE(l.text.size(), 80u) << l.text;
  EXPECT_EQ(lines.front().style, LineStyle::kTitle);
  EXPECT_TRUE(Has(lines, "colo top  alice  sort:id")) << Screen(lines);
  // The bars (one per GPU) and which job each letter is.
  // 35 cells for 80 GiB: 20 GiB is 8.75 cells, 10 GiB 4.375.
  EXPECT_TRUE(Has(lines, "[" + std::string(9, 'A') + std::string(9, 'a') + std::string(4, 'B') +
                             std::string(13, '.') + "]"))
      << Screen(lines);
  EXPECT_TRUE(Has(lines, "A=1 alice train 20.0/40.0G")) << Screen(lines);
  EXPECT_TRUE(Has(lines, "B=2 bob eval 10.0/10.0G")) << Screen(lines);
  EXPECT_TRUE(Has(lines, "SM 45%")) << Screen(lines);
  EXPECT_TRUE(Has(lines, "120W")) << Screen(lines);
  // Every job, the first selected, and the waiting ones' reasons.
  EXPECT_TRUE(Has(lines, "GPUS/REASON [2 R 2 PD]")) << Screen(lines);
  EXPECT_TRUE(Has(lines, "]  30.0/80.0G  SM 45%  120W")) << Screen(lines);
  EXPECT_TRUE(Has(lines, "(not enough memory")) << Screen(lines);
  EXPECT_TRUE(Has(lines, "0:01:00")) << Screen(lines);  // job 1 has run a minute
  auto selected = std::find_if(lines.begin(), lines.end(),
                               [](const TopLine& l) { return l.style == LineStyle::kSelected; });
  ASSERT_NE(selected, lines.end());
  EXPECT_EQ(selected->text.substr(0, 7), ">     1");
  EXPECT_TRUE(Has(lines, "job 1 running on GPU 0 (GPU-fake-0)")) << Screen(lines);
  EXPECT_TRUE(Has(lines, " 0:01:00  0 (plain)")) << Screen(lines);  // as colo queue numbers GPUs
  // Events, newest first; another user's detail is not shown.
  EXPECT_TRUE(Has(lines, "RECENT EVENTS"));
  EXPECT_TRUE(Has(lines, "attempt 1 on GPU 0"));
  EXPECT_TRUE(Has(lines, "bob      started    (private)")) << Screen(lines);
  EXPECT_LT(Screen(lines).find("(private)"), Screen(lines).find("attempt 1 on GPU 0"));
  EXPECT_TRUE(Has(lines, "q quit"));
}

TEST(TopView, ArrayTasksAreNamedAsTasks) {
  TopSnapshot s = Snapshot();
  for (api::JobSummary& j : s.queue->jobs) {
    if (j.id == 1 || j.id == 3) j.array_job = 1, j.array_task = j.id == 1 ? 0 : 2;
  }
  TopViewState state;
  state.selected = 3;
  const auto lines = RenderTop(s, state, 100, 30);
  EXPECT_TRUE(Has(lines, "A=1_0 alice")) << Screen(lines);             // the GPU's legend
  EXPECT_TRUE(Has(lines, "    1_0 alice    train")) << Screen(lines);  // the job list
  EXPECT_TRUE(Has(lines, "job 1_2 waits: not enough memory")) << Screen(lines);
  EXPECT_TRUE(Has(lines, "   1_0 alice    started")) << Screen(lines);  // its event
  EXPECT_EQ(JobIdOf(s, 2), "2");
  EXPECT_EQ(JobIdOf(s, 99), "99");
}

TEST(TopView, SortFilterMineAndSelection) {
  const TopSnapshot s = Snapshot();
  TopViewState state;
  auto ids = [&] {
    std::vector<JobId> out;
    for (const auto& j : VisibleJobs(s, state)) out.push_back(j.id);
    return out;
  };
  EXPECT_EQ(ids(), (std::vector<JobId>{1, 2, 3, 4}));
  state.sort = NextSort(state.sort);
  EXPECT_EQ(state.sort, TopSort::kUser);
  EXPECT_EQ(ids(), (std::vector<JobId>{1, 4, 2, 3}));
  state.sort = NextSort(state.sort);
  EXPECT_EQ(ids(), (std::vector<JobId>{3, 1, 2, 4}));  // largest plan first, unknown last
  state.sort = NextSort(state.sort);
  EXPECT_EQ(ids(), (std::vector<JobId>{1, 2, 3, 4}));  // running, then waiting
  EXPECT_EQ(NextSort(state.sort), TopSort::kId);
  state.sort = TopSort::kId;

  state.filter = "BOB";  // user or name, any case
  EXPECT_EQ(ids(), (std::vector<JobId>{2, 3}));
  state.filter = "sweep";
  EXPECT_EQ(ids(), (std::vector<JobId>{3}));
  EXPECT_TRUE(Has(RenderTop(s, state, 80, 24), "filter:sweep"));
  EXPECT_TRUE(Has(RenderTop(s, state, 80, 24), "job 3 waits: not enough memory"));
  state.filter.clear();
  state.mine_only = true;
  EXPECT_EQ(ids(), (std::vector<JobId>{1, 4}));
  state.mine_only = false;

  EXPECT_EQ(SelectedJob(s, state), 1);
  state.selected = MoveSelection(s, state, 1);
  EXPECT_EQ(state.selected, 2);
  state.selected = MoveSelection(s, state, 10);
  EXPECT_EQ(state.selected, 4);
  state.selected = MoveSelection(s, state, -1);
  EXPECT_EQ(state.selected, 3);
  // A filter that hides the selected job moves the selection to the first one shown.
  state.filter = "alice";
  EXPECT_EQ(SelectedJob(s, state), 1);
  state.filter = "nobody";
  EXPECT_EQ(SelectedJob(s, state), 0);
  EXPECT_TRUE(Has(RenderTop(s, state, 80, 24), "no jobs"));
}

TEST(TopView, AsksOnlyForWhatItShows) {
  TopSnapshot s = Snapshot();
  TopViewState state;
  // By id, no filter: the first jobs to a screen past the selection, one page.
  TopQueueAsk ask = QueueToAsk(s, state, 24);
  EXPECT_FALSE(ask.every_page);
  EXPECT_EQ(ask.request.limit, 25);
  EXPECT_EQ(ask.request.user, "");
  state.selected = 4;  // the fourth shown
  EXPECT_EQ(QueueToAsk(s, state, 24).request.limit, 28);
  state.mine_only = true;
  EXPECT_EQ(QueueToAsk(s, state, 24).request.user, "alice");
  state.mine_only = false;
  // Far down the list, in another order or with a filter: every page.
  EXPECT_TRUE(QueueToAsk(s, state, api::kMaxQueuePage).every_page);
  state.sort = TopSort::kMemory;
  EXPECT_TRUE(QueueToAsk(s, state, 24).every_page);
  state.sort = TopSort::kId;
  state.filter = "bob";
  EXPECT_TRUE(QueueToAsk(s, state, 24).every_page);
  state.filter.clear();

  // A first page: the header counts what colod counted, not the page.
  s.queue->next = 4;
  s.queue->running = 7;
  s.queue->waiting = 1200;
  EXPECT_TRUE(Has(RenderTop(s, state, 100, 24), "[7 R 1200 PD]"));
  s.queue->next.reset();
  EXPECT_TRUE(Has(RenderTop(s, state, 100, 24), "[2 R 2 PD]"));
}

TEST(TopView, TheSelectionStaysInViewOnAShortScreen) {
  TopSnapshot s = Snapshot();
  for (JobId id = 10; id < 60; ++id)
    s.queue->jobs.push_back(Job(id, "carol", "sweep", JobState::kQueued, GiB(1), "its turn"));
  TopViewState state;
  state.selected = 55;
  const auto lines = RenderTop(s, state, 80, 24);
  auto selected = std::find_if(lines.begin(), lines.end(),
                               [](const TopLine& l) { return l.style == LineStyle::kSelected; });
  ASSERT_NE(selected, lines.end()) << Screen(lines);
  EXPECT_EQ(selected->text.substr(0, 7), ">    55");
}

TEST(TopView, StatusLinePromptsAndColodGoingAway) {
  TopSnapshot s = Snapshot();
  TopViewState state;
  state.input = TopInput::kFilter;
  state.filter = "tr";
  EXPECT_EQ(RenderTop(s, state, 80, 24).back().text, "filter (user or name): tr_");
  state.input = TopInput::kConfirmCancel;
  state.confirm_job = 1;
  EXPECT_EQ(RenderTop(s, state, 80, 24).back().text, "cancel job 1 (train)? y/n");
  state.input = TopInput::kNone;
  state.message = "cannot cancel job 2: job 2 belongs to bob";
  EXPECT_EQ(RenderTop(s, state, 80, 24).back().style, LineStyle::kAlert);
  EXPECT_EQ(RenderTop(s, state, 80, 24).back().text, state.message);
  // colod gone: the last answers stay, the status says so.
  s.unreachable = "cannot connect to /run/colo/colod.sock";
  const auto lines = RenderTop(s, state, 80, 24);
  EXPECT_EQ(lines.back().text.rfind("colod unreachable, retrying", 0), 0u) << lines.back().text;
  EXPECT_TRUE(Has(lines, "[AAAA"));
  // Before colod ever answered.
  EXPECT_TRUE(Has(RenderTop(TopSnapshot{}, TopViewState{}, 80, 24), "waiting for colod"));
}

TEST(TopView, AnySizeGivesExactlyItsLinesWithinItsWidth) {
  TopSnapshot s = Snapshot();
  s.queue->jobs[2].name = "\x1b[31m" + std::string("\x1b[2J") + "\xff";
  for (int width : {1, 10, 40, 80, 200}) {
    for (int height : {1, 2, 5, 12, 24, 60}) {
      for (bool help : {false, true}) {
        TopViewState state;
        state.help = help;
        const auto lines = RenderTop(s, state, width, height);
        ASSERT_EQ(static_cast<int>(lines.size()), height) << width << "x" << height;
        for (const TopLine& l : lines) {
          EXPECT_LE(static_cast<int>(l.text.size()), width) << width << "x" << height;
          EXPECT_EQ(l.text.find('\x1b'), std::string::npos);
        }
      }
    }
  }
  TopViewState help;
  help.help = true;
  EXPECT_TRUE(Has(RenderTop(s, help, 80, 24), "cancel the selected job"));
  EXPECT_TRUE(RenderTop(s, TopViewState{}, 0, 0).empty());
}

}  // namespace
}  // namespace colo

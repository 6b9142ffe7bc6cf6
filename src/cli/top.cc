#include "cli/top.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <clocale>

#include "api/client.h"
#include "cli/client_commands.h"
#include "cli/top_view.h"
#include "common/clock.h"
#include "common/text.h"

// Last, and as functions only: its macros (clear, erase, timeout) would rewrite the C++ above.
#define NCURSES_NOMACROS
#include <curses.h>

namespace colo {

namespace {

volatile sig_atomic_t g_stop = 0;

void OnStopSignal(int) {
  g_stop = 1;
}

// SIGINT, SIGTERM and SIGHUP end the loop, which restores the terminal (what is left of it). Set
// before initscr, so ncurses keeps its own handlers off them; without SA_RESTART, so a wait for a
// key ends at once.
void CatchStopSignals() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  for (int stop : {SIGINT, SIGTERM, SIGHUP}) sigaction(stop, &action, nullptr);
}

// A terminal that hung up polls as POLLHUP, and every read is an immediate end of file (getch
// returns ERR without waiting). SIGHUP alone does not tell: it goes to the session's leader,
// which may ignore it and not pass it on.
bool TerminalHungUp() {
  pollfd terminal{STDIN_FILENO, POLLIN, 0};
  return poll(&terminal, 1, 0) > 0 && (terminal.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

// One connection per refresh, with a short timeout: a colod that went away or hangs shows as
// unreachable within seconds, and the view keeps trying.
constexpr auto kCallTimeout = std::chrono::seconds(3);
constexpr int kKeyWaitMs = 100;
constexpr size_t kMaxFilterBytes = 64;

class TopSession {
 public:
  TopSession(const TopOptions& options, std::string socket)
      : socket_(socket.empty() ? api::DefaultSocketPath() : std::move(socket)) {
    state_.interval = options.delay;
  }

  int Run(double delay);

 private:
  void Refresh();
  void Draw();
  // False when the key ends the view.
  bool OnKey(int key);
  void OnFilterKey(int key);
  void Cancel(JobId job);

  std::string socket_;
  TopSnapshot snapshot_;
  TopViewState state_;
};

void TopSession::Refresh() {
  snapshot_.now = ToEpochSeconds(SystemClock().WallNow());
  auto client = api::Client::Connect(socket_, kCallTimeout);
  Status failed = client.status();
  if (client.ok()) {
    auto hello = client->Call(api::HelloRequest{});
    auto gpus = client->Call(api::GpusRequest{});
    const TopQueueAsk ask = QueueToAsk(snapshot_, state_, getmaxy(stdscr));
    auto queue = ask.every_page ? client->WholeQueue(ask.request) : client->Call(ask.request);
    auto events = client->Call(api::EventsRequest{api::kMaxRecentEvents / 4});
    for (const Status& s : {hello.status(), gpus.status(), queue.status(), events.status()}) {
      if (!s.ok() && failed.ok()) failed = s;
    }
    if (hello.ok()) snapshot_.me = hello->user;
    if (gpus.ok()) snapshot_.gpus = std::move(*gpus);
    if (queue.ok()) snapshot_.queue = std::move(*queue);
    if (events.ok()) snapshot_.events = std::move(*events);
  }
  snapshot_.unreachable = failed.ok() ? "" : failed.message();
}

void TopSession::Draw() {
  int height = 0, width = 0;
  getmaxyx(stdscr, height, width);
  const auto lines = RenderTop(snapshot_, state_, width, height);
  erase();
  for (size_t y = 0; y < lines.size(); ++y) {
    int attributes = A_NORMAL;
    switch (lines[y].style) {
      case LineStyle::kTitle:
        attributes = A_REVERSE | A_BOLD;
        break;
      case LineStyle::kHeader:
        attributes = A_BOLD;
        break;
      case LineStyle::kSelected:
        attributes = A_REVERSE;
        break;
      case LineStyle::kAlert:
        attributes = A_BOLD | (has_colors() ? COLOR_PAIR(1) : 0);
        break;
      case LineStyle::kNormal:
        break;
    }
    attrset(attributes);
    mvaddnstr(static_cast<int>(y), 0, lines[y].text.c_str(),
              static_cast<int>(lines[y].text.size()));
    if (lines[y].style == LineStyle::kTitle) {
      // The title's bar reaches across the screen.
      for (int x = getcurx(stdscr); x < width && getcury(stdscr) == static_cast<int>(y); ++x)
        addch(' ');
    }
  }
  attrset(A_NORMAL);
  refresh();
}

void TopSession::Cancel(JobId job) {
  auto client = api::Client::Connect(socket_, kCallTimeout);
  if (!client.ok()) {
    state_.message = fmt::format("cannot cancel job {}: {}", job, client.status().message());
    return;
  }
  auto reply = client->Call(api::CancelRequest{job});
  const std::string name = JobIdOf(snapshot_, job);
  state_.message = reply.ok()
                       ? fmt::format("job {}: {}", name, reply->state)
                       : fmt::format("cannot cancel job {}: {}", name, reply.status().message());
}

void TopSession::OnFilterKey(int key) {
  if (key == '\n' || key == '\r' || key == KEY_ENTER) {
    state_.input = TopInput::kNone;
  } else if (key == 27) {  // Esc: no filter
    state_.filter.clear();
    state_.input = TopInput::kNone;
  } else if (key == KEY_BACKSPACE || key == 127 || key == 8) {
    // A whole character: continuation bytes, then the byte that began it.
    while (!state_.filter.empty() &&
           (static_cast<unsigned char>(state_.filter.back()) & 0xC0) == 0x80)
      state_.filter.pop_back();
    if (!state_.filter.empty()) state_.filter.pop_back();
  } else if (key >= 0x20 && key < 0x100 && key != 0x7f && state_.filter.size() < kMaxFilterBytes) {
    state_.filter += static_cast<char>(key);  // UTF-8 arrives a byte at a time
  }
}

bool TopSession::OnKey(int key) {
  if (state_.input == TopInput::kFilter) {
    OnFilterKey(key);
    return true;
  }
  if (state_.input == TopInput::kConfirmCancel) {
    state_.input = TopInput::kNone;
    if (key == 'y' || key == 'Y') {
      Cancel(state_.confirm_job);
      Refresh();
    } else {
      state_.message = fmt::format("job {} not cancelled", state_.confirm_job);
    }
    return true;
  }
  if (state_.help && key != KEY_RESIZE) {
    state_.help = false;
    return key != 'q';
  }
  switch (key) {
    case 'q':
    case 'Q':
      return false;
    case 's':
      state_.sort = NextSort(state_.sort);
      break;
    case '/':
      state_.input = TopInput::kFilter;
      state_.message.clear();
      break;
    case 'u':
      state_.mine_only = !state_.mine_only;
      break;
    case 'c':
      state_.confirm_job = SelectedJob(snapshot_, state_);
      if (state_.confirm_job == 0) {
        state_.message = "no job selected";
      } else {
        state_.input = TopInput::kConfirmCancel;
      }
      break;
    case KEY_UP:
    case 'k':
      state_.selected = MoveSelection(snapshot_, state_, -1);
      break;
    case KEY_DOWN:
    case 'j':
      state_.selected = MoveSelection(snapshot_, state_, 1);
      break;
    case KEY_PPAGE:
      state_.selected = MoveSelection(snapshot_, state_, -10);
      break;
    case KEY_NPAGE:
      state_.selected = MoveSelection(snapshot_, state_, 10);
      break;
    case '?':
      state_.help = true;
      break;
    default:
      break;
  }
  return true;
}

int TopSession::Run(double delay) {
  Refresh();
  // On the monotonic clock: the refresh keeps its pace when the calendar time is set.
  const SystemClock clock;
  const Duration every = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(delay));
  TimePoint next_refresh = clock.Now() + every;
  for (;;) {
    if (g_stop) return kExitOk;
    Draw();
    const int key = getch();
    if (g_stop || (key == ERR && TerminalHungUp())) return kExitOk;
    if (key != ERR) {
      // The selection stays on its job as the list changes; a key pins it.
      if (!OnKey(key)) return kExitOk;
      if (state_.selected == 0) state_.selected = SelectedJob(snapshot_, state_);
    }
    if (clock.Now() >= next_refresh) {
      Refresh();
      next_refresh = clock.Now() + every;
    }
  }
}

}  // namespace

void AddTopCommand(CLI::App& app, TopOptions& options) {
  auto* top = app.add_subcommand(
      "top", "a live view of the GPUs, the queue and recent events (keys: ? for help)");
  top->add_option("-d,--delay", options.delay, "seconds between refreshes")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
}

int RunTopCommand(const TopOptions& options, const std::string& socket) {
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
    fmt::print(stderr,
               "colo: top needs a terminal; for scripts use colo gpus, colo queue (--json)\n");
    return kExitError;
  }
  std::setlocale(LC_ALL, "");
  CatchStopSignals();
  if (!initscr()) {
    fmt::print(stderr, "colo: cannot use this terminal (TERM={})\n",
               Printable(getenv("TERM") ? getenv("TERM") : ""));
    return kExitError;
  }
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  set_escdelay(25);
  curs_set(0);
  timeout(kKeyWaitMs);
  if (has_colors()) {
    start_color();
    use_default_colors();
    init_pair(1, COLOR_RED, -1);
  }
  int code = kExitOk;
  try {
    TopSession session(options, socket);
    code = session.Run(options.delay);
  } catch (...) {
    endwin();  // the terminal as it was, whatever ended the view
    throw;
  }
  endwin();
  return code;
}

}  // namespace colo

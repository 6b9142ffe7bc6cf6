// colo-loadgen: load on a running colod through the API, as many users' `colo submit`s would put
// it, with latencies measured at the client. Used by bench/daemon/load.sh.
//
//   colo-loadgen submit --socket S --workdir D --jobs N --clients C [--memory B] [--command ...]
//       N submits from C concurrent connections; prints the ids to --ids FILE and the latencies
//   colo-loadgen verify --socket S --ids FILE
//       every id in FILE is known to colod and ended well (or is still live): 0 lost
//   colo-loadgen history-stall --socket S [--seconds T]
//       one client reads the whole history (all users, pages of 500) again and again while another
//       says hello every 10 ms; prints the hello latencies
//   colo-loadgen flood --socket S --workdir D [--seconds T] [--connections C] [--roles R,...]
//       one user's flood on C connections, each pipelining requests of one role in turn: submit
//       (jobs that run `true`), history (every user's, page after page), flip (hold and release
//       of 1,000 held jobs at once), array (a held 1,000-task array with a 250 KB environment and
//       a 32 KB command, then its cancel); prints what was done
//   colo-loadgen probe --socket S [--seconds T] [--interval-ms I] [--limit N]
//       another user's `queue` every I ms (the first page, of N jobs: `colo queue` asks for pages
//       of 500, `colo top` for a screenful); prints the latencies
#include <fmt/format.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "api/client.h"

namespace colo {
namespace {

using Clock = std::chrono::steady_clock;

struct Latencies {
  std::vector<double> ms;
  void Print(const std::string& what) {
    if (ms.empty()) {
      fmt::print("{}: no samples\n", what);
      return;
    }
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) {
      return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
    };
    fmt::print("{}: n={} p50={:.2f} ms p90={:.2f} ms p99={:.2f} ms max={:.2f} ms\n", what,
               ms.size(), at(0.50), at(0.90), at(0.99), ms.back());
  }
};

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

int Submit(const std::string& socket, const std::string& workdir, int jobs, int clients,
           const std::string& memory, const std::vector<std::string>& command,
           const std::string& ids_file) {
  std::mutex mutex;
  Latencies latencies;
  std::vector<JobId> ids;
  std::atomic<int> failures{0}, next{0};
  std::string first_error;
  const auto began = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto client = api::Client::Connect(socket);
      if (!client.ok()) {
        failures += 1;
        return;
      }
      std::vector<double> mine;
      std::vector<JobId> my_ids;
      while (next.fetch_add(1) < jobs) {
        api::SubmitRequest r;
        r.command = command;
        r.context.workdir = workdir;
        if (!memory.empty()) r.memory = ParseBytes(memory).value();
        r.env = {"PATH=/usr/bin:/bin"};
        const auto t0 = Clock::now();
        auto reply = client->Call(r);
        mine.push_back(Ms(Clock::now() - t0));
        if (reply.ok()) {
          my_ids.push_back(reply->job);
        } else {
          failures += 1;
          std::lock_guard lock(mutex);
          if (first_error.empty()) first_error = reply.status().message();
        }
      }
      std::lock_guard lock(mutex);
      latencies.ms.insert(latencies.ms.end(), mine.begin(), mine.end());
      ids.insert(ids.end(), my_ids.begin(), my_ids.end());
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = Ms(Clock::now() - began) / 1000;
  const std::set<JobId> unique(ids.begin(), ids.end());
  fmt::print(
      "submitted {} jobs from {} connection(s) in {:.2f} s ({:.0f}/s): {} acknowledged, {} "
      "distinct ids, {} failed{}\n",
      jobs, clients, seconds, jobs / seconds, ids.size(), unique.size(), failures.load(),
      first_error.empty() ? "" : " (" + first_error + ")");
  latencies.Print("submit latency");
  std::ofstream out(ids_file, std::ios::app);
  for (JobId id : ids) out << id << "\n";
  return failures == 0 && unique.size() == ids.size() ? 0 : 1;
}

int Verify(const std::string& socket, const std::string& ids_file) {
  auto client = api::Client::Connect(socket);
  if (!client.ok()) {
    fmt::print(stderr, "{}\n", client.status().message());
    return 1;
  }
  std::ifstream in(ids_file);
  JobId id;
  int known = 0, lost = 0, succeeded = 0, live = 0, other = 0;
  while (in >> id) {
    auto shown = client->Call(api::ShowRequest{id});
    if (!shown.ok()) {
      ++lost;
      if (lost <= 5) fmt::print("job {}: {}\n", id, shown.status().message());
      continue;
    }
    ++known;
    const JobState s = shown->job.summary.state;
    if (s == JobState::kSucceeded)
      ++succeeded;
    else if (!IsTerminal(s))
      ++live;
    else
      ++other;
  }
  fmt::print(
      "acknowledged jobs: {} known to colod, {} lost; {} succeeded, {} still live, {} ended "
      "otherwise\n",
      known, lost, succeeded, live, other);
  return lost == 0 && other == 0 ? 0 : 1;
}

int HistoryStall(const std::string& socket, double seconds) {
  std::atomic<bool> stop{false};
  std::atomic<long> pages{0}, jobs{0}, rounds{0};
  Latencies history_rounds;
  std::thread reader([&] {
    auto client = api::Client::Connect(socket);
    if (!client.ok()) return;
    while (!stop) {
      api::HistoryRequest request;
      request.all = true;
      request.limit = api::kMaxHistoryPage;
      const auto t0 = Clock::now();
      for (;;) {
        auto page = client->Call(request);
        if (!page.ok()) return;
        ++pages;
        jobs += static_cast<long>(page->jobs.size());
        if (!page->next || stop) break;
        request.before = page->next;
      }
      history_rounds.ms.push_back(Ms(Clock::now() - t0));
      ++rounds;
    }
  });
  Latencies hello;
  auto client = api::Client::Connect(socket);
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (client.ok() && Clock::now() < until) {
    const auto t0 = Clock::now();
    if (client->Call(api::HelloRequest{}).ok()) hello.ms.push_back(Ms(Clock::now() - t0));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  reader.join();
  fmt::print("history read {} time(s) in full: {} pages, {} jobs\n", rounds.load(), pages.load(),
             jobs.load());
  history_rounds.Print("one full history (all users)");
  hello.Print("hello while history is read");
  return 0;
}

// A raw connection that pipelines: `depth` request lines written at once, then their replies read.
class Pipeline {
 public:
  static std::optional<Pipeline> Connect(const std::string& path) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (fd < 0 || path.size() >= sizeof address.sun_path) return std::nullopt;
    memcpy(address.sun_path, path.c_str(), path.size() + 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      close(fd);
      return std::nullopt;
    }
    return Pipeline(fd);
  }
  Pipeline(Pipeline&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ~Pipeline() {
    if (fd_ >= 0) close(fd_);
  }
  // Sends every line and reads as many replies; false once the connection is gone.
  bool Exchange(const std::vector<std::string>& lines, std::vector<std::string>& replies) {
    std::string out;
    for (const std::string& line : lines) out += line + "\n";
    for (size_t done = 0; done < out.size();) {
      const ssize_t n = send(fd_, out.data() + done, out.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    replies.clear();
    while (replies.size() < lines.size()) {
      const size_t newline = in_.find('\n');
      if (newline != std::string::npos) {
        replies.push_back(in_.substr(0, newline));
        in_.erase(0, newline + 1);
        continue;
      }
      char buffer[1 << 16];
      const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) return false;
      in_.append(buffer, static_cast<size_t>(n));
    }
    return true;
  }

 private:
  explicit Pipeline(int fd) : fd_(fd) {}
  int fd_;
  std::string in_;
};

std::string Line(const api::Request& request) {
  return api::EncodeRequest(request);
}

// A held array of `tasks` tasks whose environment and command are about `env_bytes` and
// `command_bytes`.
api::SubmitRequest BigArray(const std::string& workdir, int tasks, size_t env_bytes,
                            size_t command_bytes) {
  api::SubmitRequest r;
  r.context.workdir = workdir;
  r.hold = true;
  r.command = {"true"};
  while (command_bytes > 1100) {
    r.command.push_back(std::string(1000, 'c'));
    command_bytes -= 1001;
  }
  r.env = {"PATH=/usr/bin:/bin"};
  for (int i = 0; env_bytes > 1100; ++i) {
    r.env.push_back(fmt::format("FLOOD_{:04}={}", i, std::string(1000, 'e')));
    env_bytes -= 1012;
  }
  api::ArraySpec array;
  for (int t = 0; t < tasks; ++t) array.tasks.push_back(t);
  r.array = array;
  return r;
}

struct FloodCounts {
  std::atomic<long> requests{0}, errors{0}, arrays{0}, flips{0};
  std::mutex mutex;
  std::map<std::string, Latencies> latencies;  // by role: one pipelined exchange
  std::string first_error;
};

// One connection of the flood: pipelines requests of `role` until `stop`.
void FloodConnection(const std::string& socket, const std::string& workdir, const std::string& role,
                     const std::atomic<bool>& stop, FloodCounts& counts) {
  auto pipe = Pipeline::Connect(socket);
  if (!pipe) {
    counts.errors++;
    return;
  }
  std::vector<std::string> lines, replies;
  const auto exchange = [&] {
    const auto t0 = Clock::now();
    const bool ok = pipe->Exchange(lines, replies);
    const double ms = Ms(Clock::now() - t0);
    std::lock_guard lock(counts.mutex);
    counts.latencies[role].ms.push_back(ms);
    counts.requests += static_cast<long>(replies.size());
    for (const std::string& reply : replies) {
      if (reply.find("\"ok\":true") == std::string::npos) {
        counts.errors++;
        if (counts.first_error.empty()) counts.first_error = reply.substr(0, 300);
      }
    }
    return ok;
  };
  // flip: 1,000 held jobs of its own (one held array), then hold and release of all of them.
  std::vector<JobId> held;
  if (role == "flip") {
    lines = {Line(BigArray(workdir, 1000, 0, 0))};
    if (!exchange()) return;
    auto reply = api::DecodeReply<api::SubmitReply>(replies.at(0));
    if (!reply.ok()) return;
    for (int t = 0; t < 1000; ++t) held.push_back(reply->job + t);
  }
  const std::string array_line = Line(BigArray(workdir, 1000, 250000, 32000));
  if (role == "array-keep") {  // one array, kept: what it costs colod
    lines = {array_line};
    exchange();
    return;
  }
  bool hold = false;
  std::optional<JobId> before;
  while (!stop) {
    lines.clear();
    if (role == "submit") {
      api::SubmitRequest r;
      r.command = {"true"};
      r.context.workdir = workdir;
      r.env = {"PATH=/usr/bin:/bin"};
      for (int i = 0; i < 16; ++i) lines.push_back(Line(r));
    } else if (role == "history") {
      api::HistoryRequest r;
      r.all = true;
      r.limit = api::kMaxHistoryPage;
      r.before = before;
      lines.push_back(Line(r));
    } else if (role == "flip") {
      api::ControlRequest r;
      r.action = hold ? api::JobAction::kHold : api::JobAction::kRelease;
      r.jobs = held;
      hold = !hold;
      lines.push_back(Line(r));
      counts.flips++;
    } else if (role == "array") {
      lines.push_back(array_line);
    }
    if (!exchange()) return;
    if (role == "history") {
      auto page = api::DecodeReply<api::HistoryReply>(replies.at(0));
      before = page.ok() ? page->next : std::nullopt;
    } else if (role == "array") {
      auto reply = api::DecodeReply<api::SubmitReply>(replies.at(0));
      if (!reply.ok()) continue;
      counts.arrays++;
      lines = {Line(api::CancelRequest{reply->job})};
      if (!exchange()) return;
    }
  }
  if (role == "flip") {  // the held jobs go
    lines.clear();
    for (JobId id : held) lines.push_back(Line(api::CancelRequest{id}));
    pipe->Exchange(lines, replies);
  }
}

int Flood(const std::string& socket, const std::string& workdir, double seconds, int connections,
          const std::vector<std::string>& roles) {
  std::atomic<bool> stop{false};
  FloodCounts counts;
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    const std::string role = roles[static_cast<size_t>(c) % roles.size()];
    threads.emplace_back([&, role] { FloodConnection(socket, workdir, role, stop, counts); });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  fmt::print(
      "flood: {} requests on {} connection(s) in {:.0f} s, {} refused or failed{}; {} big "
      "arrays submitted and cancelled, {} hold/release flips of 1,000 jobs\n",
      counts.requests.load(), connections, seconds, counts.errors.load(),
      counts.first_error.empty() ? "" : " (first: " + counts.first_error + ")",
      counts.arrays.load(), counts.flips.load());
  for (auto& [role, latencies] : counts.latencies) latencies.Print("  flood " + role + " exchange");
  return 0;
}

int Probe(const std::string& socket, double seconds, int interval_ms, int limit) {
  auto client = api::Client::Connect(socket);
  if (!client.ok()) {
    fmt::print(stderr, "{}\n", client.status().message());
    return 1;
  }
  Latencies latencies;
  int failures = 0;
  size_t jobs = 0;
  std::string first_error;
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    api::QueueRequest request;
    request.limit = limit;
    const auto t0 = Clock::now();
    auto reply = client->Call(request);
    latencies.ms.push_back(Ms(Clock::now() - t0));
    if (reply.ok()) {
      jobs = reply->jobs.size();
    } else if (failures++ == 0) {
      first_error = reply.status().message();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  fmt::print("probe: {} queue requests, {} failed{}; the last listed {} job(s)\n",
             latencies.ms.size(), failures, first_error.empty() ? "" : " (" + first_error + ")",
             jobs);
  latencies.Print("queue latency");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace colo

int main(int argc, char** argv) {
  CLI::App app{"colo-loadgen: load on a running colod through its API"};
  app.require_subcommand(1);
  std::string socket, workdir = "/tmp", memory, ids_file = "ids.txt";
  int jobs = 1000, clients = 1;
  double seconds = 10;
  std::vector<std::string> command = {"true"};
  app.add_option("--socket", socket)->required();
  auto* submit = app.add_subcommand("submit");
  submit->add_option("--workdir", workdir);
  submit->add_option("--jobs", jobs);
  submit->add_option("--clients", clients);
  submit->add_option("--memory", memory);
  submit->add_option("--ids", ids_file);
  submit->add_option("--command", command)->expected(-1);
  auto* verify = app.add_subcommand("verify");
  verify->add_option("--ids", ids_file);
  auto* stall = app.add_subcommand("history-stall");
  stall->add_option("--seconds", seconds);
  int connections = 32, interval_ms = 50, limit = colo::api::kMaxQueuePage;
  std::vector<std::string> roles = {"submit", "history", "flip", "array"};
  auto* flood = app.add_subcommand("flood");
  flood->add_option("--seconds", seconds);
  flood->add_option("--workdir", workdir);
  flood->add_option("--connections", connections);
  flood->add_option("--roles", roles)->delimiter(',');
  auto* probe = app.add_subcommand("probe");
  probe->add_option("--seconds", seconds);
  probe->add_option("--interval-ms", interval_ms);
  probe->add_option("--limit", limit);
  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand(flood)) return colo::Flood(socket, workdir, seconds, connections, roles);
  if (app.got_subcommand(probe)) return colo::Probe(socket, seconds, interval_ms, limit);
  if (app.got_subcommand(submit))
    return colo::Submit(socket, workdir, jobs, clients, memory, command, ids_file);
  if (app.got_subcommand(verify)) return colo::Verify(socket, ids_file);
  return colo::HistoryStall(socket, seconds);
}

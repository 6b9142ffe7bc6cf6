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
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
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
  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand(submit))
    return colo::Submit(socket, workdir, jobs, clients, memory, command, ids_file);
  if (app.got_subcommand(verify)) return colo::Verify(socket, ids_file);
  return colo::HistoryStall(socket, seconds);
}

// colo-replay: replays allocation traces through the caching-allocator model and prints what it
// would reserve. Used to check the model against torch's own allocator history:
//
//   colo-replay [--prefix PARAMS.trace] [--expandable] [--workspace BYTES]... TRACE
//
// --prefix replays another trace's allocations before its "m steps" marker first (colo-profile's
// parameters, for a history recorded after the model was already on the GPU).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/strings.h"
#include "estimate/caching_allocator.h"

int main(int argc, char** argv) {
  CLI::App app{"Replay allocation traces through colo's model of PyTorch's caching allocator"};
  std::string path, prefix;
  bool expandable = false;
  std::vector<int64_t> permanent_blocks;
  app.add_option("trace", path, "allocation trace")->required();
  app.add_option("--prefix", prefix, "a trace whose allocations before 'm steps' come first");
  app.add_flag("--expandable", expandable, "model expandable segments");
  app.add_option("--workspace", permanent_blocks, "a permanent allocation made before the steps");
  double ratio = 0;
  app.add_option("--workspace-ratio", ratio,
                 "size of a library workspace per byte of its largest tensor");
  CLI11_PARSE(app, argc, argv);
  auto read = [](const std::string& file) -> colo::Result<colo::AllocationTrace> {
    auto text = colo::ReadTextFile(file);
    if (!text.ok()) return text.status();
    return colo::ParseAllocationTrace(*text, file);
  };
  auto trace = read(path);
  if (!trace.ok()) {
    std::cerr << "colo-replay: " << trace.status().message() << "\n";
    return 1;
  }
  if (!prefix.empty()) {
    auto head = read(prefix);
    if (!head.ok()) {
      std::cerr << "colo-replay: " << head.status().message() << "\n";
      return 1;
    }
    // The prefix's allocations stay alive; the trace's indices shift past them.
    colo::AllocationTrace joined;
    const int64_t shift = [&] {
      int64_t n = 0;
      for (size_t i = 0; i < head->steps_begin; ++i)
        n += head->events[i].kind == colo::AllocationTrace::Event::kAlloc;
      return n;
    }();
    for (size_t i = 0; i < head->steps_begin; ++i) {
      if (head->events[i].kind == colo::AllocationTrace::Event::kAlloc)
        joined.events.push_back(head->events[i]);
    }
    joined.steps_begin = joined.events.size();
    for (const size_t begin : trace->step_begins) {
      joined.step_begins.push_back(joined.steps_begin + begin);
    }
    joined.convs = trace->convs;
    for (auto e : trace->events) {
      if (e.kind == colo::AllocationTrace::Event::kFree) e.value += shift;
      joined.events.push_back(e);
    }
    joined.allocations = shift + trace->allocations;
    *trace = std::move(joined);
  }
  colo::ReplayOptions options{permanent_blocks, {}, expandable};
  if (ratio > 0) {
    for (const auto& conv : trace->convs) {
      options.workspaces.push_back(
          {static_cast<int64_t>(ratio * static_cast<double>(conv.largest()))});
    }
  }
  auto stats = colo::Replay(*trace, options);
  if (!stats.ok()) {
    std::cerr << "colo-replay: " << stats.status().message() << "\n";
    return 1;
  }
  fmt::print(
      "{{\"peak_reserved\": {}, \"peak_allocated\": {}, \"peak_requested\": {}, \"segments\": "
      "{}}}\n",
      stats->peak_reserved, stats->peak_allocated, stats->peak_requested, stats->segments);
  return 0;
}

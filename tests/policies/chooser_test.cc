// What each chooser prefers, and what each gate refuses, on small hand-built clusters.
#include <gtest/gtest.h>

#include "policies/flat_window.h"
#include "policies/registry.h"

namespace colo {
namespace {

// Four GPUs on one server: 0 idle; 1 busy, 30 GiB free, SMACT 0.5; 2 busy, 10 GiB free, SMACT 0.2;
// 3 busy, 20 GiB free, SMACT 0.7.
ClusterView FourGpus() {
  ClusterView view;
  const struct {
    int jobs;
    int free_gib;
    double smact;
  } gpus[] = {{0, 38, 0.0}, {1, 30, 0.5}, {1, 10, 0.2}, {2, 20, 0.7}};
  for (int i = 0; i < 4; ++i) {
    GpuView g;
    g.index = i;
    g.capacity = GiB(40);
    g.job_count = gpus[i].jobs;
    g.free_for_placement = GiB(gpus[i].free_gib);
    g.smact = Flat(gpus[i].smact);
    g.mps_owner = g.job_count ? "alice" : "";
    view.gpus.push_back(g);
  }
  view.last_placed = 1;
  return view;
}

PlacementRequest Request(Bytes need, int gpus = 1) {
  PlacementRequest r;
  r.owner = "alice";
  r.gpus = gpus;
  r.memory = MemoryNeed{need, MemorySource::kEstimated, 0};
  r.memory_need = need;
  return r;
}

GpuIndex Chosen(const std::string& spec, const ClusterView& view, const PlacementRequest& request) {
  auto policy = MakePolicy(spec);
  EXPECT_TRUE(policy.ok());
  const auto decision = (*policy)->Place(view, request);
  const auto* placed = std::get_if<Placed>(&decision);
  return placed ? placed->gpus.front() : -1;
}

TEST(Choosers, EachOrdersTheSurvivorsItsOwnWay) {
  const ClusterView view = FourGpus();
  const PlacementRequest r = Request(GiB(4));
  EXPECT_EQ(Chosen("first-fit", view, r), 0);
  EXPECT_EQ(Chosen("worst-fit", view, r), 0);       // most free: the idle GPU
  EXPECT_EQ(Chosen("best-fit", view, r), 2);        // least free that fits 4+2 GiB
  EXPECT_EQ(Chosen("least-utilized", view, r), 0);  // idle counts as SMACT 0
  EXPECT_EQ(Chosen("round-robin", view, r), 2);     // the one after GPU 1
  EXPECT_EQ(Chosen("consolidate", view, r), 3);     // busiest that passes, idle last
  EXPECT_EQ(Chosen("exclusive", view, r), 0);
}

TEST(Choosers, ExclusiveWaitsWhenNoGpuIsIdle) {
  ClusterView view = FourGpus();
  view.gpus[0].job_count = 1;
  auto policy = MakePolicy("exclusive");
  const auto decision = (*policy)->Place(view, Request(GiB(1)));
  const auto* wait = std::get_if<Wait>(&decision);
  ASSERT_NE(wait, nullptr);
  for (const auto& v : wait->per_gpu) EXPECT_EQ(v.gate, Gate::kNotIdle);
}

TEST(Gates, MemoryUtilizationGraceUserAndMig) {
  ClusterView view = FourGpus();
  auto policy = MakePolicy("worst-fit");
  const GateConfig& gates = (*policy)->gates();
  EXPECT_EQ(EvaluateGates(view.gpus[2], Request(GiB(9)), gates).gate, Gate::kMemory);  // 9 + 2 > 10
  view.gpus[1].smact = Flat(0.85);
  EXPECT_EQ(EvaluateGates(view.gpus[1], Request(GiB(1)), gates).gate, Gate::kUtilization);
  view.gpus[3].placed_recently = true;
  EXPECT_EQ(EvaluateGates(view.gpus[3], Request(GiB(1)), gates).gate, Gate::kLaunchGrace);
  PlacementRequest bob = Request(GiB(1));
  bob.owner = "bob";
  EXPECT_EQ(EvaluateGates(view.gpus[2], bob, gates).gate, Gate::kOtherUser);
  EXPECT_EQ(EvaluateGates(view.gpus[0], bob, gates).gate, Gate::kPass);  // idle: any user
  view.gpus[2].mig_instance = true;
  EXPECT_EQ(EvaluateGates(view.gpus[2], Request(GiB(1)), gates).gate, Gate::kMigBusy);
}

TEST(Gates, CarmaCompoundRuleNeedsOccupancyOrDramToo) {
  ClusterView view = FourGpus();
  view.gpus[1].smact = Flat(0.9);
  view.gpus[1].smocc = Flat(0.2);
  view.gpus[1].drama = Flat(0.1);
  auto simple = MakePolicy("worst-fit");
  auto compound = MakePolicy("worst-fit:compound=on");
  EXPECT_EQ(EvaluateGates(view.gpus[1], Request(GiB(1)), (*simple)->gates()).gate,
            Gate::kUtilization);
  EXPECT_EQ(EvaluateGates(view.gpus[1], Request(GiB(1)), (*compound)->gates()).gate, Gate::kPass);
  view.gpus[1].smocc = Flat(0.5);
  EXPECT_EQ(EvaluateGates(view.gpus[1], Request(GiB(1)), (*compound)->gates()).gate,
            Gate::kUtilization);
}

TEST(Choosers, ExclusiveFirstPrefersIdleGpus) {
  ClusterView view = FourGpus();
  EXPECT_EQ(Chosen("best-fit", view, Request(GiB(4))), 2);
  EXPECT_EQ(Chosen("best-fit:exclusive-first=on", view, Request(GiB(4))), 0);
}

TEST(Choosers, MultiGpuJobsStayOnOneServer) {
  ClusterView view;
  for (int i = 0; i < 4; ++i) {
    GpuView g;
    g.index = i;
    g.node = i / 2;
    g.capacity = GiB(40);
    g.free_for_placement = GiB(40);
    view.gpus.push_back(g);
  }
  view.gpus[1].free_for_placement = GiB(1);  // node 0 has one usable GPU, node 1 two
  view.gpus[1].job_count = 1;
  auto policy = MakePolicy("first-fit");
  const auto decision = (*policy)->Place(view, Request(GiB(4), 2));
  const auto* placed = std::get_if<Placed>(&decision);
  ASSERT_NE(placed, nullptr);
  EXPECT_EQ(placed->gpus, (std::vector<GpuIndex>{2, 3}));
  EXPECT_TRUE(std::holds_alternative<Infeasible>((*policy)->Place(view, Request(GiB(4), 3))));
}

TEST(Choosers, MultiGpuJobsTakeTheFirstServerToGatherEnoughInChooserOrder) {
  // Two servers: 0 has GPUs 0 (10 GiB free) and 1 (30 GiB); 1 has GPUs 2 (25 GiB), 3 (7 GiB,
  // busy) and 4 (20 GiB). Every GPU passes a 4-GiB job's gates.
  ClusterView view;
  const int free_gib[] = {10, 30, 25, 7, 20};
  for (int i = 0; i < 5; ++i) {
    GpuView g;
    g.index = i;
    g.node = i < 2 ? 0 : 1;
    g.capacity = GiB(40);
    g.free_for_placement = GiB(free_gib[i]);
    view.gpus.push_back(g);
  }
  view.gpus[3].job_count = 1;
  view.gpus[3].mps_owner = "alice";
  auto chosen = [&](const std::string& spec) {
    auto policy = MakePolicy(spec);
    EXPECT_TRUE(policy.ok());
    const auto decision = (*policy)->Place(view, Request(GiB(4), 2));
    const auto* placed = std::get_if<Placed>(&decision);
    return placed ? placed->gpus : std::vector<GpuIndex>{};
  };
  // Best-fit's order is 3, 0, 4, 2, 1: server 1 has two at GPU 4.
  EXPECT_EQ(chosen("best-fit"), (std::vector<GpuIndex>{3, 4}));
  // Idle GPUs alone first: 0, 4, 2.
  EXPECT_EQ(chosen("best-fit:exclusive-first=on"), (std::vector<GpuIndex>{4, 2}));
  // Worst-fit's order is 1, 2, 4, 0, 3.
  EXPECT_EQ(chosen("worst-fit"), (std::vector<GpuIndex>{2, 4}));
  // Three GPUs on one server: only server 1 has them, in the chooser's order.
  auto policy = MakePolicy("best-fit");
  const auto decision = (*policy)->Place(view, Request(GiB(4), 3));
  ASSERT_TRUE(std::holds_alternative<Placed>(decision));
  EXPECT_EQ(std::get<Placed>(decision).gpus, (std::vector<GpuIndex>{3, 4, 2}));
  // No server has two GPUs that pass: the job waits, every GPU with its verdict.
  view.gpus[2].free_for_placement = view.gpus[4].free_for_placement = GiB(1);
  view.gpus[0].free_for_placement = GiB(1);
  const auto waits = (*policy)->Place(view, Request(GiB(4), 2));
  const auto* wait = std::get_if<Wait>(&waits);
  ASSERT_NE(wait, nullptr);
  ASSERT_EQ(wait->per_gpu.size(), 5u);
  EXPECT_EQ(wait->per_gpu[1].gate, Gate::kNode);
  EXPECT_EQ(wait->per_gpu[3].gate, Gate::kNode);
  EXPECT_EQ(wait->per_gpu[4].gate, Gate::kMemory);
}

TEST(ThreadPercent, TwiceTheExpectedSmactWithinBounds) {
  EXPECT_EQ(ThreadPercentFor(-1), 100);
  EXPECT_EQ(ThreadPercentFor(0.05), 20);
  EXPECT_EQ(ThreadPercentFor(0.21), 50);
  EXPECT_EQ(ThreadPercentFor(0.8), 100);
}

}  // namespace
}  // namespace colo

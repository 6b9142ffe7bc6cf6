// One conformance suite, run against every registered policy: whatever a policy prefers, it never
// over-commits memory by reservation, never places a job twice or on a GPU a gate refuses, keeps
// multi-GPU jobs on one server, waits only when it must, and decides the same way for the same
// input.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/rng.h"
#include "policies/flat_window.h"
#include "policies/registry.h"

namespace colo {
namespace {

ClusterView RandomView(Rng& rng) {
  ClusterView view;
  view.now = AtSeconds(1000);
  const int nodes = 1 + static_cast<int>(rng.Below(3));
  const int per_node = 1 + static_cast<int>(rng.Below(4));
  for (int n = 0; n < nodes; ++n) {
    for (int i = 0; i < per_node; ++i) {
      GpuView g;
      g.index = static_cast<GpuIndex>(view.gpus.size());
      g.node = n;
      g.capacity = GiB(40);
      g.job_count = static_cast<int>(rng.Below(4));
      g.free_for_placement =
          g.job_count == 0 ? GiB(40) : Bytes(static_cast<int64_t>(rng.Below(GiB(40).count())));
      g.healthy = rng.Uniform() > 0.05;
      g.mig_instance = rng.Uniform() < 0.1;
      g.holds_exclusive = g.job_count > 0 && rng.Uniform() < 0.1;
      g.mps_owner =
          g.job_count > 0 && rng.Uniform() < 0.5 ? (rng.Uniform() < 0.5 ? "alice" : "bob") : "";
      g.mode = rng.Uniform() < 0.8 ? SharingMode::kMps : SharingMode::kPlain;
      g.smact = g.job_count == 0 ? Flat(0) : Flat(rng.Uniform());
      g.smocc = Flat(rng.Uniform());
      g.drama = Flat(rng.Uniform());
      g.placed_recently = g.job_count > 0 && rng.Uniform() < 0.2;
      if (g.placed_recently) g.grace_left = Seconds(10);
      view.gpus.push_back(g);
    }
  }
  view.last_placed = static_cast<GpuIndex>(rng.Below(view.gpus.size()));
  return view;
}

PlacementRequest RandomRequest(Rng& rng) {
  PlacementRequest r;
  r.job = 7;
  r.owner = rng.Uniform() < 0.5 ? "alice" : "bob";
  r.gpus = 1 + static_cast<int>(rng.Below(3));
  if (rng.Uniform() < 0.8) {
    r.memory = MemoryNeed{Bytes(static_cast<int64_t>(rng.Below(GiB(30).count()))),
                          MemorySource::kEstimated, 0.1};
    r.memory_need = r.memory.Upper();
  }
  const double u = rng.Uniform();
  r.sharing = u < 0.7   ? SharingPreference::kAny
              : u < 0.8 ? SharingPreference::kMps
              : u < 0.9 ? SharingPreference::kPlain
                        : SharingPreference::kExclusive;
  r.require_idle = rng.Uniform() < 0.1;
  r.expected_smact = rng.Uniform() < 0.5 ? rng.Uniform() : -1;
  // A job Slurm booked GPUs for: no launch grace holds it, and past its bounded wait no
  // utilization either.
  r.booked = rng.Uniform() < 0.15;
  r.skip_utilization = r.booked && rng.Uniform() < 0.5;
  return r;
}

class PolicyConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(PolicyConformance, HoldsEveryInvariantOnRandomClusters) {
  auto made =
      MakePolicy(GetParam() + ":exclusive-first=" + (GetParam() == "worst-fit" ? "on" : "off"));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const GatedPolicy& policy = **made;
  Rng rng(std::hash<std::string>{}(GetParam()));
  int placed_count = 0, wait_count = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const ClusterView view = RandomView(rng);
    const PlacementRequest request = RandomRequest(rng);
    const PlacementDecision decision = policy.Place(view, request);

    // Deterministic for equal input.
    const PlacementDecision again = policy.Place(view, request);
    ASSERT_EQ(decision.index(), again.index());
    // Unexplained, the same decision: the same placement, or a refusal of the same kind.
    const PlacementDecision unexplained = policy.PlaceUnexplained(view, request);
    ASSERT_EQ(unexplained.index(), decision.index());
    if (const auto* placed = std::get_if<Placed>(&unexplained)) {
      EXPECT_EQ(placed->gpus, std::get<Placed>(decision).gpus);
      EXPECT_EQ(placed->mode, std::get<Placed>(decision).mode);
      EXPECT_EQ(placed->thread_percent, std::get<Placed>(decision).thread_percent);
    }

    std::map<int, int> passing_per_node, gpus_per_node;
    for (const auto& g : view.gpus) {
      gpus_per_node[g.node]++;
      if (EvaluateGates(g, request, policy.gates()).gate == Gate::kPass) passing_per_node[g.node]++;
    }
    // MayTake is false only for a GPU Place refuses: where no server has enough GPUs it may
    // take, the job is not placed.
    std::map<int, int> may_take_per_node;
    for (const auto& g : view.gpus) {
      if (policy.MayTake(g, request)) may_take_per_node[g.node]++;
    }
    int most_may_take = 0;
    for (const auto& [node, n] : may_take_per_node) most_may_take = std::max(most_may_take, n);
    int best_node = 0, biggest_node = 0;
    for (const auto& [node, n] : passing_per_node) best_node = std::max(best_node, n);
    for (const auto& [node, n] : gpus_per_node) biggest_node = std::max(biggest_node, n);

    if (const auto* placed = std::get_if<Placed>(&decision)) {
      ++placed_count;
      EXPECT_EQ(std::get<Placed>(again).gpus, placed->gpus);
      ASSERT_EQ(static_cast<int>(placed->gpus.size()), request.gpus);
      std::set<GpuIndex> distinct(placed->gpus.begin(), placed->gpus.end());
      EXPECT_EQ(distinct.size(), placed->gpus.size()) << "a GPU used twice";
      for (GpuIndex g : placed->gpus) {
        const GpuView& gpu = view.gpus[static_cast<size_t>(g)];
        EXPECT_EQ(gpu.node, view.gpus[static_cast<size_t>(placed->gpus[0])].node)
            << "spans servers";
        EXPECT_EQ(EvaluateGates(gpu, request, policy.gates()).gate, Gate::kPass);
        EXPECT_TRUE(policy.MayTake(gpu, request)) << "MayTake refuses a GPU Place takes";
        if (policy.gates().memory) {
          EXPECT_LE(request.memory_need + policy.gates().memory_margin, gpu.free_for_placement)
              << "over-commits memory";
        }
        if (policy.gates().idle_only || request.require_idle) {
          EXPECT_TRUE(gpu.idle());
        }
        EXPECT_FALSE(gpu.holds_exclusive);
      }
      EXPECT_GE(most_may_take, request.gpus);
      EXPECT_GE(placed->thread_percent, 20);
      EXPECT_LE(placed->thread_percent, 100);
    } else if (const auto* wait = std::get_if<Wait>(&decision)) {
      ++wait_count;
      EXPECT_LT(best_node, request.gpus) << "waits although a server has enough passing GPUs";
      EXPECT_EQ(wait->gpus_considered, static_cast<int>(view.gpus.size()));
      EXPECT_NE(wait->Reason().find("blocked"), std::string::npos);
      EXPECT_EQ(wait->per_gpu.size(), view.gpus.size())
          << "every GPU needs a verdict for `colo explain`";
    } else {
      EXPECT_LT(biggest_node, request.gpus) << "infeasible although a server is large enough";
    }
  }
  EXPECT_GT(placed_count, 100);
  EXPECT_GT(wait_count, 100);
}

std::vector<std::string> AllPolicies() {
  std::vector<std::string> names;
  for (const auto& p : KnownPolicies()) names.push_back(p.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, PolicyConformance, ::testing::ValuesIn(AllPolicies()),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// A random summary whose statistics all differ, so that reading one the scheduler left out shows.
WindowSummary RandomSummary(Rng& rng) {
  WindowSummary s;
  if (rng.Uniform() < 0.1) return s;
  s.empty = false;
  s.last = rng.Uniform();
  s.mean = rng.Uniform();
  s.median = rng.Uniform();
  s.p95 = rng.Uniform();
  s.ema = rng.Uniform();
  return s;
}

// What the scheduler computes at `depth`: the statistics beyond it stay 0.
WindowSummary Truncated(const WindowSummary& full, SummaryDepth depth) {
  if (depth == SummaryDepth::kAll) return full;
  WindowSummary s;
  s.empty = full.empty;
  s.last = full.last;
  if (depth == SummaryDepth::kMean) s.mean = full.mean;
  return s;
}

// A view's summaries taken as a policy reads them (the scheduler's pass view), from `from`; it
// counts the GPUs whose summaries were asked for.
class SummariesOnDemand final : public WindowSource {
 public:
  explicit SummariesOnDemand(const ClusterView& from) : from_(from) {}
  const GpuView& Summarized(const ClusterView& /*view*/, const GpuView& gpu) override {
    asked.insert(gpu.index);
    return from_.gpus[static_cast<size_t>(gpu.index)];
  }
  std::set<GpuIndex> asked;

 private:
  const ClusterView& from_;
};

TEST(PolicyWindowReads, DecisionsNeedNoStatisticBeyondThoseDeclaredWhereDeclared) {
  std::vector<std::string> specs = AllPolicies();
  for (const std::string name : {"worst-fit", "least-utilized", "consolidate"}) {
    for (const char* settings :
         {":stat=last", ":stat=mean", ":compound=on", ":compound=on,stat=mean", ":preset=carma",
          ":gates=none", ":utilization=off"})
      specs.push_back(name + settings);
  }
  specs.push_back("OR-LUG");
  specs.push_back("exclusive:utilization=on");
  for (const std::string& spec : specs) {
    auto made = MakePolicy(spec);
    ASSERT_TRUE(made.ok()) << spec;
    const GatedPolicy& policy = **made;
    const WindowReads reads = policy.window_reads();
    Rng rng(std::hash<std::string>{}(spec));
    for (int trial = 0; trial < 2000; ++trial) {
      ClusterView full = RandomView(rng);
      for (GpuView& g : full.gpus) {
        // A GPU whose job ended within the launch grace, or whose new job has not appeared yet.
        if (rng.Uniform() < 0.2) g.placed_recently = g.process_grace = true;
        g.smact = RandomSummary(rng);
        g.smocc = RandomSummary(rng);
        g.drama = RandomSummary(rng);
      }
      ClusterView partial = full;
      for (GpuView& g : partial.gpus) {
        g.smact = Truncated(g.smact, reads.smact);
        g.smocc = Truncated(g.smocc, reads.smocc);
        g.drama = Truncated(g.drama, reads.drama);
      }
      const PlacementRequest request = RandomRequest(rng);
      // The scheduler's pass: only the GPUs the policy may read for this job are summarized.
      ClusterView lazy = partial;
      for (GpuView& g : lazy.gpus) {
        if (policy.NeedsWindows(g, request)) continue;
        g.smact = g.smocc = g.drama = WindowSummary{};
      }
      // Summaries taken only as the policy reads them: of no GPU it does not need them of.
      ClusterView on_demand = partial;
      for (GpuView& g : on_demand.gpus) g.smact = g.smocc = g.drama = WindowSummary{};
      SummariesOnDemand source(partial);
      on_demand.windows = &source;
      const PlacementDecision want = policy.Place(full, request);
      for (const ClusterView* view : {&partial, &lazy, &on_demand}) {
        const PlacementDecision got = policy.Place(*view, request);
        ASSERT_EQ(got.index(), want.index()) << spec << ", trial " << trial;
        if (const auto* placed = std::get_if<Placed>(&want)) {
          ASSERT_EQ(std::get<Placed>(got).gpus, placed->gpus) << spec << ", trial " << trial;
          ASSERT_EQ(std::get<Placed>(got).mode, placed->mode);
        } else if (const auto* wait = std::get_if<Wait>(&want)) {
          const Wait& other = std::get<Wait>(got);
          ASSERT_EQ(other.per_gpu.size(), wait->per_gpu.size());
          for (size_t i = 0; i < wait->per_gpu.size(); ++i) {
            ASSERT_EQ(other.per_gpu[i].gate, wait->per_gpu[i].gate) << spec << ", trial " << trial;
            ASSERT_EQ(other.per_gpu[i].value, wait->per_gpu[i].value)
                << spec << ", trial " << trial;
          }
        }
      }
      for (const GpuIndex g : source.asked) {
        EXPECT_TRUE(policy.NeedsWindows(on_demand.gpus[static_cast<size_t>(g)], request))
            << spec << ", trial " << trial << ": GPU " << g;
      }
    }
  }
}

TEST(PolicyRegistry, UnknownNamesAndSettingsAreTypedErrors) {
  auto unknown = MakePolicy("fastest-fit");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("worst-fit"), std::string::npos)
      << "lists the known policies";
  EXPECT_FALSE(MakePolicy("worst-fit:smact=1.5").ok());
  EXPECT_FALSE(MakePolicy("worst-fit:margin=lots").ok());
  EXPECT_FALSE(MakePolicy("worst-fit:colour=blue").ok());
  EXPECT_FALSE(MakePolicy("worst-fit:compound").ok());
  ASSERT_TRUE(MakePolicy("magm").ok());
  EXPECT_EQ((*MakePolicy("lug:gates=none"))->gates().memory, false);
  EXPECT_EQ((*MakePolicy("mug:margin=5GiB"))->gates().memory_margin, GiB(5));
}

}  // namespace
}  // namespace colo

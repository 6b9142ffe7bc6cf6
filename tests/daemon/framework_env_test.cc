// The frameworks' sharing settings colod adds to a job's environment (daemon/framework_env.h).
#include "daemon/framework_env.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

using Env = std::vector<std::string>;

FrameworkPlan Plan(Bytes planned) {
  FrameworkPlan p;
  p.planned = planned;
  p.capacity = GiB(80);
  p.cuda_context = MiB(512);
  return p;
}

TEST(FrameworkEnvTest, AKnownPlanBoundsJaxsPoolToThePlanLessTheContext) {
  const FrameworkEnv env = DeriveFrameworkEnv(Plan(GiB(2)), {});
  // (2 GiB - 512 MiB) / 80 GiB = 0.01875, rounded down to a thousandth.
  EXPECT_EQ(env.set,
            (Env{"XLA_PYTHON_CLIENT_MEM_FRACTION=0.018", "TF_FORCE_GPU_ALLOW_GROWTH=true"}));
  EXPECT_TRUE(env.kept.empty());
}

TEST(FrameworkEnvTest, ThePoolNeverExceedsThePlanNorFallsToNothing) {
  // A plan smaller than two contexts keeps half of it; a tiny one still gets a thousandth.
  EXPECT_EQ(DeriveFrameworkEnv(Plan(MiB(800)), {}).set.front(),
            "XLA_PYTHON_CLIENT_MEM_FRACTION=0.004");
  EXPECT_EQ(DeriveFrameworkEnv(Plan(MiB(1)), {}).set.front(),
            "XLA_PYTHON_CLIENT_MEM_FRACTION=0.001");
  EXPECT_EQ(DeriveFrameworkEnv(Plan(GiB(80)), {}).set.front(),
            "XLA_PYTHON_CLIENT_MEM_FRACTION=0.993");
}

TEST(FrameworkEnvTest, WithoutAPlanJaxAllocatesAsItGoes) {
  const FrameworkEnv env = DeriveFrameworkEnv(Plan(Bytes(0)), {});
  EXPECT_EQ(env.set,
            (Env{"XLA_PYTHON_CLIENT_PREALLOCATE=false", "TF_FORCE_GPU_ALLOW_GROWTH=true"}));
}

TEST(FrameworkEnvTest, PyTorchGetsExpandableSegmentsOnlyWhenThePlanWasMadeForThem) {
  FrameworkPlan plan = Plan(GiB(4));
  EXPECT_EQ(DeriveFrameworkEnv(plan, {}).set.size(), 2u);
  plan.expandable_segments = true;
  const FrameworkEnv env = DeriveFrameworkEnv(plan, {});
  ASSERT_EQ(env.set.size(), 3u);
  EXPECT_EQ(env.set.back(), "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
}

TEST(FrameworkEnvTest, TheJobsOwnSettingsAreKept) {
  FrameworkPlan plan = Plan(GiB(4));
  plan.expandable_segments = true;
  const FrameworkEnv env = DeriveFrameworkEnv(
      plan, {"HOME=/home/a", "XLA_PYTHON_CLIENT_PREALLOCATE=true",
             "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128", "TF_FORCE_GPU_ALLOW_GROWTH_X=1"});
  // Choosing either JAX variable is choosing JAX's behaviour: colod adds neither.
  EXPECT_EQ(env.set, (Env{"TF_FORCE_GPU_ALLOW_GROWTH=true"}));
  EXPECT_EQ(env.kept, (Env{"XLA_PYTHON_CLIENT_PREALLOCATE", "PYTORCH_CUDA_ALLOC_CONF"}));
}

TEST(FrameworkEnvTest, AJobWithItsGpusToItselfGetsNothing) {
  FrameworkPlan plan = Plan(GiB(4));
  plan.sharing = false;
  const FrameworkEnv env = DeriveFrameworkEnv(plan, {});
  EXPECT_TRUE(env.set.empty());
  EXPECT_TRUE(env.kept.empty());
}

}  // namespace
}  // namespace colo

#include "gpu/dcgm.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace colo {
namespace {

// The fake library's log of the calls it got (it stays loaded: OpenDcgm never unloads it).
std::string FakeLog() {
  void* lib = dlopen(COLO_FAKE_DCGM, RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return "(not loaded)";
  auto log = reinterpret_cast<const char* (*)()>(dlsym(lib, "fakeDcgmLog"));
  std::string text = log ? log() : "(no log)";
  dlclose(lib);
  return text;
}

class DcgmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("COLO_DCGM_LIBRARY", COLO_FAKE_DCGM, 1);
    unsetenv("FAKE_DCGM_HOSTENGINE");
    unsetenv("FAKE_DCGM_NO_PROFILING");
  }
  void TearDown() override { unsetenv("COLO_DCGM_LIBRARY"); }
};

TEST_F(DcgmTest, ReadsTheProfilingFieldsOfTheWatchedGpusEmbedded) {
  const std::string earlier = FakeLog();
  const size_t before = earlier == "(not loaded)" ? 0 : earlier.size();
  auto dcgm = OpenDcgm({0, 1, 3}, Seconds(1));
  ASSERT_TRUE(dcgm.ok()) << dcgm.status().ToString();
  EXPECT_EQ((*dcgm)->mode(), "embedded");
  const std::string log = FakeLog().substr(before);
  EXPECT_NE(log.find("embedded mode 1;group type 1;add 0;add 1;add 3;fields 1002 1003 1005;"
                     "watch every 1000000;"),
            std::string::npos)
      << log;
  const DcgmReading one = (*dcgm)->Read(1);
  EXPECT_DOUBLE_EQ(one.smact, 0.2);
  EXPECT_DOUBLE_EQ(one.smocc, 0.1);
  EXPECT_DOUBLE_EQ(one.drama, 0.04);
  // Blank (not sampled yet) and unwatched GPUs are unknown, never 0.
  for (unsigned gpu : {3u, 2u}) {
    const DcgmReading r = (*dcgm)->Read(gpu);
    EXPECT_LT(r.smact, 0) << gpu;
    EXPECT_LT(r.smocc, 0) << gpu;
    EXPECT_LT(r.drama, 0) << gpu;
  }
  dcgm->reset();
  const std::string after = FakeLog();
  EXPECT_NE(after.rfind("destroy fields;destroy group;stop embedded;shutdown;"), std::string::npos)
      << after;
}

TEST_F(DcgmTest, PrefersARunningHostEngine) {
  setenv("FAKE_DCGM_HOSTENGINE", "1", 1);
  auto dcgm = OpenDcgm({0}, Seconds(2));
  ASSERT_TRUE(dcgm.ok()) << dcgm.status().ToString();
  EXPECT_EQ((*dcgm)->mode(), "hostengine");
  EXPECT_DOUBLE_EQ((*dcgm)->Read(0).smact, 0.1);
  const std::string log = FakeLog();
  EXPECT_NE(log.find("connect 127.0.0.1;"), std::string::npos) << log;
  EXPECT_NE(log.find("watch every 2000000;"), std::string::npos) << log;
}

TEST_F(DcgmTest, AGpuWithoutProfilingIsAClearError) {
  setenv("FAKE_DCGM_NO_PROFILING", "1", 1);
  auto dcgm = OpenDcgm({0}, Seconds(1));
  ASSERT_FALSE(dcgm.ok());
  EXPECT_NE(dcgm.status().message().find("cannot watch the profiling fields"), std::string::npos)
      << dcgm.status().message();
  EXPECT_NE(dcgm.status().message().find("not supported"), std::string::npos)
      << dcgm.status().message();
}

TEST_F(DcgmTest, NoLibraryIsAClearError) {
  setenv("COLO_DCGM_LIBRARY", "/nonexistent/libdcgm.so", 1);
  auto dcgm = OpenDcgm({0}, Seconds(1));
  ASSERT_FALSE(dcgm.ok());
  EXPECT_NE(dcgm.status().message().find("DCGM is not installed"), std::string::npos);
  EXPECT_NE(dcgm.status().message().find("/nonexistent/libdcgm.so"), std::string::npos);
}

}  // namespace
}  // namespace colo

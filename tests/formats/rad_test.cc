#include "formats/rad.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

TEST(Rad, ParsesEveryLineOfAFullFile) {
  auto task = ParseRad(
      "# c\nconda activate torch\npython3 "
      "t.py\ns.txt\nimagenet\n64\nexclusive\n1\n8536\n9000\n40000\n16384\n",
      "x.rad");
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->environment, "torch");
  EXPECT_EQ(task->command, "python3 t.py");
  EXPECT_EQ(task->batch, 64);
  EXPECT_EQ(task->gpus, 1);
  EXPECT_EQ(task->measured_peak, MiB(8536));
  EXPECT_EQ(task->horus, MiB(9000));
  EXPECT_FALSE(task->faketensor.has_value()) << "40000 means unknown";
  EXPECT_EQ(task->gpumemnet, GiB(16));
}

TEST(Rad, ShortFilesTakeDefaults) {
  // CARMA's own gpt2_xl.rad stops after the GPU count.
  auto task = ParseRad("# gpt2_xl\nconda activate t\npython3 g.py\ns.txt\nwiki\n8\nexclusive\n2\n",
                       "gpt2_xl.rad");
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->gpus, 2);
  EXPECT_FALSE(task->measured_peak.has_value());
  EXPECT_FALSE(task->gpumemnet.has_value());
}

TEST(Rad, BadNumbersNameFileAndLine) {
  auto bad_batch = ParseRad("#\nconda activate t\npython3 g.py\ns\nd\nsixty-four\n", "a.rad");
  ASSERT_FALSE(bad_batch.ok());
  EXPECT_NE(bad_batch.status().message().find("a.rad:6"), std::string::npos)
      << bad_batch.status().message();
  auto bad_memory = ParseRad("#\nc\np\ns\nd\n8\nexclusive\n1\n-5\n", "b.rad");
  ASSERT_FALSE(bad_memory.ok());
  EXPECT_NE(bad_memory.status().message().find("b.rad:9"), std::string::npos);
  auto bad_gpus = ParseRad("#\nc\np\ns\nd\n8\nexclusive\n0\n", "c.rad");
  ASSERT_FALSE(bad_gpus.ok());
  EXPECT_FALSE(ParseRad("", "empty.rad").ok());
  EXPECT_FALSE(ParseRad("#\nc\n\n", "nocommand.rad").ok());
}

}  // namespace
}  // namespace colo

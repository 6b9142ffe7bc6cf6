#include "common/strings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace colo {
namespace {

TEST(ReadTextFile, ReadsAFileWhole) {
  char path[] = "/tmp/colo-strings-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::string content(300000, 'x');
  content[0] = 'a';
  content.back() = 'z';
  std::ofstream(path, std::ios::binary) << content;
  auto text = ReadTextFile(path);
  std::remove(path);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, content);
}

TEST(ReadTextFile, ReadsFilesOfNoKnownSize) {
  // /proc files report a size of 0 but have content.
  auto text = ReadTextFile("/proc/self/status");
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_NE(text->find("Pid:"), std::string::npos);
}

TEST(ReadTextFile, NamesWhatItCouldNotRead) {
  auto text = ReadTextFile("/nonexistent/colo.trace", "allocation trace");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("allocation trace '/nonexistent/colo.trace'"),
            std::string::npos);
}

}  // namespace
}  // namespace colo

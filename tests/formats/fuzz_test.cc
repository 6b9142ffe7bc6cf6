// Randomized robustness of the parsers: mutated and random input must give a value or an error,
// never a crash, hang or sanitizer report.
#include <gtest/gtest.h>

#include "common/rng.h"
#include "formats/rad.h"
#include "sim/trace.h"

namespace colo {
namespace {

std::string Mutate(Rng& rng, std::string s) {
  const int edits = 1 + static_cast<int>(rng.Below(8));
  const std::string alphabet = "0123456789,.-:\n#eE+ GiBMsx\"[]{}\x01\xff";
  for (int i = 0; i < edits; ++i) {
    const size_t pos = s.empty() ? 0 : rng.Below(s.size());
    switch (rng.Below(3)) {
      case 0:
        if (!s.empty()) s.erase(pos, 1 + rng.Below(4));
        break;
      case 1:
        s.insert(pos, 1, alphabet[rng.Below(alphabet.size())]);
        break;
      default:
        if (!s.empty()) s[pos] = alphabet[rng.Below(alphabet.size())];
    }
  }
  return s;
}

TEST(Fuzz, CsvParserSurvivesMutations) {
  const std::string seed =
      "submit_s,workload,gpus,declared_mem,owner,duration_s,peak_mem,smact,warmup_s\n"
      "10,resnet50-imagenet-bs64,1,12GiB,alice,,,,\n0,,2,,bob,600,3GiB,0.3,20\n";
  Rng rng(11);
  int ok = 0;
  for (int i = 0; i < 20000; ++i) {
    auto r = ParseColoCsv(Mutate(rng, seed), "fuzz.csv");
    if (r.ok()) {
      ++ok;
      for (const auto& j : r->jobs) {
        EXPECT_GE(j.profile.gpus, 1);
        EXPECT_GT(j.profile.duration, Duration::zero());
        EXPECT_LT(j.profile.warmup, j.profile.duration);
      }
    } else {
      EXPECT_NE(r.status().message().find("fuzz.csv"), std::string::npos);
    }
  }
  EXPECT_GT(ok, 0);
}

TEST(Fuzz, RadParserSurvivesMutations) {
  const std::string seed =
      "# c\nconda activate torch\npython3 "
      "t.py\ns.txt\nimagenet\n64\nexclusive\n1\n8536\n9000\n40000\n16384\n";
  Rng rng(12);
  for (int i = 0; i < 20000; ++i) {
    auto r = ParseRad(Mutate(rng, seed), "fuzz.rad");
    if (r.ok()) {
      EXPECT_GE(r->gpus, 1);
      EXPECT_GE(r->batch, 0);
    }
  }
}

TEST(Fuzz, PhillyParserSurvivesMutations) {
  const std::string seed =
      R"([{"status":"Pass","user":"u1","submitted_time":"2017-10-03 02:43:15","attempts":[{"start_time":"2017-10-03 02:43:20","end_time":"2017-10-03 03:43:20","detail":[{"ip":"m1","gpus":["gpu0","gpu1"]}]}]}])";
  Rng rng(13);
  for (int i = 0; i < 5000; ++i) {
    auto r = ParsePhillyJson(Mutate(rng, seed), "fuzz.json", PhillyOptions{});
    if (r.ok()) {
      for (const auto& j : r->jobs) EXPECT_GE(j.profile.gpus, 1);
    }
  }
}

TEST(Fuzz, RandomBytesAreRejectedCleanly) {
  Rng rng(14);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng.Below(300), '\0');
    for (char& c : junk) c = static_cast<char>(rng.Below(256));
    EXPECT_FALSE(ParseColoCsv(junk, "junk.csv").ok());
    EXPECT_FALSE(ParsePhillyJson(junk, "junk.json", PhillyOptions{}).ok());
    auto rad = ParseRad(junk, "junk.rad");
    if (!rad.ok()) {
      EXPECT_NE(rad.status().message().find("junk.rad"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace colo

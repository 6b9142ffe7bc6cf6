#include "common/ring.h"

#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "common/rng.h"

namespace colo {
namespace {

// The ring and a std::deque given the same pushes and pops, through many wraps and growths,
// hold the same elements in the same order.
TEST(Ring, BehavesAsADequeThroughWrapsAndGrowth) {
  Ring<int> ring;
  std::deque<int> deque;
  Rng rng(7);
  for (int step = 0; step < 20000; ++step) {
    const uint64_t roll = rng.Next() % 10;
    if (roll < 5 || deque.empty()) {
      ring.push_back(step);
      deque.push_back(step);
    } else if (roll < 9) {
      ring.pop_front();
      deque.pop_front();
    } else {
      ring.pop_back();
      deque.pop_back();
    }
    ASSERT_EQ(ring.size(), deque.size());
    ASSERT_EQ(ring.empty(), deque.empty());
    if (deque.empty()) continue;
    ASSERT_EQ(ring.front(), deque.front());
    ASSERT_EQ(ring.back(), deque.back());
    const size_t middle = deque.size() / 2;
    ASSERT_EQ(ring[middle], deque[middle]);
  }
  const std::vector<int> walked(ring.begin(), ring.end());
  EXPECT_EQ(walked, std::vector<int>(deque.begin(), deque.end()));
}

TEST(Ring, ElementsChangeInPlace) {
  Ring<std::pair<int, double>> ring;
  for (int i = 0; i < 12; ++i) ring.push_back({i, 0.5 * i});
  ring.pop_front();
  ring.back().second = -1;
  ring[0].first = 100;
  EXPECT_EQ(ring.front().first, 100);
  EXPECT_EQ(ring.back().first, 11);
  EXPECT_EQ(ring.back().second, -1);
  EXPECT_EQ(ring.size(), 11u);
}

}  // namespace
}  // namespace colo

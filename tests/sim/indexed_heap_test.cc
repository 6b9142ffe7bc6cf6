#include "sim/indexed_heap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <utility>

namespace colo::sim {
namespace {

struct Entry {
  int64_t time;
  uint64_t seq;
  int subject;
};

struct Later {
  bool operator()(const Entry& x, const Entry& y) const {
    return x.time != y.time ? x.time > y.time : x.seq > y.seq;
  }
};

// Random sets, moves, erasures and pops against an ordered set of (time, seq, key): the top is
// always the earliest entry, and each key holds only its latest.
TEST(IndexedHeap, TopIsAlwaysTheEarliestOfEachKeysLatestEntry) {
  std::mt19937_64 random(7);
  for (int keys : {1, 2, 5, 64, 1000}) {
    IndexedHeap<Entry, Later> heap;
    heap.Resize(static_cast<size_t>(keys));
    std::set<std::tuple<int64_t, uint64_t, int>> expected;
    std::map<int, std::pair<int64_t, uint64_t>> of_key;
    uint64_t seq = 0;
    for (int step = 0; step < 20000; ++step) {
      const int key = static_cast<int>(random() % static_cast<uint64_t>(keys));
      const int op = static_cast<int>(random() % 10);
      if (op < 6) {  // set (a new entry or a move, sooner or later; times repeat)
        const Entry e{static_cast<int64_t>(random() % 50), seq++, key};
        if (auto it = of_key.find(key); it != of_key.end())
          expected.erase({it->second.first, it->second.second, key});
        of_key[key] = {e.time, e.seq};
        expected.insert({e.time, e.seq, key});
        heap.Set(e);
      } else if (op < 8) {  // erase, whether or not the key has an entry
        if (auto it = of_key.find(key); it != of_key.end()) {
          expected.erase({it->second.first, it->second.second, key});
          of_key.erase(it);
        }
        heap.Erase(key);
      } else if (!expected.empty()) {  // pop the top
        const auto [time, s, k] = *expected.begin();
        ASSERT_EQ(heap.top().subject, k);
        expected.erase(expected.begin());
        of_key.erase(k);
        heap.Pop();
      }
      ASSERT_TRUE(heap.Consistent()) << "after step " << step;
      ASSERT_EQ(heap.size(), expected.size());
      ASSERT_EQ(heap.contains(key), of_key.count(key) == 1);
      if (!expected.empty()) {
        const auto [time, s, k] = *expected.begin();
        ASSERT_EQ(heap.top().time, time);
        ASSERT_EQ(heap.top().seq, s);
        ASSERT_EQ(heap.top().subject, k);
      } else {
        ASSERT_TRUE(heap.empty());
      }
      // And a copy drained by pops gives every entry in order.
      if (step % 97 == 0) {
        IndexedHeap<Entry, Later> drained = heap;
        for (const auto& [time, s, k] : expected) {
          ASSERT_FALSE(drained.empty());
          ASSERT_EQ(drained.top().time, time);
          ASSERT_EQ(drained.top().seq, s);
          ASSERT_EQ(drained.top().subject, k);
          drained.Pop();
          ASSERT_FALSE(drained.contains(k));
        }
        ASSERT_TRUE(drained.empty());
      }
    }
  }
}

}  // namespace
}  // namespace colo::sim

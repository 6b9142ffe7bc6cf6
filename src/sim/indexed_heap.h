// A binary heap of at most one entry per key (a small integer: a job's index), earliest on top as
// `Later` orders them, whose entries move in place when their key's entry changes and leave when
// it goes. The simulator keeps running jobs' completions in one: a completion moves at every change
// of its job's rate, and a plain heap would keep each superseded one until it came due.
#pragma once

#include <cstddef>
#include <vector>

namespace colo::sim {

// `Entry` carries its key as `int subject`; `Later(a, b)` says a comes after b (a strict order).
template <typename Entry, typename Later>
class IndexedHeap {
 public:
  // Keys are in [0, keys).
  void Resize(size_t keys) { place_.assign(keys, kNone); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  bool contains(int key) const { return place_[static_cast<size_t>(key)] != kNone; }
  const Entry& top() const { return heap_.front(); }
  // Its key's entry is now `entry`, in place of the one it had, if any.
  void Set(const Entry& entry) {
    int& place = place_[static_cast<size_t>(entry.subject)];
    if (place == kNone) {
      place = static_cast<int>(heap_.size());
      heap_.push_back(entry);
      SiftUp(heap_.size() - 1);
      return;
    }
    const size_t at = static_cast<size_t>(place);
    const bool sooner = Later{}(heap_[at], entry);
    heap_[at] = entry;
    if (sooner)
      SiftUp(at);
    else
      SiftDown(at);
  }
  // The key has no entry any more (nothing happens if it had none).
  void Erase(int key) {
    int& place = place_[static_cast<size_t>(key)];
    if (place == kNone) return;
    size_t at = static_cast<size_t>(place);
    place = kNone;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (at == heap_.size()) return;
    // The hole goes down to a leaf along the earlier child, one comparison a level, and the last
    // entry, which belongs near the bottom, rises from there (as std::pop_heap does).
    for (size_t child = 2 * at + 1; child < heap_.size(); child = 2 * at + 1) {
      if (child + 1 < heap_.size() && Later{}(heap_[child], heap_[child + 1])) ++child;
      Put(at, heap_[child]);
      at = child;
    }
    heap_[at] = last;
    SiftUp(at);
  }
  void Pop() { Erase(heap_.front().subject); }
  // Whether no entry comes before its parent and each key's place names its entry (for tests: a
  // heap can show the right top with its order broken below).
  bool Consistent() const {
    size_t placed = 0;
    for (size_t at = 0; at < heap_.size(); ++at) {
      if (at > 0 && Later{}(heap_[(at - 1) / 2], heap_[at])) return false;
      if (place_[static_cast<size_t>(heap_[at].subject)] != static_cast<int>(at)) return false;
    }
    for (int place : place_) placed += place != kNone;
    return placed == heap_.size();
  }

 private:
  static constexpr int kNone = -1;
  void Put(size_t at, const Entry& entry) {
    heap_[at] = entry;
    place_[static_cast<size_t>(entry.subject)] = static_cast<int>(at);
  }
  void SiftUp(size_t at) {
    const Entry entry = heap_[at];
    while (at > 0) {
      const size_t parent = (at - 1) / 2;
      if (!Later{}(heap_[parent], entry)) break;
      Put(at, heap_[parent]);
      at = parent;
    }
    Put(at, entry);
  }
  void SiftDown(size_t at) {
    const Entry entry = heap_[at];
    for (;;) {
      size_t child = 2 * at + 1;
      if (child >= heap_.size()) break;
      if (child + 1 < heap_.size() && Later{}(heap_[child], heap_[child + 1])) ++child;
      if (!Later{}(entry, heap_[child])) break;
      Put(at, heap_[child]);
      at = child;
    }
    Put(at, entry);
  }

  std::vector<Entry> heap_;
  std::vector<int> place_;  // by key: its entry's place in heap_, kNone when it has none
};

}  // namespace colo::sim

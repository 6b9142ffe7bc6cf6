// A queue in one block of memory: pushed at the back, popped at either end, read anywhere by
// position. For short histories read and changed at every sample (a GPU signal's change points):
// std::deque's map of blocks costs every access an indirection and every push a check, where here
// a position is one mask. The block doubles when full and never shrinks.
#pragma once

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

#include "common/check.h"

namespace colo {

template <typename T>
class Ring {
 public:
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;

    const_iterator() = default;
    const T& operator*() const { return (*ring_)[at_]; }
    const T* operator->() const { return &(*ring_)[at_]; }
    const_iterator& operator++() {
      ++at_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator was = *this;
      ++at_;
      return was;
    }
    bool operator==(const const_iterator& other) const { return at_ == other.at_; }

   private:
    friend class Ring;
    const_iterator(const Ring* ring, size_t at) : ring_(ring), at_(at) {}
    const Ring* ring_ = nullptr;
    size_t at_ = 0;
  };

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // The element `i` places from the front.
  T& operator[](size_t i) { return slots_[(head_ + i) & mask_]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & mask_]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

  void push_back(T value) {
    if (size_ == slots_.size()) Grow();
    slots_[(head_ + size_) & mask_] = std::move(value);
    ++size_;
  }
  void pop_front() {
    COLO_CHECK(size_ > 0);
    head_ = (head_ + 1) & mask_;
    --size_;
  }
  void pop_back() {
    COLO_CHECK(size_ > 0);
    --size_;
  }

 private:
  void Grow() {
    // A power of two, so that a position wraps with a mask.
    std::vector<T> bigger(slots_.empty() ? 8 : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
    mask_ = slots_.size() - 1;
  }

  std::vector<T> slots_;
  size_t head_ = 0;  // where the front is in slots_
  size_t size_ = 0;
  size_t mask_ = 0;  // slots_.size() - 1
};

}  // namespace colo

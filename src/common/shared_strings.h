// A list of strings that copies share instead of duplicating: a job's command and environment,
// which every task of an array holds alike (a thousand tasks, one copy in memory and, through the
// store, one on disk). The list never changes once made; assigning another one to a holder
// changes that holder alone.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace colo {

class SharedStrings {
 public:
  using List = std::vector<std::string>;

  SharedStrings() = default;
  // Implicit: a list is held as it is given.
  SharedStrings(List strings)  // NOLINT(google-explicit-constructor)
      : strings_(strings.empty() ? nullptr : std::make_shared<const List>(std::move(strings))) {}
  SharedStrings(std::initializer_list<std::string> strings) : SharedStrings(List(strings)) {}

  const List& strings() const { return strings_ ? *strings_ : Empty(); }
  operator const List&() const { return strings(); }  // NOLINT(google-explicit-constructor)
  List::const_iterator begin() const { return strings().begin(); }
  List::const_iterator end() const { return strings().end(); }
  size_t size() const { return strings().size(); }
  bool empty() const { return strings().empty(); }
  const std::string& front() const { return strings().front(); }
  const std::string& operator[](size_t i) const { return strings()[i]; }
  void clear() { strings_.reset(); }

  // By content: two lists made apart are equal when their strings are.
  bool operator==(const SharedStrings& other) const { return strings() == other.strings(); }
  // The one copy this holder shares (null when empty): what a store keys its own copy by.
  const std::shared_ptr<const List>& shared() const { return strings_; }

 private:
  static const List& Empty() {
    static const List empty;
    return empty;
  }

  std::shared_ptr<const List> strings_;
};

}  // namespace colo

// A string held once per distinct text: the model and owner names a trace repeats for every job.
// A million-job trace names a few dozen models and users; each job holds a pointer where it held
// two or three heap copies. The texts live as long as the process (the simulator's, which reads a
// trace and exits), so that a name copied into a job's result never outlives its text.
#pragma once

#include <fmt/format.h>

#include <compare>
#include <string>
#include <string_view>

namespace colo {

class Interned {
 public:
  Interned() : text_(&EmptyText()) {}
  // Finds the text or adds it: a lookup under a lock, so made once per distinct name where a
  // trace is read, and copied (a pointer) from there on.
  explicit Interned(std::string_view text);

  const std::string& str() const { return *text_; }
  operator const std::string&() const { return *text_; }  // NOLINT: reads as the string it is
  operator std::string_view() const { return *text_; }    // NOLINT
  bool empty() const { return text_->empty(); }
  static const std::string& EmptyText();  // what every empty name points to

  // One pointer per text: equal texts are the same pointer.
  friend bool operator==(const Interned& a, const Interned& b) { return a.text_ == b.text_; }
  friend bool operator==(const Interned& a, std::string_view b) { return *a.text_ == b; }
  friend bool operator==(const Interned& a, const char* b) { return *a.text_ == b; }
  friend std::strong_ordering operator<=>(const Interned& a, const Interned& b) {
    return *a.text_ <=> *b.text_;
  }

 private:
  const std::string* text_;
};

}  // namespace colo

template <>
struct fmt::formatter<colo::Interned> : fmt::formatter<std::string_view> {
  auto format(const colo::Interned& name, fmt::format_context& context) const {
    return fmt::formatter<std::string_view>::format(name.str(), context);
  }
};

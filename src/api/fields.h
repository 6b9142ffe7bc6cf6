// How a struct of the API travels: one description per struct, the list of its fields, each with
// its key on the wire, its member and what a decoder accepts (a range, a size, whether it must be
// there). The encoder and the decoder (field_json.h) both walk that one list, so a field is
// written once; a description that misses a member of its struct does not compile (field_json.h
// counts the struct's members).
//
// A description is an overload of Fields() beside its struct:
//
//   constexpr auto Fields(Of<Dependency>) {
//     return std::tuple{Field("kind", &Dependency::kind),
//                       Field("job", &Dependency::job).Range(1, kMaxJobId).Required("a job id")};
//   }
//
// Members may be bool, whole numbers, double, Bytes, std::string, enums (with ToString and a
// ParseName overload in the codec), described structs, std::optional of any of these (absent on
// the wire when empty), and std::vector of strings, whole numbers or described structs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <tuple>

namespace colo::api {

// Names a type where an overload is chosen: Fields(Of<T>{}) is T's description.
template <typename T>
struct Of {};

// Lengths a decoder accepts unless the description says otherwise.
constexpr size_t kDefaultMaxBytes = size_t{1} << 20;
constexpr size_t kDefaultMaxItems = size_t{1} << 20;

template <typename Struct, typename Member>
struct FieldSpec {
  const char* key = nullptr;
  Member Struct::*member = nullptr;
  // Whole numbers, sizes and the entries of a list of numbers: the type's own range unless set.
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  // double: any finite value unless set.
  double min_number = -std::numeric_limits<double>::max();
  double max_number = std::numeric_limits<double>::max();
  size_t max_bytes = kDefaultMaxBytes;  // a string, and each string of a list
  size_t max_items = kDefaultMaxItems;  // a list
  // Set: absent (or null) is an error, "KEY: is required (WHAT)".
  const char* required = nullptr;
  // Left off the wire while it holds its struct's default (the decoder gives that default back);
  // for members that compare with ==.
  bool omit_default = false;

  template <typename Low, typename High>
  constexpr FieldSpec Range(Low low, High high) const {
    FieldSpec f = *this;
    f.min = static_cast<int64_t>(low);
    f.max = static_cast<int64_t>(high);
    f.min_number = static_cast<double>(low);
    f.max_number = static_cast<double>(high);
    return f;
  }
  constexpr FieldSpec MaxBytes(size_t bytes) const {
    FieldSpec f = *this;
    f.max_bytes = bytes;
    return f;
  }
  constexpr FieldSpec MaxItems(size_t items) const {
    FieldSpec f = *this;
    f.max_items = items;
    return f;
  }
  constexpr FieldSpec Required(const char* what) const {
    FieldSpec f = *this;
    f.required = what;
    return f;
  }
  constexpr FieldSpec OmitDefault() const {
    FieldSpec f = *this;
    f.omit_default = true;
    return f;
  }
};

template <typename Struct, typename Member>
constexpr FieldSpec<Struct, Member> Field(const char* key, Member Struct::*member) {
  return FieldSpec<Struct, Member>{key, member};
}

// A described struct held by value whose fields travel as this struct's own (JobDetail's
// summary).
template <typename Struct, typename Member>
struct EmbedSpec {
  Member Struct::*member = nullptr;
};
template <typename Struct, typename Member>
constexpr EmbedSpec<Struct, Member> Embed(Member Struct::*member) {
  return EmbedSpec<Struct, Member>{member};
}

}  // namespace colo::api

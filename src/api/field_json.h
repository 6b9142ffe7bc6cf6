// The one walker of API descriptions (fields.h): writes a described struct into a JSON object and
// reads it back. Reading is strict and total: any JSON gives the struct or the first problem, as
// an InvalidArgument naming the field by its path ("estimate.peak: must be between 1 and ..."),
// never an exception. The codec (codec.cc) uses it for every request and reply; colod's job
// records (daemon/job_codec.cc) use it for the parts of a job the API describes.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/fields.h"
#include "common/status.h"
#include "common/units.h"

namespace colo::api {

namespace field_json {

using nlohmann::json;

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsVector : std::false_type {};
template <typename T, typename A>
struct IsVector<std::vector<T, A>> : std::true_type {};

// Whether == compares two values (a vector's own == is declared for every element type).
template <typename T>
constexpr bool kComparable = std::equality_comparable<T>;
template <typename T, typename A>
constexpr bool kComparable<std::vector<T, A>> = kComparable<T>;

template <typename T>
concept Described = requires {
  Fields(Of<T>{});
};
template <typename T>
concept WholeNumber = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// How many members an aggregate has: the most initializers its braces take. A description must
// name every one of them (see CheckDescribed).
struct AnyMember {
  template <typename T>
  operator T&() const&& noexcept {
    __builtin_unreachable();
  }
};
template <typename T, typename... Taken>
constexpr size_t MemberCount() {
  if constexpr (requires { T{Taken{}..., AnyMember{}}; })
    return MemberCount<T, Taken..., AnyMember>();
  else
    return sizeof...(Taken);
}

template <typename T>
constexpr void CheckDescribed() {
  static_assert(std::tuple_size_v<decltype(Fields(Of<T>{}))> == MemberCount<T>(),
                "a member of this struct is missing from its Fields() description");
}

// A described struct as a JSON object: each field by its spec, defaults omitted where it says so.

template <Described T>
void Write(const T& value, json& out);

template <typename S, typename M>
json Value(const M& v, const FieldSpec<S, M>& spec);

template <typename M>
json Scalar(const M& v) {
  if constexpr (std::is_same_v<M, Bytes>) {
    return v.count();
  } else if constexpr (std::is_enum_v<M>) {
    return std::string(ToString(v));
  } else if constexpr (Described<M>) {
    json object = json::object();
    Write(v, object);
    return object;
  } else if constexpr (IsVector<M>::value) {
    json list = json::array();
    for (const auto& item : v) list.push_back(Scalar(item));
    return list;
  } else {
    return v;
  }
}

template <typename S, typename M>
void WriteField(const S& s, const EmbedSpec<S, M>& spec, json& out) {
  Write(s.*spec.member, out);
}

template <typename S, typename M>
void WriteField(const S& s, const FieldSpec<S, M>& spec, json& out) {
  const M& v = s.*spec.member;
  if constexpr (IsOptional<M>::value) {
    if (!v) return;
    if constexpr (std::is_floating_point_v<typename M::value_type>) {
      if (!std::isfinite(*v)) return;  // JSON has no NaN: absent, never a number standing for it
    }
    out[spec.key] = Scalar(*v);
  } else {
    if constexpr (kComparable<M>) {
      static const S kDefault{};
      if (spec.omit_default && v == kDefault.*spec.member) return;
    }
    out[spec.key] = Scalar(v);
  }
}

template <Described T>
void Write(const T& value, json& out) {
  CheckDescribed<T>();
  std::apply([&](const auto&... spec) { (WriteField(value, spec, out), ...); }, Fields(Of<T>{}));
}

// A JSON object into a described struct, strictly: types, ranges and sizes by each field's spec.

// Reads the fields of one JSON object; every reader of one value shares the first problem. A
// strict reader (a request's) also refuses a key its struct does not describe: a misspelled
// option would otherwise be a silent default.
class Reader {
 public:
  Reader(const json& object, std::string path, Status& status, bool strict = false)
      : object_(object), path_(std::move(path)), status_(status), strict_(strict) {}

  bool ok() const { return status_.ok(); }
  // Present and not null.
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  const json* Find(std::string_view key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  std::string Path(std::string_view key) const {
    return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  }
  void Fail(std::string_view key, std::string_view why) {
    if (status_.ok()) status_ = InvalidArgument(fmt::format("{}: {}", Path(key), why));
  }
  const json& object() const { return object_; }
  const std::string& path() const { return path_; }
  Status& status() { return status_; }
  bool strict() const { return strict_; }

 private:
  const json& object_;
  std::string path_;
  Status& status_;
  bool strict_;
};

// Whether `key` names a field of T's description (or of a struct it embeds).
template <typename S, typename M>
constexpr bool NamesField(std::string_view key, const FieldSpec<S, M>& spec) {
  return key == spec.key;
}
template <Described T>
constexpr bool Describes(std::string_view key);
template <typename S, typename M>
constexpr bool NamesField(std::string_view key, const EmbedSpec<S, M>&) {
  return Describes<M>(key);
}
template <Described T>
constexpr bool Describes(std::string_view key) {
  return std::apply([&](const auto&... spec) { return (NamesField(key, spec) || ...); },
                    Fields(Of<T>{}));
}

// A strict reader's object has no key but T's fields and `also`.
template <Described T>
void RefuseUnknownKeys(Reader& r, std::initializer_list<std::string_view> also = {}) {
  if (!r.strict() || !r.ok()) return;
  for (const auto& [key, value] : r.object().items()) {
    if (Describes<T>(key) || std::find(also.begin(), also.end(), key) != also.end()) continue;
    // Cut, as every echoed text is: the key is the client's.
    r.Fail(std::string_view(key).substr(0, 64), "is not a field of this request (misspelled?)");
    return;
  }
}

template <Described T>
void Read(Reader& r, T& value);

// Reads `v` from the JSON value `j` of field `key`; false (with the reason) when it is not one.
template <typename S, typename M, typename Item>
bool ReadValue(Reader& r, std::string_view key, const json& j, const FieldSpec<S, M>& spec,
               Item& v) {
  if constexpr (std::is_same_v<Item, bool>) {
    if (!j.is_boolean()) return r.Fail(key, "must be true or false"), false;
    v = j.get<bool>();
  } else if constexpr (WholeNumber<Item> || std::is_same_v<Item, Bytes>) {
    using Count = std::conditional_t<std::is_same_v<Item, Bytes>, int64_t, Item>;
    // The description's range within the member type's own.
    const int64_t min = std::max<int64_t>(spec.min, std::numeric_limits<Count>::min());
    const int64_t max = static_cast<int64_t>(
        std::min<uint64_t>(static_cast<uint64_t>(std::max<int64_t>(spec.max, 0)),
                           static_cast<uint64_t>(std::numeric_limits<Count>::max())));
    int64_t value = 0;
    if constexpr (std::is_same_v<Item, Bytes>) {
      if (j.is_string()) {
        // A size may be given as text ("12GiB").
        const std::string& text = j.get_ref<const std::string&>();
        auto parsed =
            text.size() > 64 ? Result<Bytes>(InvalidArgument("is not a size")) : ParseBytes(text);
        if (!parsed.ok()) return r.Fail(key, parsed.status().message()), false;
        value = parsed->count();
        if (value < min || value > max)
          return r.Fail(key, fmt::format("must be between {} and {}", FormatBytes(Bytes(min)),
                                         FormatBytes(Bytes(max)))),
                 false;
        v = Bytes(value);
        return true;
      }
    }
    if (!j.is_number_integer())
      return r.Fail(key, j.is_number() ? "must be a whole number" : "must be a number"), false;
    // Above int64's range a value is unsigned: compared as one.
    const bool above = j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(max);
    value = above ? max : j.get<int64_t>();
    if (above || value < min || value > max)
      return r.Fail(key, fmt::format("must be between {} and {}", min, max)), false;
    if constexpr (std::is_same_v<Item, Bytes>)
      v = Bytes(value);
    else
      v = static_cast<Item>(value);
  } else if constexpr (std::is_floating_point_v<Item>) {
    if (!j.is_number()) return r.Fail(key, "must be a number"), false;
    const double value = j.get<double>();
    if (!std::isfinite(value) || value < spec.min_number || value > spec.max_number)
      return r.Fail(key,
                    fmt::format("must be between {} and {}", spec.min_number, spec.max_number)),
             false;
    v = value;
  } else if constexpr (std::is_same_v<Item, std::string>) {
    // JSON text is valid UTF-8 once parsed, so strings need only a length bound.
    if (!j.is_string()) return r.Fail(key, "must be a string"), false;
    const auto& text = j.get_ref<const std::string&>();
    if (text.size() > spec.max_bytes)
      return r.Fail(key, fmt::format("is longer than {} bytes", spec.max_bytes)), false;
    v = text;
  } else if constexpr (std::is_enum_v<Item>) {
    if (!j.is_string()) return r.Fail(key, "must be a string"), false;
    const auto& text = j.get_ref<const std::string&>();
    auto parsed = ParseName(std::string_view(text).substr(0, 64), Of<Item>{});
    if (!parsed.ok()) return r.Fail(key, parsed.status().message()), false;
    v = *parsed;
  } else if constexpr (Described<Item>) {
    if (!j.is_object()) return r.Fail(key, "must be an object"), false;
    Reader inner(j, r.Path(key), r.status(), r.strict());
    RefuseUnknownKeys<Item>(inner);
    Read(inner, v);
  } else if constexpr (IsVector<Item>::value) {
    using Entry = typename Item::value_type;
    constexpr bool strings = std::is_same_v<Entry, std::string>;
    if (!j.is_array())
      return r.Fail(key, strings ? "must be a list of strings" : "must be a list"), false;
    if (j.size() > spec.max_items)
      return r.Fail(key, fmt::format("has more than {} entries", spec.max_items)), false;
    Item out;
    out.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
      const json& e = j[i];
      if constexpr (strings) {
        if (!e.is_string())
          return r.Fail(key, "must be a list of strings (every entry a string)"), false;
        if (e.get_ref<const std::string&>().size() > spec.max_bytes)
          return r.Fail(key, fmt::format("has an entry longer than {} bytes", spec.max_bytes)),
                 false;
        out.push_back(e.get<std::string>());
      } else if constexpr (Described<Entry>) {
        if (!e.is_object()) return r.Fail(key, "entries must be objects"), false;
        Reader inner(e, fmt::format("{}[{}]", r.Path(key), i), r.status(), r.strict());
        RefuseUnknownKeys<Entry>(inner);
        Read(inner, out.emplace_back());
        if (!r.ok()) return false;
      } else {
        Entry entry{};
        if (!ReadValue(r, key, e, spec, entry)) return false;
        out.push_back(entry);
      }
    }
    v = std::move(out);
  } else {
    static_assert(!sizeof(Item), "no JSON form for this member type");
  }
  return true;
}

template <typename S, typename M>
void ReadField(Reader& r, S& s, const EmbedSpec<S, M>& spec) {
  if (r.ok()) Read(r, s.*spec.member);
}

template <typename S, typename M>
void ReadField(Reader& r, S& s, const FieldSpec<S, M>& spec) {
  if (!r.ok()) return;
  M& v = s.*spec.member;
  const json* j = r.Find(spec.key);
  if (!j) {
    if (spec.required) r.Fail(spec.key, fmt::format("is required ({})", spec.required));
    return;
  }
  if constexpr (IsOptional<M>::value) {
    typename M::value_type value{};
    if (ReadValue(r, spec.key, *j, spec, value)) v = std::move(value);
  } else {
    ReadValue(r, spec.key, *j, spec, v);
  }
}

template <Described T>
void Read(Reader& r, T& value) {
  CheckDescribed<T>();
  std::apply([&](const auto&... spec) { (ReadField(r, value, spec), ...); }, Fields(Of<T>{}));
  // What no one field can say (a list's order, one field against another), where T has such a
  // rule: CheckFields(T&, Reader&), beside the codec.
  if constexpr (requires { CheckFields(value, r); }) {
    if (r.ok()) CheckFields(value, r);
  }
}

}  // namespace field_json

// `value`'s fields into `object` (which may hold others already).
template <typename T>
void WriteFields(const T& value, nlohmann::json& object) {
  field_json::Write(value, object);
}

// `value`'s fields from `object`: an absent field keeps the value it has. The first problem goes
// into `status`, naming the field below `path`.
template <typename T>
void ReadFields(const nlohmann::json& object, std::string path, T& value, Status& status) {
  field_json::Reader reader(object, std::move(path), status);
  field_json::Read(reader, value);
}

// A request's fields from `object`, strictly: a key that is neither a field of T nor one of `also`
// (the envelope's own keys) is an error naming it.
template <typename T>
void ReadRequestFields(const nlohmann::json& object, T& value, Status& status,
                       std::initializer_list<std::string_view> also) {
  field_json::Reader reader(object, "", status, /*strict=*/true);
  field_json::RefuseUnknownKeys<T>(reader, also);
  field_json::Read(reader, value);
}

}  // namespace colo::api

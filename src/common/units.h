// Strong types for quantities: Bytes for memory, Duration/TimePoint for time. Bare integers for
// bytes or time are not used anywhere in colo.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace colo {

class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(int64_t count) : count_(count) {}
  constexpr int64_t count() const { return count_; }
  constexpr double mib() const { return static_cast<double>(count_) / (1 << 20); }
  constexpr double gib() const { return static_cast<double>(count_) / (1 << 30); }

  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes operator+(Bytes o) const { return Bytes(count_ + o.count_); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(count_ - o.count_); }
  constexpr Bytes& operator+=(Bytes o) {
    count_ += o.count_;
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) {
    count_ -= o.count_;
    return *this;
  }
  // Scaling rounds to the nearest byte and saturates (a product beyond int64 is no size, and
  // converting it would be undefined).
  Bytes Scaled(double factor) const {
    const double scaled = static_cast<double>(count_) * factor + 0.5;
    if (!(scaled < 9.2e18)) return Bytes(scaled > 0 ? int64_t{9'200'000'000'000'000'000} : 0);
    if (scaled <= -9.2e18) return Bytes(-int64_t{9'200'000'000'000'000'000});
    return Bytes(static_cast<int64_t>(scaled));
  }

 private:
  int64_t count_ = 0;
};

constexpr Bytes KiB(int64_t n) {
  return Bytes(n << 10);
}
constexpr Bytes MiB(int64_t n) {
  return Bytes(n << 20);
}
constexpr Bytes GiB(int64_t n) {
  return Bytes(n << 30);
}
inline Bytes MiBf(double n) {
  return Bytes(static_cast<int64_t>(n * (1 << 20) + 0.5));
}
inline Bytes GiBf(double n) {
  return Bytes(static_cast<int64_t>(n * (1 << 30) + 0.5));
}

// Parses "12GiB", "512MiB", "40000" (MiB when no unit, as CARMA's files give), "1.5GB" (GB is read
// as GiB: GPU tools report binary units under decimal names), "12g" (units in any case, as Slurm
// takes them).
Result<Bytes> ParseBytes(const std::string& text);
// "11.5 GiB", "512 MiB".
std::string FormatBytes(Bytes b);
// A size as ParseBytes reads it back exactly, in the largest binary unit that divides it: "2GiB",
// "512MiB", "1000B" (for settings a person reads and a parser reads again).
std::string FormatExactBytes(Bytes b);

// Time inside colo: microsecond ticks on a monotonic axis whose origin the Clock defines.
using Duration = std::chrono::microseconds;
struct MonotonicTag {};
using TimePoint = std::chrono::time_point<MonotonicTag, Duration>;

constexpr Duration Seconds(int64_t s) {
  return std::chrono::seconds(s);
}
inline Duration SecondsF(double s) {
  return Duration(static_cast<int64_t>(s * 1e6 + 0.5));
}
inline double ToSeconds(Duration d) {
  return static_cast<double>(d.count()) / 1e6;
}
inline double ToSeconds(TimePoint t) {
  return ToSeconds(t.time_since_epoch());
}
inline TimePoint AtSeconds(double s) {
  return TimePoint(SecondsF(s));
}

// Parses "30s", "5m", "2h", "1.5" (seconds when no unit).
Result<Duration> ParseDuration(const std::string& text);
// "45 s", "31 min", "2.5 h", "3.2 d": a span for people, to two figures.
std::string FormatDuration(Duration d);

}  // namespace colo

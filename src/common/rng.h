// Seeded, portable random numbers. std::*_distribution differ between standard libraries, so colo
// draws from its own transforms of a fixed generator to keep simulator output byte-identical
// everywhere.
#pragma once

#include <cmath>
#include <cstdint>

namespace colo {

// SplitMix64 seeding + xoshiro256** generator.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n).
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }
  double Exponential(double mean) { return -mean * std::log(1.0 - Uniform()); }
  double Normal(double mean, double stddev);
  double LogNormal(double mu, double sigma) { return std::exp(Normal(mu, sigma)); }

 private:
  uint64_t s_[4];
};

}  // namespace colo

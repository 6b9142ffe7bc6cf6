#include "estimate/estimator.h"

#include <fmt/format.h>

#include <cmath>

#include "common/rng.h"
#include "common/strings.h"

namespace colo {

MemoryNeed MemoryEstimate::AsNeed() const {
  MemoryNeed need;
  need.peak = peak;
  // Peaks measured on earlier runs are learned, not estimated.
  need.source = method == "history" ? MemorySource::kLearned : MemorySource::kEstimated;
  if (peak > Bytes(0) && upper > peak) {
    need.uncertainty =
        static_cast<double>((upper - peak).count()) / static_cast<double>(peak.count());
  }
  return need;
}

namespace {

class OracleEstimator final : public MemoryEstimator {
 public:
  std::string_view name() const override { return "oracle"; }
  Result<MemoryEstimate> Estimate(const JobDescription& job) const override {
    if (!job.true_peak) return Unavailable("the oracle needs the job's measured peak");
    return MemoryEstimate{*job.true_peak, *job.true_peak, *job.true_peak, "oracle"};
  }
};

class NoEstimator final : public MemoryEstimator {
 public:
  std::string_view name() const override { return "none"; }
  Result<MemoryEstimate> Estimate(const JobDescription&) const override {
    return Unavailable("no estimator: memory is learned from crashes");
  }
};

class DeclaredEstimator final : public MemoryEstimator {
 public:
  std::string_view name() const override { return "declared"; }
  Result<MemoryEstimate> Estimate(const JobDescription& job) const override {
    if (!job.declared) return Unavailable("the job declared no memory");
    return MemoryEstimate{*job.declared, *job.declared, *job.declared, "declared"};
  }
};

// The true peak times exp(N(bias, sigma)), drawn from a generator seeded by the job's key, so every
// job gets the same error whatever the order of estimation.
class NoisyEstimator final : public MemoryEstimator {
 public:
  NoisyEstimator(double sigma, double bias, uint64_t seed)
      : sigma_(sigma), bias_(bias), seed_(seed) {}
  std::string_view name() const override { return "noisy"; }
  Result<MemoryEstimate> Estimate(const JobDescription& job) const override {
    if (!job.true_peak) return Unavailable("the noisy estimator needs the job's measured peak");
    Rng rng(seed_ ^ (job.key * 0x9e3779b97f4a7c15ULL));
    const double factor = std::exp(rng.Normal(bias_, sigma_));
    const Bytes peak = job.true_peak->Scaled(factor);
    return MemoryEstimate{peak, peak.Scaled(std::exp(-sigma_)), peak.Scaled(std::exp(sigma_)),
                          fmt::format("noisy:{}", sigma_)};
  }

 private:
  double sigma_, bias_;
  uint64_t seed_;
};

class BucketEstimator final : public MemoryEstimator {
 public:
  explicit BucketEstimator(Bytes bucket) : bucket_(bucket) {}
  std::string_view name() const override { return "bucket"; }
  Result<MemoryEstimate> Estimate(const JobDescription& job) const override {
    if (!job.true_peak) return Unavailable("the bucket estimator needs the job's measured peak");
    const int64_t n = (job.true_peak->count() + bucket_.count() - 1) / bucket_.count();
    const Bytes upper(std::max<int64_t>(1, n) * bucket_.count());
    return MemoryEstimate{upper, upper - bucket_, upper,
                          fmt::format("bucket:{}", FormatBytes(bucket_))};
  }

 private:
  Bytes bucket_;
};

}  // namespace

Result<std::unique_ptr<MemoryEstimator>> MakeEstimator(const std::string& spec, uint64_t seed) {
  const auto parts = Split(spec, ':');
  const std::string& kind = parts[0];
  if (kind == "oracle" && parts.size() == 1)
    return std::unique_ptr<MemoryEstimator>(new OracleEstimator());
  if (kind == "none" && parts.size() == 1)
    return std::unique_ptr<MemoryEstimator>(new NoEstimator());
  if (kind == "declared" && parts.size() == 1) {
    return std::unique_ptr<MemoryEstimator>(new DeclaredEstimator());
  }
  if (kind == "noisy" && (parts.size() == 2 || parts.size() == 3)) {
    auto sigma = ParseDouble(parts[1]);
    if (!sigma.ok() || *sigma < 0 || *sigma > 3) {
      return InvalidArgument(
          fmt::format("noisy estimator: sigma '{}' must be in [0, 3]", parts[1]));
    }
    double bias = 0;
    if (parts.size() == 3) {
      auto b = ParseDouble(parts[2]);
      if (!b.ok() || std::fabs(*b) > 3) {
        return InvalidArgument(
            fmt::format("noisy estimator: bias '{}' must be in [-3, 3]", parts[2]));
      }
      bias = *b;
    }
    return std::unique_ptr<MemoryEstimator>(new NoisyEstimator(*sigma, bias, seed));
  }
  if (kind == "bucket" && parts.size() == 2) {
    auto bucket = ParseBytes(parts[1]);
    if (!bucket.ok() || *bucket < MiB(1)) {
      return InvalidArgument(
          fmt::format("bucket estimator: bucket '{}' must be at least 1 MiB", parts[1]));
    }
    return std::unique_ptr<MemoryEstimator>(new BucketEstimator(*bucket));
  }
  return InvalidArgument(fmt::format(
      "unknown estimator '{}' (use oracle, none, declared, noisy:SIGMA[:BIAS], bucket:SIZE)",
      spec));
}

}  // namespace colo

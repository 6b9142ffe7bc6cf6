// Memory estimators behind one interface: given what is known about a job before it runs, how much
// GPU memory will it need at its peak (per GPU)?
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "core/model.h"

namespace colo {

struct ModelSummary;

// What an estimator may look at. Fields are optional; each estimator says which it needs.
struct JobDescription {
  uint64_t key = 0;  // stable identity of the job (for reproducible noise)
  std::string workload;
  int batch = 0;
  std::optional<Bytes> true_peak;         // known only to the simulator and to offline evaluation
  std::optional<Bytes> declared;          // what the user declared
  const ModelSummary* summary = nullptr;  // colo-profile's or torchsummary's description
  std::vector<Bytes> history{};           // peaks of earlier runs with the same signature
};

struct MemoryEstimate {
  Bytes peak;
  Bytes lower;
  Bytes upper;
  std::string method;
  std::string detail{};  // how it was obtained, and anything the user should know
  // What makes it less sure than usual that the user should hear before planning with it (another
  // GPU's calibration, a profile made before colo-profile recorded its convolutions' geometry);
  // empty when nothing does.
  std::string caveat{};

  // As the scheduler plans with it: the peak plus the upper uncertainty (a history estimate is
  // MemorySource::kLearned, any other kEstimated).
  MemoryNeed AsNeed() const;
};

class MemoryEstimator {
 public:
  virtual ~MemoryEstimator() = default;
  virtual std::string_view name() const = 0;
  // kUnavailable when this estimator has nothing to say about the job (the scheduler then plans
  // without a memory number and relies on recovery).
  virtual Result<MemoryEstimate> Estimate(const JobDescription& job) const = 0;
};

// Builds an estimator from a spec: "oracle", "none", "declared", "noisy:SIGMA[:BIAS]"
// (multiplicative log-normal error, e.g. noisy:0.2), "bucket:8GiB" (the true peak rounded up to the
// bucket's upper edge, as GPUMemNet hands its class to the scheduler).
Result<std::unique_ptr<MemoryEstimator>> MakeEstimator(const std::string& spec, uint64_t seed);

}  // namespace colo

// How jobs sharing a GPU slow each other down, and how much power the GPU draws. Both models are
// fitted to the collocation measurements on the H100 (docs/simulator.md's "Models" section has the
// fit and its error; `colo sim --calibration` prints it); the MPS model's queueing term to the
// mixed pairs of the real-trace runs on H200s.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace colo {

struct CoRunner {
  double smact = 0.2;        // solo SM activity
  int thread_percent = 100;  // MPS active-thread limit
};

struct InterferenceModel {
  // MPS: jobs run side by side on the SMs. Each co-runner costs beta * its SMACT (contention for
  // memory bandwidth and caches). A job's kernels also queue behind the co-runners' kernels that
  // hold the SMs: with the co-runners' SMACT rho, the wait grows as rho / (1 - rho), as in a
  // single-server queue, up to rho = mps_queue_cap, and a job pays it for the share of its time it
  // does not hold the SMs itself (1 - its SMACT). So a job of small kernels beside one of large
  // kernels slows much, and the large one little (measured on an H200: CIFAR CNNs at SMACT 0.12
  // beside a VGG-16 at 0.92 took 1.7-2.1x as long, the VGG-16 1.08x). Past mps_capacity of SM
  // activity delivered by all jobs together, the SMs saturate and every job slows by the same
  // further factor (which of two saturating jobs wins depends on kernel shapes SMACT does not
  // show).
  double mps_beta = 0.10;
  double mps_queueing = 0.04;
  double mps_queue_cap = 0.95;
  double mps_capacity = 0.923;
  // Plain time-slicing: contexts take turns. A job occupies the GPU for k * SMACT of the time (its
  // kernels hold the whole GPU while they run); each co-runner costs delta * its occupancy in
  // context switches; past naive_capacity of aggregate occupancy everyone waits.
  double naive_k = 2.19;
  double naive_delta = 0.347;
  double naive_capacity = 0.913;

  // Slowdown factor (>= 1) of every job on one GPU.
  std::vector<double> Slowdowns(SharingMode mode, const std::vector<CoRunner>& jobs) const;
  // The same into `out`, reusing its storage (the simulator calls this at every event).
  void Slowdowns(SharingMode mode, const std::vector<CoRunner>& jobs,
                 std::vector<double>& out) const;
  // A job held below its solo SM demand by an MPS thread limit runs proportionally slower.
  double ThreadLimit(const CoRunner& job) const;
};

struct PowerModel {
  // P = idle + scale * (active + linear * s + quadratic * s^2) while any job runs, s = SMACT.
  // Fitted on the H100 (idle 71 W, TDP 700 W); scale = TDP / 700 for other GPUs.
  double active_watts = 85;
  double linear_watts = 85;
  double quadratic_watts = 390;
  bool fitted_to_server = false;  // true: the coefficients are the server's GPU's, not scaled

  // Never below idle.
  double Watts(double idle_watts, double tdp_watts, bool busy, double smact) const;
};

// "A,L,Q": watts above idle at SM activity s are A + L*s + Q*s^2, fitted to a GPU of the TDP the
// server profile names (no scaling then: the fit is that GPU's).
Result<PowerModel> ParsePowerModel(std::string_view text);

// One row of the H100 collocation table and the models' prediction of it.
struct CalibrationRow {
  std::string set;
  int jobs = 1;
  SharingMode mode = SharingMode::kExclusive;
  double solo_smact = 0;
  int thread_percent = 100;
  double measured_slowdown = 1, measured_gain = 1, measured_smact = 0, measured_watts = 0;
  double predicted_slowdown = 1, predicted_gain = 1, predicted_smact = 0, predicted_watts = 0;
};
std::vector<CalibrationRow> CalibrationTable(const InterferenceModel& interference,
                                             const PowerModel& power);

}  // namespace colo

#include "sim/interference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/strings.h"

namespace colo {

double InterferenceModel::ThreadLimit(const CoRunner& job) const {
  if (job.thread_percent >= 100) return 1.0;
  return std::max(1.0, job.smact / (job.thread_percent / 100.0 * mps_capacity));
}

std::vector<double> InterferenceModel::Slowdowns(SharingMode mode,
                                                 const std::vector<CoRunner>& jobs) const {
  std::vector<double> out;
  Slowdowns(mode, jobs, out);
  return out;
}

void InterferenceModel::Slowdowns(SharingMode mode, const std::vector<CoRunner>& jobs,
                                  std::vector<double>& out) const {
  out.assign(jobs.size(), 1.0);
  if (jobs.size() <= 1 || mode == SharingMode::kExclusive) {
    // Alone, a thread limit below the job's solo demand still slows it.
    for (size_t i = 0; i < jobs.size(); ++i) out[i] = ThreadLimit(jobs[i]);
    return;
  }
  if (mode == SharingMode::kMps) {
    double total = 0;
    for (const auto& j : jobs) total += j.smact;
    double delivered = 0;  // SM activity of all jobs at these slowdowns
    for (size_t i = 0; i < jobs.size(); ++i) {
      const double others = total - jobs[i].smact;
      const double busy = std::min(others, mps_queue_cap);
      const double queueing =
          mps_queueing * busy / (1.0 - busy) * std::max(0.0, 1.0 - jobs[i].smact);
      out[i] = std::max({1.0, 1.0 + mps_beta * others + queueing, ThreadLimit(jobs[i])});
      delivered += jobs[i].smact / out[i];
    }
    if (delivered > mps_capacity)
      for (double& slowdown : out) slowdown *= delivered / mps_capacity;
    return;
  }
  double total = 0;
  for (const auto& j : jobs) total += std::min(1.0, naive_k * j.smact);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const double occupancy = std::min(1.0, naive_k * jobs[i].smact);
    const double switching = 1.0 + naive_delta * (total - occupancy);
    out[i] = std::max({1.0, switching, total / naive_capacity});
  }
}

double PowerModel::Watts(double idle_watts, double tdp_watts, bool busy, double smact) const {
  if (!busy) return idle_watts;
  const double s = std::clamp(smact, 0.0, 1.0);
  const double scale = fitted_to_server ? 1.0 : tdp_watts / 700.0;
  return idle_watts +
         std::max(0.0, scale * (active_watts + linear_watts * s + quadratic_watts * s * s));
}

Result<PowerModel> ParsePowerModel(std::string_view text) {
  const auto parts = Split(text, ',');
  if (parts.size() != 3)
    return InvalidArgument(fmt::format("power model '{}' must be three numbers A,L,Q", text));
  double values[3];
  for (size_t i = 0; i < 3; ++i) {
    auto v = ParseDouble(Trim(parts[i]));
    if (!v.ok() || std::abs(*v) > 1e5)
      return InvalidArgument(
          fmt::format("power model '{}': '{}' is not a number of watts", text, parts[i]));
    values[i] = *v;
  }
  PowerModel model;
  model.active_watts = values[0];
  model.linear_watts = values[1];
  model.quadratic_watts = values[2];
  model.fitted_to_server = true;
  return model;
}

std::vector<CalibrationRow> CalibrationTable(const InterferenceModel& interference,
                                             const PowerModel& power) {
  // Measured on an H100 80GB, 2026-11-21 (docs/simulator.md's table): iteration time alone and
  // shared, SMACT and power.
  struct Measured {
    const char* set;
    int jobs;
    SharingMode mode;
    double solo_smact, solo_iter_ms;
    int threads;
    double iter_ms, gain, smact, watts;
  };
  const Measured table[] = {
      {"small alone", 1, SharingMode::kExclusive, 0.206, 5.1, 100, 5.1, 1.00, 0.206, 185},
      {"small naive", 2, SharingMode::kPlain, 0.206, 5.1, 100, 5.9, 1.74, 0.364, 238},
      {"small naive", 4, SharingMode::kPlain, 0.206, 5.1, 100, 10.1, 2.01, 0.425, 254},
      {"small MPS", 2, SharingMode::kMps, 0.206, 5.1, 100, 5.3, 1.94, 0.391, 248},
      {"small MPS", 4, SharingMode::kMps, 0.206, 5.1, 100, 5.7, 3.55, 0.705, 362},
      {"small MPS 50% threads", 2, SharingMode::kMps, 0.206, 5.1, 50, 5.35, 1.90, 0.307, 241},
      {"medium alone", 1, SharingMode::kExclusive, 0.209, 11.8, 100, 11.8, 1.00, 0.209, 188},
      {"medium naive", 2, SharingMode::kPlain, 0.209, 11.8, 100, 13.0, 1.82, 0.402, 257},
      {"medium MPS", 2, SharingMode::kMps, 0.209, 11.8, 100, 11.85, 1.98, 0.430, 270},
      {"large alone", 1, SharingMode::kExclusive, 0.804, 37.9, 100, 37.9, 1.00, 0.804, 504},
      {"large naive", 2, SharingMode::kPlain, 0.804, 37.9, 100, 83.0, 0.91, 0.786, 487},
      {"large MPS", 2, SharingMode::kMps, 0.804, 37.9, 100, 66.1, 1.15, 0.949, 593},
  };
  std::vector<CalibrationRow> rows;
  for (const Measured& m : table) {
    CalibrationRow r;
    r.set = m.set;
    r.jobs = m.jobs;
    r.mode = m.mode;
    r.solo_smact = m.solo_smact;
    r.thread_percent = m.threads;
    r.measured_slowdown = m.iter_ms / m.solo_iter_ms;
    r.measured_gain = m.gain;
    r.measured_smact = m.smact;
    r.measured_watts = m.watts;
    const std::vector<CoRunner> jobs(m.jobs, CoRunner{m.solo_smact, m.threads});
    const auto slow = interference.Slowdowns(m.mode, jobs);
    r.predicted_slowdown = slow[0];
    r.predicted_gain = 0;
    r.predicted_smact = 0;
    for (double s : slow) {
      r.predicted_gain += 1.0 / s;
      r.predicted_smact += m.solo_smact / s;
    }
    r.predicted_smact = std::min(1.0, r.predicted_smact);
    r.predicted_watts = power.Watts(71, 700, true, r.predicted_smact);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace colo

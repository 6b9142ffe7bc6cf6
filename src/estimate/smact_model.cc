#include "estimate/smact_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace colo {

Result<SmactModel> SmactModel::FromJson(const std::string& text, const std::string& origin) {
  SmactModel m;
  try {
    const auto j = nlohmann::json::parse(text);
    m.fp32_flops_per_second = j.at("fp32_tflops").get<double>() * 1e12;
    m.amp_flops_per_second = j.at("amp_tflops").get<double>() * 1e12;
    m.bytes_per_second = j.at("bandwidth_gbs").get<double>() * 1e9;
    m.host_seconds_per_op = j.at("host_us_per_op").get<double>() * 1e-6;
    m.fill = j.at("fill").get<double>();
    m.bytes_per_parameter = j.at("bytes_per_parameter").get<double>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(fmt::format("{}: malformed smact model ({})", origin, e.what()));
  }
  const bool positive = m.fp32_flops_per_second > 0 && m.amp_flops_per_second > 0 &&
                        m.bytes_per_second > 0 && m.host_seconds_per_op > 0 &&
                        m.bytes_per_parameter >= 0;
  if (!positive || !(m.fill > 0 && m.fill <= 1)) {
    return InvalidArgument(
        fmt::format("{}: the smact model needs positive rates and 0 < fill <= 1", origin));
  }
  return m;
}

Result<SmactPrediction> PredictSoloSmact(const ModelSummary& summary, int batch,
                                         const SmactModel& model) {
  if (batch <= 0) return InvalidArgument("the batch size must be positive");
  if (summary.flops_per_step <= 0 || summary.batch <= 0) {
    return Unavailable(fmt::format(
        "{}: the profile recorded no FLOPs per step (profile it again with colo-profile)",
        summary.origin));
  }
  // The trace nearest the batch: its ops do not change with the batch, its bytes nearly all do
  // (activations), and so do the FLOPs.
  const TraceRef* trace = nullptr;
  for (const TraceRef& t : summary.traces) {
    if (t.steps <= 0 || t.events <= 0 || t.batch <= 0) continue;
    if (!trace || std::abs(t.batch - batch) < std::abs(trace->batch - batch)) trace = &t;
  }
  if (!trace) {
    return Unavailable(fmt::format(
        "{}: the profile has no trace with its steps and allocations (profile it again with "
        "colo-profile)",
        summary.origin));
  }
  const double flops = static_cast<double>(summary.flops_per_step) * batch / summary.batch;
  const double allocated =
      static_cast<double>(trace->allocated_bytes_per_step) * batch / trace->batch;
  const double ops = static_cast<double>(trace->events) / trace->steps / 2;  // alloc and free
  const bool amp = !summary.precision.empty() && summary.precision != "fp32";
  SmactPrediction p;
  p.gpu_seconds =
      flops / (amp ? model.amp_flops_per_second : model.fp32_flops_per_second) +
      (2 * allocated + model.bytes_per_parameter * static_cast<double>(summary.parameters)) /
          model.bytes_per_second;
  p.host_seconds = ops * model.host_seconds_per_op;
  const double step = std::max(p.gpu_seconds, p.host_seconds);
  p.smact = step > 0 ? std::clamp(model.fill * p.gpu_seconds / step, 0.0, 1.0) : 0.0;
  return p;
}

}  // namespace colo

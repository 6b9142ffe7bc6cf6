#include "estimate/job_estimators.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "common/strings.h"
#include "core/run_learning.h"

#ifndef COLO_SOURCE_DATA_DIR
#define COLO_SOURCE_DATA_DIR ""
#endif

namespace colo {

namespace fs = std::filesystem;

namespace {

std::string UnknownLayersNote(const ModelSummary& s) {
  if (s.unknown_layer_types.empty()) return "";
  return fmt::format("; unknown layer types (counted by parameters and outputs only): {}",
                     Join(s.unknown_layer_types, ", "));
}

// colo-calibrate's "catalogue": {"batches": [B1, B2], "calls": [[BACKWARD, INPUT_PER_SAMPLE,
// OUTPUT_PER_SAMPLE, WEIGHT_BYTES, KERNEL_H, KERNEL_W, IN_CHANNELS, GROUPS, [WORKSPACES AT B1],
// [WORKSPACES AT B2]], ...], "calls_channels_last": [the same, measured with NHWC inputs]}.
Result<ConvWorkspaceCatalogue> CatalogueFromJson(const nlohmann::json& doc,
                                                 const std::string& origin) {
  std::vector<int> batch_sizes;
  for (const auto& b : doc.at("batches")) {
    if (!b.is_number_integer() || b.get<int64_t>() <= 0 || b.get<int64_t>() > (1 << 24)) {
      return InvalidArgument(
          fmt::format("{}: catalogue batches must be whole numbers from 1 to {}", origin, 1 << 24));
    }
    batch_sizes.push_back(b.get<int>());
  }
  auto catalogue = ConvWorkspaceCatalogue::Make(std::move(batch_sizes));
  if (!catalogue.ok())
    return InvalidArgument(fmt::format("{}: {}", origin, catalogue.status().message()));
  const size_t batches = doc.at("batches").size();
  // "calls": measured with contiguous (NCHW) tensors; "calls_channels_last": with NHWC ones.
  for (const bool channels_last : {false, true}) {
    const char* const list = channels_last ? "calls_channels_last" : "calls";
    if (!doc.contains(list)) continue;
    size_t index = 0;
    for (const auto& call : doc.at(list)) {
      if (!call.is_array() || call.size() != 8 + batches) {
        return InvalidArgument(
            fmt::format("{}: catalogue {} {}: needs {} fields", origin, list, index, 8 + batches));
      }
      ConvWorkspaceCatalogue::Key key{
          call[0].get<int>() != 0, call[1].get<int64_t>(), call[2].get<int64_t>(),
          call[3].get<int64_t>(),  call[4].get<int64_t>(), call[5].get<int64_t>(),
          call[6].get<int64_t>(),  call[7].get<int64_t>(), channels_last};
      std::vector<std::vector<int64_t>> at;
      for (size_t b = 0; b < batches; ++b) at.push_back(call[8 + b].get<std::vector<int64_t>>());
      if (auto added = catalogue->Add(key, std::move(at)); !added.ok()) {
        return InvalidArgument(
            fmt::format("{}: catalogue {} {}: {}", origin, list, index, added.message()));
      }
      ++index;
    }
  }
  return catalogue;
}

// One hash of several fields (boost's hash_combine).
size_t Mix(std::initializer_list<int64_t> fields) {
  uint64_t h = 0x9e3779b97f4a7c15;
  for (const int64_t f : fields) {
    h ^= static_cast<uint64_t>(f) + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2);
  }
  return static_cast<size_t>(h);
}

}  // namespace

Result<ConvWorkspaceCatalogue> ConvWorkspaceCatalogue::Make(std::vector<int> batches) {
  if (batches.empty() || !std::is_sorted(batches.begin(), batches.end()) ||
      std::adjacent_find(batches.begin(), batches.end()) != batches.end() || batches.front() <= 0) {
    return InvalidArgument("a convolution catalogue needs distinct positive batches, ascending");
  }
  ConvWorkspaceCatalogue catalogue;
  catalogue.batches_ = std::move(batches);
  return catalogue;
}

Status ConvWorkspaceCatalogue::Add(const Key& key, std::vector<std::vector<int64_t>> at_batches) {
  if (at_batches.size() != batches_.size()) {
    return InvalidArgument(fmt::format("{} batches of workspaces for a catalogue of {}",
                                       at_batches.size(), batches_.size()));
  }
  if (key.input_per_sample <= 0 || key.output_per_sample <= 0 || key.weight_bytes <= 0 ||
      key.kernel_h <= 0 || key.kernel_w <= 0 || key.in_channels <= 0 || key.groups <= 0) {
    return InvalidArgument("a catalogued convolution needs positive sizes, kernel and channels");
  }
  for (const auto& sizes : at_batches) {
    if (std::any_of(sizes.begin(), sizes.end(), [](int64_t b) { return b < 0; })) {
      return InvalidArgument("a catalogued workspace is negative");
    }
  }
  if (calls_.emplace(key, std::move(at_batches)).second) {
    const Inputs inputs{key.backward, key.input_per_sample, key.weight_bytes, key.kernel_h,
                        key.kernel_w, key.in_channels,      key.groups,       key.channels_last};
    const auto [slot, first] = by_inputs_.emplace(inputs, key);
    if (!first) slot->second.reset();
  }
  return Status::Ok();
}

size_t ConvWorkspaceCatalogue::Hash::operator()(const Key& k) const {
  return Mix({k.backward, k.input_per_sample, k.output_per_sample, k.weight_bytes, k.kernel_h,
              k.kernel_w, k.in_channels, k.groups, k.channels_last});
}
size_t ConvWorkspaceCatalogue::Hash::operator()(const Inputs& k) const {
  return Mix({k.backward, k.input_per_sample, k.weight_bytes, k.kernel_h, k.kernel_w, k.in_channels,
              k.groups, k.channels_last});
}

std::optional<ConvWorkspaceCatalogue::Workspaces> ConvWorkspaceCatalogue::Lookup(
    const ConvCall& conv, int batch) const {
  if (!conv.geometry || batch <= 0 || calls_.empty()) return std::nullopt;
  // Bytes per sample: a whole multiple of the batch, but for the few bytes a trace interpolated
  // between two batches may be off by.
  constexpr int64_t kSlack = 16;
  auto per_sample = [batch](int64_t bytes) -> std::optional<int64_t> {
    if (bytes <= 0 || bytes > (int64_t{1} << 50)) return std::nullopt;
    const int64_t per = (bytes + batch / 2) / batch;
    if (per <= 0 || std::llabs(per * batch - bytes) > kSlack) return std::nullopt;
    return per;
  };
  const auto input = per_sample(conv.input_bytes);
  const auto output = per_sample(conv.output_bytes);
  if (!input || !output) return std::nullopt;
  const Measured* measured = nullptr;
  if (const auto it =
          calls_.find(Key{conv.backward, *input, *output, conv.weight_bytes, conv.kernel_h,
                          conv.kernel_w, conv.in_channels, conv.groups, conv.channels_last});
      it != calls_.end()) {
    measured = &it->second;
  } else if (conv.backward) {
    const auto one =
        by_inputs_.find(Inputs{true, *input, conv.weight_bytes, conv.kernel_h, conv.kernel_w,
                               conv.in_channels, conv.groups, conv.channels_last});
    if (one != by_inputs_.end() && one->second && one->second->output_per_sample < *output) {
      measured = &calls_.at(*one->second);
    }
  }
  if (!measured) return std::nullopt;
  const auto& at = *measured;
  Workspaces found;
  if (const auto exact = std::find(batches_.begin(), batches_.end(), batch);
      exact != batches_.end()) {
    found.bytes = at[exact - batches_.begin()];
    return found;
  }
  auto largest = [](const std::vector<int64_t>& v) {
    return v.empty() ? int64_t{0} : *std::max_element(v.begin(), v.end());
  };
  auto scaled = [batch](const std::vector<int64_t>& v, int from) {
    std::vector<int64_t> out;
    for (const int64_t bytes : v) {
      out.push_back(static_cast<int64_t>(static_cast<double>(bytes) * batch / from));
    }
    return out;
  };
  if (batches_.size() == 1) {
    found.bytes = scaled(at[0], batches_[0]);
    return found;
  }
  // The two measured batches around `batch` (the nearest two outside them).
  const size_t hi = std::clamp<size_t>(
      std::upper_bound(batches_.begin(), batches_.end(), batch) - batches_.begin(), 1,
      batches_.size() - 1);
  const size_t lo = hi - 1;
  if (at[lo].size() == at[hi].size()) {
    const double t = static_cast<double>(batch - batches_[lo]) / (batches_[hi] - batches_[lo]);
    for (size_t k = 0; k < at[lo].size(); ++k) {
      const double bytes =
          static_cast<double>(at[lo][k]) + t * static_cast<double>(at[hi][k] - at[lo][k]);
      found.bytes.push_back(std::max<int64_t>(0, std::llround(bytes)));
    }
  } else {
    // cuDNN chose differently at the two batches: the nearer one's choice, scaled.
    const size_t near = std::abs(batch - batches_[lo]) <= std::abs(batches_[hi] - batch) ? lo : hi;
    found.bytes = scaled(at[near], batches_[near]);
  }
  found.spread = std::max<int64_t>(
      0, std::max(largest(scaled(at[lo], batches_[lo])), largest(scaled(at[hi], batches_[hi]))) -
             largest(found.bytes));
  return found;
}

Result<GpuCalibration> GpuCalibration::FromJson(const std::string& text, const std::string& origin,
                                                bool with_catalogue) {
  GpuCalibration c;
  try {
    // Without the catalogue its value is dropped as it is parsed, never built.
    const auto skip_catalogue = [with_catalogue](int depth, nlohmann::json::parse_event_t event,
                                                 nlohmann::json& parsed) {
      return with_catalogue || depth != 2 || event != nlohmann::json::parse_event_t::key ||
             parsed != "catalogue";
    };
    const auto doc = nlohmann::json::parse(text, skip_catalogue);
    if (doc.value("format", "") != "colo-gpu-calibration") {
      return InvalidArgument(fmt::format("{}: not a colo-calibrate profile", origin));
    }
    c.gpu = doc.at("gpu").get<std::string>();
    c.driver = doc.value("driver", "");
    c.torch = doc.value("torch", "");
    c.context_bytes = doc.at("context_bytes").get<int64_t>();
    c.cublas_workspace_bytes = doc.value("cublas_workspace_bytes", int64_t{0});
    c.margin_ratio = doc.value("margin_ratio", c.margin_ratio);
    c.margin_bytes = doc.value("margin_bytes", c.margin_bytes);
    c.conv_workspace_ratio = doc.value("conv_workspace_ratio", c.conv_workspace_ratio);
    c.conv_uncertainty_scale = doc.value("conv_uncertainty_scale", c.conv_uncertainty_scale);
    if (const auto w = doc.find("conv_workspace"); w != doc.end() && w->contains("coefficients")) {
      const auto& modes = w->at("coefficients");
      for (const bool benchmark : {false, true}) {
        const auto mode = modes.find(benchmark ? "benchmark" : "heuristic");
        if (mode == modes.end()) continue;
        for (const bool backward : {false, true}) {
          const auto pass = mode->find(backward ? "backward" : "forward");
          if (pass == mode->end()) continue;
          for (int shape = 0; shape < ConvCall::kShapes; ++shape) {
            const auto name = std::string(ShapeName(static_cast<ConvCall::Shape>(shape)));
            if (!pass->contains(name)) continue;
            auto& k = c.conv_workspace[ConvWorkspaceIndex(benchmark, backward,
                                                          static_cast<ConvCall::Shape>(shape))];
            k.median = pass->at(name).at("median").get<double>();
            k.max = pass->at(name).at("max").get<double>();
            k.measured = true;
            if (k.median < 0 || k.max < k.median) {
              return InvalidArgument(
                  fmt::format("{}: conv_workspace {}: needs 0 <= median <= max", origin, name));
            }
          }
        }
      }
    }
    if (const auto w = doc.find("conv_workspace"); w != doc.end() && w->contains("catalogue")) {
      auto catalogue = CatalogueFromJson(w->at("catalogue"), origin);
      if (!catalogue.ok()) return catalogue.status();
      c.conv_catalogue = std::move(*catalogue);
    }
    if (const auto mps = doc.find("mps"); mps != doc.end()) {
      c.mps_context_bytes = mps->value("context_bytes", int64_t{0});
    }
    if (const auto smact = doc.find("smact"); smact != doc.end()) {
      auto model = SmactModel::FromJson(smact->dump(), origin);
      if (!model.ok()) return model.status();
      c.smact = std::move(*model);
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(fmt::format("{}: malformed calibration ({})", origin, e.what()));
  }
  if (c.context_bytes < 0 || c.cublas_workspace_bytes < 0 || c.conv_workspace_ratio < 0 ||
      c.mps_context_bytes < 0 || c.conv_uncertainty_scale < 0 || c.margin_ratio < 0 ||
      c.margin_bytes < 0) {
    return InvalidArgument(fmt::format("{}: negative sizes", origin));
  }
  return c;
}

std::string FindDataFile(const std::string& name) {
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("COLO_DATA_DIR"); env && *env) roots.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.parent_path().parent_path() / "share" / "colo");
  if (*COLO_SOURCE_DATA_DIR) roots.emplace_back(COLO_SOURCE_DATA_DIR);
  for (const auto& root : roots) {
    if (fs::exists(root / name, ec)) return (root / name).string();
  }
  return "";
}

std::string GpuMemNetPaperWeightsPath() {
  // What colo-gpumemnet-import writes by default: the user's own, with GPUMemNet's published
  // estimators in it.
  const char* data_home = std::getenv("XDG_DATA_HOME");
  const char* home = std::getenv("HOME");
  fs::path user;
  if (data_home && *data_home == '/') {
    user = fs::path(data_home) / "colo";
  } else if (home && *home == '/') {
    user = fs::path(home) / ".local" / "share" / "colo";
  }
  std::error_code ec;
  if (!user.empty() && fs::is_regular_file(user / "gpumemnet-paper.json", ec)) {
    return (user / "gpumemnet-paper.json").string();
  }
  return FindDataFile("gpumemnet-paper.json");
}

Result<GpuCalibration> LoadCalibration(const std::string& gpu_name, bool with_catalogue) {
  const std::string dir = FindDataFile("gpu-calibration");
  if (dir.empty()) return NotFound("no gpu-calibration folder in colo's data (set COLO_DATA_DIR)");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> known;
  const std::string wanted = ToLower(gpu_name);
  for (const auto& file : files) {
    auto text = ReadTextFile(file.string(), "calibration");
    if (!text.ok()) return text.status();
    auto c = GpuCalibration::FromJson(*text, file.string(), with_catalogue);
    if (!c.ok()) return c.status();
    if (wanted.empty() || ToLower(c->gpu).find(wanted) != std::string::npos) return c;
    known.push_back(c->gpu);
  }
  return NotFound(fmt::format("no calibration for GPU '{}' (have: {}); run colo-calibrate on it",
                              gpu_name, known.empty() ? "none" : Join(known, ", ")));
}

namespace {

int BatchOf(const JobDescription& job) {
  if (job.batch > 0) return job.batch;
  return job.summary ? job.summary->batch : 0;
}

class HorusEstimator final : public MemoryEstimator {
 public:
  std::string_view name() const override { return "horus"; }
  Result<MemoryEstimate> Estimate(const JobDescription& job) const override {
    if (!job.summary) return Unavailable("Horus needs a model summary");
    const int batch = BatchOf(job);
    if (batch <= 0) return Unavailable("Horus needs the batch size");
    // CARMA: 4 B x (A*B + P + B*P) / 2^20 + 800 MiB, capped at 40000 MiB.
    const double a = static_cast<double>(job.summary->activations_per_sample);
    const double p = static_cast<double>(job.summary->parameters);
    const double mib = std::min(40000.0, 4.0 * (a * batch + p + batch * p) / (1 << 20) + 800.0);
    const Bytes peak = MiB(static_cast<int64_t>(std::ceil(mib)));
    return MemoryEstimate{
        peak, peak, peak, "horus",
        fmt::format("A={} activations/sample, P={} parameters, B={}",
                    job.summary->activations_per_sample, job.summary->parameters, batch)};
  }
};

class GpuMemNetEstimator final : public MemoryEstimator {
 public:
  GpuMemNetEstimator(std::shared_ptr<const GpuMemNetModel> model, int64_t bucket)
      : model_(std::move(model)), bucket_(bucket) {}
  std::string_view name() const override { return "gpumemnet"; }
  Result<MemoryEstimate> Estimate(const JobDescription& job) const override {
    if (!job.summary) return Unavailable("GPUMemNet needs a model summary");
    const int batch = BatchOf(job);
    if (batch <= 0) return Unavailable("GPUMemNet needs the batch size");
    const std::string family = job.summary->Family();
    const GpuMemNetEnsemble* e = model_->Find(family, bucket_);
    if (!e) {
      return Unavailable(
          fmt::format("GPUMemNet has no {} model{}", family, bucket_ ? " for that bucket" : ""));
    }
    const int cls = e->Classify(ExtractFeatures(*job.summary, batch).values);
    const Bytes upper(static_cast<int64_t>(cls + 1) * e->bucket_bytes);
    const Bytes lower(static_cast<int64_t>(cls) * e->bucket_bytes);
    std::string detail = fmt::format("{} model, bucket {} of {}", family,
                                     FormatBytes(Bytes(e->bucket_bytes)), FormatBytes(upper));
    if (cls + 1 == e->classes) detail += " (the highest bucket it knows: may be more)";
    return MemoryEstimate{upper, lower, upper,
                          fmt::format("gpumemnet:{}", FormatBytes(Bytes(e->bucket_bytes))),
                          detail + UnknownLayersNote(*job.summary)};
  }

 private:
  std::shared_ptr<const GpuMemNetModel> model_;
  int64_t bucket_;
};

class GpuMemNetPaperEstimator final : public MemoryEstimator {
 public:
  GpuMemNetPaperEstimator(std::shared_ptr<const GpuMemNetPaperModel> model, std::string name)
      : model_(std::move(model)), name_(std::move(name)) {}
  std::string_view name() const override { return "gpumemnet-paper"; }
  Result<MemoryEstimate> Estimate(const JobDescription& job) const override {
    if (!job.summary) return Unavailable("GPUMemNet needs a model summary");
    const int batch = BatchOf(job);
    if (batch <= 0) return Unavailable("GPUMemNet needs the batch size");
    const PaperFamily family = PaperFamilyOf(*job.summary);
    const PaperEnsemble* e = name_.empty() ? model_->Find(family) : model_->Find(family, name_);
    if (!e && !name_.empty()) {
      std::vector<std::string> have;
      for (const auto& other : model_->ensembles()) {
        if (other.family == family) have.push_back(other.name);
      }
      return Unavailable(fmt::format("these weights have no {} classifier named {} (have: {})",
                                     PaperFamilyName(family), name_,
                                     have.empty() ? "none" : Join(have, ", ")));
    }
    if (!e) {
      return Unavailable(fmt::format(
          "these weights have no {} classifier (import GPUMemNet's published one with "
          "colo-gpumemnet-import, or train one with colo-gpumemnet-train --published on its {} "
          "CSV)",
          PaperFamilyName(family), PaperFamilyName(family)));
    }
    const auto input = MakePaperInput(*job.summary, family, e->recipe, batch);
    if (!input) {
      return Unavailable(
          fmt::format("GPUMemNet's {} has no {} input", e->name, PaperFamilyName(family)));
    }
    const int cls = e->Classify(*input);
    const auto& edges = PaperBucketsFor(family).edges_mib;
    const Bytes lower = MiB(static_cast<int64_t>(edges[cls]));
    // The MLP family's top bucket has no upper edge: its lower edge is all it says.
    const bool open = !std::isfinite(edges[cls + 1]);
    const Bytes upper = open ? lower : MiB(static_cast<int64_t>(edges[cls + 1]));
    const std::string what =
        e->source.empty()
            ? fmt::format("{} classifier retrained on the published features and data",
                          PaperFamilyName(family))
            : fmt::format("GPUMemNet's published {} estimator {} (inputs as its {})",
                          PaperFamilyName(family), e->name, PaperRecipeName(family, e->recipe));
    std::string detail =
        fmt::format("{}, bucket {} to {} MiB", what, edges[cls],
                    open ? std::string("more") : fmt::format("{}", edges[cls + 1]));
    if (cls + 1 == e->classes) {
      detail += family == PaperFamily::kMlp
                    ? " (the top bucket: may be more)"
                    : " (the top bucket, where the published data puts out-of-memory crashes on "
                      "a 40 GB GPU)";
    }
    return MemoryEstimate{upper, lower, upper, "gpumemnet-paper",
                          detail + UnknownLayersNote(*job.summary)};
  }

 private:
  std::shared_ptr<const GpuMemNetPaperModel> model_;
  std::string name_;  // empty: the family's first
};

class TraceEstimator final : public MemoryEstimator {
 public:
  TraceEstimator(GpuCalibration calibration, bool expandable, std::string caveat)
      : calibration_(std::move(calibration)), expandable_(expandable), caveat_(std::move(caveat)) {}
  std::string_view name() const override { return "trace"; }

  Result<MemoryEstimate> Estimate(const JobDescription& job) const override {
    if (!job.summary) return Unavailable("the trace estimator needs colo-profile's summary");
    const int batch = BatchOf(job);
    const ModelSummary& s = *job.summary;
    if (s.traces.empty()) {
      return Unavailable("the summary has no allocation trace (a torchsummary file has none)");
    }
    auto trace = TraceAt(s, batch);
    if (!trace.ok()) return trace.status();
    // Two cuBLAS workspaces (the forward's thread and the autograd engine's), for the run.
    const int64_t half = calibration_.cublas_workspace_bytes / 2;
    std::vector<int64_t> permanent;
    if (half > 0) permanent = {half, calibration_.cublas_workspace_bytes - half};
    // cuDNN's workspaces: a call colo-calibrate ran on this GPU allocates what it measured
    // there; any other is sized with the calibration's median for such a pass and shape, and
    // what the largest measured coefficient would add at the worst such call goes into the upper
    // bound. A profile without the geometry, or a GPU calibrated without convolutions, gets the
    // older bound of a multiple of the largest tensor.
    const bool benchmark = s.cudnn_benchmark;
    const GpuCalibration& cal = calibration_;
    int64_t uncertainty = 0;
    int64_t calls = 0, measured_calls = 0, without_geometry = 0;
    auto choose = [&](const ConvCall& conv) -> std::vector<int64_t> {
      ++calls;
      without_geometry += !conv.geometry;
      // The catalogue holds the default heuristics' choices; cudnn.benchmark times its own.
      if (cal.conv_catalogue && !benchmark) {
        if (auto measured = cal.conv_catalogue->Lookup(conv, batch)) {
          ++measured_calls;
          uncertainty = std::max(uncertainty, measured->spread);
          return std::move(measured->bytes);
        }
      }
      const auto& k =
          cal.conv_workspace[ConvWorkspaceIndex(benchmark, conv.backward, conv.shape())];
      if (!conv.geometry || !k.measured) {
        uncertainty = std::max(
            uncertainty,
            static_cast<int64_t>(cal.conv_workspace_ratio * static_cast<double>(conv.largest())));
        return {};
      }
      const double operands = static_cast<double>(conv.operand_bytes()) * conv.group_padding();
      uncertainty = std::max(uncertainty, static_cast<int64_t>(cal.conv_uncertainty_scale *
                                                               (k.max - k.median) * operands));
      return {static_cast<int64_t>(k.median * operands)};
    };
    ReplayOptions replay{permanent, {}, expandable_};
    replay.workspaces.reserve((*trace)->convs.size());
    for (const ConvCall& conv : (*trace)->convs) replay.workspaces.push_back(choose(conv));
    auto probed = ReplayWithFragmentationProbe(**trace, replay);
    if (!probed.ok()) return probed.status();
    const AllocatorStats& stats = probed->stats;
    const int64_t risk = probed->fragmentation_risk;
    const Bytes peak(stats.peak_reserved + cal.context_bytes);
    // Saturating: a profile's convolutions can name any size, and the bound must not wrap around.
    auto plus = [](Bytes a, int64_t b) {
      return Bytes(a.count() > std::numeric_limits<int64_t>::max() - b
                       ? std::numeric_limits<int64_t>::max()
                       : a.count() + b);
    };
    const Bytes upper =
        plus(plus(plus(peak, risk).Scaled(1 + cal.margin_ratio), cal.margin_bytes), uncertainty);
    MemoryEstimate estimate{
        peak, peak, upper, "trace",
        fmt::format("{} events replayed: peak reserved {} (allocated {}), context {} ({}){}{}{}",
                    (*trace)->events.size(), FormatBytes(Bytes(stats.peak_reserved)),
                    FormatBytes(Bytes(stats.peak_allocated)), FormatBytes(Bytes(cal.context_bytes)),
                    cal.gpu,
                    (*trace)->convs.empty()
                        ? ""
                        : fmt::format("; cuDNN workspaces of {} convolution calls, {} as "
                                      "measured on this GPU{}, up to {} more in the upper bound",
                                      calls, measured_calls, benchmark ? " (cudnn.benchmark)" : "",
                                      FormatBytes(Bytes(uncertainty))),
                    risk > 0 ? fmt::format("; fragmentation could add {} (in the upper bound)",
                                           FormatBytes(Bytes(risk)))
                             : "",
                    UnknownLayersNote(s))};
    estimate.caveat = caveat_;
    if (without_geometry > 0) {
      // Such a profile can be read, but its workspaces are a guess in both directions (VGG-16 at
      // batch 64 of 2026-11-21: the bound 1.8% under; MobileNetV2: 18% over).
      estimate.caveat += fmt::format(
          "{}{} of {} convolution calls were profiled without their geometry (colo-profile "
          "before it recorded it): no measured workspace applies, the bound holds {}x the largest "
          "tensor in their place; profile the job again",
          estimate.caveat.empty() ? "" : "; ", without_geometry, calls, cal.conv_workspace_ratio);
    }
    return estimate;
  }

 private:
  // The recorded trace at `batch`, or one interpolated between two recorded batches: allocation
  // sizes are affine in the batch when the operator sequence is the same.
  Result<std::shared_ptr<const AllocationTrace>> TraceAt(const ModelSummary& s, int batch) const {
    if (const TraceRef* exact = s.TraceFor(batch)) return Load(exact->path);
    std::vector<const TraceRef*> sorted;
    for (const auto& t : s.traces) sorted.push_back(&t);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->batch < b->batch; });
    std::vector<std::string> have;
    for (auto* t : sorted) have.push_back(std::to_string(t->batch));
    if (sorted.size() < 2 || batch <= 0) {
      return Unavailable(fmt::format(
          "no trace for batch {} (recorded: {}); profile with --batch {} or with two batches",
          batch, Join(have, ", "), batch));
    }
    // The two recorded batches around `batch` (or the nearest two when outside).
    size_t hi = 1;
    while (hi + 1 < sorted.size() && sorted[hi]->batch < batch) ++hi;
    auto a = Load(sorted[hi - 1]->path);
    if (!a.ok()) return a.status();
    auto b = Load(sorted[hi]->path);
    if (!b.ok()) return b.status();
    const AllocationTrace& ta = **a;
    const AllocationTrace& tb = **b;
    bool same = ta.events.size() == tb.events.size();
    for (size_t i = 0; same && i < ta.events.size(); ++i) {
      same = ta.events[i].kind == tb.events[i].kind &&
             (ta.events[i].kind == AllocationTrace::Event::kAlloc ||
              ta.events[i].value == tb.events[i].value);
    }
    same = same && ta.convs.size() == tb.convs.size();
    // The same convolutions, of the same kind: only their tensors grow with the batch.
    for (size_t i = 0; same && i < ta.convs.size(); ++i) {
      const ConvCall& x = ta.convs[i];
      const ConvCall& y = tb.convs[i];
      same = x.backward == y.backward && x.geometry == y.geometry &&
             x.weight_bytes == y.weight_bytes && x.kernel_h == y.kernel_h &&
             x.kernel_w == y.kernel_w && x.in_channels == y.in_channels && x.groups == y.groups;
    }
    if (!same) {
      return Unavailable(fmt::format(
          "no trace for batch {}, and the traces of batches {} and {} differ in structure; "
          "profile with --batch {}",
          batch, sorted[hi - 1]->batch, sorted[hi]->batch, batch));
    }
    auto out = std::make_shared<AllocationTrace>(ta);
    const double t = static_cast<double>(batch - sorted[hi - 1]->batch) /
                     (sorted[hi]->batch - sorted[hi - 1]->batch);
    // Far outside the traced batches a size can leave any sane range: clamped to 0..10^18 (a
    // trace's own sizes stay below that), which no GPU places.
    auto between = [t](int64_t x, int64_t y) {
      const double v =
          static_cast<double>(x) + t * (static_cast<double>(y) - static_cast<double>(x));
      return static_cast<int64_t>(std::llround(std::clamp(v, 0.0, 1e18)));
    };
    for (size_t i = 0; i < out->events.size(); ++i) {
      auto& e = out->events[i];
      if (e.kind != AllocationTrace::Event::kAlloc) continue;
      e.value = std::max<int64_t>(1, between(ta.events[i].value, tb.events[i].value));
    }
    for (size_t i = 0; i < out->convs.size(); ++i) {
      ConvCall& c = out->convs[i];
      c.input_bytes = between(ta.convs[i].input_bytes, tb.convs[i].input_bytes);
      c.output_bytes = between(ta.convs[i].output_bytes, tb.convs[i].output_bytes);
    }
    return std::shared_ptr<const AllocationTrace>(out);
  }

  Result<std::shared_ptr<const AllocationTrace>> Load(const std::string& path) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cache_.find(path); it != cache_.end()) return it->second;
    auto text = ReadTextFile(path, "allocation trace");
    if (!text.ok()) return text.status();
    auto trace = ParseAllocationTrace(*text, path);
    if (!trace.ok()) return trace.status();
    auto shared = std::make_shared<const AllocationTrace>(std::move(*trace));
    cache_.emplace(path, shared);
    return shared;
  }

  GpuCalibration calibration_;
  bool expandable_;
  std::string caveat_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const AllocationTrace>> cache_;
};

class HistoryEstimator final : public MemoryEstimator {
 public:
  std::string_view name() const override { return "history"; }
  Result<MemoryEstimate> Estimate(const JobDescription& job) const override {
    // The rule colod and the simulator learn by (core/run_learning.h).
    const std::optional<NeedFromRuns> learned = LearnNeed(job.history);
    if (!learned) return Unavailable("no earlier run of this job");
    return MemoryEstimate{learned->highest, learned->lowest, learned->upper, "history",
                          fmt::format("{} earlier run(s), peaks {} to {}", learned->runs,
                                      FormatBytes(learned->lowest), FormatBytes(learned->highest))};
  }
};

}  // namespace

std::unique_ptr<MemoryEstimator> MakeHorusEstimator() {
  return std::make_unique<HorusEstimator>();
}
std::unique_ptr<MemoryEstimator> MakeGpuMemNetEstimator(std::shared_ptr<const GpuMemNetModel> model,
                                                        int64_t bucket_bytes) {
  return std::make_unique<GpuMemNetEstimator>(std::move(model), bucket_bytes);
}
std::unique_ptr<MemoryEstimator> MakeGpuMemNetPaperEstimator(
    std::shared_ptr<const GpuMemNetPaperModel> model, std::string name) {
  return std::make_unique<GpuMemNetPaperEstimator>(std::move(model), std::move(name));
}
std::unique_ptr<MemoryEstimator> MakeTraceEstimator(GpuCalibration calibration, bool expandable,
                                                    std::string caveat) {
  return std::make_unique<TraceEstimator>(std::move(calibration), expandable, std::move(caveat));
}
std::unique_ptr<MemoryEstimator> MakeHistoryEstimator() {
  return std::make_unique<HistoryEstimator>();
}

const NamedEstimate* BestEstimate(const std::vector<NamedEstimate>& all) {
  for (std::string_view wanted : {"history", "trace", "gpumemnet", "gpumemnet-paper", "horus"}) {
    for (const auto& e : all) {
      // The name before any ':BUCKET' option.
      const std::string_view name = std::string_view(e.estimator).substr(0, e.estimator.find(':'));
      if (e.estimate.ok() && name == wanted) {
        return &e;
      }
    }
  }
  return nullptr;
}

std::vector<std::string> EstimateWarnings(const std::vector<NamedEstimate>& all) {
  std::vector<std::string> warnings;
  const NamedEstimate* best = BestEstimate(all);
  const auto trace = std::find_if(all.begin(), all.end(),
                                  [](const NamedEstimate& e) { return e.estimator == "trace"; });
  if (best && trace != all.end() && !trace->estimate.ok() && best->estimator != "history") {
    const std::string_view name =
        std::string_view(best->estimator).substr(0, best->estimator.find(':'));
    const std::string what =
        name == "horus"
            ? "Horus's formula (CARMA's; off by tens of percent on real models, often over)"
            : fmt::format(
                  "{}, a bucket classifier (the bucket's upper edge; off by tens "
                  "of percent on real models)",
                  best->estimator);
    warnings.push_back(fmt::format(
        "the estimate falls back to {}: the trace estimator could not answer ({}){}", what,
        trace->estimate.status().message(),
        trace->estimate.status().message().find("no allocation trace") != std::string::npos
            ? "; profile the job with colo-profile for an estimate within a few percent"
            : ""));
  }
  if (best && best->estimate.ok() && !best->estimate->caveat.empty()) {
    warnings.push_back(fmt::format("the {} estimate: {}", best->estimator, best->estimate->caveat));
  }
  return warnings;
}

Result<std::vector<NamedEstimator>> MakeEstimators(const EstimateOptions& options) {
  std::vector<std::string> names = options.names;
  if (names.empty()) {
    names = {"history", "trace", "gpumemnet", "gpumemnet-paper", "horus", "declared"};
  }
  std::vector<NamedEstimator> out;
  for (const auto& name : names) {
    const auto parts = Split(name, ':');
    Result<std::unique_ptr<MemoryEstimator>> made = Unavailable("");
    if (parts[0] == "horus" && parts.size() == 1) {
      made = MakeHorusEstimator();
    } else if (parts[0] == "trace" && parts.size() == 1) {
      // A GPU without a calibration of its own gets another's, said so: the replay is the same
      // on every GPU, and a wrong context or cuDNN workspace is hundreds of MiB, where the
      // estimators that need no trace are off by gigabytes.
      auto calibration = LoadCalibration(options.gpu);
      std::string caveat;
      if (!calibration.ok() && calibration.status().code() == StatusCode::kNotFound &&
          !options.gpu.empty()) {
        if (auto other = LoadCalibration(""); other.ok()) {
          caveat = fmt::format("{}: made with the {}'s calibration instead",
                               calibration.status().message(), other->gpu);
          calibration = std::move(other);
        }
      } else if (calibration.ok() && options.gpu.empty()) {
        caveat = fmt::format(
            "no GPU named: made with the {}'s calibration (name the job's GPU model to use "
            "its own)",
            calibration->gpu);
      }
      if (calibration.ok())
        made = MakeTraceEstimator(*calibration, false, std::move(caveat));
      else
        made = calibration.status();
    } else if (parts[0] == "gpumemnet" && parts.size() <= 2) {
      int64_t bucket = 0;
      if (parts.size() == 2) {
        auto b = ParseBytes(parts[1]);
        if (!b.ok()) return InvalidArgument(fmt::format("estimator '{}': bad bucket size", name));
        bucket = b->count();
      }
      const std::string path = options.gpumemnet_weights.empty() ? FindDataFile("gpumemnet.json")
                                                                 : options.gpumemnet_weights;
      if (path.empty()) {
        made = NotFound("no GPUMemNet weights (share/colo/gpumemnet.json); set COLO_DATA_DIR");
      } else if (auto model = GpuMemNetModel::Load(path); model.ok()) {
        made = MakeGpuMemNetEstimator(std::make_shared<const GpuMemNetModel>(std::move(*model)),
                                      bucket);
      } else {
        made = model.status();
      }
    } else if (parts[0] == "gpumemnet-paper" && parts.size() <= 2) {
      const std::string path = options.gpumemnet_paper_weights.empty()
                                   ? GpuMemNetPaperWeightsPath()
                                   : options.gpumemnet_paper_weights;
      if (path.empty()) {
        made = NotFound(
            "no published-method GPUMemNet weights (share/colo/gpumemnet-paper.json); set "
            "COLO_DATA_DIR");
      } else if (auto model = GpuMemNetPaperModel::Load(path); model.ok()) {
        made = MakeGpuMemNetPaperEstimator(
            std::make_shared<const GpuMemNetPaperModel>(std::move(*model)),
            parts.size() == 2 ? parts[1] : "");
      } else {
        made = model.status();
      }
    } else if (parts[0] == "history" && parts.size() == 1) {
      made = MakeHistoryEstimator();
    } else if (parts[0] == "declared" && parts.size() == 1) {
      auto declared = MakeEstimator("declared", 0);
      if (!declared.ok()) return declared.status();
      made = std::move(*declared);
    } else {
      return InvalidArgument(fmt::format(
          "unknown estimator '{}' (use horus, gpumemnet[:BUCKET], gpumemnet-paper[:NAME], trace, "
          "history, declared)",
          name));
    }
    out.push_back(NamedEstimator{name, std::move(made)});
  }
  return out;
}

}  // namespace colo

// The estimators for real jobs, behind MemoryEstimator: each reads what it needs from the job's
// description (its model summary, batch, history, declared number) and says kUnavailable when
// that is missing.
// - horus: CARMA's formula, the baseline.
// - gpumemnet: colo's variant of the thesis' bucket classifier (share/colo/gpumemnet.json).
// - gpumemnet-paper: GPUMemNet's published method and data (share/colo/gpumemnet-paper.json), and
//   its published estimators once imported (colo-gpumemnet-import).
// - trace: colo-profile's allocation trace replayed through the caching-allocator model, plus the
//   calibrated context, cuBLAS and cuDNN workspaces of the target GPU.
// - history: the peaks earlier runs of the same job reached.
// - declared: the user's number.
#pragma once

#include <array>
#include <compare>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "estimate/caching_allocator.h"
#include "estimate/estimator.h"
#include "estimate/gpumemnet.h"
#include "estimate/gpumemnet_paper.h"
#include "estimate/model_summary.h"
#include "estimate/smact_model.h"

namespace colo {

// The workspaces cuDNN allocated inside convolutions that colo-calibrate ran one at a time on a
// GPU (default heuristics, cudnn.benchmark off), keyed as a profile records a call. cuDNN picks an
// algorithm, and with it a workspace, per geometry; where a call was measured, its own workspaces
// replace the per-shape coefficients, which can miss a conv-heavy model's peak by a fifth.
class ConvWorkspaceCatalogue {
 public:
  struct Key {
    bool backward = false;
    int64_t input_per_sample = 0, output_per_sample = 0, weight_bytes = 0;
    int64_t kernel_h = 0, kernel_w = 0, in_channels = 0, groups = 1;
    bool channels_last = false;  // measured with an NHWC input (ConvCall::channels_last)
    bool operator==(const Key&) const = default;
  };
  // The batch sizes every call was measured at (at least one, ascending).
  static Result<ConvWorkspaceCatalogue> Make(std::vector<int> batches);
  // The workspaces of one call at each of the catalogue's batches, in the order it made them.
  Status Add(const Key& key, std::vector<std::vector<int64_t>> at_batches);
  size_t size() const { return calls_.size(); }

  struct Workspaces {
    std::vector<int64_t> bytes;  // allocated and freed one after another
    // How much more the largest could be: 0 at a measured batch; between two, what the other
    // batch's choice would add (cuDNN may switch algorithms in between).
    int64_t spread = 0;
    bool operator==(const Workspaces&) const = default;
  };
  // The workspaces `conv` makes at `batch`; nullopt when that call was not measured (or the
  // profile did not record its geometry). Between two measured batches each workspace is
  // interpolated linearly when both made as many; otherwise those of the nearer batch, scaled to
  // `batch`.
  std::optional<Workspaces> Lookup(const ConvCall& conv, int batch) const;

 private:
  using Measured = std::vector<std::vector<int64_t>>;
  // Everything but the output. Profiles made before they recorded tensor bytes gave a gradient's
  // storage, which can be a slice of a larger one (a concatenation's, a class token's); such a
  // backward is still known when only one measured call matches the rest and its output is smaller
  // than the recorded storage (nullopt: several match).
  struct Inputs {
    bool backward = false;
    int64_t input_per_sample = 0, weight_bytes = 0, kernel_h = 0, kernel_w = 0, in_channels = 0,
            groups = 1;
    bool channels_last = false;
    bool operator==(const Inputs&) const = default;
  };
  // Every field mixed in: a model's calls differ in one or two of them. Hashed, a lookup costs a
  // fifth of a search of the ordered map, and an estimate makes one per convolution.
  struct Hash {
    size_t operator()(const Key& k) const;
    size_t operator()(const Inputs& k) const;
  };
  std::vector<int> batches_;
  std::unordered_map<Key, Measured, Hash> calls_;
  std::unordered_map<Inputs, std::optional<Key>, Hash> by_inputs_;
};

// What a training process holds on a GPU outside the caching allocator, measured by
// colo-calibrate for one GPU model, driver and torch version.
struct GpuCalibration {
  std::string gpu;
  std::string driver;
  std::string torch;
  int64_t context_bytes = 0;
  int64_t cublas_workspace_bytes = 0;
  // The trace estimator's upper bound: peak x (1 + margin_ratio) + margin_bytes +
  // conv_workspace_ratio x the largest tensor of any convolution. cuDNN picks its algorithm (and
  // workspace, measured up to 2x the largest tensor, two per backward call) on the GPU, so the
  // workspaces are uncertainty, not part of the estimate. Fitted in bench/estimate.
  double margin_ratio = 0.05;
  int64_t margin_bytes = int64_t{256} << 20;
  // For profiles that did not record a convolution's geometry (or GPUs without the table below).
  double conv_workspace_ratio = 3.0;
  // cuDNN's workspace per byte of a convolution's input, output and weight, measured by
  // colo-calibrate on this GPU for each pass (forward, backward), shape (ConvCall::Shape) and
  // cudnn.benchmark setting: the median over the shapes it measured, and the largest.
  struct ConvWorkspace {
    double median = 0, max = 0;
    bool measured = false;
  };
  std::array<ConvWorkspace, 4 * ConvCall::kShapes> conv_workspace{};
  // Measured call by call; absent for GPUs calibrated before it was (the coefficients serve).
  std::optional<ConvWorkspaceCatalogue> conv_catalogue;
  // How many times the spread (max - median) at the worst convolution the upper bound adds:
  // cuDNN's backward takes its data and filter workspaces separately, and large first layers
  // take more than the measured shapes did. Fitted with the margins in bench/estimate.
  double conv_uncertainty_scale = 1.5;
  // Under MPS a client's context is partly in the MPS server: what remains in the client's own
  // NVML entry (measured by colo-calibrate --mps; 0 when not measured).
  int64_t mps_context_bytes = 0;
  // Solo SM activity from a profile's FLOPs and bytes on this GPU (absent: not fitted for it).
  std::optional<SmactModel> smact;
  // `with_catalogue` false skips the convolution catalogue (hundreds of KB), for readers that
  // need only the context and margins (colod's plans).
  static Result<GpuCalibration> FromJson(const std::string& text, const std::string& origin,
                                         bool with_catalogue = true);
};

constexpr size_t ConvWorkspaceIndex(bool benchmark, bool backward, ConvCall::Shape shape) {
  return (benchmark ? 2 : 0) * ConvCall::kShapes + (backward ? 1 : 0) * ConvCall::kShapes +
         static_cast<size_t>(shape);
}

// Where colo's data files are: $COLO_DATA_DIR, then share/colo beside the executable's folder,
// then the source tree's data/ (for a build that was not installed).
std::string FindDataFile(const std::string& name);

// The weights gpumemnet-paper reads: the user's own (${XDG_DATA_HOME:-~/.local/share}/colo/
// gpumemnet-paper.json, where colo-gpumemnet-import writes GPUMemNet's published estimators) when
// there is one, else the shipped file; "" when neither is found.
std::string GpuMemNetPaperWeightsPath();

// Loads every calibration in the data folder's gpu-calibration/ and picks one by GPU name
// (case-insensitive substring); an empty name picks the first. See FromJson for `with_catalogue`.
Result<GpuCalibration> LoadCalibration(const std::string& gpu_name, bool with_catalogue = true);

std::unique_ptr<MemoryEstimator> MakeHorusEstimator();
std::unique_ptr<MemoryEstimator> MakeGpuMemNetEstimator(std::shared_ptr<const GpuMemNetModel> model,
                                                        int64_t bucket_bytes = 0);
// `name` picks a classifier of the weights by name ("" = the job's family's first).
std::unique_ptr<MemoryEstimator> MakeGpuMemNetPaperEstimator(
    std::shared_ptr<const GpuMemNetPaperModel> model, std::string name = "");
// `caveat`: why the calibration may not be the job's GPU's (MemoryEstimate::caveat).
std::unique_ptr<MemoryEstimator> MakeTraceEstimator(GpuCalibration calibration,
                                                    bool expandable_segments = false,
                                                    std::string caveat = "");
std::unique_ptr<MemoryEstimator> MakeHistoryEstimator();

// An answer from one estimator, or why it has none.
struct NamedEstimate {
  std::string estimator;
  Result<MemoryEstimate> estimate;
  double micros = 0;  // how long it took (measured by the caller: estimate reads no clock)
};

// Every estimator colo has, built by name. `names` chooses (empty: all, in priority order); an
// estimator that cannot be built (no weights, no calibration for the GPU) comes with that error.
struct EstimateOptions {
  // horus, gpumemnet[:BUCKET], gpumemnet-paper[:NAME], trace, history, declared
  std::vector<std::string> names;
  std::string gpu;                      // which calibration the trace estimator uses ("" = first)
  std::string gpumemnet_weights;        // "" = the shipped file
  std::string gpumemnet_paper_weights;  // "" = the shipped file
};
struct NamedEstimator {
  std::string name;
  Result<std::unique_ptr<MemoryEstimator>> estimator;  // or why it cannot be built
};
Result<std::vector<NamedEstimator>> MakeEstimators(const EstimateOptions& options);

// Priority when several answer: history (measured on this job), trace, gpumemnet,
// gpumemnet-paper, horus.
// Declared is a limit the job runs under, never a better estimate than a measurement.
const NamedEstimate* BestEstimate(const std::vector<NamedEstimate>& all);

// What the user should hear about the estimate colo plans with: that it falls back to a bucket
// classifier or a formula because the trace estimator could not answer (and why, and what would
// let it), or that it was made with another GPU's calibration. Empty when nothing.
std::vector<std::string> EstimateWarnings(const std::vector<NamedEstimate>& all);

}  // namespace colo

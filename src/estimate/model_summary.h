// What is known about a training job's model before it runs: colo-profile's JSON summary, or a
// torchsummary text file (the format GPUMemNet and CARMA's .rad files use).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "estimate/caching_allocator.h"

namespace colo {

// The layer types colo knows, by role. Unknown types are kept (and reported), never guessed.
enum class LayerKind {
  kLinear,
  kConv,
  kBatchNorm,
  kLayerNorm,
  kOtherNorm,
  kDropout,
  kActivation,
  kPool,
  kEmbedding,
  kAttention,
  kShape,
  kContainer,
  kUnknown
};
LayerKind ClassifyLayer(const std::string& type);

struct LayerInfo {
  std::string type;
  LayerKind kind = LayerKind::kUnknown;
  // -1 for the batch dimension (a torchsummary shape that printed the batch is made so too);
  // empty when not known
  std::vector<int64_t> output_shape;
  int64_t parameters = 0;
  int64_t OutputPerSample() const;  // elements per sample, 0 when the shape is not known
};

struct TraceRef {
  int batch = 0;
  std::string path;  // resolved against the summary's folder
  int64_t events = 0;
  int steps = 0;                         // training steps it recorded (0: not said)
  int64_t allocated_bytes_per_step = 0;  // bytes the steps allocated, per step (0: not said)
};

struct ModelSummary {
  std::string origin;  // the file it came from, for messages
  std::string format;  // "colo-model-summary v1", "torchsummary" or "module tree"
  std::string model;
  // The batch the summary was made for (0: unknown); in a torchsummary file, the batch its
  // shapes print instead of -1.
  int batch = 0;
  std::string optimizer;
  std::string precision;
  // Whether the profiled code turned on cudnn.benchmark (its convolutions' workspaces differ).
  bool cudnn_benchmark = false;
  std::map<std::string, std::string> framework;
  std::vector<LayerInfo> layers;
  int64_t parameters = 0;
  int64_t trainable_parameters = 0;
  int64_t activations_per_sample = 0;
  // Floating-point operations of one training step at `batch` (colo-profile counts them on fake
  // tensors); 0: not recorded (torchsummary files, older profiles).
  int64_t flops_per_step = 0;
  std::vector<TraceRef> traces;
  std::vector<std::string> unknown_layer_types;  // sorted, unique

  // "mlp", "cnn" or "transformer": which of GPUMemNet's models applies.
  std::string Family() const;
  const TraceRef* TraceFor(int batch) const;
  // A hash of what determines memory: model, layer table, optimizer, precision (not the batch).
  uint64_t Signature() const;
};

// `origin` is used in messages; `base_dir` resolves trace file names.
Result<ModelSummary> ParseModelSummaryJson(const std::string& text, const std::string& origin,
                                           const std::string& base_dir);
Result<ModelSummary> ParseTorchSummary(const std::string& text, const std::string& origin);
// A model printed as PyTorch prints a module, each line annotated with its parameters
// ("(query): Linear(in_features=768, out_features=768, bias=True), 590,592 params": GPUMemNet's
// Transformer summaries). It prints no shapes: each layer's output is `sequence` tokens of the
// width its arguments give; `batch` is the summary's batch (0: unknown).
Result<ModelSummary> ParseModuleTree(const std::string& text, const std::string& origin, int batch,
                                     int64_t sequence);
// Reads a file and picks the parser by its content (a module tree takes its batch and sequence
// length from "bs:N" and "sl:N" in the file's name, as GPUMemNet's do).
Result<ModelSummary> LoadModelSummary(const std::string& path);

// GPUMemNet's input features (thesis 5.4.4): depth, counts of linear/conv/batch-norm/dropout
// layers, batch, parameters, activations, activations x batch, activation function (sin/cos).
struct GpuMemNetFeatures {
  static const std::vector<std::string>& Names();
  std::vector<double> values;
};
GpuMemNetFeatures ExtractFeatures(const ModelSummary& summary, int batch);

}  // namespace colo

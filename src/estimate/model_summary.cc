#include "estimate/model_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <regex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "common/strings.h"

namespace colo {

namespace {

// torch.nn's layer classes (and the common library ones) by role. Matching is by exact class name;
// library-specific subclasses that end in a known name ("NonDynamicallyQuantizableLinear",
// "Conv1D" in transformers) are caught by the suffix rules in ClassifyLayer.
const std::unordered_map<std::string, LayerKind>& KnownLayers() {
  static const auto* table = new std::unordered_map<std::string, LayerKind>{
      {"Linear", LayerKind::kLinear},
      {"Bilinear", LayerKind::kLinear},
      {"LazyLinear", LayerKind::kLinear},
      {"Conv1D", LayerKind::kLinear},
      {"Conv1d", LayerKind::kConv},
      {"Conv2d", LayerKind::kConv},
      {"Conv3d", LayerKind::kConv},
      {"ConvTranspose1d", LayerKind::kConv},
      {"ConvTranspose2d", LayerKind::kConv},
      {"ConvTranspose3d", LayerKind::kConv},
      {"Conv2dSame", LayerKind::kConv},
      {"Conv2dNormActivation", LayerKind::kContainer},
      {"BatchNorm1d", LayerKind::kBatchNorm},
      {"BatchNorm2d", LayerKind::kBatchNorm},
      {"BatchNorm3d", LayerKind::kBatchNorm},
      {"SyncBatchNorm", LayerKind::kBatchNorm},
      {"BatchNormAct2d", LayerKind::kBatchNorm},
      {"LayerNorm", LayerKind::kLayerNorm},
      {"RMSNorm", LayerKind::kLayerNorm},
      {"LayerNorm2d", LayerKind::kLayerNorm},
      {"GroupNorm", LayerKind::kOtherNorm},
      {"InstanceNorm1d", LayerKind::kOtherNorm},
      {"InstanceNorm2d", LayerKind::kOtherNorm},
      {"InstanceNorm3d", LayerKind::kOtherNorm},
      {"LocalResponseNorm", LayerKind::kOtherNorm},
      {"Dropout", LayerKind::kDropout},
      {"Dropout1d", LayerKind::kDropout},
      {"Dropout2d", LayerKind::kDropout},
      {"Dropout3d", LayerKind::kDropout},
      {"AlphaDropout", LayerKind::kDropout},
      {"DropPath", LayerKind::kDropout},
      {"StochasticDepth", LayerKind::kDropout},
      {"ReLU", LayerKind::kActivation},
      {"ReLU6", LayerKind::kActivation},
      {"ELU", LayerKind::kActivation},
      {"SELU", LayerKind::kActivation},
      {"CELU", LayerKind::kActivation},
      {"GELU", LayerKind::kActivation},
      {"SiLU", LayerKind::kActivation},
      {"Mish", LayerKind::kActivation},
      {"Tanh", LayerKind::kActivation},
      {"Sigmoid", LayerKind::kActivation},
      {"LeakyReLU", LayerKind::kActivation},
      {"PReLU", LayerKind::kActivation},
      {"Hardswish", LayerKind::kActivation},
      {"Hardsigmoid", LayerKind::kActivation},
      {"Hardtanh", LayerKind::kActivation},
      {"Softplus", LayerKind::kActivation},
      {"Softmax", LayerKind::kActivation},
      {"LogSoftmax", LayerKind::kActivation},
      {"Softmax2d", LayerKind::kActivation},
      {"GELUActivation", LayerKind::kActivation},
      {"NewGELUActivation", LayerKind::kActivation},
      {"Swish", LayerKind::kActivation},
      {"MaxPool1d", LayerKind::kPool},
      {"MaxPool2d", LayerKind::kPool},
      {"MaxPool3d", LayerKind::kPool},
      {"AvgPool1d", LayerKind::kPool},
      {"AvgPool2d", LayerKind::kPool},
      {"AvgPool3d", LayerKind::kPool},
      {"AdaptiveAvgPool1d", LayerKind::kPool},
      {"AdaptiveAvgPool2d", LayerKind::kPool},
      {"AdaptiveAvgPool3d", LayerKind::kPool},
      {"AdaptiveMaxPool2d", LayerKind::kPool},
      {"SelectAdaptivePool2d", LayerKind::kPool},
      {"Embedding", LayerKind::kEmbedding},
      {"EmbeddingBag", LayerKind::kEmbedding},
      {"MultiheadAttention", LayerKind::kAttention},
      {"Flatten", LayerKind::kShape},
      {"Unflatten", LayerKind::kShape},
      {"Identity", LayerKind::kShape},
      {"ZeroPad2d", LayerKind::kShape},
      {"ConstantPad2d", LayerKind::kShape},
      {"Upsample", LayerKind::kShape},
      {"UpsamplingNearest2d", LayerKind::kShape},
      {"PixelShuffle", LayerKind::kShape},
      {"ChannelShuffle", LayerKind::kShape},
      {"Sequential", LayerKind::kContainer},
      {"ModuleList", LayerKind::kContainer},
      {"ModuleDict", LayerKind::kContainer},
  };
  return *table;
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

LayerKind ClassifyLayer(const std::string& type) {
  const auto& known = KnownLayers();
  if (auto it = known.find(type); it != known.end()) return it->second;
  // Subclasses and library variants named after what they are.
  if (EndsWith(type, "Linear")) return LayerKind::kLinear;
  if (EndsWith(type, "Conv2d") || EndsWith(type, "Conv1d") || EndsWith(type, "Conv3d")) {
    return LayerKind::kConv;
  }
  if (EndsWith(type, "LayerNorm") || EndsWith(type, "RMSNorm")) return LayerKind::kLayerNorm;
  if (EndsWith(type, "BatchNorm2d") || EndsWith(type, "BatchNorm1d")) return LayerKind::kBatchNorm;
  if (EndsWith(type, "Attention") || EndsWith(type, "SelfAttention")) return LayerKind::kAttention;
  if (EndsWith(type, "Embedding") || EndsWith(type, "Embeddings")) return LayerKind::kEmbedding;
  if (EndsWith(type, "Dropout")) return LayerKind::kDropout;
  return LayerKind::kUnknown;
}

int64_t LayerInfo::OutputPerSample() const {
  if (output_shape.empty() || output_shape[0] != -1) return 0;
  int64_t count = 1;
  for (size_t i = 1; i < output_shape.size(); ++i) count *= std::max<int64_t>(0, output_shape[i]);
  return count;
}

std::string ModelSummary::Family() const {
  bool attention = false, embedding = false, layernorm = false, conv = false;
  for (const auto& layer : layers) {
    attention |= layer.kind == LayerKind::kAttention;
    embedding |= layer.kind == LayerKind::kEmbedding;
    layernorm |= layer.kind == LayerKind::kLayerNorm;
    conv |= layer.kind == LayerKind::kConv;
  }
  if (attention || (embedding && layernorm)) return "transformer";
  if (conv) return "cnn";
  return "mlp";
}

const TraceRef* ModelSummary::TraceFor(int wanted) const {
  for (const auto& t : traces) {
    if (t.batch == wanted) return &t;
  }
  return nullptr;
}

uint64_t ModelSummary::Signature() const {
  // FNV-1a over the fields that decide memory apart from the batch.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    h ^= 0xff;
    h *= 1099511628211ULL;
  };
  mix(model);
  mix(optimizer);
  mix(precision);
  for (const auto& layer : layers) {
    mix(layer.type);
    mix(std::to_string(layer.parameters));
    for (int64_t d : layer.output_shape) mix(std::to_string(d));
  }
  return h;
}

namespace {

void Finish(ModelSummary& s) {
  std::set<std::string> unknown;
  int64_t activations = 0;
  for (auto& layer : s.layers) {
    layer.kind = ClassifyLayer(layer.type);
    if (layer.kind == LayerKind::kUnknown) unknown.insert(layer.type);
    activations += layer.OutputPerSample();
  }
  if (s.activations_per_sample == 0) s.activations_per_sample = activations;
  s.unknown_layer_types.assign(unknown.begin(), unknown.end());
}

}  // namespace

Result<ModelSummary> ParseModelSummaryJson(const std::string& text, const std::string& origin,
                                           const std::string& base_dir) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(fmt::format("{}: not valid JSON ({})", origin, e.what()));
  }
  if (!doc.is_object() || doc.value("format", "") != "colo-model-summary") {
    return InvalidArgument(fmt::format(
        "{}: not a colo model summary (no \"format\": \"colo-model-summary\"); make one with "
        "colo-profile",
        origin));
  }
  const int version = doc.value("version", 0);
  if (version != 1) {
    return InvalidArgument(fmt::format(
        "{}: summary version {} is not supported (this colo reads version 1)", origin, version));
  }
  ModelSummary s;
  s.origin = origin;
  s.format = "colo-model-summary v1";
  try {
    s.model = doc.value("model", "");
    s.batch = doc.value("batch", 0);
    s.optimizer = doc.value("optimizer", "");
    s.precision = doc.value("precision", "fp32");
    s.cudnn_benchmark = doc.value("cudnn_benchmark", false);
    if (auto it = doc.find("framework"); it != doc.end() && it->is_object()) {
      for (const auto& [key, value] : it->items()) {
        if (value.is_string()) s.framework[key] = value.get<std::string>();
      }
    }
    // Counts must be integers: a float (1e30) would not convert to int64_t safely.
    auto count = [](const nlohmann::json& j, const char* key, int64_t fallback) -> int64_t {
      auto it = j.find(key);
      if (it == j.end()) return fallback;
      if (!it->is_number_integer()) {
        throw nlohmann::json::other_error::create(501, std::string(key) + " must be an integer",
                                                  &j);
      }
      return it->get<int64_t>();
    };
    const auto& totals = doc.at("totals");
    s.parameters = count(totals, "parameters", -1);
    if (s.parameters < 0)
      return InvalidArgument(fmt::format("{}: totals.parameters missing", origin));
    s.trainable_parameters = count(totals, "trainable_parameters", s.parameters);
    s.activations_per_sample = count(totals, "activations_per_sample", 0);
    s.flops_per_step = count(totals, "flops_per_step", 0);
    for (const auto& layer : doc.at("layers")) {
      LayerInfo info;
      info.type = layer.at("type").get<std::string>();
      info.parameters = count(layer, "parameters", 0);
      if (auto shape = layer.find("output_shape"); shape != layer.end() && shape->is_array()) {
        for (const auto& d : *shape) {
          if (!d.is_number_integer()) {
            throw nlohmann::json::other_error::create(501, "output_shape must hold integers", &d);
          }
          info.output_shape.push_back(d.get<int64_t>());
        }
      }
      s.layers.push_back(std::move(info));
    }
    if (auto traces = doc.find("traces"); traces != doc.end()) {
      for (const auto& t : *traces) {
        TraceRef ref;
        ref.batch = t.at("batch").get<int>();
        ref.events = count(t, "events", 0);
        ref.steps = static_cast<int>(std::clamp<int64_t>(count(t, "steps", 0), 0, 1 << 20));
        ref.allocated_bytes_per_step = count(t, "allocated_bytes_per_step", 0);
        if (ref.events < 0 || ref.allocated_bytes_per_step < 0) {
          return InvalidArgument(fmt::format("{}: negative trace totals", origin));
        }
        const std::filesystem::path file = t.at("file").get<std::string>();
        ref.path =
            file.is_absolute() ? file.string() : (std::filesystem::path(base_dir) / file).string();
        s.traces.push_back(std::move(ref));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(fmt::format("{}: malformed summary ({})", origin, e.what()));
  }
  if (s.parameters < 0 || s.activations_per_sample < 0 || s.flops_per_step < 0) {
    return InvalidArgument(fmt::format("{}: negative totals", origin));
  }
  Finish(s);
  return s;
}

Result<ModelSummary> ParseTorchSummary(const std::string& text, const std::string& origin) {
  // "      Conv2d-1       [-1, 64, 112, 112]        9,408"
  static const std::regex row(R"(^\s*([A-Za-z_][A-Za-z0-9_]*)-(\d+)\s+(\[.*\])\s+(-|[\d,]+)\s*$)");
  static const std::regex total(R"(^\s*Total params:\s*([\d,]+)\s*$)");
  static const std::regex trainable(R"(^\s*Trainable params:\s*([\d,]+)\s*$)");
  ModelSummary s;
  s.origin = origin;
  s.format = "torchsummary";
  // "9,408", or "-" for none.
  auto number = [&](std::string digits, size_t at) -> Result<int64_t> {
    digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
    if (digits.empty() || digits == "-") return int64_t{0};
    auto n = ParseInt(digits);
    if (!n.ok()) return InvalidArgument(fmt::format("{}:{}: bad count '{}'", origin, at, digits));
    return n;
  };
  std::istringstream in(text);
  std::string line;
  bool header = false;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::smatch m;
    if (line.find("Layer (type)") != std::string::npos) {
      header = true;
    } else if (std::regex_match(line, m, row)) {
      LayerInfo layer;
      layer.type = m[1];
      // The first bracketed list is the (first) output's shape.
      const std::string shape = m[3];
      const size_t open = shape.find_last_of('[', shape.find(']'));
      const size_t close = shape.find(']', open);
      for (const auto& dim : Split(shape.substr(open + 1, close - open - 1), ',')) {
        auto d = ParseInt(Trim(dim));
        if (!d.ok()) {
          return InvalidArgument(
              fmt::format("{}:{}: bad output shape '{}'", origin, line_no, shape));
        }
        layer.output_shape.push_back(*d);
      }
      auto parameters = number(m[4], line_no);
      if (!parameters.ok()) return parameters.status();
      layer.parameters = *parameters;
      s.layers.push_back(std::move(layer));
    } else if (std::regex_match(line, m, total) || std::regex_match(line, m, trainable)) {
      auto n = number(m[1], line_no);
      if (!n.ok()) return n.status();
      (line.find("Trainable") != std::string::npos ? s.trainable_parameters : s.parameters) = *n;
    }
  }
  if (!header || s.layers.empty()) {
    return InvalidArgument(
        fmt::format("{}: not a torchsummary file (no 'Layer (type)' table with rows like "
                    "'Conv2d-1  [-1, 64, 112, 112]  9,408')",
                    origin));
  }
  // summary(model, input_size, batch_size=64) prints the batch in every shape ([64, 64, 112, 112])
  // where the default prints -1. A concrete first dimension on the first layer is that batch: it
  // becomes the summary's batch, and the shapes that carry it are made per sample again.
  const auto first = std::find_if(s.layers.begin(), s.layers.end(),
                                  [](const LayerInfo& l) { return !l.output_shape.empty(); });
  if (first != s.layers.end() && first->output_shape[0] > 0) {
    const int64_t batch = first->output_shape[0];
    if (batch <= std::numeric_limits<int>::max()) {
      s.batch = static_cast<int>(batch);
      for (auto& layer : s.layers) {
        if (!layer.output_shape.empty() && layer.output_shape[0] == batch) {
          layer.output_shape[0] = -1;
        }
      }
    }
  }
  if (s.parameters == 0) {
    for (const auto& layer : s.layers) s.parameters += layer.parameters;
  }
  if (s.trainable_parameters == 0) s.trainable_parameters = s.parameters;
  Finish(s);
  return s;
}

Result<ModelSummary> ParseModuleTree(const std::string& text, const std::string& origin, int batch,
                                     int64_t sequence) {
  // "      (query): Linear(in_features=768, out_features=768, bias=True), 590,592 params": a leaf
  // module; containers open with "(name): Type(" and close with "), N params".
  static const std::regex leaf(
      R"(^\s*\([^)]*\): ([A-Za-z_][A-Za-z0-9_]*)\((.*)\), ([\d,]+) params\s*$)");
  static const std::regex root(R"(^\s*([A-Za-z_][A-Za-z0-9_]*)\(\s*$)");
  static const std::regex total(R"(^\s*Total params:\s*([\d,]+)\s*$)");
  static const std::regex trainable(R"(^\s*Trainable params:\s*([\d,]+)\s*$)");
  static const std::regex width(R"(out_features=(\d+))");
  static const std::regex embedding(R"(^\s*\d+,\s*(\d+))");
  static const std::regex norm(R"(^\s*\(\s*(\d+),?\s*\))");
  if (sequence <= 0 || sequence > (int64_t{1} << 24)) {
    return InvalidArgument(fmt::format(
        "{}: a printed module tree has no shapes: its sequence length must be known (GPUMemNet's "
        "summaries name it in the file name, as in BERT_base_bs:32_sl:512.txt)",
        origin));
  }
  ModelSummary s;
  s.origin = origin;
  s.format = "module tree";
  s.batch = batch;
  auto count = [](std::string digits) -> int64_t {
    digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
    auto n = ParseInt(digits);
    return n.ok() && *n >= 0 ? *n : -1;
  };
  std::istringstream in(text);
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::smatch m;
    if (std::regex_match(line, m, leaf)) {
      LayerInfo layer;
      layer.type = m[1];
      layer.parameters = count(m[3]);
      if (layer.parameters < 0) {
        return InvalidArgument(fmt::format("{}:{}: bad parameter count", origin, line_no));
      }
      // The widths the printed arguments give: a Linear's out_features, an Embedding's
      // dimension, a LayerNorm's shape; per token.
      const std::string args = m[2];
      std::smatch w;
      int64_t out = 0;
      if (std::regex_search(args, w, width) ||
          (EndsWith(layer.type, "Embedding") && std::regex_search(args, w, embedding)) ||
          (EndsWith(layer.type, "LayerNorm") && std::regex_search(args, w, norm))) {
        out = count(w[1]);
      }
      if (out > 0) layer.output_shape = {-1, sequence, out};
      s.layers.push_back(std::move(layer));
    } else if (std::regex_match(line, m, total) || std::regex_match(line, m, trainable)) {
      const int64_t n = count(m[1]);
      if (n < 0) return InvalidArgument(fmt::format("{}:{}: bad count", origin, line_no));
      (line.find("Trainable") != std::string::npos ? s.trainable_parameters : s.parameters) = n;
    } else if (s.model.empty() && std::regex_match(line, m, root)) {
      s.model = m[1];
    }
  }
  if (s.layers.empty()) {
    return InvalidArgument(fmt::format(
        "{}: not a printed module tree (no lines like '(query): Linear(in_features=768, "
        "out_features=768, bias=True), 590,592 params')",
        origin));
  }
  if (s.parameters == 0) {
    for (const auto& layer : s.layers) s.parameters += layer.parameters;
  }
  if (s.trainable_parameters == 0) s.trainable_parameters = s.parameters;
  Finish(s);
  return s;
}

Result<ModelSummary> LoadModelSummary(const std::string& path) {
  auto read = ReadTextFile(path, "model summary");
  if (!read.ok()) return read.status();
  const std::string& text = *read;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    return ParseModelSummaryJson(text, path, std::filesystem::path(path).parent_path().string());
  }
  // A printed module tree begins with the model's class ("BertForMaskedLM("); GPUMemNet names the
  // batch and the sequence length in such a file's name (BERT_base_bs:32_sl:512.txt).
  static const std::regex tree(R"(^\s*[A-Za-z_][A-Za-z0-9_]*\(\s*\n)");
  if (std::regex_search(text.substr(0, text.find('\n') + 1), tree)) {
    const std::string name = std::filesystem::path(path).filename().string();
    static const std::regex batch(R"(bs:(\d{1,7}))"), sequence(R"(sl:(\d{1,7}))");
    std::smatch b, q;
    return ParseModuleTree(text, path, std::regex_search(name, b, batch) ? std::stoi(b[1]) : 0,
                           std::regex_search(name, q, sequence) ? std::stoll(q[1]) : 0);
  }
  return ParseTorchSummary(text, path);
}

const std::vector<std::string>& GpuMemNetFeatures::Names() {
  static const std::vector<std::string> names = {
      "depth",          "linear",          "conv",
      "batchnorm",      "layernorm",       "dropout",
      "embedding",      "attention",       "batch",
      "log_parameters", "log_activations", "log_activations_x_batch",
      "activation_sin", "activation_cos"};
  return names;
}

GpuMemNetFeatures ExtractFeatures(const ModelSummary& summary, int batch) {
  static const std::vector<std::string> activations = {"ReLU", "ELU",  "Tanh",    "LeakyReLU",
                                                       "GELU", "SiLU", "Sigmoid", "Mish"};
  std::array<double, static_cast<size_t>(LayerKind::kUnknown) + 1> count{};
  std::map<std::string, int> seen;
  for (const auto& layer : summary.layers) {
    ++count[static_cast<size_t>(layer.kind)];
    if (layer.kind == LayerKind::kActivation) ++seen[layer.type];
  }
  auto n = [&](LayerKind k) { return count[static_cast<size_t>(k)]; };
  const double linear = n(LayerKind::kLinear), conv = n(LayerKind::kConv);
  // The most used activation, as an angle on a circle of the known ones (0 = none or other).
  int index = 0, best = 0;
  for (size_t i = 0; i < activations.size(); ++i) {
    auto it = seen.find(activations[i]);
    if (it != seen.end() && it->second > best) {
      best = it->second;
      index = static_cast<int>(i) + 1;
    }
  }
  const double angle = 2 * std::numbers::pi * index / (activations.size() + 1);
  const double acts = static_cast<double>(summary.activations_per_sample);
  GpuMemNetFeatures f;
  f.values = {linear + conv,
              linear,
              conv,
              n(LayerKind::kBatchNorm),
              n(LayerKind::kLayerNorm),
              n(LayerKind::kDropout),
              n(LayerKind::kEmbedding),
              n(LayerKind::kAttention),
              static_cast<double>(batch),
              std::log1p(static_cast<double>(summary.parameters)),
              std::log1p(acts),
              std::log1p(acts * batch),
              std::sin(angle),
              std::cos(angle)};
  return f;
}

}  // namespace colo

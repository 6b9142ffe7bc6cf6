#include "estimate/gpumemnet_paper.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace colo {

std::string_view PaperFamilyName(PaperFamily family) {
  switch (family) {
    case PaperFamily::kMlp:
      return "mlp";
    case PaperFamily::kCnn:
      return "cnn";
    case PaperFamily::kTransformer:
      return "transformer";
  }
  return "mlp";
}

std::optional<PaperFamily> PaperFamilyFromName(std::string_view name) {
  for (PaperFamily f : kPaperFamilies) {
    if (PaperFamilyName(f) == name) return f;
  }
  return std::nullopt;
}

int PaperBuckets::ClassOf(double mib) const {
  if (!std::isfinite(mib)) return -1;
  for (int k = 0; k < Classes(); ++k) {
    const double lo = edges_mib[k], hi = edges_mib[k + 1];
    if (right_closed ? (mib > lo && mib <= hi) : (mib >= lo && mib < hi)) return k;
  }
  return -1;
}

const PaperBuckets& PaperBucketsFor(PaperFamily family) {
  // Ensemble/dataloaders/dataloaders4mlp.py: pd.cut with these bins.
  static const PaperBuckets mlp{
      {1000, 2000, 3000, 4000, 5000, std::numeric_limits<double>::infinity()}, true};
  static const PaperBuckets large{{0, 8000, 16000, 24000, 32000, 40000, 50000}, false};
  return family == PaperFamily::kMlp ? mlp : large;
}

// The features, in the published order. Each comes from a column of the published CSV (named
// after the '=') and, for colo's inputs, from the layer table (per sample; B = batch):
//
// mlp (data_cleaner_mlp_step2.py over torchsummary lines):
//   layers          = Depth: layers whose type ends in "Linear"
//   batch_size      = Batch Size: B
//   all_parameters  = Total Parameters: parameters of Linear and *BatchNorm* layers
//   all_activations = Total Activations: output width N of Linear, *BatchNorm*, *Dropout* and
//                     activation layers whose output is [-1, N]
//   batch_norm_layer, dropout_layers = Batch Normalization Layers, Dropout Layers
//   activation sin/cos = Activation Function: the most frequent activation, at angle i*pi/11 of
//                     ELU, GELU, Identity, LeakyReLU, Mish, PReLU, ReLU, SELU, SiLU, Softplus, Tanh
//                     (a model with none of them: Identity)
// cnn (data_cleaner_cnn_step1.py; layers whose type contains "Block" are skipped):
//   Depth: Conv2d, BatchNorm2d, Dropout, AdaptiveAvgPool2d, Linear, Softmax and activation layers
//   Total Activations: C*H*W of those with [-1, C, H, W] outputs, N of Linear/Softmax [-1, N], C of
//     AdaptiveAvgPool2d; Total_Activations_Batch_Size: that x B; Batch Size: B
//   Total Parameters: parameters of Conv2d, BatchNorm2d and Linear layers
//   Conv2d Count, BatchNorm2d Count, Dropout Count
//   activation sin/cos: the most frequent activation at angle i*pi/10 of ELU, GELU, LeakyReLU,
//     Mish, PReLU, ReLU, SELU, SiLU, Softplus, Tanh (a model with none of them: ReLU, where the
//     published loader would drop the row)
// transformer (data_cleaner_transformer_m2.py over the printed module tree):
//   Depth: Embedding, Linear, LayerNorm and Dropout layers
//   Total Activations: B x (seq x dim of each Embedding + out_features of each Linear + for each
//     LayerNorm and Dropout the latest of those two); the published rows carry the batch in this
//     column; Total_Activations_Batch_Size: that x B again
//   Total Parameters: parameters of Embedding and Linear layers (the published column holds the
//     same sum); Batch Size: B
//   NonDynamicallyQuantizableLinear Count: those layers (the output projections of
//     nn.MultiheadAttention); a model without them counts its attention modules, or one per two
//     LayerNorms (every published encoder layer has two)
//   Linear Count: the other Linear layers (HF's Conv1D is one); LayerNorm Count, Dropout Count
const std::vector<std::string>& PaperFeatureNames(PaperFamily family) {
  static const std::vector<std::string> mlp = {
      "layers",           "batch_size",     "all_parameters",          "all_activations",
      "batch_norm_layer", "dropout_layers", "activation_encoding_sin", "activation_encoding_cos"};
  static const std::vector<std::string> cnn = {"Depth",
                                               "Total Activations",
                                               "Total_Activations_Batch_Size",
                                               "Total Parameters",
                                               "Batch Size",
                                               "Conv2d Count",
                                               "BatchNorm2d Count",
                                               "Dropout Count",
                                               "activation_encoding_sin",
                                               "activation_encoding_cos"};
  static const std::vector<std::string> transformer = {"Depth",
                                                       "Total Activations",
                                                       "Total_Activations_Batch_Size",
                                                       "Total Parameters",
                                                       "Batch Size",
                                                       "NonDynamicallyQuantizableLinear Count",
                                                       "Linear Count",
                                                       "LayerNorm Count",
                                                       "Dropout Count"};
  switch (family) {
    case PaperFamily::kMlp:
      return mlp;
    case PaperFamily::kCnn:
      return cnn;
    case PaperFamily::kTransformer:
      return transformer;
  }
  return mlp;
}

namespace {

const std::vector<std::string>& ActivationList(PaperFamily family) {
  static const std::vector<std::string> mlp = {"ELU",  "GELU",     "Identity", "LeakyReLU",
                                               "Mish", "PReLU",    "ReLU",     "SELU",
                                               "SiLU", "Softplus", "Tanh"};
  static const std::vector<std::string> cnn = {"ELU",  "GELU", "LeakyReLU", "Mish",     "PReLU",
                                               "ReLU", "SELU", "SiLU",      "Softplus", "Tanh"};
  return family == PaperFamily::kMlp ? mlp : cnn;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// The first of the most frequent names (Counter.most_common keeps first-seen order on ties).
std::string MostFrequent(const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& n : names) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto& c) { return c.first == n; });
    if (it == counts.end())
      counts.emplace_back(n, 1);
    else
      ++it->second;
  }
  std::string best;
  int top = 0;
  for (const auto& [name, count] : counts) {
    if (count > top) {
      top = count;
      best = name;
    }
  }
  return best;
}

// The published cleaners match output shapes with regexes on "[-1, ...]": only per-sample shapes
// of exactly that rank count.
bool PerSampleRank(const LayerInfo& layer, size_t rank) {
  return layer.output_shape.size() == rank && layer.output_shape[0] == -1;
}

// In double: a hostile summary's shapes may multiply past int64 (features are doubles anyway).
double ElementsAfterBatch(const LayerInfo& layer) {
  double n = 1;
  for (size_t i = 1; i < layer.output_shape.size(); ++i)
    n *= static_cast<double>(std::max<int64_t>(0, layer.output_shape[i]));
  return layer.output_shape.empty() ? 0 : n;
}

// A family's columns, and its layers as the published cleaner lists them in 'Activations-Params':
// (kind, activations, parameters), the kind one-hot as dataloaders4transformer.py encodes it.
struct FamilyInput {
  std::vector<double> columns;
  std::vector<std::vector<double>> layers;
};

FamilyInput MlpInput(const ModelSummary& s, int batch) {
  static const char* const kActivations[] = {"ReLU", "Sigmoid",  "Tanh",     "LeakyReLU", "PReLU",
                                             "ELU",  "SELU",     "Softplus", "SiLU",      "Mish",
                                             "GELU", "Identity", "Softmax"};
  double depth = 0, parameters = 0, activations = 0, batchnorm = 0, dropout = 0;
  std::vector<std::string> seen;
  FamilyInput in;
  // Kinds: a linear layer [0, 1], anything else [1, 0]; activations per sample.
  auto row = [&](bool linear, double width, double params) {
    in.layers.push_back({linear ? 0.0 : 1.0, linear ? 1.0 : 0.0, width, params});
  };
  for (const auto& layer : s.layers) {
    const std::string& t = layer.type;
    const bool flat = PerSampleRank(layer, 2);
    const double width = flat ? static_cast<double>(layer.output_shape[1]) : 0;
    const auto params = static_cast<double>(layer.parameters);
    if (EndsWith(t, "Linear")) {
      ++depth;
      if (flat) {
        parameters += params;
        activations += width;
        row(true, width, params);
      }
    } else if (Contains(t, "BatchNorm")) {
      ++batchnorm;
      if (flat) {
        parameters += params;
        activations += width;
        row(false, width, params);
      }
    } else if (Contains(t, "Dropout")) {
      ++dropout;
      activations += width;
      if (flat) row(false, width, 0);
    } else if (std::any_of(std::begin(kActivations), std::end(kActivations),
                           [&](const char* a) { return Contains(t, a); })) {
      if (flat) {
        activations += width;
        row(false, width, 0);
        if (PaperActivationIndex(PaperFamily::kMlp, t)) seen.push_back(t);
      }
    }
  }
  const size_t index =
      PaperActivationIndex(PaperFamily::kMlp, seen.empty() ? "Identity" : MostFrequent(seen))
          .value_or(2);
  const auto [sin, cos] = PaperActivationEncoding(PaperFamily::kMlp, index);
  in.columns = {depth, static_cast<double>(batch), parameters, activations, batchnorm, dropout, sin,
                cos};
  return in;
}

// The leftmost activation name that ends the type, as the published regexes find it; "" if none.
std::string EndingActivation(const std::string& t) {
  static const char* const kActivations[] = {"LeakyReLU", "PReLU", "ReLU", "SELU",     "GELU",
                                             "ELU",       "Tanh",  "SiLU", "Softplus", "Mish"};
  std::string found;
  size_t at = std::string::npos;
  for (const char* a : kActivations) {
    if (EndsWith(t, a) && t.size() - std::string_view(a).size() < at) {
      at = t.size() - std::string_view(a).size();
      found = a;
    }
  }
  return found;
}

FamilyInput CnnInput(const ModelSummary& s, int batch) {
  double depth = 0, activations = 0, parameters = 0, conv = 0, batchnorm = 0, dropout = 0;
  std::vector<std::string> seen;
  const double b = static_cast<double>(batch);
  FamilyInput in;
  // Kinds: activations, pooling and softmax [1, 0]; conv2d [0, 1]; linear [1, 1]; dropout and
  // batchnorm2d [0, 0]. Activations times the batch, as the CNN cleaner writes them.
  auto row = [&](double k0, double k1, double elements, double params) {
    in.layers.push_back({k0, k1, elements * b, params});
  };
  for (const auto& layer : s.layers) {
    const std::string& t = layer.type;
    if (Contains(t, "Block")) continue;
    const bool image = PerSampleRank(layer, 4);
    const double chw = image ? ElementsAfterBatch(layer) : 0;
    const bool flat = PerSampleRank(layer, 2);
    const double width = flat ? static_cast<double>(layer.output_shape[1]) : 0;
    const auto params = static_cast<double>(layer.parameters);
    if (EndsWith(t, "Conv2d")) {
      ++depth, ++conv;
      if (image) {
        activations += chw;
        parameters += params;
        row(0, 1, chw, params);
      }
    } else if (EndsWith(t, "BatchNorm2d")) {
      ++depth, ++batchnorm;
      if (image) {
        activations += chw;
        parameters += params;
        row(0, 0, chw, params);
      }
    } else if (EndsWith(t, "Dropout")) {
      ++depth, ++dropout;
      activations += chw;
      if (image) row(0, 0, chw, 0);
    } else if (EndsWith(t, "AdaptiveAvgPool2d")) {
      ++depth;
      if (layer.output_shape.size() >= 2 && layer.output_shape[0] == -1) {
        const auto channels = static_cast<double>(layer.output_shape[1]);
        activations += channels;
        row(1, 0, channels, 0);
      }
    } else if (EndsWith(t, "Linear")) {
      ++depth;
      if (flat) {
        activations += width;
        parameters += params;
        row(1, 1, width, params);
      }
    } else if (EndsWith(t, "Softmax")) {
      ++depth;
      activations += width;
      if (flat) row(1, 0, width, 0);
    } else if (const std::string found = EndingActivation(t); !found.empty()) {
      ++depth;
      if (image) {
        activations += chw;
        seen.push_back(found);
        row(1, 0, chw, 0);
      }
    }
  }
  const size_t index =
      PaperActivationIndex(PaperFamily::kCnn, seen.empty() ? "ReLU" : MostFrequent(seen))
          .value_or(5);
  const auto [sin, cos] = PaperActivationEncoding(PaperFamily::kCnn, index);
  in.columns = {depth, activations, activations * b, parameters, b,
                conv,  batchnorm,   dropout,         sin,        cos};
  return in;
}

// data_cleaner_transformer_m2.py over the printed module tree: an Embedding's activations are
// sequence x width, a Linear's its out_features (the sequence left out), and a LayerNorm or Dropout
// adds the latest of those; the layers' list carries the batch for Embeddings and Linears only.
// Total Parameters is the model's total; an attention output projection
// (NonDynamicallyQuantizableLinear, or nn.MultiheadAttention where a profile lists the module)
// counts in both its own count and the Linear count.
FamilyInput TransformerInput(const ModelSummary& s, int batch) {
  double depth = 0, activations = 0, quantizable = 0, linear = 0, norms = 0, dropout = 0,
         current = 0;
  const double b = static_cast<double>(batch);
  FamilyInput in;
  // Kinds: LayerNorm [1, 0, 0, 0], Embedding [0, 1, 0, 0], Linear [0, 0, 1, 0], Dropout [0, 0, 0,
  // 1].
  auto row = [&](int kind, double value, double params) {
    std::vector<double> r(6, 0.0);
    r[kind] = 1;
    r[4] = value;
    r[5] = params;
    in.layers.push_back(std::move(r));
  };
  for (const auto& layer : s.layers) {
    const std::string& t = layer.type;
    const auto params = static_cast<double>(layer.parameters);
    if (EndsWith(t, "Embedding")) {
      current = ElementsAfterBatch(layer);
      activations += current;
      ++depth;
      row(1, current * b, params);
    } else if (EndsWith(t, "Linear") || t == "Conv1D" || t == "MultiheadAttention") {
      if (t != "MultiheadAttention" && !layer.output_shape.empty()) {
        current = static_cast<double>(layer.output_shape.back());
      }
      activations += current;
      ++depth, ++linear;
      if (t == "NonDynamicallyQuantizableLinear" || t == "MultiheadAttention") ++quantizable;
      row(2, current * b, params);
    } else if (Contains(t, "LayerNorm")) {
      activations += current;
      ++norms, ++depth;
      row(0, current, params);
    } else if (Contains(t, "Dropout")) {
      activations += current;
      ++dropout, ++depth;
      row(3, current, 0);
    }
  }
  in.columns = {depth,  activations, activations * b, static_cast<double>(s.parameters),
                b,      quantizable, linear,          norms,
                dropout};
  return in;
}

FamilyInput FamilyInputOf(const ModelSummary& s, PaperFamily family, int batch) {
  switch (family) {
    case PaperFamily::kMlp:
      return MlpInput(s, batch);
    case PaperFamily::kCnn:
      return CnnInput(s, batch);
    case PaperFamily::kTransformer:
      return TransformerInput(s, batch);
  }
  return {};
}

// Test_Pipeline/Tester_trans_mlp.py: as the cleaner, but a NonDynamicallyQuantizableLinear is not
// a Linear, and a Conv1D (GPT-2's) is one whose activations stay the latest.
std::vector<double> TransformerTesterColumns(const ModelSummary& s, int batch) {
  double depth = 0, activations = 0, linear = 0, norms = 0, dropout = 0, current = 0;
  for (const auto& layer : s.layers) {
    const std::string& t = layer.type;
    if (EndsWith(t, "Embedding")) {
      current = ElementsAfterBatch(layer);
    } else if (EndsWith(t, "Linear")) {
      if (!layer.output_shape.empty()) current = static_cast<double>(layer.output_shape.back());
      if (t != "NonDynamicallyQuantizableLinear") ++linear;
    } else if (t == "Conv1D") {
      ++linear;
    } else if (Contains(t, "LayerNorm")) {
      ++norms;
    } else if (Contains(t, "Dropout")) {
      ++dropout;
    } else {
      continue;
    }
    activations += current;
    ++depth;
  }
  const double b = static_cast<double>(batch);
  return {depth, activations, activations * b, static_cast<double>(s.parameters),
          b,     linear,      norms,           dropout};
}

// Test_Pipeline/01-mlp4cnn.py: the CNN cleaner's sums with the tester's own rules: the rows of
// modules it skips (blocks, squeeze-excitation, inverted residuals, Inception's BasicConv2d,
// separable convolutions) left out, flat outputs of dropouts and activations counted too, and
// ReLU6 read as ReLU.
std::vector<double> CnnTesterColumns(const ModelSummary& s, int batch) {
  static const char* const kSkipped[] = {"SqueezeExcitation", "MBConv",           "Block",
                                         "SeparableConv2d",   "InvertedResidual", "BasicConv2d"};
  double activations = 0, parameters = 0, conv = 0, batchnorm = 0, dropout = 0;
  std::vector<std::string> seen;
  for (const auto& layer : s.layers) {
    const std::string& t = layer.type;
    if (std::any_of(std::begin(kSkipped), std::end(kSkipped),
                    [&](const char* w) { return Contains(t, w); })) {
      continue;
    }
    const bool image = PerSampleRank(layer, 4);
    const bool flat = PerSampleRank(layer, 2);
    const double elements = image || flat ? ElementsAfterBatch(layer) : 0;
    const auto params = static_cast<double>(layer.parameters);
    if (EndsWith(t, "Conv2d") || EndsWith(t, "BatchNorm2d")) {
      ++(EndsWith(t, "Conv2d") ? conv : batchnorm);
      if (image) activations += elements, parameters += params;
    } else if (EndsWith(t, "Dropout")) {
      ++dropout;
      activations += elements;
    } else if (EndsWith(t, "AdaptiveAvgPool2d")) {
      if (layer.output_shape.size() >= 2 && layer.output_shape[0] == -1) {
        activations += static_cast<double>(layer.output_shape[1]);
      }
    } else if (EndsWith(t, "Linear")) {
      if (flat) activations += elements, parameters += params;
    } else if (EndsWith(t, "Softmax")) {
      if (flat) activations += elements;
    } else if (const std::string found = EndsWith(t, "ReLU6") ? "ReLU" : EndingActivation(t);
               !found.empty() && (image || flat)) {
      activations += elements;
      seen.push_back(found);
    }
  }
  const size_t index =
      PaperActivationIndex(PaperFamily::kCnn, seen.empty() ? "ReLU" : MostFrequent(seen))
          .value_or(5);
  const auto [sin, cos] = PaperActivationEncoding(PaperFamily::kCnn, index);
  const double b = static_cast<double>(batch);
  return {activations, activations * b, parameters, b, conv, batchnorm, dropout, sin, cos};
}

}  // namespace

// The published positional encoding of an activation's index in the family's list.
std::pair<double, double> PaperActivationEncoding(PaperFamily family, size_t index) {
  const double angle = static_cast<double>(index) * std::numbers::pi /
                       static_cast<double>(ActivationList(family).size());
  return {std::sin(angle), std::cos(angle)};
}

std::optional<size_t> PaperActivationIndex(PaperFamily family, std::string_view name) {
  const auto& list = ActivationList(family);
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == name) return i;
  }
  return std::nullopt;
}

PaperFamily PaperFamilyOf(const ModelSummary& summary) {
  const std::string family = summary.Family();
  return PaperFamilyFromName(family).value_or(PaperFamily::kMlp);
}

std::vector<double> PaperFeatures(const ModelSummary& summary, PaperFamily family, int batch) {
  return FamilyInputOf(summary, family, batch).columns;
}

std::string PaperRecipeName(PaperFamily family, PaperRecipe recipe) {
  switch (recipe) {
    case PaperRecipe::kColumns:
      return fmt::format("{}_data4mlp", PaperFamilyName(family));
    case PaperRecipe::kSequence:
      return fmt::format("{}_data4transformer", PaperFamilyName(family));
    case PaperRecipe::kTester:
      return family == PaperFamily::kCnn ? "01-mlp4cnn" : "Tester_trans_mlp";
  }
  return "";
}

std::optional<std::pair<PaperFamily, PaperRecipe>> PaperRecipeFromName(std::string_view name) {
  if (name == "Tester_trans_mlp") return std::pair{PaperFamily::kTransformer, PaperRecipe::kTester};
  if (name == "01-mlp4cnn") return std::pair{PaperFamily::kCnn, PaperRecipe::kTester};
  for (PaperFamily f : kPaperFamilies) {
    for (PaperRecipe r : {PaperRecipe::kColumns, PaperRecipe::kSequence}) {
      if (PaperRecipeName(f, r) == name) return std::pair{f, r};
    }
  }
  return std::nullopt;
}

namespace {

// dataloaders4transformer.py's columns beside the layer sequence, by their positions among the
// family's kColumns.
const std::vector<size_t>& SequenceColumnOrder(PaperFamily family) {
  // batch_size, all_parameters, all_activations, Total_Activations_Batch_Size
  static const std::vector<size_t> mlp = {1, 2, 3, 8};
  // batch_size, all_parameters, all_activations, Total_Activations_Batch_Size, Conv2d Count,
  // BatchNorm2d Count, Dropout Count, activation_encoding_sin, activation_encoding_cos
  static const std::vector<size_t> cnn = {4, 3, 1, 2, 5, 6, 7, 8, 9};
  // Depth, Total Activations, Total Parameters, Batch Size, NonDynamicallyQuantizableLinear
  // Count, Linear Count, Total_Activations_Batch_Size, LayerNorm Count, Dropout Count
  static const std::vector<size_t> transformer = {0, 1, 3, 4, 5, 6, 2, 7, 8};
  switch (family) {
    case PaperFamily::kMlp:
      return mlp;
    case PaperFamily::kCnn:
      return cnn;
    case PaperFamily::kTransformer:
      return transformer;
  }
  return mlp;
}

// dataloaders4transformer.py's columns from the family's: reordered, with Total Activations x
// Batch Size added for MLPs, and cast to integers (the activation's sin and cos too).
std::vector<double> SequenceColumns(PaperFamily family, std::vector<double> columns) {
  if (family == PaperFamily::kMlp) columns.push_back(columns[1] * columns[3]);
  std::vector<double> out;
  for (const size_t i : SequenceColumnOrder(family)) out.push_back(std::trunc(columns[i]));
  return out;
}

}  // namespace

std::optional<PaperInput> MakePaperInput(const ModelSummary& summary, PaperFamily family,
                                         PaperRecipe recipe, int batch) {
  PaperInput out;
  switch (recipe) {
    case PaperRecipe::kColumns:
      out.columns = PaperFeatures(summary, family, batch);
      return out;
    case PaperRecipe::kTester:
      if (family == PaperFamily::kMlp) return std::nullopt;
      out.columns = family == PaperFamily::kCnn ? CnnTesterColumns(summary, batch)
                                                : TransformerTesterColumns(summary, batch);
      return out;
    case PaperRecipe::kSequence: {
      FamilyInput in = FamilyInputOf(summary, family, batch);
      out.columns = SequenceColumns(family, std::move(in.columns));
      out.layers = std::move(in.layers);
      return out;
    }
  }
  return std::nullopt;
}

PaperInput PaperInputOfRow(const PaperRow& row, PaperFamily family, PaperRecipe recipe) {
  if (recipe != PaperRecipe::kSequence) return PaperInput{row.features, {}};
  return PaperInput{SequenceColumns(family, row.features), row.layers};
}

std::vector<std::string> PaperColumnNames(PaperFamily family, PaperRecipe recipe) {
  const auto& columns = PaperFeatureNames(family);
  switch (recipe) {
    case PaperRecipe::kColumns:
      return columns;
    case PaperRecipe::kTester:
      if (family == PaperFamily::kCnn) return {columns.begin() + 1, columns.end()};
      return {"Depth",
              "Total Activations",
              "Total_Activations_Batch_Size",
              "Total Parameters",
              "Batch Size",
              "Linear Count",
              "LayerNorm Count",
              "Dropout Count"};
    case PaperRecipe::kSequence: {
      std::vector<std::string> names;
      for (const size_t i : SequenceColumnOrder(family)) {
        names.push_back(i < columns.size() ? columns[i] : "Total_Activations_Batch_Size");
      }
      return names;
    }
  }
  return {};
}

}  // namespace colo

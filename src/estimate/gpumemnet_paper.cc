#include "estimate/gpumemnet_paper.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <numeric>
#include <set>

#include "common/rng.h"
#include "common/strings.h"

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

// The published positional encoding of an activation's index in the family's list.
std::pair<double, double> ActivationEncoding(PaperFamily family, size_t index) {
  const double angle = static_cast<double>(index) * std::numbers::pi /
                       static_cast<double>(ActivationList(family).size());
  return {std::sin(angle), std::cos(angle)};
}

std::optional<size_t> ActivationIndex(PaperFamily family, std::string_view name) {
  const auto& list = ActivationList(family);
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == name) return i;
  }
  return std::nullopt;
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
        if (ActivationIndex(PaperFamily::kMlp, t)) seen.push_back(t);
      }
    }
  }
  const size_t index =
      ActivationIndex(PaperFamily::kMlp, seen.empty() ? "Identity" : MostFrequent(seen))
          .value_or(2);
  const auto [sin, cos] = ActivationEncoding(PaperFamily::kMlp, index);
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
      ActivationIndex(PaperFamily::kCnn, seen.empty() ? "ReLU" : MostFrequent(seen)).value_or(5);
  const auto [sin, cos] = ActivationEncoding(PaperFamily::kCnn, index);
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
      ActivationIndex(PaperFamily::kCnn, seen.empty() ? "ReLU" : MostFrequent(seen)).value_or(5);
  const auto [sin, cos] = ActivationEncoding(PaperFamily::kCnn, index);
  const double b = static_cast<double>(batch);
  return {activations, activations * b, parameters, b, conv, batchnorm, dropout, sin, cos};
}

}  // namespace

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

// ------------------------------------------------------------------------------------------------
// The published CSVs.

namespace {

// RFC 4180 records: quoted fields may hold commas, doubled quotes and line breaks. `line` is where
// each record starts. Returns false on an unterminated quote at the end of the text.
struct CsvRecord {
  std::vector<std::string> fields;
  int line = 0;
};

bool ParseCsvRecords(const std::string& text, std::vector<CsvRecord>& records) {
  CsvRecord record;
  std::string field;
  bool quoted = false, any = false;
  int line = 1;
  record.line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      record.fields.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        record.fields.push_back(std::move(field));
        records.push_back(std::move(record));
      }
      record = CsvRecord{};
      field.clear();
      any = false;
      record.line = ++line;
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) return false;
  if (any || !field.empty()) {
    record.fields.push_back(std::move(field));
    records.push_back(std::move(record));
  }
  return true;
}

// The one-hot kind dataloaders4transformer.py gives a layer of the published lists, or nullopt for
// a kind it does not know (it raises there).
std::optional<std::vector<double>> EncodeLayerKind(PaperFamily family, std::string_view kind) {
  switch (family) {
    case PaperFamily::kTransformer:
      // `layer_type in 'LayerNorm'`: a substring test.
      if (std::string_view("LayerNorm").find(kind) != std::string_view::npos)
        return std::vector<double>{1, 0, 0, 0};
      if (kind == "Embedding") return std::vector<double>{0, 1, 0, 0};
      if (kind == "Linear") return std::vector<double>{0, 0, 1, 0};
      if (kind == "Dropout") return std::vector<double>{0, 0, 0, 1};
      return std::nullopt;
    case PaperFamily::kCnn: {
      static const std::set<std::string_view> first = {"adaptive_avg_pool2d",
                                                       "Sigmoid",
                                                       "softmax",
                                                       "ELU",
                                                       "GELU",
                                                       "Identity",
                                                       "LeakyReLU",
                                                       "Mish",
                                                       "PReLU",
                                                       "ReLU",
                                                       "SELU",
                                                       "SiLU",
                                                       "Softplus",
                                                       "Tanh"};
      if (first.count(kind)) return std::vector<double>{1, 0};
      if (kind == "conv2d") return std::vector<double>{0, 1};
      if (kind == "linear") return std::vector<double>{1, 1};
      if (kind == "dropout" || kind == "batchnorm2d") return std::vector<double>{0, 0};
      return std::nullopt;
    }
    case PaperFamily::kMlp: {
      static const std::set<std::string_view> first = {"dropout",  "batch_normalization",
                                                       "Sigmoid",  "Softmax",
                                                       "ELU",      "GELU",
                                                       "Identity", "LeakyReLU",
                                                       "Mish",     "PReLU",
                                                       "ReLU",     "SELU",
                                                       "SiLU",     "Softplus",
                                                       "Tanh"};
      if (first.count(kind)) return std::vector<double>{1, 0};
      if (kind == "linear") return std::vector<double>{0, 1};
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// 'Activations-Params': a Python list of (kind, activations, parameters) tuples, as
// "[('linear', 1173, 2753031), ('ReLU', 1173, 0)]". Empty when the list is malformed or names a
// kind the family's loader does not know.
std::vector<std::vector<double>> ParseLayerList(PaperFamily family, std::string_view text) {
  std::vector<std::vector<double>> layers;
  size_t at = 0;
  while ((at = text.find('(', at)) != std::string_view::npos) {
    const size_t close = text.find(')', at);
    if (close == std::string_view::npos) return {};
    const auto fields = Split(std::string(text.substr(at + 1, close - at - 1)), ',');
    at = close + 1;
    if (fields.size() != 3) return {};
    std::string_view kind = Trim(fields[0]);
    if (kind.size() < 2 || (kind.front() != '\'' && kind.front() != '"') ||
        kind.back() != kind.front())
      return {};
    kind = kind.substr(1, kind.size() - 2);
    auto row = EncodeLayerKind(family, kind);
    const auto activations = ParseDouble(Trim(fields[1]));
    const auto parameters = ParseDouble(Trim(fields[2]));
    if (!row || !activations.ok() || !parameters.ok()) return {};
    row->push_back(*activations);
    row->push_back(*parameters);
    layers.push_back(std::move(*row));
  }
  return layers;
}

// What pandas reads as missing.
bool IsMissing(std::string_view v) {
  static const char* const kMissing[] = {"",    "None", "nan",  "NaN",  "NA",
                                         "N/A", "n/a",  "null", "NULL", "<NA>"};
  return std::any_of(std::begin(kMissing), std::end(kMissing),
                     [&](const char* m) { return v == m; });
}

// The label the published loaders give an out-of-memory crash (CNN and Transformer data): a
// peak in the top bucket.
constexpr double kOomMiB = 42000;

}  // namespace

int PaperDataset::SkippedRows() const {
  int n = 0;
  for (const auto& [reason, count] : skipped) n += count;
  return n;
}

Result<PaperDataset> ParsePaperCsv(const std::string& text, const std::string& origin) {
  std::vector<CsvRecord> records;
  if (!ParseCsvRecords(text, records)) {
    return InvalidArgument(fmt::format("{}: a quoted field is never closed", origin));
  }
  if (records.empty()) return InvalidArgument(fmt::format("{}: empty file, no CSV header", origin));
  const auto& header = records[0].fields;
  auto column = [&](std::string_view name) -> int {
    for (size_t i = 0; i < header.size(); ++i) {
      if (Trim(header[i]) == name) return static_cast<int>(i);
    }
    return -1;
  };
  PaperDataset data;
  data.origin = origin;
  if (column("NonDynamicallyQuantizableLinear Count") >= 0) {
    data.family = PaperFamily::kTransformer;
  } else if (column("Conv2d Count") >= 0) {
    data.family = PaperFamily::kCnn;
  } else if (column("Batch Normalization Layers") >= 0) {
    data.family = PaperFamily::kMlp;
  } else {
    return InvalidArgument(fmt::format(
        "{}: not one of GPUMemNet's published CSVs (no 'Batch Normalization Layers', 'Conv2d "
        "Count' or 'NonDynamicallyQuantizableLinear Count' column)",
        origin));
  }
  // The published columns of each feature; "*" multiplies the batch in, "activation" is encoded.
  std::vector<std::string> sources;
  switch (data.family) {
    case PaperFamily::kMlp:
      sources = {"Depth",
                 "Batch Size",
                 "Total Parameters",
                 "Total Activations",
                 "Batch Normalization Layers",
                 "Dropout Layers",
                 "activation",
                 "activation"};
      break;
    case PaperFamily::kCnn:
      sources = {"Depth",      "Total Activations", "*Total Activations", "Total Parameters",
                 "Batch Size", "Conv2d Count",      "BatchNorm2d Count",  "Dropout Count",
                 "activation", "activation"};
      break;
    case PaperFamily::kTransformer:
      sources = {"Depth",
                 "Total Activations",
                 "*Total Activations",
                 "Total Parameters",
                 "Batch Size",
                 "NonDynamicallyQuantizableLinear Count",
                 "Linear Count",
                 "LayerNorm Count",
                 "Dropout Count"};
      break;
  }
  std::vector<std::string> required = {"Max GPU Memory (MiB)", "Batch Size"};
  for (const auto& s : sources) {
    if (s == "activation")
      required.push_back("Activation Function");
    else
      required.push_back(s[0] == '*' ? s.substr(1) : s);
  }
  std::vector<std::string> missing;
  for (const auto& r : required) {
    if (column(r) < 0 && std::find(missing.begin(), missing.end(), r) == missing.end()) {
      missing.push_back(r);
    }
  }
  if (!missing.empty()) {
    return InvalidArgument(fmt::format("{}: GPUMemNet {} CSV without column(s) {}", origin,
                                       PaperFamilyName(data.family), Join(missing, ", ")));
  }
  const int memory_col = column("Max GPU Memory (MiB)"), batch_col = column("Batch Size");
  const int status_col = column("Status"), architecture_col = column("architecture");
  const int layers_col = column("Activations-Params");
  const int activation_col = column("Activation Function");
  const PaperBuckets& buckets = PaperBucketsFor(data.family);
  data.data_rows = static_cast<int>(records.size()) - 1;
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& f = records[r].fields;
    auto skip = [&](std::string reason) { ++data.skipped[std::move(reason)]; };
    if (f.size() != header.size()) {
      skip(fmt::format("{} fields where the header has {}",
                       f.size() < header.size() ? "fewer" : "more", header.size()));
      continue;
    }
    std::optional<size_t> activation;
    if (activation_col >= 0 && data.family != PaperFamily::kTransformer) {
      const std::string name(Trim(f[activation_col]));
      if (IsMissing(name)) {
        skip("no activation function (the published loader drops these rows)");
        continue;
      }
      activation = ActivationIndex(data.family, name);
      if (!activation) {
        skip(fmt::format("activation function '{}' is not in the published encoding", name));
        continue;
      }
    }
    if (architecture_col >= 0) {
      const std::string_view arch = Trim(f[architecture_col]);
      if (arch == "residual" || arch == "dense") {
        skip("residual and dense CNNs (left out by the published loader)");
        continue;
      }
    }
    auto number = [&](int col) -> std::optional<double> {
      auto v = ParseDouble(Trim(f[col]));
      if (!v.ok() || !std::isfinite(*v)) return std::nullopt;
      return *v;
    };
    PaperRow row;
    row.line = records[r].line;
    bool bad = false;
    const auto batch = number(batch_col);
    for (const auto& s : sources) {
      if (s == "activation") continue;
      const bool times_batch = s[0] == '*';
      const int col = column(times_batch ? s.substr(1) : s);
      const auto v = number(col);
      if (!v || !batch) {
        skip(fmt::format("column '{}' is not a number", v ? "Batch Size" : header[col]));
        bad = true;
        break;
      }
      row.features.push_back(times_batch ? *v * *batch : *v);
    }
    if (bad) continue;
    if (activation) {
      const auto [sin, cos] = ActivationEncoding(data.family, *activation);
      row.features.push_back(sin);
      row.features.push_back(cos);
    }
    if (layers_col >= 0) row.layers = ParseLayerList(data.family, f[layers_col]);
    if (status_col >= 0 && data.family != PaperFamily::kMlp && Trim(f[status_col]) == "OOM_CRASH") {
      row.memory_mib = kOomMiB;
    } else if (const auto m = number(memory_col)) {
      row.memory_mib = *m;
    } else {
      skip("column 'Max GPU Memory (MiB)' is not a number");
      continue;
    }
    row.label = buckets.ClassOf(row.memory_mib);
    if (row.label < 0) {
      skip(fmt::format("peak memory outside the published buckets ({} to {} MiB)",
                       buckets.edges_mib.front(), buckets.edges_mib.back()));
      continue;
    }
    data.rows.push_back(std::move(row));
  }
  if (data.rows.empty()) {
    std::vector<std::string> reasons;
    for (const auto& [reason, count] : data.skipped) {
      reasons.push_back(fmt::format("{} x {}", count, reason));
    }
    return InvalidArgument(fmt::format("{}: no usable row in {} data row(s){}{}", origin,
                                       data.data_rows, reasons.empty() ? "" : ": ",
                                       Join(reasons, "; ")));
  }
  return data;
}

Result<PaperDataset> LoadPaperCsv(const std::string& path) {
  if (EndsWith(path, ".gz")) {
    return InvalidArgument(fmt::format("{}: decompress it first (gzip -d)", path));
  }
  auto text = ReadTextFile(path, "GPUMemNet CSV");
  if (!text.ok()) return text.status();
  return ParsePaperCsv(*text, path);
}

// ------------------------------------------------------------------------------------------------
// The split.

namespace {

// MT19937 as numpy's legacy RandomState runs it.
class Mt19937 {
 public:
  explicit Mt19937(uint32_t seed) {
    state_[0] = seed;
    for (int i = 1; i < 624; ++i) {
      state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
    }
  }
  uint32_t Next() {
    if (pos_ >= 624) Twist();
    uint32_t y = state_[pos_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }

 private:
  void Twist() {
    for (int i = 0; i < 624; ++i) {
      const uint32_t y = (state_[i] & 0x80000000u) | (state_[(i + 1) % 624] & 0x7fffffffu);
      state_[i] = state_[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    pos_ = 0;
  }
  uint32_t state_[624];
  int pos_ = 624;
};

}  // namespace

std::vector<size_t> NumpyLegacyPermutation(size_t n, uint32_t seed) {
  std::vector<size_t> out(n);
  std::iota(out.begin(), out.end(), 0);
  Mt19937 mt(seed);
  for (size_t i = n; i-- > 1;) {
    // random_interval(i): masked rejection sampling (the rows never exceed 32 bits here).
    uint64_t mask = i;
    for (int shift = 1; shift <= 32; shift <<= 1) mask |= mask >> shift;
    uint64_t j;
    do {
      j = mt.Next() & mask;
    } while (j > i);
    std::swap(out[i], out[j]);
  }
  return out;
}

PaperSplit PublishedSplit(size_t rows, uint32_t seed) {
  // sklearn: n_test = ceil(test_size * n), the rest trains; the permutation's head is the test
  // part.
  auto split = [&](const std::vector<size_t>& items, double test_size) {
    const size_t n = items.size();
    const auto n_test = static_cast<size_t>(std::ceil(test_size * static_cast<double>(n)));
    const auto perm = NumpyLegacyPermutation(n, seed);
    std::pair<std::vector<size_t>, std::vector<size_t>> parts;  // (train part, test part)
    for (size_t i = n_test; i < n; ++i) parts.first.push_back(items[perm[i]]);
    for (size_t i = 0; i < n_test && i < n; ++i) parts.second.push_back(items[perm[i]]);
    return parts;
  };
  std::vector<size_t> all(rows);
  std::iota(all.begin(), all.end(), 0);
  PaperSplit s;
  auto [train, rest] = split(all, 0.3);
  auto [test, validation] = split(rest, 0.66);
  s.train = std::move(train);
  s.test = std::move(test);
  s.validation = std::move(validation);
  return s;
}

// ------------------------------------------------------------------------------------------------
// The ensemble.

const std::vector<int>& PaperMemberDepths(PaperFamily family) {
  // Ensemble/train.py: model_list of EnsembleModel per family.
  static const std::vector<int> thirteen = {1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6};
  static const std::vector<int> sixteen = {1, 2, 3, 4, 5, 6, 7, 8, 4, 5, 6, 7, 8, 4, 5, 6};
  return family == PaperFamily::kCnn ? sixteen : thirteen;
}

namespace {

constexpr double kBatchNormEps = 1e-5;
constexpr double kBatchNormMomentum = 0.1;

// RandomMLP: hidden widths 8 * 0.5^i, never below 4.
int HiddenWidth(int i) {
  return std::max(4, static_cast<int>(8 * std::pow(0.5, i)));
}

void AddLogits(const PaperMember& m, const std::vector<double>& x, std::vector<double>& sum) {
  std::vector<double> a = x, z;
  for (const auto& h : m.hidden) {
    z.assign(h.linear.out, 0);
    for (int o = 0; o < h.linear.out; ++o) {
      double s = h.linear.bias[o];
      const double* w = &h.linear.weight[static_cast<size_t>(o) * h.linear.in];
      for (int i = 0; i < h.linear.in; ++i) s += w[i] * a[i];
      const double y =
          (s - h.running_mean[o]) / std::sqrt(h.running_var[o] + kBatchNormEps) * h.gamma[o] +
          h.beta[o];
      z[o] = std::max(0.0, y);
    }
    std::swap(a, z);
  }
  for (int o = 0; o < m.output.out; ++o) {
    double s = m.output.bias[o];
    const double* w = &m.output.weight[static_cast<size_t>(o) * m.output.in];
    for (int i = 0; i < m.output.in; ++i) s += w[i] * a[i];
    sum[o] += s;
  }
}

std::vector<double> MeanLogits(const PaperEnsemble& e, const std::vector<double>& features) {
  std::vector<double> sum(e.classes, 0.0);
  for (const auto& m : e.members) AddLogits(m, features, sum);
  for (double& v : sum) v /= static_cast<double>(e.members.size());
  return sum;
}

// Cross-entropy of softmax(logits) at `label`.
double CrossEntropy(const std::vector<double>& logits, int label) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (double v : logits) total += std::exp(v - top);
  return std::log(total) + top - logits[label];
}

// One parameter tensor with its gradient and Adam moments.
struct Param {
  std::vector<double>* value;
  std::vector<double> grad, m, v;
};

// A batch-major matrix.
using Matrix = std::vector<std::vector<double>>;

struct HiddenCache {
  Matrix input, normalized, pre_relu;
  std::vector<double> inv_std;
};

class EnsembleTrainer {
 public:
  EnsembleTrainer(PaperEnsemble& e, int features, Rng& rng) : e_(e) {
    auto xavier = [&](PaperLinear& l, int in, int out) {
      l.in = in;
      l.out = out;
      const double a = std::sqrt(6.0 / (in + out));
      l.weight.resize(static_cast<size_t>(in) * out);
      for (double& w : l.weight) w = rng.Uniform(-a, a);
      l.bias.assign(out, 0.0);
    };
    for (int depth : PaperMemberDepths(e.family)) {
      PaperMember m;
      int in = features;
      for (int i = 0; i < depth; ++i) {
        PaperHidden h;
        const int width = HiddenWidth(i);
        xavier(h.linear, in, width);
        h.gamma.assign(width, 1.0);
        h.beta.assign(width, 0.0);
        h.running_mean.assign(width, 0.0);
        h.running_var.assign(width, 1.0);
        m.hidden.push_back(std::move(h));
        in = width;
      }
      xavier(m.output, in, e.classes);
      e.members.push_back(std::move(m));
    }
    // Parameters are registered after every member exists: their vectors no longer move.
    for (auto& m : e.members) {
      for (auto& h : m.hidden) {
        for (auto* v : {&h.linear.weight, &h.linear.bias, &h.gamma, &h.beta}) Register(v);
      }
      Register(&m.output.weight);
      Register(&m.output.bias);
    }
  }

  // One optimiser step on a batch; returns nothing, the loss is measured on validation.
  void Step(const Matrix& x, const std::vector<int>& y, double learning_rate) {
    const size_t batch = x.size();
    const size_t members = e_.members.size();
    std::vector<Matrix> member_logits(members);
    std::vector<std::vector<HiddenCache>> caches(members);
    std::vector<Matrix> last_input(members);
    for (size_t k = 0; k < members; ++k) {
      member_logits[k] = ForwardTrain(e_.members[k], x, caches[k], last_input[k]);
    }
    // d(mean CE)/d(member logits) = (softmax(mean logits) - onehot) / batch / members.
    Matrix d_logits(batch, std::vector<double>(e_.classes));
    for (size_t b = 0; b < batch; ++b) {
      std::vector<double> mean(e_.classes, 0.0);
      for (size_t k = 0; k < members; ++k) {
        for (int c = 0; c < e_.classes; ++c) mean[c] += member_logits[k][b][c] / members;
      }
      const double top = *std::max_element(mean.begin(), mean.end());
      double total = 0;
      for (double& v : mean) total += v = std::exp(v - top);
      for (int c = 0; c < e_.classes; ++c) {
        d_logits[b][c] = (mean[c] / total - (c == y[b] ? 1.0 : 0.0)) / batch / members;
      }
    }
    size_t p = 0;
    for (size_t k = 0; k < members; ++k) {
      Backward(e_.members[k], caches[k], last_input[k], d_logits, p);
    }
    ++t_;
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const double c1 = 1 - std::pow(b1, t_), c2 = 1 - std::pow(b2, t_);
    for (auto& param : params_) {
      auto& value = *param.value;
      for (size_t i = 0; i < value.size(); ++i) {
        const double g = param.grad[i];
        param.m[i] = b1 * param.m[i] + (1 - b1) * g;
        param.v[i] = b2 * param.v[i] + (1 - b2) * g * g;
        value[i] -= learning_rate * (param.m[i] / c1) / (std::sqrt(param.v[i] / c2) + eps);
        param.grad[i] = 0;
      }
    }
  }

 private:
  void Register(std::vector<double>* v) {
    params_.push_back(Param{v, std::vector<double>(v->size(), 0.0),
                            std::vector<double>(v->size(), 0.0),
                            std::vector<double>(v->size(), 0.0)});
  }

  static Matrix Affine(const PaperLinear& l, const Matrix& x) {
    Matrix z(x.size(), std::vector<double>(l.out));
    for (size_t b = 0; b < x.size(); ++b) {
      for (int o = 0; o < l.out; ++o) {
        double s = l.bias[o];
        const double* w = &l.weight[static_cast<size_t>(o) * l.in];
        for (int i = 0; i < l.in; ++i) s += w[i] * x[b][i];
        z[b][o] = s;
      }
    }
    return z;
  }

  // Training mode: batch statistics normalise, running statistics follow them.
  static Matrix ForwardTrain(PaperMember& m, const Matrix& x, std::vector<HiddenCache>& caches,
                             Matrix& last_input) {
    Matrix a = x;
    const double n = static_cast<double>(x.size());
    for (auto& h : m.hidden) {
      HiddenCache cache;
      cache.input = a;
      Matrix z = Affine(h.linear, a);
      const int width = h.linear.out;
      cache.inv_std.resize(width);
      cache.normalized = z;
      cache.pre_relu = z;
      for (int o = 0; o < width; ++o) {
        double mean = 0, var = 0;
        for (const auto& row : z) mean += row[o];
        mean /= n;
        for (const auto& row : z) var += (row[o] - mean) * (row[o] - mean);
        var /= n;
        const double inv = 1.0 / std::sqrt(var + kBatchNormEps);
        cache.inv_std[o] = inv;
        h.running_mean[o] =
            (1 - kBatchNormMomentum) * h.running_mean[o] + kBatchNormMomentum * mean;
        h.running_var[o] = (1 - kBatchNormMomentum) * h.running_var[o] +
                           kBatchNormMomentum * var * n / std::max(1.0, n - 1);
        for (size_t b = 0; b < z.size(); ++b) {
          const double xhat = (z[b][o] - mean) * inv;
          cache.normalized[b][o] = xhat;
          cache.pre_relu[b][o] = h.gamma[o] * xhat + h.beta[o];
          z[b][o] = std::max(0.0, cache.pre_relu[b][o]);
        }
      }
      caches.push_back(std::move(cache));
      a = std::move(z);
    }
    last_input = a;
    return Affine(m.output, a);
  }

  // Accumulates the member's gradients into params_ starting at index p (registration order).
  void Backward(const PaperMember& m, const std::vector<HiddenCache>& caches,
                const Matrix& last_input, const Matrix& d_out, size_t& p) {
    const size_t batch = d_out.size();
    // Parameter slots of this member, in registration order.
    const size_t first = p;
    const size_t output_w = first + 4 * m.hidden.size(), output_b = output_w + 1;
    p = output_b + 1;
    Matrix d =
        LinearBackward(m.output, last_input, d_out, params_[output_w].grad, params_[output_b].grad);
    for (size_t l = m.hidden.size(); l-- > 0;) {
      const auto& h = m.hidden[l];
      const auto& cache = caches[l];
      const int width = h.linear.out;
      auto& d_gamma = params_[first + 4 * l + 2].grad;
      auto& d_beta = params_[first + 4 * l + 3].grad;
      Matrix dz(batch, std::vector<double>(width));
      for (int o = 0; o < width; ++o) {
        double sum_dxhat = 0, sum_dxhat_xhat = 0;
        std::vector<double> dxhat(batch);
        for (size_t b = 0; b < batch; ++b) {
          const double dy = cache.pre_relu[b][o] > 0 ? d[b][o] : 0.0;
          d_gamma[o] += dy * cache.normalized[b][o];
          d_beta[o] += dy;
          dxhat[b] = dy * h.gamma[o];
          sum_dxhat += dxhat[b];
          sum_dxhat_xhat += dxhat[b] * cache.normalized[b][o];
        }
        const double n = static_cast<double>(batch);
        for (size_t b = 0; b < batch; ++b) {
          dz[b][o] = cache.inv_std[o] / n *
                     (n * dxhat[b] - sum_dxhat - cache.normalized[b][o] * sum_dxhat_xhat);
        }
      }
      d = LinearBackward(h.linear, cache.input, dz, params_[first + 4 * l].grad,
                         params_[first + 4 * l + 1].grad);
    }
  }

  static Matrix LinearBackward(const PaperLinear& l, const Matrix& input, const Matrix& d_out,
                               std::vector<double>& d_weight, std::vector<double>& d_bias) {
    Matrix d_in(input.size(), std::vector<double>(l.in, 0.0));
    for (size_t b = 0; b < input.size(); ++b) {
      for (int o = 0; o < l.out; ++o) {
        const double g = d_out[b][o];
        if (g == 0) continue;
        d_bias[o] += g;
        double* dw = &d_weight[static_cast<size_t>(o) * l.in];
        const double* w = &l.weight[static_cast<size_t>(o) * l.in];
        for (int i = 0; i < l.in; ++i) {
          dw[i] += g * input[b][i];
          d_in[b][i] += g * w[i];
        }
      }
    }
    return d_in;
  }

  PaperEnsemble& e_;
  std::vector<Param> params_;
  int64_t t_ = 0;
};

}  // namespace

namespace {

std::vector<double> Apply(const PaperLinear& l, const std::vector<double>& x) {
  std::vector<double> y(l.out);
  for (int o = 0; o < l.out; ++o) {
    double s = l.bias[o];
    const double* w = &l.weight[static_cast<size_t>(o) * l.in];
    for (int i = 0; i < l.in; ++i) s += w[i] * x[i];
    y[o] = s;
  }
  return y;
}

void LayerNormInPlace(const PaperNorm& n, std::vector<double>& x) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  const double scale = 1 / std::sqrt(var + kBatchNormEps);  // nn.LayerNorm's default eps too
  for (size_t i = 0; i < x.size(); ++i) x[i] = (x[i] - mean) * scale * n.gamma[i] + n.beta[i];
}

// Linear, then BatchNorm1d whose channels are the positions (row `p` is channel `p`), then ReLU.
std::vector<double> EmbedRow(const PaperLinear& l, const PaperNorm& n, size_t p,
                             const std::vector<double>& x) {
  auto y = Apply(l, x);
  const double scale = n.gamma[p] / std::sqrt(n.running_var[p] + kBatchNormEps);
  for (double& v : y) v = std::max(0.0, (v - n.running_mean[p]) * scale + n.beta[p]);
  return y;
}

std::vector<double> SequenceLogits(const PaperSequenceMember& m, const PaperInput& input,
                                   int classes) {
  const std::vector<double> padding(m.embed1.in, 0.0);
  std::vector<double> pooled(m.width, 0.0);
  for (int p = 0; p < m.positions; ++p) {
    const auto& row = static_cast<size_t>(p) < input.layers.size() ? input.layers[p] : padding;
    auto x = EmbedRow(m.embed2, m.embed_norm2, p, EmbedRow(m.embed1, m.embed_norm1, p, row));
    for (int i = 0; i < m.width; ++i) x[i] += m.positional[static_cast<size_t>(p) * m.width + i];
    for (const auto& layer : m.layers) {
      // Attention over a sequence of one: softmax is 1, the output is the value's projection.
      PaperLinear value;
      value.in = layer.in_proj.in;
      value.out = m.width;
      value.weight.assign(layer.in_proj.weight.begin() + 2 * m.width * value.in,
                          layer.in_proj.weight.end());
      value.bias.assign(layer.in_proj.bias.begin() + 2 * m.width, layer.in_proj.bias.end());
      const auto attended = Apply(layer.out_proj, Apply(value, x));
      for (int i = 0; i < m.width; ++i) x[i] += attended[i];
      LayerNormInPlace(layer.norm1, x);
      auto hidden = Apply(layer.linear1, x);
      for (double& v : hidden) v = std::max(0.0, v);
      const auto fed = Apply(layer.linear2, hidden);
      for (int i = 0; i < m.width; ++i) x[i] += fed[i];
      LayerNormInPlace(layer.norm2, x);
    }
    for (int i = 0; i < m.width; ++i) pooled[i] += x[i];
  }
  pooled.insert(pooled.end(), input.columns.begin(), input.columns.end());
  std::vector<double> sum(classes, 0.0);
  for (const auto& h : m.head) AddLogits(h, pooled, sum);
  for (double& v : sum) v /= static_cast<double>(m.head.size());
  return sum;
}

int ArgMax(const std::vector<double>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

int PaperEnsemble::Classify(const std::vector<double>& features) const {
  return ArgMax(MeanLogits(*this, features));
}

int PaperEnsemble::Classify(const PaperInput& input) const {
  if (sequence_members.empty()) return Classify(input.columns);
  std::vector<double> sum(classes, 0.0);
  for (const auto& m : sequence_members) {
    const auto logits = SequenceLogits(m, input, classes);
    for (int c = 0; c < classes; ++c) sum[c] += logits[c];
  }
  return ArgMax(sum);
}

double PaperAccuracy(const PaperEnsemble& ensemble, const PaperDataset& data,
                     const std::vector<size_t>& rows) {
  if (rows.empty()) return 0;
  int right = 0;
  for (size_t i : rows) {
    right += ensemble.Classify(PaperInputOfRow(data.rows[i], data.family, ensemble.recipe)) ==
             data.rows[i].label;
  }
  return static_cast<double>(right) / static_cast<double>(rows.size());
}

std::vector<size_t> PaperReadableRows(const PaperEnsemble& ensemble, const PaperDataset& data,
                                      const std::vector<size_t>& rows) {
  std::vector<size_t> out;
  for (size_t i : rows) {
    if (ensemble.recipe != PaperRecipe::kSequence || !data.rows[i].layers.empty()) out.push_back(i);
  }
  return out;
}

PaperEnsemble TrainPaperEnsemble(const PaperDataset& data, const PaperSplit& split,
                                 const PaperTraining& options) {
  PaperEnsemble e;
  e.family = data.family;
  e.classes = PaperBucketsFor(data.family).Classes();
  e.seed = options.seed;
  e.train_rows = static_cast<int>(split.train.size());
  e.validation_rows = static_cast<int>(split.validation.size());
  e.test_rows = static_cast<int>(split.test.size());
  Rng rng(options.seed);
  const int features = static_cast<int>(PaperFeatureNames(data.family).size());
  EnsembleTrainer trainer(e, features, rng);
  auto validation_loss = [&]() {
    double total = 0;
    for (size_t i : split.validation) {
      total += CrossEntropy(MeanLogits(e, data.rows[i].features), data.rows[i].label);
    }
    return split.validation.empty() ? 0.0 : total / static_cast<double>(split.validation.size());
  };
  std::vector<size_t> order = split.train;
  PaperEnsemble best = e;
  double best_loss = std::numeric_limits<double>::infinity();
  int since_best = 0;
  const size_t batch = static_cast<size_t>(std::max(2, options.batch));
  for (int epoch = 1; epoch <= options.max_epochs; ++epoch) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
    for (size_t start = 0; start < order.size(); start += batch) {
      const size_t end = std::min(order.size(), start + batch);
      // Batch normalisation needs two rows to have statistics.
      if (end - start < 2) continue;
      Matrix x;
      std::vector<int> y;
      for (size_t k = start; k < end; ++k) {
        x.push_back(data.rows[order[k]].features);
        y.push_back(data.rows[order[k]].label);
      }
      trainer.Step(x, y, options.learning_rate);
    }
    e.epochs = epoch;
    const double loss = validation_loss();
    if (loss < best_loss) {
      best_loss = loss;
      best = e;
      best.best_epoch = epoch;
      since_best = 0;
    } else if (++since_best >= options.patience) {
      break;
    }
  }
  best.epochs = e.epochs;
  best.test_accuracy = PaperAccuracy(best, data, split.test);
  return best;
}

// ------------------------------------------------------------------------------------------------
// Weights file.

const PaperEnsemble* GpuMemNetPaperModel::Find(PaperFamily family) const {
  for (const auto& e : ensembles_) {
    if (e.family == family) return &e;
  }
  return nullptr;
}

const PaperEnsemble* GpuMemNetPaperModel::Find(PaperFamily family, std::string_view name) const {
  for (const auto& e : ensembles_) {
    if (e.family == family && e.name == name) return &e;
  }
  return nullptr;
}

void GpuMemNetPaperModel::Set(PaperEnsemble ensemble) {
  for (auto& e : ensembles_) {
    if (e.family == ensemble.family && e.name == ensemble.name) {
      e = std::move(ensemble);
      return;
    }
  }
  ensembles_.push_back(std::move(ensemble));
}

namespace {

// Sizes in weights files are bounded: GPUMemNet's networks are tiny, and a file must not make
// colo allocate without limit.
constexpr int kMaxWidth = 1 << 12;
constexpr int kMaxPositions = 1 << 14;

nlohmann::json LinearJson(const PaperLinear& l) {
  return {{"in", l.in}, {"out", l.out}, {"w", l.weight}, {"b", l.bias}};
}

// `in` < 0: any input width.
Result<PaperLinear> LinearFromJson(const nlohmann::json& j, int in, const std::string& origin) {
  PaperLinear l;
  l.in = j.at("in").get<int>();
  l.out = j.at("out").get<int>();
  if ((in >= 0 && l.in != in) || l.in <= 0 || l.in > kMaxWidth || l.out <= 0 || l.out > kMaxWidth) {
    return InvalidArgument(fmt::format("{}: malformed layer", origin));
  }
  l.weight = j.at("w").get<std::vector<double>>();
  l.bias = j.at("b").get<std::vector<double>>();
  if (l.weight.size() != static_cast<size_t>(l.in) * l.out ||
      l.bias.size() != static_cast<size_t>(l.out)) {
    return InvalidArgument(fmt::format("{}: malformed layer", origin));
  }
  return l;
}

nlohmann::json NormJson(const PaperNorm& n) {
  nlohmann::json j{{"gamma", n.gamma}, {"beta", n.beta}};
  if (!n.running_mean.empty()) j["mean"] = n.running_mean, j["var"] = n.running_var;
  return j;
}

// A layer norm (`batch` false) or a batch norm with its running statistics, of `width` channels.
Result<PaperNorm> NormFromJson(const nlohmann::json& j, size_t width, bool batch,
                               const std::string& origin) {
  PaperNorm n;
  n.gamma = j.at("gamma").get<std::vector<double>>();
  n.beta = j.at("beta").get<std::vector<double>>();
  if (batch) {
    n.running_mean = j.at("mean").get<std::vector<double>>();
    n.running_var = j.at("var").get<std::vector<double>>();
  }
  if (n.gamma.size() != width || n.beta.size() != width ||
      (batch && (n.running_mean.size() != width || n.running_var.size() != width ||
                 std::any_of(n.running_var.begin(), n.running_var.end(),
                             [](double v) { return !(v >= 0); })))) {
    return InvalidArgument(fmt::format("{}: malformed {} norm", origin, batch ? "batch" : "layer"));
  }
  return n;
}

nlohmann::json MemberJson(const PaperMember& m) {
  nlohmann::json hidden = nlohmann::json::array();
  for (const auto& h : m.hidden) {
    hidden.push_back({{"linear", LinearJson(h.linear)},
                      {"gamma", h.gamma},
                      {"beta", h.beta},
                      {"mean", h.running_mean},
                      {"var", h.running_var}});
  }
  return {{"hidden", hidden}, {"output", LinearJson(m.output)}};
}

Result<PaperMember> MemberFromJson(const nlohmann::json& j, int in, int classes,
                                   const std::string& origin) {
  PaperMember m;
  for (const auto& hj : j.at("hidden")) {
    PaperHidden h;
    auto linear = LinearFromJson(hj.at("linear"), in, origin);
    if (!linear.ok()) return linear.status();
    h.linear = std::move(*linear);
    auto norm = NormFromJson(hj, static_cast<size_t>(h.linear.out), true, origin);
    if (!norm.ok()) return norm.status();
    h.gamma = std::move(norm->gamma);
    h.beta = std::move(norm->beta);
    h.running_mean = std::move(norm->running_mean);
    h.running_var = std::move(norm->running_var);
    in = h.linear.out;
    m.hidden.push_back(std::move(h));
  }
  auto output = LinearFromJson(j.at("output"), in, origin);
  if (!output.ok()) return output.status();
  if (output->out != classes) {
    return InvalidArgument(fmt::format("{}: member output is not {} classes", origin, classes));
  }
  m.output = std::move(*output);
  return m;
}

nlohmann::json SequenceMemberJson(const PaperSequenceMember& m) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : m.layers) {
    layers.push_back({{"in_proj", LinearJson(l.in_proj)},
                      {"out_proj", LinearJson(l.out_proj)},
                      {"linear1", LinearJson(l.linear1)},
                      {"linear2", LinearJson(l.linear2)},
                      {"norm1", NormJson(l.norm1)},
                      {"norm2", NormJson(l.norm2)}});
  }
  nlohmann::json head = nlohmann::json::array();
  for (const auto& h : m.head) head.push_back(MemberJson(h));
  return {{"positions", m.positions},
          {"d_model", m.width},
          {"positional", m.positional},
          {"embedding",
           {LinearJson(m.embed1), NormJson(m.embed_norm1), LinearJson(m.embed2),
            NormJson(m.embed_norm2)}},
          {"layers", layers},
          {"head", head}};
}

// Width of a layer row of each family's sequence: the kind one-hot, activations, parameters.
int SequenceRowWidth(PaperFamily family) {
  return family == PaperFamily::kTransformer ? 6 : 4;
}

Result<PaperSequenceMember> SequenceMemberFromJson(const nlohmann::json& j, PaperFamily family,
                                                   int columns, int classes,
                                                   const std::string& origin) {
  PaperSequenceMember m;
  m.positions = j.at("positions").get<int>();
  m.width = j.at("d_model").get<int>();
  if (m.positions <= 0 || m.positions > kMaxPositions || m.width <= 0 || m.width > kMaxWidth) {
    return InvalidArgument(fmt::format("{}: malformed sequence classifier", origin));
  }
  const auto& embedding = j.at("embedding");
  if (!embedding.is_array() || embedding.size() != 4) {
    return InvalidArgument(fmt::format("{}: the embedding needs 4 layers", origin));
  }
  const auto positions = static_cast<size_t>(m.positions);
  auto e1 = LinearFromJson(embedding[0], SequenceRowWidth(family), origin);
  if (!e1.ok()) return e1.status();
  auto n1 = NormFromJson(embedding[1], positions, true, origin);
  if (!n1.ok()) return n1.status();
  auto e2 = LinearFromJson(embedding[2], m.width, origin);
  if (!e2.ok()) return e2.status();
  auto n2 = NormFromJson(embedding[3], positions, true, origin);
  if (!n2.ok()) return n2.status();
  if (e1->out != m.width || e2->out != m.width) {
    return InvalidArgument(fmt::format("{}: embedding not of width {}", origin, m.width));
  }
  m.embed1 = std::move(*e1), m.embed_norm1 = std::move(*n1);
  m.embed2 = std::move(*e2), m.embed_norm2 = std::move(*n2);
  m.positional = j.at("positional").get<std::vector<double>>();
  if (m.positional.size() != positions * m.width) {
    return InvalidArgument(
        fmt::format("{}: positional encoding is not {} x {}", origin, m.positions, m.width));
  }
  for (const auto& lj : j.at("layers")) {
    PaperEncoderLayer l;
    auto in_proj = LinearFromJson(lj.at("in_proj"), m.width, origin);
    auto out_proj = LinearFromJson(lj.at("out_proj"), m.width, origin);
    auto linear1 = LinearFromJson(lj.at("linear1"), m.width, origin);
    if (!in_proj.ok() || !out_proj.ok() || !linear1.ok() || in_proj->out != 3 * m.width ||
        out_proj->out != m.width) {
      return InvalidArgument(fmt::format("{}: malformed encoder layer", origin));
    }
    auto linear2 = LinearFromJson(lj.at("linear2"), linear1->out, origin);
    if (!linear2.ok() || linear2->out != m.width) {
      return InvalidArgument(fmt::format("{}: malformed encoder layer", origin));
    }
    auto norm1 = NormFromJson(lj.at("norm1"), m.width, false, origin);
    if (!norm1.ok()) return norm1.status();
    auto norm2 = NormFromJson(lj.at("norm2"), m.width, false, origin);
    if (!norm2.ok()) return norm2.status();
    l.in_proj = std::move(*in_proj), l.out_proj = std::move(*out_proj);
    l.linear1 = std::move(*linear1), l.linear2 = std::move(*linear2);
    l.norm1 = std::move(*norm1), l.norm2 = std::move(*norm2);
    m.layers.push_back(std::move(l));
  }
  for (const auto& hj : j.at("head")) {
    auto member = MemberFromJson(hj, m.width + columns, classes, origin);
    if (!member.ok()) return member.status();
    m.head.push_back(std::move(*member));
  }
  if (m.head.empty())
    return InvalidArgument(fmt::format("{}: a classifier without a head", origin));
  return m;
}

}  // namespace

std::string GpuMemNetPaperModel::ToJson() const {
  nlohmann::json doc;
  doc["format"] = "colo-gpumemnet-paper";
  doc["version"] = 1;
  doc["provenance"] = provenance;
  auto& list = doc["ensembles"] = nlohmann::json::array();
  for (const auto& e : ensembles_) {
    nlohmann::json j;
    j["family"] = PaperFamilyName(e.family);
    j["name"] = e.name;
    j["inputs"] = PaperRecipeName(e.family, e.recipe);
    j["features"] = PaperColumnNames(e.family, e.recipe);
    j["classes"] = e.classes;
    if (!e.source.empty()) j["source"] = e.source;
    j["seed"] = e.seed;
    j["epochs"] = e.epochs;
    j["best_epoch"] = e.best_epoch;
    j["train_rows"] = e.train_rows;
    j["validation_rows"] = e.validation_rows;
    j["test_rows"] = e.test_rows;
    j["test_accuracy"] = e.test_accuracy;
    auto& members = j["members"] = nlohmann::json::array();
    for (const auto& m : e.members) members.push_back(MemberJson(m));
    if (!e.sequence_members.empty()) {
      auto& sequence = j["sequence_members"] = nlohmann::json::array();
      for (const auto& m : e.sequence_members) sequence.push_back(SequenceMemberJson(m));
    }
    list.push_back(std::move(j));
  }
  return doc.dump() + "\n";
}

Result<GpuMemNetPaperModel> GpuMemNetPaperModel::FromJson(const std::string& text,
                                                          const std::string& origin) {
  GpuMemNetPaperModel model;
  try {
    const auto doc = nlohmann::json::parse(text);
    if (!doc.is_object() || doc.value("format", "") != "colo-gpumemnet-paper" ||
        doc.value("version", 0) != 1) {
      return InvalidArgument(fmt::format("{}: not a colo-gpumemnet-paper version 1 file", origin));
    }
    model.provenance = doc.value("provenance", "");
    for (const auto& j : doc.at("ensembles")) {
      const auto family = PaperFamilyFromName(j.at("family").get<std::string>());
      if (!family) return InvalidArgument(fmt::format("{}: unknown family", origin));
      PaperEnsemble e;
      e.family = *family;
      e.name = j.value("name", e.name);
      if (e.name.empty() || e.name.size() > 200) {
        return InvalidArgument(fmt::format("{}: a classifier needs a name", origin));
      }
      if (auto inputs = j.find("inputs"); inputs != j.end()) {
        const auto recipe = PaperRecipeFromName(inputs->get<std::string>());
        if (!recipe || recipe->first != *family) {
          return InvalidArgument(
              fmt::format("{}: {}: inputs '{}' are not one of GPUMemNet's for {}", origin, e.name,
                          inputs->get<std::string>(), PaperFamilyName(*family)));
        }
        e.recipe = recipe->second;
      }
      const auto columns = PaperColumnNames(*family, e.recipe);
      if (auto features = j.find("features");
          features != j.end() && features->get<std::vector<std::string>>() != columns) {
        return InvalidArgument(fmt::format("{}: {} classifier on other features than the published",
                                           origin, PaperFamilyName(*family)));
      }
      e.classes = j.at("classes").get<int>();
      if (e.classes != PaperBucketsFor(*family).Classes()) {
        return InvalidArgument(
            fmt::format("{}: {} classifier with {} classes, the published has {}", origin,
                        PaperFamilyName(*family), e.classes, PaperBucketsFor(*family).Classes()));
      }
      e.source = j.value("source", "");
      e.seed = j.value("seed", uint64_t{0});
      e.epochs = j.value("epochs", 0);
      e.best_epoch = j.value("best_epoch", 0);
      e.train_rows = j.value("train_rows", 0);
      e.validation_rows = j.value("validation_rows", 0);
      e.test_rows = j.value("test_rows", 0);
      e.test_accuracy = j.value("test_accuracy", 0.0);
      const int width = static_cast<int>(columns.size());
      const std::string where = fmt::format("{}: {}", origin, e.name);
      if (e.recipe == PaperRecipe::kSequence) {
        for (const auto& mj : j.at("sequence_members")) {
          auto m = SequenceMemberFromJson(mj, *family, width, e.classes, where);
          if (!m.ok()) return m.status();
          e.sequence_members.push_back(std::move(*m));
        }
      } else {
        for (const auto& mj : j.at("members")) {
          auto m = MemberFromJson(mj, width, e.classes, where);
          if (!m.ok()) return m.status();
          e.members.push_back(std::move(*m));
        }
      }
      if (e.members.empty() && e.sequence_members.empty()) {
        return InvalidArgument(
            fmt::format("{}: {} ensemble without members", origin, PaperFamilyName(*family)));
      }
      if (model.Find(e.family, e.name) != nullptr) {
        return InvalidArgument(fmt::format("{}: two {} classifiers named {}", origin,
                                           PaperFamilyName(e.family), e.name));
      }
      model.ensembles_.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(fmt::format("{}: malformed GPUMemNet weights ({})", origin, e.what()));
  }
  return model;
}

Result<GpuMemNetPaperModel> GpuMemNetPaperModel::Load(const std::string& path) {
  auto text = ReadTextFile(path, "GPUMemNet weights");
  if (!text.ok()) return text.status();
  return FromJson(*text, path);
}

}  // namespace colo

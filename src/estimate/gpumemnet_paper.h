// GPUMemNet as its authors published it (github.com/itu-rad/GPUMemNet, Ensemble/ and
// Data_Cleaner_scripts/): per model family an ensemble of small MLP classifiers, each hidden layer
// Linear -> BatchNorm1d -> ReLU, 8 then 4 units, the members' logits averaged and trained together
// on the raw (unscaled) features of that family's dataset, with its bucket edges and its
// train/validation/test split. colo's own variant (gpumemnet.h) differs in features, buckets,
// ensemble and data; this one exists to reproduce the published numbers and to compare with them.
// Beside the classifiers colo-gpumemnet-train makes from the published data, the weights file holds
// GPUMemNet's own trained estimators as published (converted from its checkpoints by
// colo-gpumemnet-import): the same MLP ensembles, the single MLPs of its test pipeline, and its
// ensembles of Transformer encoders over the sequence of a model's layers.
//
// Where each feature comes from, for the published CSVs and for colo's inputs (the layer table of
// a torchsummary file or of colo-profile's summary, per sample, batch given separately), is
// documented beside PaperFeatureNames in gpumemnet_paper.cc.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "estimate/model_summary.h"

namespace colo {

enum class PaperFamily { kMlp, kCnn, kTransformer };
inline constexpr PaperFamily kPaperFamilies[] = {PaperFamily::kMlp, PaperFamily::kCnn,
                                                 PaperFamily::kTransformer};
std::string_view PaperFamilyName(PaperFamily family);  // "mlp", "cnn", "transformer"
std::optional<PaperFamily> PaperFamilyFromName(std::string_view name);

// The published buckets in MiB (the paper's "1 GB" is 1000 MiB, its "8 GB" 8000 MiB). Class k
// holds [edges[k], edges[k+1]), or (edges[k], edges[k+1]] where right_closed (the MLP family's,
// whose first edge is 1000 MiB: nothing at or below it has a class).
struct PaperBuckets {
  std::vector<double> edges_mib;
  bool right_closed = false;
  int Classes() const { return static_cast<int>(edges_mib.size()) - 1; }
  // The class of a peak, or -1 when no bucket holds it.
  int ClassOf(double mib) const;
};
const PaperBuckets& PaperBucketsFor(PaperFamily family);

// The published feature order of each family's classifier input.
const std::vector<std::string>& PaperFeatureNames(PaperFamily family);

// The features of a model at a batch size, computed from colo's layer table the way the
// published data cleaners compute them from a training script's printed summary.
std::vector<double> PaperFeatures(const ModelSummary& summary, PaperFamily family, int batch);
// The published encoding of a model's most frequent activation (MLP and CNN families): its index
// in the family's list (nullopt for one not in it), and the sine and cosine of that index's angle.
std::optional<size_t> PaperActivationIndex(PaperFamily family, std::string_view name);
std::pair<double, double> PaperActivationEncoding(PaperFamily family, size_t index);

// How the published code turns a model into a classifier's input.
enum class PaperRecipe {
  kColumns,   // Ensemble/dataloaders/dataloaders4mlp.py: the family's columns (PaperFeatureNames)
  kSequence,  // dataloaders4transformer.py: the layer sequence, and columns beside it
  kTester,    // Test_Pipeline/Tester_trans_mlp.py (Transformers), 01-mlp4cnn.py (CNNs)
};
// The published code's name of a family's recipe ("cnn_data4mlp", "Tester_trans_mlp", ...), and
// back; nullopt for a name it does not have.
std::string PaperRecipeName(PaperFamily family, PaperRecipe recipe);
std::optional<std::pair<PaperFamily, PaperRecipe>> PaperRecipeFromName(std::string_view name);

// A classifier's input: the columns in its order (for kSequence, the integers the published
// loader casts them to), and for kSequence one row per layer: the layer's kind one-hot, its
// activations and its parameters, as the published cleaner lists them in 'Activations-Params'.
struct PaperInput {
  std::vector<double> columns;
  std::vector<std::vector<double>> layers;
};
// Nullopt where the published code has no such recipe (a Tester for MLPs).
std::optional<PaperInput> MakePaperInput(const ModelSummary& summary, PaperFamily family,
                                         PaperRecipe recipe, int batch);
// A published CSV row as a classifier of the recipe reads it (kColumns or kSequence).
PaperInput PaperInputOfRow(const struct PaperRow& row, PaperFamily family, PaperRecipe recipe);
// The names of a recipe's columns, in order.
std::vector<std::string> PaperColumnNames(PaperFamily family, PaperRecipe recipe);
// Which family's classifier answers for a summary (conv layers: cnn; attention, or embeddings
// with layer norms: transformer; else mlp), as ModelSummary::Family decides.
PaperFamily PaperFamilyOf(const ModelSummary& summary);

// One usable row of a published CSV.
struct PaperRow {
  std::vector<double> features;  // the family's columns (PaperFeatureNames)
  // 'Activations-Params' encoded as dataloaders4transformer.py encodes it (see PaperInput); empty
  // when the row's list names a layer kind that loader does not know.
  std::vector<std::vector<double>> layers;
  double memory_mib = 0;  // the label's source: measured peak, or 42000 for an OOM crash
  int label = 0;
  int line = 0;  // in the file, for messages
};

struct PaperDataset {
  PaperFamily family = PaperFamily::kMlp;
  std::string origin;
  int data_rows = 0;  // records in the file, the header not counted
  std::vector<PaperRow> rows;
  std::map<std::string, int> skipped;  // reason -> rows
  int SkippedRows() const;
};

// Reads mlp_data2.csv / cnn_data1.csv / trans_data.csv (any name: the family is told by the
// header). Rows the published loaders drop (CNN rows without an activation function, residual and
// dense CNNs) and rows that cannot be used (malformed, a peak in no bucket) are counted in
// `skipped` with the reason. A file with no usable row is an error.
Result<PaperDataset> ParsePaperCsv(const std::string& text, const std::string& origin);
Result<PaperDataset> LoadPaperCsv(const std::string& path);  // .gz read through gzip -dc

// numpy's legacy RandomState(seed).permutation(n): MT19937 seeded by init_genrand, Fisher-Yates
// from the end with masked rejection sampling. sklearn's train_test_split draws with it.
std::vector<size_t> NumpyLegacyPermutation(size_t n, uint32_t seed);

// The published split: train_test_split(test_size=0.3, random_state=42) into train and a
// remainder, then the remainder split the same way with test_size=0.66 into test (the first
// part) and validation. Indices into the dataset's rows.
struct PaperSplit {
  std::vector<size_t> train, validation, test;
};
PaperSplit PublishedSplit(size_t rows, uint32_t seed = 42);

// One member: `hidden` blocks of Linear -> BatchNorm1d (eval: running statistics) -> ReLU, then a
// Linear to the classes.
struct PaperLinear {
  int in = 0, out = 0;
  std::vector<double> weight;  // out x in, row-major
  std::vector<double> bias;
};
struct PaperHidden {
  PaperLinear linear;
  std::vector<double> gamma, beta, running_mean, running_var;
};
struct PaperMember {
  std::vector<PaperHidden> hidden;
  PaperLinear output;
};

// One of GPUMemNet's TransformerClassifiers (Ensemble/models/transformer_models.py): each layer row
// goes through Linear -> BatchNorm1d over the positions -> ReLU, twice, plus a positional encoding,
// then post-norm nn.TransformerEncoderLayers (ReLU, no dropout); the rows are summed, the columns
// appended, and an ensemble of MLP members (mean of their logits) classifies. The encoder is built
// without batch_first, so a (1, positions, width) input is a sequence of length 1 over a batch of
// positions: each row attends only to itself, and attention is its value projection through the
// output projection.
struct PaperNorm {
  std::vector<double> gamma, beta, running_mean, running_var;  // running_*: batch norms only
};
struct PaperEncoderLayer {
  PaperLinear in_proj;  // query, key and value stacked (3 x width rows)
  PaperLinear out_proj, linear1, linear2;
  PaperNorm norm1, norm2;
};
struct PaperSequenceMember {
  int positions = 0;  // rows beyond are dropped, missing ones are zeros
  int width = 0;      // d_model
  PaperLinear embed1, embed2;
  PaperNorm embed_norm1, embed_norm2;  // over the positions
  std::vector<double> positional;      // positions x width
  std::vector<PaperEncoderLayer> layers;
  std::vector<PaperMember> head;
};

struct PaperEnsemble {
  PaperFamily family = PaperFamily::kMlp;
  // "retrained" for colo-gpumemnet-train's; an imported checkpoint's name otherwise.
  std::string name = "retrained";
  PaperRecipe recipe = PaperRecipe::kColumns;
  std::string source;  // where imported weights came from (file, sha256, epoch)
  int classes = 0;
  std::vector<PaperMember> members;
  std::vector<PaperSequenceMember> sequence_members;  // GPUMemNet's Transformer-encoder ensembles
  // How it was trained and what it reached on the published test split.
  uint64_t seed = 0;
  int epochs = 0;      // run before early stopping
  int best_epoch = 0;  // the weights kept: lowest validation loss
  int train_rows = 0, validation_rows = 0, test_rows = 0;
  double test_accuracy = 0;

  // The averaged logits' argmax.
  int Classify(const std::vector<double>& features) const;
  int Classify(const PaperInput& input) const;
};

// The published ensembles: hidden-layer counts of the members (13 for MLPs and Transformers, 16
// for CNNs).
const std::vector<int>& PaperMemberDepths(PaperFamily family);

struct PaperTraining {
  int max_epochs = 600;
  int patience = 30;  // epochs without a lower validation loss before stopping
  int batch = 128;
  double learning_rate = 1e-3;
  uint64_t seed = 1;  // initial weights and batch order
};

// Trains on split.train, keeps the weights of the epoch with the lowest validation loss, and
// measures accuracy on split.test.
PaperEnsemble TrainPaperEnsemble(const PaperDataset& data, const PaperSplit& split,
                                 const PaperTraining& options);
double PaperAccuracy(const PaperEnsemble& ensemble, const PaperDataset& data,
                     const std::vector<size_t>& rows);
// The rows an ensemble of the recipe can read (kSequence: those whose layer list it knows).
std::vector<size_t> PaperReadableRows(const PaperEnsemble& ensemble, const PaperDataset& data,
                                      const std::vector<size_t>& rows);

class GpuMemNetPaperModel {
 public:
  static Result<GpuMemNetPaperModel> Load(const std::string& path);
  static Result<GpuMemNetPaperModel> FromJson(const std::string& text, const std::string& origin);
  std::string ToJson() const;

  // The family's first classifier (an imported one goes first), or the one of that name.
  const PaperEnsemble* Find(PaperFamily family) const;
  const PaperEnsemble* Find(PaperFamily family, std::string_view name) const;
  // Replaces the classifier of the same family and name, or adds it last.
  void Set(PaperEnsemble ensemble);
  const std::vector<PaperEnsemble>& ensembles() const { return ensembles_; }

  std::string provenance;

 private:
  std::vector<PaperEnsemble> ensembles_;
};

}  // namespace colo

// GPUMemNet as its authors published it (github.com/itu-rad/GPUMemNet, Ensemble/ and
// Data_Cleaner_scripts/): per model family an ensemble of small MLP classifiers, each hidden layer
// Linear -> BatchNorm1d -> ReLU, 8 then 4 units, the members' logits averaged and trained together
// on the raw (unscaled) features of that family's dataset, with its bucket edges and its
// train/validation/test split. colo's own variant (gpumemnet.h) differs in features, buckets,
// ensemble and data; this one exists to reproduce the published numbers and to compare with them.
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
// Which family's classifier answers for a summary (conv layers: cnn; attention, or embeddings
// with layer norms: transformer; else mlp), as ModelSummary::Family decides.
PaperFamily PaperFamilyOf(const ModelSummary& summary);

// One usable row of a published CSV.
struct PaperRow {
  std::vector<double> features;
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

struct PaperEnsemble {
  PaperFamily family = PaperFamily::kMlp;
  int classes = 0;
  std::vector<PaperMember> members;
  // How it was trained and what it reached on the published test split.
  uint64_t seed = 0;
  int epochs = 0;      // run before early stopping
  int best_epoch = 0;  // the weights kept: lowest validation loss
  int train_rows = 0, validation_rows = 0, test_rows = 0;
  double test_accuracy = 0;

  // The averaged logits' argmax.
  int Classify(const std::vector<double>& features) const;
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

class GpuMemNetPaperModel {
 public:
  static Result<GpuMemNetPaperModel> Load(const std::string& path);
  static Result<GpuMemNetPaperModel> FromJson(const std::string& text, const std::string& origin);
  std::string ToJson() const;

  const PaperEnsemble* Find(PaperFamily family) const;
  void Set(PaperEnsemble ensemble);

  std::string provenance;

 private:
  std::map<PaperFamily, PaperEnsemble> ensembles_;
};

}  // namespace colo

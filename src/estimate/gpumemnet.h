// GPUMemNet (thesis ch. 5): an ensemble of small MLP classifiers that maps a model's features to
// a memory bucket; the estimate handed to the scheduler is the bucket's upper edge. One ensemble
// per model family (MLP, CNN, Transformer) and bucket size. Inference is here; so is training,
// done offline by colo-gpumemnet-train on the dataset bench/estimate/gpumemnet_collect.py builds.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/rng.h"
#include "common/status.h"
#include "estimate/model_summary.h"

namespace colo {

struct DenseLayer {
  int in = 0, out = 0;
  std::vector<float> weights;  // out x in, row-major
  std::vector<float> bias;
};

// One classifier: ReLU between layers, logits out.
struct MlpClassifier {
  std::vector<DenseLayer> layers;
  // Writes the softmax of the logits into `probabilities` (size = classes).
  void Predict(const std::vector<double>& input, std::vector<double>& probabilities) const;
};

struct GpuMemNetEnsemble {
  std::string family;
  int64_t bucket_bytes = 0;
  int classes = 0;
  std::vector<double> mean, scale;  // feature standardization
  std::vector<MlpClassifier> members;
  // Measured on the held-out test split when trained.
  double test_accuracy = 0;
  int test_rows = 0;

  // The averaged class probabilities' argmax.
  int Classify(const std::vector<double>& features) const;
};

class GpuMemNetModel {
 public:
  static Result<GpuMemNetModel> Load(const std::string& path);
  static Result<GpuMemNetModel> FromJson(const std::string& text, const std::string& origin);
  std::string ToJson() const;

  // The ensemble for a family and bucket size; bucket 0 picks the family's default bucket.
  const GpuMemNetEnsemble* Find(const std::string& family, int64_t bucket_bytes = 0) const;
  void Add(GpuMemNetEnsemble ensemble, bool is_default);

  std::string provenance;

 private:
  std::vector<GpuMemNetEnsemble> ensembles_;
  std::map<std::string, int64_t> default_bucket_;
};

// Training: one labelled example per measured configuration.
struct GpuMemNetExample {
  std::vector<double> features;
  int64_t peak_bytes = 0;
};

struct GpuMemNetTraining {
  int members = 13;  // the thesis' ensemble size
  int epochs = 150;
  double learning_rate = 3e-3;
  uint64_t seed = 1;
};

// Trains on `train` (early-stopped on `validation`), reports accuracy on `test`.
GpuMemNetEnsemble TrainEnsemble(const std::string& family, int64_t bucket_bytes,
                                const std::vector<GpuMemNetExample>& train,
                                const std::vector<GpuMemNetExample>& validation,
                                const std::vector<GpuMemNetExample>& test,
                                const GpuMemNetTraining& options);

}  // namespace colo

#include "estimate/gpumemnet.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "common/strings.h"

namespace colo {

void MlpClassifier::Predict(const std::vector<double>& input,
                            std::vector<double>& probabilities) const {
  thread_local std::vector<double> a, b;
  a.assign(input.begin(), input.end());
  for (size_t l = 0; l < layers.size(); ++l) {
    const DenseLayer& layer = layers[l];
    b.assign(layer.out, 0.0);
    for (int o = 0; o < layer.out; ++o) {
      double sum = layer.bias[o];
      const float* w = &layer.weights[static_cast<size_t>(o) * layer.in];
      for (int i = 0; i < layer.in; ++i) sum += w[i] * a[i];
      b[o] = (l + 1 < layers.size()) ? std::max(0.0, sum) : sum;
    }
    std::swap(a, b);
  }
  const double top = *std::max_element(a.begin(), a.end());
  double total = 0;
  probabilities.resize(a.size());
  for (size_t i = 0; i < a.size(); ++i) total += probabilities[i] = std::exp(a[i] - top);
  for (double& p : probabilities) p /= total;
}

int GpuMemNetEnsemble::Classify(const std::vector<double>& features) const {
  std::vector<double> x(features.size());
  for (size_t i = 0; i < features.size(); ++i) x[i] = (features[i] - mean[i]) / scale[i];
  std::vector<double> sum(classes, 0.0), p;
  for (const auto& member : members) {
    member.Predict(x, p);
    for (int c = 0; c < classes; ++c) sum[c] += p[c];
  }
  return static_cast<int>(std::max_element(sum.begin(), sum.end()) - sum.begin());
}

const GpuMemNetEnsemble* GpuMemNetModel::Find(const std::string& family,
                                              int64_t bucket_bytes) const {
  if (bucket_bytes == 0) {
    auto it = default_bucket_.find(family);
    if (it == default_bucket_.end()) return nullptr;
    bucket_bytes = it->second;
  }
  for (const auto& e : ensembles_) {
    if (e.family == family && e.bucket_bytes == bucket_bytes) return &e;
  }
  return nullptr;
}

void GpuMemNetModel::Add(GpuMemNetEnsemble ensemble, bool is_default) {
  if (is_default || !default_bucket_.count(ensemble.family)) {
    default_bucket_[ensemble.family] = ensemble.bucket_bytes;
  }
  ensembles_.push_back(std::move(ensemble));
}

std::string GpuMemNetModel::ToJson() const {
  nlohmann::json doc;
  doc["format"] = "colo-gpumemnet";
  doc["version"] = 1;
  doc["provenance"] = provenance;
  doc["features"] = GpuMemNetFeatures::Names();
  doc["defaults"] = default_bucket_;
  auto& list = doc["ensembles"] = nlohmann::json::array();
  for (const auto& e : ensembles_) {
    nlohmann::json j;
    j["family"] = e.family;
    j["bucket_bytes"] = e.bucket_bytes;
    j["classes"] = e.classes;
    j["mean"] = e.mean;
    j["scale"] = e.scale;
    j["test_accuracy"] = e.test_accuracy;
    j["test_rows"] = e.test_rows;
    auto& members = j["members"] = nlohmann::json::array();
    for (const auto& m : e.members) {
      nlohmann::json layers = nlohmann::json::array();
      for (const auto& l : m.layers) {
        // Four decimals are plenty for these weights and keep the file small.
        std::vector<double> w(l.weights.begin(), l.weights.end()), b(l.bias.begin(), l.bias.end());
        for (double& v : w) v = std::round(v * 1e4) / 1e4;
        for (double& v : b) v = std::round(v * 1e4) / 1e4;
        layers.push_back({{"in", l.in}, {"out", l.out}, {"w", w}, {"b", b}});
      }
      members.push_back({{"layers", layers}});
    }
    list.push_back(std::move(j));
  }
  return doc.dump() + "\n";
}

Result<GpuMemNetModel> GpuMemNetModel::FromJson(const std::string& text,
                                                const std::string& origin) {
  GpuMemNetModel model;
  try {
    const auto doc = nlohmann::json::parse(text);
    if (doc.value("format", "") != "colo-gpumemnet" || doc.value("version", 0) != 1) {
      return InvalidArgument(fmt::format("{}: not a colo-gpumemnet version 1 file", origin));
    }
    if (doc.at("features").get<std::vector<std::string>>() != GpuMemNetFeatures::Names()) {
      return InvalidArgument(
          fmt::format("{}: trained on other features than this colo computes; retrain it", origin));
    }
    model.provenance = doc.value("provenance", "");
    const size_t n_features = GpuMemNetFeatures::Names().size();
    const auto defaults = doc.at("defaults").get<std::map<std::string, int64_t>>();
    for (const auto& j : doc.at("ensembles")) {
      GpuMemNetEnsemble e;
      e.family = j.at("family").get<std::string>();
      e.bucket_bytes = j.at("bucket_bytes").get<int64_t>();
      e.classes = j.at("classes").get<int>();
      e.mean = j.at("mean").get<std::vector<double>>();
      e.scale = j.at("scale").get<std::vector<double>>();
      e.test_accuracy = j.value("test_accuracy", 0.0);
      e.test_rows = j.value("test_rows", 0);
      if (e.mean.size() != n_features || e.scale.size() != n_features || e.classes < 1 ||
          e.bucket_bytes <= 0) {
        return InvalidArgument(fmt::format("{}: malformed ensemble for {}", origin, e.family));
      }
      for (const auto& m : j.at("members")) {
        MlpClassifier member;
        int expected_in = static_cast<int>(n_features);
        for (const auto& l : m.at("layers")) {
          DenseLayer layer;
          layer.in = l.at("in").get<int>();
          layer.out = l.at("out").get<int>();
          layer.weights = l.at("w").get<std::vector<float>>();
          layer.bias = l.at("b").get<std::vector<float>>();
          if (layer.in != expected_in || layer.in <= 0 || layer.out <= 0 ||
              layer.weights.size() != static_cast<size_t>(layer.in) * layer.out ||
              layer.bias.size() != static_cast<size_t>(layer.out)) {
            return InvalidArgument(fmt::format("{}: malformed layer in {}", origin, e.family));
          }
          expected_in = layer.out;
          member.layers.push_back(std::move(layer));
        }
        if (member.layers.empty() || expected_in != e.classes) {
          return InvalidArgument(
              fmt::format("{}: member output is not {} classes", origin, e.classes));
        }
        e.members.push_back(std::move(member));
      }
      if (e.members.empty())
        return InvalidArgument(fmt::format("{}: ensemble without members", origin));
      auto d = defaults.find(e.family);
      model.Add(std::move(e),
                d != defaults.end() && d->second == j.at("bucket_bytes").get<int64_t>());
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(fmt::format("{}: malformed GPUMemNet weights ({})", origin, e.what()));
  }
  return model;
}

Result<GpuMemNetModel> GpuMemNetModel::Load(const std::string& path) {
  auto text = ReadTextFile(path, "GPUMemNet weights");
  if (!text.ok()) return text.status();
  return FromJson(*text, path);
}

// Training: mini-batch Adam on softmax cross-entropy, the best validation epoch kept.

namespace {

struct Trainable {
  MlpClassifier net;
  std::vector<std::vector<double>> m, v;  // Adam moments per layer (weights then bias)
};

int ClassOf(int64_t peak, int64_t bucket) {
  return static_cast<int>(peak / bucket);
}

double Accuracy(const GpuMemNetEnsemble& e, const std::vector<GpuMemNetExample>& rows) {
  if (rows.empty()) return 0;
  int right = 0;
  for (const auto& r : rows) {
    right +=
        e.Classify(r.features) == std::min(ClassOf(r.peak_bytes, e.bucket_bytes), e.classes - 1);
  }
  return static_cast<double>(right) / rows.size();
}

MlpClassifier TrainMember(const std::vector<std::vector<double>>& x, const std::vector<int>& y,
                          const std::vector<std::vector<double>>& vx, const std::vector<int>& vy,
                          int classes, int depth, int width, const GpuMemNetTraining& options,
                          Rng& rng) {
  MlpClassifier net;
  int in = static_cast<int>(x.empty() ? 0 : x[0].size());
  for (int l = 0; l <= depth; ++l) {
    DenseLayer layer;
    layer.in = in;
    layer.out = l == depth ? classes : width;
    const double limit = std::sqrt(6.0 / layer.in);  // He-uniform for ReLU
    layer.weights.resize(static_cast<size_t>(layer.in) * layer.out);
    for (float& w : layer.weights) w = static_cast<float>(rng.Uniform(-limit, limit));
    layer.bias.assign(layer.out, 0.0f);
    in = layer.out;
    net.layers.push_back(std::move(layer));
  }
  const size_t L = net.layers.size();
  std::vector<std::vector<double>> gw(L), gb(L), mw(L), vw(L), mb(L), vb(L);
  for (size_t l = 0; l < L; ++l) {
    gw[l].assign(net.layers[l].weights.size(), 0);
    mw[l] = vw[l] = gw[l];
    gb[l].assign(net.layers[l].bias.size(), 0);
    mb[l] = vb[l] = gb[l];
  }
  auto validation_accuracy = [&]() {
    int right = 0;
    std::vector<double> p;
    for (size_t i = 0; i < vx.size(); ++i) {
      net.Predict(vx[i], p);
      right += (std::max_element(p.begin(), p.end()) - p.begin()) == vy[i];
    }
    return vx.empty() ? 0.0 : static_cast<double>(right) / vx.size();
  };
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t batch = 32;
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  int64_t t = 0;
  MlpClassifier best = net;
  double best_accuracy = -1;
  std::vector<std::vector<double>> acts(L + 1), deltas(L);
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
    for (size_t start = 0; start < order.size(); start += batch) {
      const size_t end = std::min(order.size(), start + batch);
      for (size_t l = 0; l < L; ++l) {
        std::fill(gw[l].begin(), gw[l].end(), 0.0);
        std::fill(gb[l].begin(), gb[l].end(), 0.0);
      }
      for (size_t k = start; k < end; ++k) {
        const size_t row = order[k];
        acts[0] = x[row];
        for (size_t l = 0; l < L; ++l) {
          const auto& layer = net.layers[l];
          acts[l + 1].assign(layer.out, 0);
          for (int o = 0; o < layer.out; ++o) {
            double s = layer.bias[o];
            const float* w = &layer.weights[static_cast<size_t>(o) * layer.in];
            for (int i = 0; i < layer.in; ++i) s += w[i] * acts[l][i];
            acts[l + 1][o] = (l + 1 < L) ? std::max(0.0, s) : s;
          }
        }
        // Softmax cross-entropy gradient at the logits.
        auto& logits = acts[L];
        const double top = *std::max_element(logits.begin(), logits.end());
        double total = 0;
        deltas[L - 1].resize(logits.size());
        for (size_t c = 0; c < logits.size(); ++c)
          total += deltas[L - 1][c] = std::exp(logits[c] - top);
        for (size_t c = 0; c < logits.size(); ++c) {
          deltas[L - 1][c] = deltas[L - 1][c] / total - (static_cast<int>(c) == y[row] ? 1.0 : 0.0);
        }
        for (size_t l = L; l-- > 0;) {
          const auto& layer = net.layers[l];
          for (int o = 0; o < layer.out; ++o) {
            const double d = deltas[l][o];
            gb[l][o] += d;
            double* g = &gw[l][static_cast<size_t>(o) * layer.in];
            for (int i = 0; i < layer.in; ++i) g[i] += d * acts[l][i];
          }
          if (l == 0) break;
          deltas[l - 1].assign(layer.in, 0);
          for (int o = 0; o < layer.out; ++o) {
            const float* w = &layer.weights[static_cast<size_t>(o) * layer.in];
            for (int i = 0; i < layer.in; ++i) deltas[l - 1][i] += w[i] * deltas[l][o];
          }
          for (int i = 0; i < layer.in; ++i) {
            if (acts[l][i] <= 0) deltas[l - 1][i] = 0;  // ReLU
          }
        }
      }
      ++t;
      const double n = static_cast<double>(end - start);
      const double correction1 = 1 - std::pow(b1, t), correction2 = 1 - std::pow(b2, t);
      auto step = [&](std::vector<float>& param, std::vector<double>& g, std::vector<double>& m,
                      std::vector<double>& v) {
        for (size_t i = 0; i < param.size(); ++i) {
          const double grad = g[i] / n;
          m[i] = b1 * m[i] + (1 - b1) * grad;
          v[i] = b2 * v[i] + (1 - b2) * grad * grad;
          param[i] -= static_cast<float>(options.learning_rate * (m[i] / correction1) /
                                         (std::sqrt(v[i] / correction2) + eps));
        }
      };
      for (size_t l = 0; l < L; ++l) {
        step(net.layers[l].weights, gw[l], mw[l], vw[l]);
        step(net.layers[l].bias, gb[l], mb[l], vb[l]);
      }
    }
    if (epoch % 10 == 9 || epoch + 1 == options.epochs) {
      const double accuracy = validation_accuracy();
      if (accuracy > best_accuracy) {
        best_accuracy = accuracy;
        best = net;
      }
    }
  }
  return best;
}

}  // namespace

GpuMemNetEnsemble TrainEnsemble(const std::string& family, int64_t bucket_bytes,
                                const std::vector<GpuMemNetExample>& train,
                                const std::vector<GpuMemNetExample>& validation,
                                const std::vector<GpuMemNetExample>& test,
                                const GpuMemNetTraining& options) {
  GpuMemNetEnsemble e;
  e.family = family;
  e.bucket_bytes = bucket_bytes;
  int top = 0;
  for (const auto* rows : {&train, &validation, &test}) {
    for (const auto& r : *rows) top = std::max(top, ClassOf(r.peak_bytes, bucket_bytes));
  }
  e.classes = top + 1;
  const size_t n = GpuMemNetFeatures::Names().size();
  e.mean.assign(n, 0);
  e.scale.assign(n, 0);
  for (const auto& r : train) {
    for (size_t i = 0; i < n; ++i) e.mean[i] += r.features[i] / train.size();
  }
  for (const auto& r : train) {
    for (size_t i = 0; i < n; ++i) {
      e.scale[i] += (r.features[i] - e.mean[i]) * (r.features[i] - e.mean[i]) / train.size();
    }
  }
  for (double& s : e.scale) s = s > 1e-12 ? std::sqrt(s) : 1.0;
  auto standardize = [&](const std::vector<GpuMemNetExample>& rows,
                         std::vector<std::vector<double>>& xs, std::vector<int>& ys) {
    for (const auto& r : rows) {
      std::vector<double> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = (r.features[i] - e.mean[i]) / e.scale[i];
      xs.push_back(std::move(v));
      ys.push_back(ClassOf(r.peak_bytes, bucket_bytes));
    }
  };
  std::vector<std::vector<double>> x, vx;
  std::vector<int> y, vy;
  standardize(train, x, y);
  standardize(validation, vx, vy);
  Rng rng(options.seed ^ static_cast<uint64_t>(bucket_bytes) ^ std::hash<std::string>{}(family));
  static const int widths[] = {16, 32, 64};
  for (int k = 0; k < options.members; ++k) {
    const int depth = 1 + k % 6;  // hidden layers, 1 to 6
    e.members.push_back(TrainMember(x, y, vx, vy, e.classes, depth, widths[k % 3], options, rng));
  }
  e.test_rows = static_cast<int>(test.size());
  e.test_accuracy = Accuracy(e, test);
  return e;
}

}  // namespace colo

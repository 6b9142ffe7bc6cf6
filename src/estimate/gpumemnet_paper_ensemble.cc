// The published ensembles: their members run on an input, and trained as the published code
// trains them (Adam on the mean of the members' logits, the epoch of lowest validation loss kept).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/rng.h"
#include "estimate/gpumemnet_paper.h"

namespace colo {

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

}  // namespace colo

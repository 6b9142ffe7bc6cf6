// The weights file: every family's ensembles by name, as JSON, each size bounded and every tensor
// checked against the shape its member needs before it is used.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "estimate/gpumemnet_paper.h"

namespace colo {

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

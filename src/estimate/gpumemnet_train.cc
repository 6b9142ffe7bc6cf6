// colo-gpumemnet-train: trains the GPUMemNet classifiers colo ships.
//
//   colo-gpumemnet-train data/gpumemnet/*.jsonl.gz -o data/gpumemnet.json
//       colo's own variant, on the dataset bench/estimate/gpumemnet_collect.py measured. Each
//       family's rows are split 70/20/10 (train/validation/test) by a hash of the configuration,
//       so a re-run on more data keeps earlier test rows in the test split. Buckets: the thesis'
//       (1 GiB for MLPs, 8 GiB for CNNs and Transformers) and finer ones; the thesis' stay the
//       defaults.
//
//   colo-gpumemnet-train --published DIR_OR_CSV... -o data/gpumemnet-paper.json
//       the published method (gpumemnet_paper.h) on GPUMemNet's published CSVs (mlp_data2.csv,
//       cnn_data1.csv, trans_data.csv under any name), with the published split;
//       reports the held-out accuracy per family. CSV inputs given without --published are
//       recognised by their extension.
//
// Rows that cannot be used are counted with the reason; a training set without a usable row is
// an error (exit 1), never an empty model.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <sstream>

#include "common/strings.h"
#include "estimate/gpumemnet.h"
#include "estimate/gpumemnet_paper.h"
#include "estimate/model_summary.h"

namespace {

// Writes a trained model; the process's exit status.
int WriteModel(const std::string& output, const std::string& json) {
  std::ofstream out(output);
  out << json;
  if (!out) {
    std::cerr << "colo-gpumemnet-train: cannot write " << output << "\n";
    return 1;
  }
  fmt::print("wrote {}\n", output);
  return 0;
}

using colo::GpuMemNetExample;

constexpr int64_t kGiB = int64_t{1} << 30;

struct Split {
  std::vector<GpuMemNetExample> train, validation, test;
};

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsCsv(const std::string& path) {
  return EndsWith(path, ".csv");
}

void PrintSkipped(const std::map<std::string, int>& skipped) {
  for (const auto& [reason, count] : skipped)
    fmt::print("  skipped {:>5} row(s): {}\n", count, reason);
}

// Reads JSON lines; files ending in .gz are read through gzip -dc.
bool ReadRows(const std::string& path, std::map<std::string, Split>& families,
              std::map<std::string, int>& skipped) {
  std::string text;
  if (EndsWith(path, ".gz")) {
    FILE* pipe = popen(("gzip -dc '" + path + "' 2>/dev/null").c_str(), "r");
    if (!pipe) return false;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) text.append(buf, n);
    if (pclose(pipe) != 0) return false;
  } else {
    std::ifstream in(path);
    if (!in) return false;
    std::ostringstream b;
    b << in.rdbuf();
    text = b.str();
  }
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (colo::Trim(line).empty()) continue;
    nlohmann::json row;
    try {
      row = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      ++skipped["not a JSON line (a CSV? give --published)"];
      continue;
    }
    if (!row.is_object() || row.value("status", "") != "ok" || !row.contains("summary")) {
      ++skipped["no \"status\": \"ok\" with a \"summary\" (a failed or foreign measurement)"];
      continue;
    }
    auto summary = colo::ParseModelSummaryJson(row["summary"].dump(), path, ".");
    if (!summary.ok()) {
      ++skipped["summary unreadable"];
      continue;
    }
    try {
      const std::string family = row.at("family").get<std::string>();
      const int batch = row.at("config").at("batch").get<int>();
      GpuMemNetExample example{colo::ExtractFeatures(*summary, batch).values,
                               row.at("peak_bytes").get<int64_t>()};
      const uint64_t h =
          std::hash<std::string>{}(family + ":" + std::to_string(row.at("index").get<int>()));
      auto& split = families[family];
      const int bucket = static_cast<int>(h % 10);
      (bucket < 7   ? split.train
       : bucket < 9 ? split.validation
                    : split.test)
          .push_back(std::move(example));
    } catch (const nlohmann::json::exception&) {
      ++skipped["no family, config.batch, peak_bytes or index"];
    }
  }
  return true;
}

int TrainColoVariant(const std::vector<std::string>& inputs, const std::string& output,
                     const std::string& provenance, const colo::GpuMemNetTraining& options) {
  std::map<std::string, Split> families;
  std::map<std::string, int> skipped;
  for (const auto& path : inputs) {
    if (!ReadRows(path, families, skipped)) {
      std::cerr << "colo-gpumemnet-train: cannot read " << path << "\n";
      return 1;
    }
  }
  const std::map<std::string, std::vector<int64_t>> buckets = {
      {"mlp", {1 * kGiB, 2 * kGiB}},
      {"cnn", {8 * kGiB, 2 * kGiB}},
      {"transformer", {8 * kGiB, 2 * kGiB}},
  };
  for (auto it = families.begin(); it != families.end();) {
    if (!buckets.count(it->first)) {
      skipped[fmt::format("family '{}' has no model", it->first)] += static_cast<int>(
          it->second.train.size() + it->second.validation.size() + it->second.test.size());
      it = families.erase(it);
    } else if (it->second.train.empty()) {
      skipped[fmt::format("{}: no row fell in the training split", it->first)] +=
          static_cast<int>(it->second.validation.size() + it->second.test.size());
      it = families.erase(it);
    } else {
      ++it;
    }
  }
  if (families.empty()) {
    std::cerr << "colo-gpumemnet-train: no usable training row in " << colo::Join(inputs, ", ")
              << "\n";
    for (const auto& [reason, count] : skipped) {
      std::cerr << "  skipped " << count << " row(s): " << reason << "\n";
    }
    return 1;
  }
  colo::GpuMemNetModel model;
  model.provenance = provenance;
  fmt::print("{:<12} {:>7} {:>6} {:>5} {:>5} {:>9} {:>10} {:>9}\n", "family", "bucket", "train",
             "val", "test", "accuracy", "over GiB", "under %");
  for (const auto& [family, split] : families) {
    const auto& sizes = buckets.at(family);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t bucket = sizes[i];
      auto e =
          colo::TrainEnsemble(family, bucket, split.train, split.validation, split.test, options);
      double over = 0;
      int under = 0;
      for (const auto& r : split.test) {
        const int64_t upper = (e.Classify(r.features) + 1) * bucket;
        if (upper < r.peak_bytes) ++under;
        over += static_cast<double>(upper - r.peak_bytes) / kGiB;
      }
      const double n = static_cast<double>(std::max<size_t>(1, split.test.size()));
      fmt::print("{:<12} {:>5}Gi {:>6} {:>5} {:>5} {:>9.3f} {:>10.2f} {:>9.1f}\n", family,
                 bucket / kGiB, split.train.size(), split.validation.size(), split.test.size(),
                 e.test_accuracy, over / n, 100.0 * under / n);
      std::fflush(stdout);
      model.Add(std::move(e), i == 0);
    }
  }
  int skipped_rows = 0;
  for (const auto& [reason, count] : skipped) skipped_rows += count;
  if (skipped_rows > 0) {
    fmt::print("{} row(s) skipped:\n", skipped_rows);
    PrintSkipped(skipped);
  }
  return WriteModel(output, model.ToJson());
}

// GPUMemNet's published CSVs (or the CSVs in folders), one per family, each said as it is read;
// nullopt (after saying why) when one cannot be used.
std::optional<std::map<colo::PaperFamily, colo::PaperDataset>> ReadPublished(
    const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const auto& input : inputs) {
    std::error_code ec;
    if (std::filesystem::is_directory(input, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : std::filesystem::directory_iterator(input, ec)) {
        if (entry.is_regular_file() && IsCsv(entry.path().string())) {
          found.push_back(entry.path().string());
        }
      }
      std::sort(found.begin(), found.end());
      if (found.empty()) {
        std::cerr << "colo-gpumemnet-train: no .csv file in " << input << "\n";
        return std::nullopt;
      }
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(input);
    }
  }
  std::map<colo::PaperFamily, colo::PaperDataset> datasets;
  for (const auto& path : files) {
    auto data = colo::LoadPaperCsv(path);
    if (!data.ok()) {
      std::cerr << "colo-gpumemnet-train: " << data.status().message() << "\n";
      return std::nullopt;
    }
    const auto family = data->family;
    fmt::print("{}: {} data, {} row(s), {} used, {} skipped\n", path, colo::PaperFamilyName(family),
               data->data_rows, data->rows.size(), data->SkippedRows());
    PrintSkipped(data->skipped);
    if (datasets.count(family)) {
      std::cerr << "colo-gpumemnet-train: two " << colo::PaperFamilyName(family) << " CSVs ("
                << datasets[family].origin << ", " << path << ")\n";
      return std::nullopt;
    }
    datasets.emplace(family, std::move(*data));
  }
  return datasets;
}

int TrainPublished(const std::vector<std::string>& inputs, const std::string& output,
                   const std::string& provenance, const colo::PaperTraining& options, bool update) {
  colo::GpuMemNetPaperModel model;
  if (update && std::filesystem::exists(output)) {
    auto existing = colo::GpuMemNetPaperModel::Load(output);
    if (!existing.ok()) {
      std::cerr << "colo-gpumemnet-train: " << existing.status().message() << "\n";
      return 1;
    }
    model = std::move(*existing);
  }
  model.provenance = provenance;
  const auto datasets = ReadPublished(inputs);
  if (!datasets) return 1;
  fmt::print("{:<12} {:>9} {:>6} {:>5} {:>5} {:>9} {:>11} {:>5}\n", "family", "buckets", "train",
             "val", "test", "accuracy", "epochs/best", "seed");
  for (const auto& [family, data] : *datasets) {
    const auto split = colo::PublishedSplit(data.rows.size());
    if (split.train.size() < 2 || split.validation.empty() || split.test.empty()) {
      std::cerr << "colo-gpumemnet-train: " << data.origin << ": " << data.rows.size()
                << " usable row(s) are too few for the published 70/20/10 split\n";
      return 1;
    }
    auto e = colo::TrainPaperEnsemble(data, split, options);
    const auto& edges = colo::PaperBucketsFor(family).edges_mib;
    fmt::print("{:<12} {:>6}MiB {:>6} {:>5} {:>5} {:>9.4f} {:>7}/{:<3} {:>5}\n",
               colo::PaperFamilyName(family), edges[2] - edges[1], split.train.size(),
               split.validation.size(), split.test.size(), e.test_accuracy, e.epochs, e.best_epoch,
               e.seed);
    std::fflush(stdout);
    model.Set(std::move(e));
  }
  return WriteModel(output, model.ToJson());
}

// Each classifier of a weights file (GPUMemNet's published estimators once imported, or those
// trained here) on the published CSV of its family: accuracy on the published held-out split, and
// on every row.
int EvaluatePublished(const std::string& weights, const std::vector<std::string>& inputs) {
  auto model = colo::GpuMemNetPaperModel::Load(weights);
  if (!model.ok()) {
    std::cerr << "colo-gpumemnet-train: " << model.status().message() << "\n";
    return 1;
  }
  const auto datasets = ReadPublished(inputs);
  if (!datasets) return 1;
  fmt::print("{:<28} {:<12} {:<30} {:>17} {:>17}\n", "classifier", "family", "inputs",
             "held-out accuracy", "all rows");
  for (const auto& e : model->ensembles()) {
    const auto data = datasets->find(e.family);
    if (data == datasets->end()) continue;
    const std::string recipe = colo::PaperRecipeName(e.family, e.recipe);
    if (e.recipe == colo::PaperRecipe::kTester) {
      fmt::print(
          "{:<28} {:<12} {:<30} (fed by the published test pipeline's own parser, not the "
          "CSV's columns)\n",
          e.name, colo::PaperFamilyName(e.family), recipe);
      continue;
    }
    const auto split = colo::PublishedSplit(data->second.rows.size());
    std::vector<size_t> all(data->second.rows.size());
    std::iota(all.begin(), all.end(), size_t{0});
    auto measure = [&](const std::vector<size_t>& rows) {
      const auto readable = colo::PaperReadableRows(e, data->second, rows);
      return fmt::format("{:.4f} ({})", colo::PaperAccuracy(e, data->second, readable),
                         readable.size());
    };
    fmt::print("{:<28} {:<12} {:<30} {:>17} {:>17}\n", e.name, colo::PaperFamilyName(e.family),
               recipe, measure(split.test), measure(all));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train GPUMemNet's classifiers: colo's variant, or the published method"};
  std::vector<std::string> inputs, published;
  std::string output;
  std::string provenance;
  bool update = false;
  colo::GpuMemNetTraining options;
  colo::PaperTraining paper;
  app.add_option("inputs", inputs, "colo's dataset files (JSON lines, optionally .gz)");
  app.add_option("--published", published,
                 "GPUMemNet's published CSVs, or folders holding them: trains the published "
                 "method (weights for --estimator gpumemnet-paper)");
  app.add_option("-o,--output", output, "weights file to write");
  app.add_option("--provenance", provenance, "where the data came from (stored in the file)");
  app.add_option("--epochs", options.epochs, "colo's variant: training epochs per member");
  app.add_option("--members", options.members, "colo's variant: classifiers per ensemble");
  app.add_option("--seed", paper.seed, "published method: seed of the weights and batch order");
  app.add_option("--max-epochs", paper.max_epochs, "published method: epoch limit (600)");
  app.add_option("--patience", paper.patience,
                 "published method: epochs without a better validation loss before stopping (30)");
  std::string evaluate;
  app.add_option("--evaluate", evaluate,
                 "measure the classifiers of this weights file on the --published CSVs instead of "
                 "training");
  app.add_flag("--update", update,
               "published method: keep the families of an existing output file that this run "
               "does not train");
  CLI11_PARSE(app, argc, argv);
  if (!evaluate.empty()) {
    published.insert(published.end(), inputs.begin(), inputs.end());
    if (published.empty()) {
      std::cerr << "colo-gpumemnet-train: --evaluate needs GPUMemNet's published CSVs\n";
      return 2;
    }
    return EvaluatePublished(evaluate, published);
  }
  if (output.empty()) {
    std::cerr << "colo-gpumemnet-train: -o/--output is required\n";
    return 2;
  }

  const bool all_csv = !inputs.empty() &&
                       std::all_of(inputs.begin(), inputs.end(), [](auto& p) { return IsCsv(p); });
  if (!published.empty() || all_csv) {
    if (!published.empty() && !inputs.empty() && !all_csv) {
      std::cerr << "colo-gpumemnet-train: give either colo's dataset or --published CSVs\n";
      return 2;
    }
    published.insert(published.end(), inputs.begin(), inputs.end());
    return TrainPublished(published, output, provenance, paper, update);
  }
  if (inputs.empty()) {
    std::cerr << "colo-gpumemnet-train: no input (colo's dataset files or --published CSVs)\n";
    return 2;
  }
  if (std::any_of(inputs.begin(), inputs.end(), [](auto& p) { return IsCsv(p); })) {
    std::cerr << "colo-gpumemnet-train: CSV files mixed with JSON lines; give the CSVs with "
                 "--published\n";
    return 2;
  }
  return TrainColoVariant(inputs, output, provenance, options);
}

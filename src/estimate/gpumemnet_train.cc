// colo-gpumemnet-train: trains GPUMemNet's ensembles on the dataset gpumemnet_collect.py measured
// and writes the weights file colo ships (data/gpumemnet.json).
//
//   colo-gpumemnet-train data/gpumemnet/*.jsonl.gz... -o data/gpumemnet.json
//
// Each family's rows are split 70/20/10 (train/validation/test) by a hash of the configuration,
// so a re-run on more data keeps earlier test rows in the test split. Buckets: the thesis' (1 GiB
// for MLPs, 8 GiB for CNNs and Transformers) and finer ones; the thesis' stay the defaults.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "estimate/gpumemnet.h"
#include "estimate/model_summary.h"

namespace {

using colo::GpuMemNetExample;

constexpr int64_t kGiB = int64_t{1} << 30;

struct Split {
  std::vector<GpuMemNetExample> train, validation, test;
};

// Reads JSON lines; files ending in .gz are read through gzip -dc.
bool ReadRows(const std::string& path, std::map<std::string, Split>& families, int& skipped) {
  std::string text;
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    FILE* pipe = popen(("gzip -dc '" + path + "'").c_str(), "r");
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
    if (line.empty()) continue;
    nlohmann::json row;
    try {
      row = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      ++skipped;
      continue;
    }
    if (row.value("status", "") != "ok" || !row.contains("summary")) {
      ++skipped;
      continue;
    }
    auto summary = colo::ParseModelSummaryJson(row["summary"].dump(), path, ".");
    if (!summary.ok()) {
      ++skipped;
      continue;
    }
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
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train GPUMemNet's ensembles on a measured dataset"};
  std::vector<std::string> inputs;
  std::string output;
  std::string provenance;
  colo::GpuMemNetTraining options;
  app.add_option("inputs", inputs, "dataset files (JSON lines, optionally .gz)")->required();
  app.add_option("-o,--output", output, "weights file to write")->required();
  app.add_option("--provenance", provenance, "where the data came from (stored in the file)");
  app.add_option("--epochs", options.epochs, "training epochs per member");
  app.add_option("--members", options.members, "classifiers per ensemble");
  CLI11_PARSE(app, argc, argv);

  std::map<std::string, Split> families;
  int skipped = 0;
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
  colo::GpuMemNetModel model;
  model.provenance = provenance;
  fmt::print("{:<12} {:>7} {:>6} {:>5} {:>5} {:>9} {:>10} {:>9}\n", "family", "bucket", "train",
             "val", "test", "accuracy", "over GiB", "under %");
  for (const auto& [family, split] : families) {
    auto it = buckets.find(family);
    if (it == buckets.end()) continue;
    for (size_t i = 0; i < it->second.size(); ++i) {
      const int64_t bucket = it->second[i];
      auto e =
          colo::TrainEnsemble(family, bucket, split.train, split.validation, split.test, options);
      double over = 0;
      int under = 0;
      for (const auto& r : split.test) {
        const int64_t upper = (e.Classify(r.features) + 1) * bucket;
        if (upper < r.peak_bytes) ++under;
        over += static_cast<double>(upper - r.peak_bytes) / kGiB;
      }
      const double n = std::max<size_t>(1, split.test.size());
      fmt::print("{:<12} {:>5}Gi {:>6} {:>5} {:>5} {:>9.3f} {:>10.2f} {:>9.1f}\n", family,
                 bucket / kGiB, split.train.size(), split.validation.size(), split.test.size(),
                 e.test_accuracy, over / n, 100.0 * under / n);
      std::fflush(stdout);
      model.Add(std::move(e), i == 0);
    }
  }
  std::ofstream out(output);
  out << model.ToJson();
  if (!out) {
    std::cerr << "colo-gpumemnet-train: cannot write " << output << "\n";
    return 1;
  }
  fmt::print("wrote {} ({} rows skipped)\n", output, skipped);
  return 0;
}

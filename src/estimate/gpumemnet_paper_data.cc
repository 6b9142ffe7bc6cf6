// The published data set: its CSVs read as the published loaders read them, and the split of its
// rows the paper trained, validated and tested on (numpy's legacy permutation, as sklearn draws
// it).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "common/strings.h"
#include "estimate/gpumemnet_paper.h"

namespace colo {

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
      activation = PaperActivationIndex(data.family, name);
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
      const auto [sin, cos] = PaperActivationEncoding(data.family, *activation);
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
  if (path.ends_with(".gz")) {
    return InvalidArgument(fmt::format("{}: decompress it first (gzip -d)", path));
  }
  auto text = ReadTextFile(path, "GPUMemNet CSV");
  if (!text.ok()) return text.status();
  return ParsePaperCsv(*text, path);
}

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

}  // namespace colo

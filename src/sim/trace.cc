#include "sim/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/rng.h"
#include "common/strings.h"
#include "formats/rad.h"

namespace colo {
namespace {

// Inter-arrival seconds of the first 90 non-failed Philly jobs submitted on 2017-12-20 (CC-BY-4.0,
// Jeon et al., ATC'19), as the thesis used them.
constexpr int kThesisGaps[90] = {
    0,  73,  441, 52, 51,  365, 18,  166, 439, 83,  23,  56,  260, 26, 313, 17,  301, 187,
    8,  56,  31,  52, 84,  465, 199, 272, 125, 4,   286, 283, 30,  63, 341, 196, 88,  9,
    4,  2,   2,   3,  108, 232, 152, 249, 52,  300, 419, 181, 49,  1,  272, 247, 30,  221,
    19, 100, 256, 4,  589, 11,  95,  370, 91,  45,  197, 147, 257, 0,  175, 208, 191, 24,
    94, 126, 74,  5,  7,   294, 394, 123, 83,  30,  36,  228, 80,  65, 2,   4,   60,  43};

std::vector<const SoloProfile*> OfClass(WorkloadClass cls) {
  std::vector<const SoloProfile*> out;
  for (const auto& p : ThesisCatalogue()) {
    if (p.cls == cls && p.in_table_6_2) out.push_back(&p);
  }
  return out;
}

void SortAndNumber(Trace& trace) {
  const auto earlier = [](const TraceJob& a, const TraceJob& b) { return a.submit < b.submit; };
  // Generated and most recorded traces come in order: a stable sort would move every job anyway.
  if (!std::is_sorted(trace.jobs.begin(), trace.jobs.end(), earlier))
    std::stable_sort(trace.jobs.begin(), trace.jobs.end(), earlier);
  for (size_t i = 0; i < trace.jobs.size(); ++i) trace.jobs[i].id = static_cast<int64_t>(i + 1);
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("cannot open '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().size() > (size_t{1} << 31))
    return InvalidArgument(fmt::format("'{}' is too large", path));
  return ss.str();
}

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// "2017-10-03 02:43:20" -> seconds since the epoch; nullopt for "None" or malformed text.
std::optional<int64_t> ParsePhillyTime(const nlohmann::json& value) {
  if (!value.is_string()) return std::nullopt;
  const std::string s = value.get<std::string>();
  int y, mo, d, h, mi, se;
  if (std::sscanf(s.c_str(), "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &se) != 6)
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 ||
      se > 60) {
    return std::nullopt;
  }
  return DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 +
         mi * 60 + se;
}

WorkloadClass DrawClass(Rng& rng) {
  const double u = rng.Uniform();
  return u < 0.65   ? WorkloadClass::kLight
         : u < 0.92 ? WorkloadClass::kMedium
                    : WorkloadClass::kHeavy;
}

// Takes memory and SMACT from a catalogue workload of a random class, the rest from the caller.
SoloProfile ProfileLike(Rng& rng, Duration duration, int gpus) {
  static const std::vector<const SoloProfile*> by_class[3] = {OfClass(WorkloadClass::kLight),
                                                              OfClass(WorkloadClass::kMedium),
                                                              OfClass(WorkloadClass::kHeavy)};
  const auto& pool = by_class[static_cast<int>(DrawClass(rng))];
  SoloProfile p = *pool[rng.Below(pool.size())];
  p.name = Interned(fmt::format("{}-like", p.name));
  p.duration = std::max(duration, p.warmup + Seconds(1));
  p.gpus = gpus;
  return p;
}

}  // namespace

Trace ThesisTrace(int tasks) {
  Trace trace;
  trace.name = fmt::format("thesis-{}", tasks);
  // Class counts that give the thesis' mix: 90 = 59 light + 24 medium + 7 heavy; 60 = 50 + 10.
  std::vector<WorkloadClass> classes;
  const int light = tasks == 90 ? 59 : 0;
  const int heavy = tasks == 90 ? 7 : tasks / 6;
  const int medium = tasks - light - heavy;
  classes.insert(classes.end(), light, WorkloadClass::kLight);
  classes.insert(classes.end(), medium, WorkloadClass::kMedium);
  classes.insert(classes.end(), heavy, WorkloadClass::kHeavy);
  Rng rng(tasks == 90 ? 2025090 : 2025060);  // fixed: the traces are part of the product
  for (size_t i = classes.size(); i > 1; --i) std::swap(classes[i - 1], classes[rng.Below(i)]);
  Duration at{0};
  for (int i = 0; i < tasks && i < 90; ++i) {
    at += Seconds(kThesisGaps[i]);
    const auto pool = OfClass(classes[static_cast<size_t>(i)]);
    TraceJob job;
    job.submit = at;
    job.profile = *pool[rng.Below(pool.size())];
    job.name = job.profile.name;
    job.owner = Interned("thesis");
    trace.jobs.push_back(job);
  }
  SortAndNumber(trace);
  return trace;
}

Result<Trace> ParseColoCsv(const std::string& text, const std::string& origin) {
  Trace trace;
  trace.name = std::filesystem::path(origin).stem().string();
  std::map<std::string, size_t> column;
  const std::vector<std::string> lines = Split(text, '\n');
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string_view line = Trim(lines[n]);
    if (line.empty() || line.front() == '#') continue;
    const std::vector<std::string> fields = Split(line, ',');
    auto where = [&](const std::string& problem) {
      return InvalidArgument(fmt::format("{}:{}: {}", origin, n + 1, problem));
    };
    if (column.empty()) {
      for (size_t i = 0; i < fields.size(); ++i) column[std::string(Trim(fields[i]))] = i;
      if (!column.count("submit_s")) return where("header must name a submit_s column");
      if (!column.count("workload") && !(column.count("duration_s") && column.count("peak_mem"))) {
        return where("header must name a workload column, or duration_s and peak_mem");
      }
      continue;
    }
    if (fields.size() > column.size())
      return where(fmt::format("{} fields, header has {}", fields.size(), column.size()));
    auto field = [&](const char* name) -> std::string {
      auto it = column.find(name);
      if (it == column.end() || it->second >= fields.size()) return "";
      return std::string(Trim(fields[it->second]));
    };
    TraceJob job;
    auto submit = ParseDouble(field("submit_s"));
    if (!submit.ok() || *submit < 0 || *submit > 1e9)
      return where(fmt::format("submit_s '{}' must be 0..1e9 seconds", field("submit_s")));
    job.submit = SecondsF(*submit);
    const std::string workload = field("workload");
    if (!workload.empty()) {
      const SoloProfile* p = FindWorkload(workload);
      if (!p)
        return where(
            fmt::format("unknown workload '{}' (see `colo sim --list-workloads`)", workload));
      job.profile = *p;
    } else {
      job.profile.name = Interned("custom");
    }
    if (const auto s = field("duration_s"); !s.empty()) {
      auto d = ParseDouble(s);
      if (!d.ok() || *d <= 0 || *d > 1e8)
        return where(fmt::format("duration_s '{}' must be in (0, 1e8]", s));
      job.profile.duration = SecondsF(*d);
    } else if (workload.empty()) {
      return where("duration_s is empty and no workload is named");
    }
    if (const auto s = field("peak_mem"); !s.empty()) {
      auto b = ParseBytes(s);
      if (!b.ok() || *b <= Bytes(0) || *b > GiB(1024))
        return where(fmt::format("peak_mem '{}' must be a size in (0, 1 TiB]", s));
      job.profile.peak = *b;
    } else if (workload.empty()) {
      return where("peak_mem is empty and no workload is named");
    }
    if (const auto s = field("smact"); !s.empty()) {
      auto v = ParseDouble(s);
      if (!v.ok() || *v < 0 || *v > 1)
        return where(fmt::format("smact '{}' must be a fraction in [0, 1]", s));
      job.profile.smact = *v;
    }
    if (const auto s = field("warmup_s"); !s.empty()) {
      auto v = ParseDouble(s);
      if (!v.ok() || *v < 0 || *v > 1e6)
        return where(fmt::format("warmup_s '{}' must be 0..1e6", s));
      job.profile.warmup = SecondsF(*v);
    }
    if (job.profile.warmup >= job.profile.duration) job.profile.warmup = job.profile.duration / 2;
    if (const auto s = field("startup_s"); !s.empty()) {
      auto v = ParseDouble(s);
      if (!v.ok() || *v < 0 || SecondsF(*v) >= job.profile.duration)
        return where(
            fmt::format("startup_s '{}' must be at least 0 and less than the duration", s));
      job.profile.startup = SecondsF(*v);
    }
    if (const auto s = field("gpus"); !s.empty()) {
      auto v = ParseInt(s);
      if (!v.ok() || *v < 1 || *v > 64) return where(fmt::format("gpus '{}' must be 1..64", s));
      job.profile.gpus = static_cast<int>(*v);
    }
    if (const auto s = field("declared_mem"); !s.empty()) {
      auto b = ParseBytes(s);
      if (!b.ok() || *b > GiB(1024))
        return where(fmt::format("declared_mem '{}' must be a size up to 1 TiB", s));
      job.declared = *b;
    }
    if (const auto s = field("owner"); !s.empty()) job.owner = Interned(s);
    if (const auto s = field("model"); !s.empty()) job.profile.name = Interned(s);
    job.name = field("name").empty() ? job.profile.name : Interned(field("name"));
    trace.jobs.push_back(std::move(job));
    if (trace.jobs.size() > 10'000'000) return where("more than 10 million jobs");
  }
  if (column.empty()) return InvalidArgument(fmt::format("{}: no header line", origin));
  SortAndNumber(trace);
  return trace;
}

Result<Trace> ReadColoCsv(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseColoCsv(*text, path);
}

namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  return out;
}

// A task path as the script names it, else its trailing components under the script's directory
// or one of its parents (CARMA's scripts run from the repository root or name /home/... paths).
std::optional<std::filesystem::path> FindTaskFile(const std::filesystem::path& named,
                                                  const std::filesystem::path& script_dir) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(named, ec)) return named;
  std::vector<std::filesystem::path> tails;
  std::filesystem::path tail;
  std::vector<std::filesystem::path> parts(named.begin(), named.end());
  for (auto it = parts.rbegin(); it != parts.rend() && tails.size() < 3; ++it) {
    if (it->empty() || *it == "/") break;
    tail = tail.empty() ? *it : *it / tail;
    tails.push_back(tail);
  }
  for (std::filesystem::path dir = script_dir.empty() ? "." : script_dir;;
       dir = dir.parent_path()) {
    for (auto t = tails.rbegin(); t != tails.rend(); ++t) {
      if (std::filesystem::is_regular_file(dir / *t, ec)) return dir / *t;
    }
    if (!dir.has_parent_path() || dir.parent_path() == dir) break;
  }
  return std::nullopt;
}

// The value after `flag` on a command line, as a positive integer.
std::optional<int> IntAfter(const std::vector<std::string>& argv,
                            std::initializer_list<const char*> flags) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    for (const char* flag : flags) {
      if (argv[i] != flag) continue;
      auto v = ParseInt(argv[i + 1]);
      if (v.ok() && *v > 0 && *v < 100'000'000) return static_cast<int>(*v);
    }
  }
  return std::nullopt;
}

struct TaskShape {
  CarmaModel model;
  int batch = 0;
  int epochs = 0;  // 0: the catalogue's
};

// What a task file's command trains: the script it runs and its flags.
std::optional<TaskShape> ShapeOfCommand(const std::string& command, int file_batch) {
  std::istringstream words(command);
  std::vector<std::string> argv;
  for (std::string w; words >> w;) argv.push_back(w);
  TaskShape shape;
  for (const std::string& word : argv) {
    const std::filesystem::path p(word);
    if (p.extension() != ".py" && p.extension() != ".sh") continue;
    std::string stem = p.stem().string();
    // torchvision's detection reference: the model is a flag.
    if (stem == "train")
      for (size_t i = 0; i + 1 < argv.size(); ++i)
        if (argv[i] == "--model") stem = argv[i + 1];
    auto model = CarmaModelOfScript(stem);
    if (!model) continue;
    shape.model = *model;
    shape.batch =
        IntAfter(argv, {"--batch_size", "--batch-size", "-b", "--bs", "--mini-batch-size"})
            .value_or(file_batch);
    shape.epochs = IntAfter(argv, {"--epochs", "--nepochs", "--num_epochs"}).value_or(0);
    return shape;
  }
  // Not one of CARMA's scripts: the longest catalogued model named anywhere on the line
  // ("train.py --model resnet50").
  const std::string haystack = Lower(command);
  size_t best_len = 0;
  for (const auto& p : ThesisCatalogue()) {
    const std::string model = p.name.str().substr(0, p.name.str().find('-'));
    if (model.size() > best_len && haystack.find(model) != std::string::npos) {
      best_len = model.size();
      shape.model = {model, ""};
    }
  }
  if (best_len == 0) return std::nullopt;
  shape.batch = IntAfter(argv, {"--batch_size", "--batch-size", "-b", "--bs"}).value_or(file_batch);
  shape.epochs = IntAfter(argv, {"--epochs", "--nepochs", "--num_epochs"}).value_or(0);
  return shape;
}

// A task file known only by name (CARMA's older script names files it does not publish):
// "densenet2.rad" is densenet121 at batch 64, as CARMA numbers its ImageNet files 32/64/128.
std::optional<TaskShape> ShapeOfName(const std::string& stem) {
  std::string base = stem;
  int variant = 1;
  if (!base.empty() && std::isdigit(static_cast<unsigned char>(base.back()))) {
    variant = base.back() - '0';
    base.pop_back();
    if (!base.empty() && base.back() == '_') base.pop_back();
  }
  static const std::pair<const char*, const char*> kScripts[] = {
      {"densenet", "densenet"},
      {"xlnet_large_cased", "xlnet_large_cased"},
      {"xlnet_base_cased", "xlnet_base_cased"},
      {"gpt2_large", "gpt2_large_on_wiki"},
      {"gpt2_xl", "gpt2_xl_on_wiki"}};
  for (const auto& [name, script] : kScripts) {
    if (Lower(base) != name) continue;
    TaskShape shape;
    shape.model = *CarmaModelOfScript(script);
    shape.batch = shape.model.data == "imagenet" ? (variant == 2   ? 64
                                                    : variant == 3 ? 128
                                                                   : 32)
                                                 : 0;
    return shape;
  }
  return std::nullopt;
}

// The catalogued profile for a task, its duration scaled to the task's epochs.
std::optional<SoloProfile> ProfileOf(const TaskShape& shape) {
  const SoloProfile* p =
      MatchWorkload(shape.model.model, shape.batch, shape.model.data, shape.epochs);
  if (!p) return std::nullopt;
  SoloProfile profile = *p;
  if (shape.epochs > 0 && shape.epochs != p->epochs) {
    profile.duration = p->duration * shape.epochs / p->epochs;
    profile.epochs = shape.epochs;
    const std::string& name = p->name;
    profile.name = Interned(fmt::format("{}-e{}", name.substr(0, name.rfind("-e")), shape.epochs));
    if (profile.warmup >= profile.duration) profile.warmup = profile.duration / 2;
  }
  return profile;
}

}  // namespace

std::optional<CarmaModel> CarmaModelOfScript(std::string_view script) {
  // CARMA's workloads/*.py (and the torchvision/DLRM programs its task files run) -> catalogue.
  static const struct {
    const char* script;
    CarmaModel model;
  } kScripts[] = {
      {"bert_base_on_wiki", {"bert_base", "wiki"}},
      {"bert_base_on_wiki_faketensor", {"bert_base", "wiki"}},
      {"bert_large_on_wiki", {"bert_large", "wiki"}},
      {"gpt2_large_on_wiki", {"gpt2_large", "wiki"}},
      {"gpt2_xl_on_wiki", {"gpt2_xl", "wiki"}},
      {"xlnet_base_cased", {"xlnet_base", "wiki"}},
      {"xlnet_large_cased", {"xlnet_large", "wiki"}},
      {"inception", {"inception", "imagenet"}},
      {"xception", {"xception", "imagenet"}},
      {"efficientnet", {"efficientnet_b0", "imagenet"}},
      {"mobilenet", {"mobilenet_v2", "imagenet"}},
      {"resnet50", {"resnet50", "imagenet"}},
      {"vgg", {"vgg16", "imagenet"}},
      {"densenet", {"densenet121", "imagenet"}},
      {"efficientnet_cifar100", {"efficientnet_b0", "cifar100"}},
      {"mobilenet_cifar100", {"mobilenetv3_small", "cifar100"}},
      {"resnet18_cifar100", {"resnet18", "cifar100"}},
      {"resnet34_cifar100", {"resnet34", "cifar100"}},
      {"unet", {"unet", "voc"}},
      {"dlrm_s_pytorch", {"dlrm", "criteo"}},
      {"dlrm", {"dlrm", "criteo"}},
      {"maskrcnn_resnet50_fpn", {"maskrcnn", "coco"}},
      {"maskrcnn", {"maskrcnn", "coco"}},
      {"mnist_train", {"mnist", "mnist"}},
  };
  const std::string key = Lower(script);
  for (const auto& s : kScripts) {
    if (key == s.script) return s.model;
  }
  return std::nullopt;
}

Result<Trace> ReadCarmaScript(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  // Absolute, so that the search for task files climbs above a relative script's directory
  // (carma:traces/x.sh finds ../tasks/a.rad from traces/).
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::absolute(path, ec).parent_path();
  Trace trace;
  trace.name = std::filesystem::path(path).stem().string();
  const std::vector<std::string> lines = Split(*text, '\n');
  std::map<std::string, bool> noted;
  double at = 0;
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string line(Trim(lines[n]));
    auto where = [&](const std::string& problem) {
      return InvalidArgument(fmt::format("{}:{}: {}", path, n + 1, problem));
    };
    if (line.empty() || line.front() == '#') continue;
    std::istringstream words(line);
    std::vector<std::string> argv;
    for (std::string w; words >> w;) argv.push_back(w);
    if (argv[0] == "sleep") {
      if (argv.size() != 2) return where("sleep takes one number of seconds");
      auto secs = ParseDouble(argv[1]);
      if (!secs.ok() || *secs < 0 || *secs > 1e7)
        return where(fmt::format("sleep '{}' is not a sane number of seconds", argv[1]));
      at += *secs;
      continue;
    }
    const bool submits = std::any_of(argv.begin(), argv.end(), [](const std::string& w) {
      return w.size() >= 9 && w.compare(w.size() - 9, 9, "submit.py") == 0;
    });
    if (!submits) continue;  // cd, echo, conda and the like do not change the trace
    auto task_arg = std::find(argv.begin(), argv.end(), "--task");
    if (task_arg == argv.end() || task_arg + 1 == argv.end())
      return where("submit.py without --task FILE");
    const std::filesystem::path named = *(task_arg + 1);
    const auto rad_path = FindTaskFile(named, dir);
    TraceJob job;
    job.submit = SecondsF(at);
    job.name = Interned(named.stem().string());
    std::optional<TaskShape> shape;
    int gpus = 0;
    if (rad_path) {
      auto rad_text = ReadFile(rad_path->string());
      if (!rad_text.ok()) return where(rad_text.status().message());
      auto task = ParseRad(*rad_text, rad_path->string());
      if (!task.ok()) return task.status();
      shape = ShapeOfCommand(task->command, task->batch);
      if (!shape) {
        return InvalidArgument(
            fmt::format("{}:3: cannot tell which catalogued model '{}' trains; the simulator "
                        "needs its solo profile (see `colo sim --list-workloads`)",
                        rad_path->string(), task->command));
      }
      gpus = task->gpus;
      job.task_file = std::make_shared<const TaskFileMemory>(
          TaskFileMemory{task->measured_peak, task->horus, task->faketensor, task->gpumemnet});
    } else {
      shape = ShapeOfName(named.stem().string());
      if (!shape) {
        return where(fmt::format("task file '{}' not found (also not under {} or its parents)",
                                 named.string(), dir.empty() ? "." : dir.string()));
      }
      if (!noted[named.string()]) {
        noted[named.string()] = true;
        trace.notes.push_back(fmt::format(
            "{}:{}: task file '{}' not found; replayed from its name as {} (catalogue memory, "
            "no estimator lines)",
            path, n + 1, named.string(), shape->model.model));
      }
    }
    auto profile = ProfileOf(*shape);
    if (!profile) {
      return where(fmt::format("model {} on {} is not catalogued (see `colo sim --list-workloads`)",
                               shape->model.model, shape->model.data));
    }
    job.profile = *profile;
    if (gpus > 0) job.profile.gpus = gpus;
    // The true peak stays the catalogue's (nvidia-smi's, CUDA context included, as table 6.2
    // gives it); a task file's line 8 is what CARMA's oracle policies plan with (est=rad:oracle).
    trace.jobs.push_back(std::move(job));
  }
  SortAndNumber(trace);
  return trace;
}

Result<Trace> ParsePhillyJson(const std::string& text, const std::string& origin,
                              const PhillyOptions& options) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument(fmt::format("{}: not valid JSON", origin));
  if (!doc.is_array())
    return InvalidArgument(fmt::format("{}: expected a JSON array of jobs", origin));
  struct Raw {
    int64_t submitted;
    int64_t duration;
    int gpus;
    std::string user;
  };
  std::vector<Raw> raws;
  for (const auto& entry : doc) {
    if (!entry.is_object()) continue;
    const std::string status = entry.value("status", "");
    if (std::find(options.statuses.begin(), options.statuses.end(), status) ==
        options.statuses.end())
      continue;
    const auto submitted = ParsePhillyTime(entry.value("submitted_time", nlohmann::json()));
    const auto attempts = entry.find("attempts");
    if (!submitted || attempts == entry.end() || !attempts->is_array() || attempts->empty())
      continue;
    const auto start = ParsePhillyTime(attempts->front().value("start_time", nlohmann::json()));
    const auto end = ParsePhillyTime(attempts->back().value("end_time", nlohmann::json()));
    if (!start || !end || *end <= *start) continue;
    int gpus = 0;
    const auto detail = attempts->front().find("detail");
    if (detail != attempts->front().end() && detail->is_array()) {
      for (const auto& d : *detail) {
        if (d.is_object() && d.contains("gpus") && d["gpus"].is_array())
          gpus += static_cast<int>(d["gpus"].size());
      }
    }
    if (gpus < 1) continue;
    raws.push_back({*submitted, *end - *start, gpus, entry.value("user", "philly")});
  }
  if (raws.empty())
    return InvalidArgument(fmt::format("{}: no usable jobs (status filter, times, GPUs)", origin));
  std::stable_sort(raws.begin(), raws.end(),
                   [](const Raw& a, const Raw& b) { return a.submitted < b.submitted; });
  if (options.max_jobs && raws.size() > options.max_jobs) raws.resize(options.max_jobs);
  Rng rng(options.seed);
  Trace trace;
  trace.name = std::filesystem::path(origin).stem().string();
  for (const Raw& r : raws) {
    TraceJob job;
    job.submit = Seconds(r.submitted - raws.front().submitted);
    job.profile = ProfileLike(rng, Seconds(r.duration), r.gpus);
    job.name = job.profile.name;
    job.owner = Interned(r.user);
    trace.jobs.push_back(std::move(job));
  }
  SortAndNumber(trace);
  return trace;
}

Result<Trace> ReadPhillyJson(const std::string& path, const PhillyOptions& options) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParsePhillyJson(*text, path, options);
}

Trace SyntheticPhilly(const SyntheticOptions& o) {
  Rng rng(o.seed);
  Trace trace;
  trace.name = fmt::format("synthetic-{}", o.jobs);
  trace.jobs.reserve(o.jobs);
  // Hyper-exponential inter-arrivals with balanced means give the requested CV.
  const double mean_gap = 3600.0 / o.jobs_per_hour;
  const double c2 = o.arrival_cv * o.arrival_cv;
  const double p1 = c2 > 1 ? 0.5 * (1.0 + std::sqrt((c2 - 1.0) / (c2 + 1.0))) : 1.0;
  const double mean1 = mean_gap / (2.0 * p1);
  const double mean2 = p1 < 1 ? mean_gap / (2.0 * (1.0 - p1)) : mean_gap;
  // Durations: log-normal with median 19 min and mean 3.6 h => sigma = sqrt(2 ln(mean/median)).
  const double mu = std::log(19.0 * 60.0);
  const double sigma = std::sqrt(2.0 * std::log(3.6 * 3600.0 / (19.0 * 60.0)));
  // Users: a burst of arrivals (the short gaps) is one user's sweep; a burst begins with a user
  // drawn with Zipf's weights 1/k, so that a few heavy users submit most jobs and the rest a few.
  const int users = std::max(1, o.users);
  std::vector<double> cumulative(static_cast<size_t>(users));
  double weight_sum = 0;
  for (int k = 0; k < users; ++k) cumulative[static_cast<size_t>(k)] = weight_sum += 1.0 / (k + 1);
  int owner = -1;
  Interned owner_name;  // the name of `owner`, made when it changes
  double at = 0;
  for (size_t i = 0; i < o.jobs; ++i) {
    const bool in_burst = rng.Uniform() < p1;
    at += in_burst ? rng.Exponential(mean1) : rng.Exponential(mean2);
    const double u = rng.Uniform();
    int gpus = u < 0.93 ? 1 : u < 0.96 ? 2 : u < 0.985 ? 4 : 8;
    gpus = std::min(gpus, o.max_gpus);
    const double seconds = std::clamp(rng.LogNormal(mu, sigma), 60.0, 14.0 * 86400.0);
    TraceJob job;
    job.submit = SecondsF(at);
    job.profile = ProfileLike(rng, SecondsF(seconds), gpus);
    job.name = job.profile.name;
    const double pick = rng.Uniform() * weight_sum;
    if (!in_burst || i == 0) {
      const int drawn = std::min(
          users - 1, static_cast<int>(std::lower_bound(cumulative.begin(), cumulative.end(), pick) -
                                      cumulative.begin()));
      if (drawn != owner) owner_name = Interned(fmt::format("user{}", drawn));
      owner = drawn;
    }
    job.owner = owner_name;
    trace.jobs.push_back(std::move(job));
  }
  SortAndNumber(trace);
  return trace;
}

TraceLoad DescribeLoad(const Trace& trace) {
  TraceLoad load;
  load.jobs = trace.jobs.size();
  if (trace.jobs.empty()) return load;
  double first = ToSeconds(trace.jobs.front().submit), last = first;
  for (const TraceJob& job : trace.jobs) {
    first = std::min(first, ToSeconds(job.submit));
    last = std::max(last, ToSeconds(job.submit));
  }
  load.span_s = last - first;
  double busy = 0, all_at_once = 0;
  for (const TraceJob& job : trace.jobs) {
    const double gpus = job.profile.gpus;
    const double start = ToSeconds(job.submit);
    const double duration = ToSeconds(job.profile.duration);
    load.gpu_hours += gpus * duration / 3600;
    busy += gpus * (std::min(start + duration, last) - start);
    all_at_once += gpus;
    const size_t g = static_cast<size_t>(job.profile.gpus);
    if (load.jobs_by_gpus.size() <= g) load.jobs_by_gpus.resize(g + 1, 0);
    ++load.jobs_by_gpus[g];
  }
  load.mean_demand_gpus = load.span_s > 0 ? busy / load.span_s : all_at_once;
  return load;
}

Result<Trace> LoadTrace(const std::string& source, const SyntheticOptions& synthetic) {
  if (source == "thesis-90" || source == "thesis90") return ThesisTrace(90);
  if (source == "thesis-60" || source == "thesis60") return ThesisTrace(60);
  if (source == "synthetic") return SyntheticPhilly(synthetic);
  if (StartsWith(source, "carma:")) return ReadCarmaScript(source.substr(6));
  if (StartsWith(source, "philly:")) {
    PhillyOptions options;
    options.seed = synthetic.seed;
    options.max_jobs = 0;  // the whole log
    return ReadPhillyJson(source.substr(7), options);
  }
  return ReadColoCsv(source);
}

}  // namespace colo

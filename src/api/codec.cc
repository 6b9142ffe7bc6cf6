#include "api/codec.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "api/output_pattern.h"

namespace colo::api {

using nlohmann::json;

namespace {

// --- Reading: every accessor checks type and range and remembers the first problem, naming the
// field, so a decoder reads like the schema and reports like a validator. ---
class FieldReader {
 public:
  FieldReader(const json& object, std::string prefix, Status* status)
      : object_(object), prefix_(std::move(prefix)), status_(status) {}

  bool Has(std::string_view key) const {
    const auto it = object_.find(key);
    return it != object_.end() && !it->is_null();
  }

  int64_t Int(std::string_view key, int64_t fallback, int64_t min, int64_t max) {
    const json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_number_integer()) {
      Fail(key, v->is_number() ? "must be a whole number" : "must be a number");
      return fallback;
    }
    // Unsigned values above int64's range do not fit; read them as unsigned first.
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
      Fail(key, fmt::format("must be at most {}", max));
      return fallback;
    }
    const int64_t value = v->get<int64_t>();
    if (value < min || value > max) {
      Fail(key, fmt::format("must be between {} and {}", min, max));
      return fallback;
    }
    return value;
  }

  double Number(std::string_view key, double fallback, double min, double max) {
    const json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_number()) {
      Fail(key, "must be a number");
      return fallback;
    }
    const double value = v->get<double>();
    if (!std::isfinite(value) || value < min || value > max) {
      Fail(key, fmt::format("must be between {} and {}", min, max));
      return fallback;
    }
    return value;
  }

  bool Bool(std::string_view key, bool fallback) {
    const json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) {
      Fail(key, "must be true or false");
      return fallback;
    }
    return v->get<bool>();
  }

  // JSON text is valid UTF-8 once parsed, so strings need only a length bound.
  std::string String(std::string_view key, std::string fallback, size_t max_bytes) {
    const json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_string()) {
      Fail(key, "must be a string");
      return fallback;
    }
    const auto& text = v->get_ref<const std::string&>();
    if (text.size() > max_bytes) {
      Fail(key, fmt::format("is longer than {} bytes", max_bytes));
      return fallback;
    }
    return text;
  }

  std::vector<std::string> Strings(std::string_view key, size_t max_items, size_t max_bytes) {
    std::vector<std::string> out;
    const json* v = Find(key);
    if (!v) return out;
    if (!v->is_array()) {
      Fail(key, "must be a list of strings");
      return out;
    }
    if (v->size() > max_items) {
      Fail(key, fmt::format("has more than {} entries", max_items));
      return out;
    }
    for (const json& item : *v) {
      if (!item.is_string()) {
        Fail(key, "must be a list of strings (every entry a string)");
        return {};
      }
      if (item.get_ref<const std::string&>().size() > max_bytes) {
        Fail(key, fmt::format("has an entry longer than {} bytes", max_bytes));
        return {};
      }
      out.push_back(item.get<std::string>());
    }
    return out;
  }

  // A nested object, or nullptr (absent, or not an object: then an error).
  const json* Object(std::string_view key) {
    const json* v = Find(key);
    if (!v) return nullptr;
    if (!v->is_object()) {
      Fail(key, "must be an object");
      return nullptr;
    }
    return v;
  }

  template <typename T>
  T Enum(std::string_view key, T fallback, Result<T> (*parse)(std::string_view)) {
    const std::string text = String(key, "", 64);
    if (text.empty()) return fallback;
    auto parsed = parse(text);
    if (!parsed.ok()) {
      Fail(key, parsed.status().message());
      return fallback;
    }
    return *parsed;
  }

  std::string Path(std::string_view key) const {
    return prefix_.empty() ? std::string(key) : fmt::format("{}.{}", prefix_, key);
  }
  void Fail(std::string_view key, std::string_view why) {
    if (status_->ok()) *status_ = InvalidArgument(fmt::format("{}: {}", Path(key), why));
  }

 private:
  const json* Find(std::string_view key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  const json& object_;
  std::string prefix_;
  Status* status_;
};

// A byte count given as a number of bytes or as text ("12GiB").
std::optional<Bytes> ReadBytes(FieldReader& r, const json& object, std::string_view key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  Bytes bytes;
  if (it->is_string()) {
    auto parsed = ParseBytes(r.String(key, "", 64));
    if (!parsed.ok()) {
      r.Fail(key, parsed.status().message());
      return std::nullopt;
    }
    bytes = *parsed;
  } else {
    bytes = Bytes(r.Int(key, 0, 0, kMaxMemoryBytes));
  }
  if (bytes <= Bytes(0) || bytes.count() > kMaxMemoryBytes) {
    r.Fail(key,
           fmt::format("must be more than 0 and at most {}", FormatBytes(Bytes(kMaxMemoryBytes))));
    return std::nullopt;
  }
  return bytes;
}

// --- Estimates ---
json ToJson(const JobEstimate& e) {
  json j{{"estimator", e.estimator}, {"peak", e.peak.count()}, {"lower", e.lower.count()},
         {"upper", e.upper.count()}, {"detail", e.detail},     {"signature", e.signature}};
  if (e.predicted_smact >= 0) j["predicted_smact"] = e.predicted_smact;
  if (e.learned)
    j["history"] = {{"runs", e.learned->runs},
                    {"peak", e.learned->peak.count()},
                    {"upper", e.learned->upper.count()},
                    {"solo_smact", e.learned->solo_smact}};
  return j;
}

std::optional<JobEstimate> ReadEstimate(const json& j, std::string_view prefix, Status* status) {
  FieldReader r(j, std::string(prefix), status);
  JobEstimate e;
  e.estimator = r.String("estimator", "", 64);
  e.peak = Bytes(r.Int("peak", 0, 1, kMaxMemoryBytes));
  e.lower = Bytes(r.Int("lower", e.peak.count(), 0, kMaxMemoryBytes));
  e.upper = Bytes(r.Int("upper", e.peak.count(), 1, kMaxMemoryBytes));
  e.detail = r.String("detail", "", 1024);
  e.signature = r.String("signature", "", 256);
  e.predicted_smact = r.Number("predicted_smact", -1, -1, 1);
  if (!r.Has("peak")) r.Fail("peak", "is required");
  if (status->ok() && !(e.lower <= e.peak && e.peak <= e.upper))
    r.Fail("upper", "needs lower <= peak <= upper");
  if (const json* h = r.Object("history")) {
    FieldReader hr(*h, r.Path("history"), status);
    JobEstimate::Learned learned;
    learned.runs = static_cast<int>(hr.Int("runs", 0, 0, 1 << 30));
    learned.peak = Bytes(hr.Int("peak", 0, 0, kMaxMemoryBytes));
    learned.upper = Bytes(hr.Int("upper", 0, 0, kMaxMemoryBytes));
    learned.solo_smact = hr.Number("solo_smact", -1, -1, 1);
    e.learned = learned;
  }
  if (!status->ok()) return std::nullopt;
  return e;
}

// --- Requests ---
struct RequestEncoder {
  json operator()(const HelloRequest&) const { return json{{"op", "hello"}}; }
  json operator()(const SubmitRequest& s) const {
    json j{{"op", "submit"},
           {"command", s.command},
           {"gpus", s.gpus},
           {"workdir", s.workdir},
           {"env", s.env},
           {"source", s.source},
           {"share", std::string(ToString(s.share))}};
    if (s.memory) j["memory"] = s.memory->count();
    if (s.estimate) j["estimate"] = ToJson(*s.estimate);
    if (s.threads) j["threads"] = *s.threads;
    if (s.expected_smact) j["expected_smact"] = *s.expected_smact;
    if (!s.name.empty()) j["name"] = s.name;
    if (s.time_limit_s > 0) j["time_limit_s"] = s.time_limit_s;
    if (!s.dependencies.empty()) {
      json deps = json::array();
      for (const Dependency& d : s.dependencies)
        deps.push_back({{"kind", std::string(ToString(d.kind))}, {"job", d.job}});
      j["dependencies"] = std::move(deps);
    }
    if (s.hold) j["hold"] = true;
    if (s.priority != 0) j["priority"] = s.priority;
    if (s.array) j["array"] = {{"tasks", s.array->tasks}, {"limit", s.array->limit}};
    if (!s.output.empty()) j["output"] = s.output;
    if (!s.error.empty()) j["error"] = s.error;
    return j;
  }
  json operator()(const ControlRequest& c) const {
    json j{{"op", "control"}, {"action", std::string(ToString(c.action))}, {"jobs", c.jobs}};
    if (c.each_alone) j["each_alone"] = true;
    return j;
  }
  json operator()(const QueueRequest& q) const { return json{{"op", "queue"}, {"user", q.user}}; }
  json operator()(const ShowRequest& q) const { return json{{"op", "show"}, {"job", q.job}}; }
  json operator()(const CancelRequest& q) const { return json{{"op", "cancel"}, {"job", q.job}}; }
  json operator()(const ExplainRequest& q) const { return json{{"op", "explain"}, {"job", q.job}}; }
  json operator()(const LogsRequest& q) const {
    json j{{"op", "logs"}, {"job", q.job}};
    if (q.attempt) j["attempt"] = *q.attempt;
    return j;
  }
  json operator()(const GpusRequest&) const { return json{{"op", "gpus"}}; }
  json operator()(const HistoryRequest& q) const {
    json j{{"op", "history"}, {"limit", q.limit}, {"all", q.all}};
    if (q.before) j["before"] = *q.before;
    return j;
  }
  json operator()(const SlurmAttachRequest& a) const {
    json j{{"op", "slurm_attach"},  {"job", a.job},   {"uid", a.uid},
           {"name", a.name},        {"gpus", a.gpus}, {"share", std::string(ToString(a.share))},
           {"restarts", a.restarts}};
    if (a.memory) j["memory"] = a.memory->count();
    return j;
  }
  json operator()(const SlurmEndRequest& e) const {
    json j{{"op", "slurm_end"}, {"job", e.job}};
    if (e.wait_status) j["wait_status"] = *e.wait_status;
    return j;
  }
  json operator()(const RunReportRequest& r) const {
    return json{
        {"op", "report"}, {"since", r.since}, {"until", r.until}, {"max_points", r.max_points}};
  }
  json operator()(const SlurmRunRequest& r) const {
    json j{{"op", "slurm_run"}, {"job", r.job}, {"restarts", r.restarts}, {"gpus", r.gpus}};
    if (r.share) j["share"] = std::string(ToString(*r.share));
    if (r.memory) j["memory"] = r.memory->count();
    return j;
  }
  json operator()(const EventsRequest& e) const {
    return json{{"op", "events"}, {"limit", e.limit}};
  }
};

uint32_t ReadSlurmJobId(FieldReader& r) {
  if (!r.Has("job")) r.Fail("job", "is required (a Slurm job id)");
  return static_cast<uint32_t>(r.Int("job", 0, 1, kMaxSlurmJobId));
}

SlurmAttachRequest ReadSlurmAttach(FieldReader& r, const json& j) {
  SlurmAttachRequest a;
  a.job = ReadSlurmJobId(r);
  if (!r.Has("uid")) r.Fail("uid", "is required (the job's user)");
  a.uid = static_cast<unsigned>(r.Int("uid", 0, 0, 0xfffffffe));
  a.name = r.String("name", "", 1024);
  a.gpus = static_cast<int>(r.Int("gpus", 1, 1, kMaxGpusPerJob));
  a.memory = ReadBytes(r, j, "memory");
  a.share = r.Enum("share", SharingPreference::kAny, &ParseSharingPreference);
  a.restarts = static_cast<int>(r.Int("restarts", 0, 0, 1 << 20));
  return a;
}

Result<SubmitRequest> ReadSubmit(const json& j) {
  Status status;
  FieldReader r(j, "", &status);
  SubmitRequest s;
  s.command = r.Strings("command", kMaxCommandWords, kMaxFieldBytes);
  if (status.ok() && s.command.empty())
    r.Fail("command", "is required (a non-empty list of strings)");
  if (status.ok() && s.command.front().empty()) r.Fail("command", "starts with an empty word");
  s.gpus = static_cast<int>(r.Int("gpus", 1, 1, kMaxGpusPerJob));
  s.memory = ReadBytes(r, j, "memory");
  if (const json* e = r.Object("estimate")) s.estimate = ReadEstimate(*e, "estimate", &status);
  s.share = r.Enum("share", SharingPreference::kAny, &ParseSharingPreference);
  if (r.Has("threads")) s.threads = static_cast<int>(r.Int("threads", 100, 1, 100));
  if (r.Has("expected_smact")) s.expected_smact = r.Number("expected_smact", -1, 0, 1);
  s.name = r.String("name", "", 1024);
  s.workdir = r.String("workdir", "", 4096);
  if (status.ok() && s.workdir.empty()) r.Fail("workdir", "is required (an absolute path)");
  s.env = r.Strings("env", kMaxEnvEntries, kMaxFieldBytes);
  for (const std::string& entry : s.env) {
    if (entry.find('=') == std::string::npos || entry.front() == '=' ||
        entry.find('\0') != std::string::npos) {
      r.Fail("env", "entries must be NAME=value");
      break;
    }
  }
  size_t command_bytes = 0, env_bytes = 0;
  for (const std::string& word : s.command) {
    command_bytes += word.size() + 1;
    if (word.find('\0') != std::string::npos) {
      r.Fail("command", "contains a NUL byte");
      break;
    }
  }
  for (const std::string& entry : s.env) env_bytes += entry.size() + 1;
  if (command_bytes > kMaxCommandBytes)
    r.Fail("command", fmt::format("is longer than {} bytes in all", kMaxCommandBytes));
  if (env_bytes > kMaxEnvBytes)
    r.Fail("env", fmt::format("is larger than {} bytes in all", kMaxEnvBytes));
  s.source = r.String("source", "cli", 4096);
  s.time_limit_s = r.Int("time_limit_s", 0, 0, kMaxTimeLimitSeconds);
  if (const auto it = j.find("dependencies"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() > kMaxDependencies) {
      r.Fail("dependencies", fmt::format("must be a list of at most {} objects", kMaxDependencies));
    } else {
      for (const json& d : *it) {
        if (!d.is_object()) {
          r.Fail("dependencies", "entries must be objects {\"kind\", \"job\"}");
          break;
        }
        FieldReader dr(d, "dependencies", &status);
        Dependency dep;
        dep.kind = dr.Enum("kind", DependencyKind::kAfterAny, &ParseDependencyKind);
        if (!dr.Has("job")) dr.Fail("job", "is required (a job id)");
        dep.job = dr.Int("job", 0, 1, kMaxJobId);
        s.dependencies.push_back(dep);
      }
    }
  }
  s.hold = r.Bool("hold", false);
  s.priority = static_cast<int>(r.Int("priority", 0, -kMaxPriority, kMaxPriority));
  if (const json* array = r.Object("array")) {
    FieldReader ar(*array, "array", &status);
    ArraySpec spec;
    spec.limit = static_cast<int>(ar.Int("limit", 0, 0, static_cast<int64_t>(kMaxArrayTasks)));
    const auto tasks = array->find("tasks");
    if (tasks == array->end() || !tasks->is_array() || tasks->empty() ||
        tasks->size() > kMaxArrayTasks) {
      ar.Fail("tasks", fmt::format("must be a list of 1 to {} task ids", kMaxArrayTasks));
    } else {
      for (const json& t : *tasks) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > kMaxArrayTaskId ||
            (!spec.tasks.empty() && t.get<int64_t>() <= spec.tasks.back())) {
          ar.Fail("tasks",
                  fmt::format("must be distinct ascending task ids from 0 to {}", kMaxArrayTaskId));
          break;
        }
        spec.tasks.push_back(static_cast<int>(t.get<int64_t>()));
      }
    }
    s.array = std::move(spec);
  }
  for (auto [field, value] : {std::pair{"output", &s.output}, std::pair{"error", &s.error}}) {
    *value = r.String(field, "", kMaxOutputPatternBytes);
    if (!r.Has(field)) continue;
    if (Status checked = CheckOutputPattern(*value); !checked.ok())
      r.Fail(field, checked.message());
  }
  if (!status.ok()) return status;
  return s;
}

Result<ControlRequest> ReadControl(const json& j) {
  Status status;
  FieldReader r(j, "", &status);
  ControlRequest c;
  if (!r.Has("action")) r.Fail("action", "is required (hold, release, requeue or cancel)");
  c.action = r.Enum("action", JobAction::kCancel, &ParseJobAction);
  const auto it = j.find("jobs");
  if (it == j.end() || !it->is_array() || it->empty() || it->size() > kMaxControlJobs) {
    r.Fail("jobs", fmt::format("must be a list of 1 to {} job ids", kMaxControlJobs));
  } else {
    for (const json& id : *it) {
      if (!id.is_number_integer() || id.get<int64_t>() < 1 || id.get<int64_t>() > kMaxJobId) {
        r.Fail("jobs", fmt::format("entries must be job ids (1 to {})", kMaxJobId));
        break;
      }
      c.jobs.push_back(id.get<int64_t>());
    }
  }
  c.each_alone = r.Bool("each_alone", false);
  if (!status.ok()) return status;
  return c;
}

JobId ReadJobId(FieldReader& r) {
  if (!r.Has("job")) r.Fail("job", "is required (a job id)");
  return r.Int("job", 0, 1, kMaxJobId);
}

// --- Replies ---
json ToJson(const AttemptInfo& a) {
  json j{{"number", a.number},
         {"pid", a.pid},
         {"gpus", a.gpus},
         {"gpu_uuids", a.gpu_uuids},
         {"mode", a.mode},
         {"thread_percent", a.thread_percent},
         {"memory_limit", a.memory_limit.count()},
         {"started", a.started},
         {"ended", a.ended},
         {"exit_kind", a.exit_kind},
         {"detail", a.detail},
         {"peak", a.peak.count()},
         {"over_plan", a.over_plan},
         {"solo_smact", a.solo_smact}};
  if (a.exit_code) j["exit_code"] = *a.exit_code;
  if (a.exit_signal) j["exit_signal"] = *a.exit_signal;
  return j;
}

json ToJson(const JobSummary& s) {
  json j{{"id", s.id},
         {"name", s.name},
         {"user", s.user},
         {"state", std::string(ToString(s.state))},
         {"gpus", s.gpus},
         {"submitted", s.submitted},
         {"started", s.started},
         {"finished", s.finished},
         {"reason", s.reason},
         {"attempts", s.attempts},
         {"share", std::string(ToString(s.share))},
         {"gpu_uuids", s.gpu_uuids},
         {"mode", s.mode},
         {"peak", s.peak.count()}};
  if (s.memory) j["memory"] = s.memory->count();
  if (s.slurm_job) j["slurm_job"] = *s.slurm_job;
  if (s.redacted) j["redacted"] = true;
  j["gpu_indices"] = s.gpu_indices;
  if (s.exit_code) j["exit_code"] = *s.exit_code;
  if (s.exit_signal) j["exit_signal"] = *s.exit_signal;
  if (s.time_limit_s > 0) j["time_limit_s"] = s.time_limit_s;
  if (s.priority != 0) j["priority"] = s.priority;
  if (s.array_job) {
    j["array_job"] = *s.array_job;
    j["array_task"] = s.array_task;
  }
  return j;
}

json ToJson(const JobDetail& d) {
  json j = ToJson(d.summary);
  j["command"] = d.command;
  j["workdir"] = d.workdir;
  j["source"] = d.source;
  if (d.estimate) j["estimate"] = ToJson(*d.estimate);
  json attempts = json::array();
  for (const AttemptInfo& a : d.attempt_list) attempts.push_back(ToJson(a));
  j["attempt_list"] = std::move(attempts);
  if (d.need) j["need"] = d.need->count();
  j["need_source"] = d.need_source;
  if (d.reservation) j["reservation"] = d.reservation->count();
  if (d.smact) j["smact"] = *d.smact;
  j["oom_count"] = d.oom_count;
  if (!d.output_file.empty()) j["output_file"] = d.output_file;
  if (!d.error_file.empty()) j["error_file"] = d.error_file;
  json events = json::array();
  for (const EventInfo& e : d.events)
    events.push_back({{"time", e.time}, {"kind", e.kind}, {"detail", e.detail}});
  j["events"] = std::move(events);
  return j;
}

std::string Line(json j) {
  j["ok"] = true;
  // Every string colod sends was made valid UTF-8 where it entered; replacing here is the last
  // guard, so a reply can always be encoded.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Reading replies (client side): the same readers, more forgiving of absent fields.
std::vector<std::string> StringList(FieldReader& r, std::string_view key) {
  return r.Strings(key, 1 << 20, 1 << 24);
}

AttemptInfo ReadAttempt(const json& j, Status* status) {
  FieldReader r(j, "attempt", status);
  AttemptInfo a;
  a.number = static_cast<int>(r.Int("number", 0, 0, 1 << 30));
  a.pid = static_cast<int>(r.Int("pid", 0, 0, 1 << 30));
  if (const auto it = j.find("gpus"); it != j.end() && it->is_array()) {
    for (const json& g : *it) {
      if (g.is_number_integer()) a.gpus.push_back(g.get<int>());
    }
  }
  a.gpu_uuids = StringList(r, "gpu_uuids");
  a.mode = r.String("mode", "", 64);
  a.thread_percent = static_cast<int>(r.Int("thread_percent", 100, 0, 100));
  a.memory_limit = Bytes(r.Int("memory_limit", 0, 0, kMaxMemoryBytes));
  a.started = r.Number("started", 0, 0, 1e12);
  a.ended = r.Number("ended", 0, 0, 1e12);
  a.exit_kind = r.String("exit_kind", "", 64);
  a.detail = r.String("detail", "", 1 << 20);
  a.peak = Bytes(r.Int("peak", 0, 0, kMaxMemoryBytes));
  a.over_plan = r.Bool("over_plan", false);
  a.solo_smact = r.Number("solo_smact", -1, -1, 1);
  if (r.Has("exit_code")) a.exit_code = static_cast<int>(r.Int("exit_code", 0, 0, 255));
  if (r.Has("exit_signal")) a.exit_signal = static_cast<int>(r.Int("exit_signal", 0, 1, 128));
  return a;
}

JobSummary ReadSummary(const json& j, Status* status) {
  FieldReader r(j, "job", status);
  JobSummary s;
  s.id = r.Int("id", 0, 0, kMaxJobId);
  s.name = r.String("name", "", 1 << 20);
  s.user = r.String("user", "", 1 << 20);
  s.state = r.Enum("state", JobState::kQueued, &ParseJobState);
  s.gpus = static_cast<int>(r.Int("gpus", 1, 0, kMaxGpusPerJob));
  s.submitted = r.Number("submitted", 0, 0, 1e12);
  s.started = r.Number("started", 0, 0, 1e12);
  s.finished = r.Number("finished", 0, 0, 1e12);
  s.reason = r.String("reason", "", 1 << 20);
  s.attempts = static_cast<int>(r.Int("attempts", 0, 0, 1 << 30));
  if (r.Has("memory")) s.memory = Bytes(r.Int("memory", 0, 0, kMaxMemoryBytes));
  s.share = r.Enum("share", SharingPreference::kAny, &ParseSharingPreference);
  s.gpu_uuids = StringList(r, "gpu_uuids");
  s.mode = r.String("mode", "", 64);
  s.peak = Bytes(r.Int("peak", 0, 0, kMaxMemoryBytes));
  if (r.Has("slurm_job"))
    s.slurm_job = static_cast<uint32_t>(r.Int("slurm_job", 0, 0, kMaxSlurmJobId));
  s.redacted = r.Bool("redacted", false);
  if (const auto it = j.find("gpu_indices"); it != j.end() && it->is_array()) {
    for (const json& g : *it) {
      if (g.is_number_integer()) s.gpu_indices.push_back(g.get<int>());
    }
  }
  if (r.Has("exit_code")) s.exit_code = static_cast<int>(r.Int("exit_code", 0, 0, 255));
  if (r.Has("exit_signal")) s.exit_signal = static_cast<int>(r.Int("exit_signal", 0, 1, 128));
  s.time_limit_s = r.Int("time_limit_s", 0, 0, kMaxTimeLimitSeconds);
  s.priority = static_cast<int>(r.Int("priority", 0, -kMaxPriority, kMaxPriority));
  if (r.Has("array_job")) {
    s.array_job = r.Int("array_job", 0, 0, kMaxJobId);
    s.array_task = static_cast<int>(r.Int("array_task", 0, 0, kMaxArrayTaskId));
  }
  return s;
}

JobDetail ReadDetail(const json& j, Status* status) {
  FieldReader r(j, "job", status);
  JobDetail d;
  d.summary = ReadSummary(j, status);
  d.command = StringList(r, "command");
  d.workdir = r.String("workdir", "", 1 << 20);
  d.source = r.String("source", "", 1 << 20);
  if (const json* e = r.Object("estimate")) d.estimate = ReadEstimate(*e, "job.estimate", status);
  if (const auto it = j.find("attempt_list"); it != j.end() && it->is_array()) {
    for (const json& a : *it) {
      if (a.is_object()) d.attempt_list.push_back(ReadAttempt(a, status));
    }
  }
  if (r.Has("need")) d.need = Bytes(r.Int("need", 0, 0, kMaxMemoryBytes));
  d.need_source = r.String("need_source", "", 64);
  if (r.Has("reservation")) d.reservation = Bytes(r.Int("reservation", 0, 0, kMaxMemoryBytes));
  if (r.Has("smact")) d.smact = r.Number("smact", 0, 0, 1);
  d.oom_count = static_cast<int>(r.Int("oom_count", 0, 0, 1 << 30));
  d.output_file = r.String("output_file", "", 1 << 20);
  d.error_file = r.String("error_file", "", 1 << 20);
  if (const auto it = j.find("events"); it != j.end() && it->is_array()) {
    for (const json& e : *it) {
      if (!e.is_object()) continue;
      FieldReader er(e, "event", status);
      d.events.push_back(EventInfo{er.Number("time", 0, 0, 1e12), er.String("kind", "", 1 << 20),
                                   er.String("detail", "", 1 << 24)});
    }
  }
  return d;
}

std::vector<JobSummary> ReadSummaries(const json& j, Status* status) {
  std::vector<JobSummary> out;
  if (const auto it = j.find("jobs"); it != j.end() && it->is_array()) {
    for (const json& s : *it) {
      if (s.is_object()) out.push_back(ReadSummary(s, status));
    }
  }
  return out;
}

template <typename T>
struct ReplyReader;

template <>
struct ReplyReader<SlurmAttachReply> {
  static SlurmAttachReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    SlurmAttachReply a;
    a.state = r.Enum("state", SlurmPlacement::kFailed, &ParseSlurmPlacement);
    a.job = r.Int("job", 0, 0, kMaxJobId);
    a.env = r.Strings("env", 256, 64 * 1024);
    a.env_defaults = r.Strings("env_defaults", 64, 16 * 1024);
    a.reason = r.String("reason", "", 1 << 20);
    return a;
  }
};
template <>
struct ReplyReader<SlurmEndReply> {
  static SlurmEndReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    return SlurmEndReply{r.Int("job", 0, 0, kMaxJobId), r.String("state", "", 64)};
  }
};
template <>
struct ReplyReader<SlurmRunReply> {
  static SlurmRunReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    return SlurmRunReply{static_cast<uint32_t>(r.Int("job", 0, 0, kMaxSlurmJobId)),
                         static_cast<int>(r.Int("restarts", 0, 0, 1 << 20))};
  }
};

template <>
struct ReplyReader<ControlReply> {
  static ControlReply Read(const json& j, Status* status) {
    ControlReply c;
    if (const auto it = j.find("results"); it != j.end() && it->is_array()) {
      for (const json& e : *it) {
        if (!e.is_object()) continue;
        FieldReader er(e, "results", status);
        ControlResult result;
        result.job = er.Int("job", 0, 0, kMaxJobId);
        result.ok = er.Bool("ok", false);
        result.state = er.String("state", "", 64);
        result.error = er.String("error", "", 1 << 16);
        result.code =
            ParseErrorCode(er.String("code", "internal", 64)).value_or(ErrorCode::kInternal);
        c.results.push_back(std::move(result));
      }
    }
    return c;
  }
};

template <>
struct ReplyReader<HelloReply> {
  static HelloReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    HelloReply h;
    h.server = r.String("server", "", 256);
    h.api = static_cast<int>(r.Int("api", 0, 0, 1 << 20));
    h.gpu_backend = r.String("gpus", "", 256);
    h.user = r.String("user", "", 256);
    h.personal = r.Bool("personal", false);
    return h;
  }
};
template <>
struct ReplyReader<SubmitReply> {
  static SubmitReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    return SubmitReply{r.Int("job", 0, 0, kMaxJobId)};
  }
};
template <>
struct ReplyReader<QueueReply> {
  static QueueReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    QueueReply q;
    q.jobs = ReadSummaries(j, status);
    q.main_queue = static_cast<int>(r.Int("main_queue", 0, 0, 1 << 30));
    q.recovery_queue = static_cast<int>(r.Int("recovery_queue", 0, 0, 1 << 30));
    return q;
  }
};
template <>
struct ReplyReader<ShowReply> {
  static ShowReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    ShowReply s;
    if (const json* job = r.Object("job")) s.job = ReadDetail(*job, status);
    return s;
  }
};
template <>
struct ReplyReader<CancelReply> {
  static CancelReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    return CancelReply{r.Int("job", 0, 0, kMaxJobId), r.String("state", "", 64)};
  }
};
template <>
struct ReplyReader<ExplainReply> {
  static ExplainReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    ExplainReply e;
    e.job = r.Int("job", 0, 0, kMaxJobId);
    e.state = r.Enum("state", JobState::kQueued, &ParseJobState);
    e.summary = r.String("summary", "", 1 << 20);
    e.position = static_cast<int>(r.Int("position", 0, 0, 1 << 30));
    e.queue = r.String("queue", "", 64);
    if (const auto it = j.find("gpus"); it != j.end() && it->is_array()) {
      for (const json& g : *it) {
        if (!g.is_object()) continue;
        FieldReader gr(g, "gpus", status);
        e.gpus.push_back(GateInfo{static_cast<int>(gr.Int("gpu", 0, 0, 1 << 20)),
                                  gr.String("gate", "", 64), gr.String("detail", "", 1 << 16)});
      }
    }
    return e;
  }
};
template <>
struct ReplyReader<LogsReply> {
  static LogsReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    LogsReply l;
    l.job = r.Int("job", 0, 0, kMaxJobId);
    l.state = r.Enum("state", JobState::kQueued, &ParseJobState);
    l.attempt = static_cast<int>(r.Int("attempt", 0, 0, 1 << 30));
    l.stdout_path = r.String("stdout", "", 1 << 16);
    l.stderr_path = r.String("stderr", "", 1 << 16);
    return l;
  }
};
template <>
struct ReplyReader<GpusReply> {
  static GpusReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    GpusReply out;
    out.backend = r.String("backend", "", 256);
    if (const auto it = j.find("gpus"); it != j.end() && it->is_array()) {
      for (const json& g : *it) {
        if (!g.is_object()) continue;
        FieldReader gr(g, "gpus", status);
        GpuInfoReply info;
        info.index = static_cast<int>(gr.Int("index", 0, 0, 1 << 20));
        info.uuid = gr.String("uuid", "", 256);
        info.name = gr.String("name", "", 256);
        info.mode = gr.String("mode", "", 64);
        info.memory_total = Bytes(gr.Int("memory_total", 0, 0, kMaxMemoryBytes));
        info.free_for_placement =
            Bytes(gr.Int("free_for_placement", 0, -kMaxMemoryBytes, kMaxMemoryBytes));
        info.smact_risk = gr.Number("smact_risk", -1, -1, 1e9);
        if (gr.Has("memory_used"))
          info.memory_used = Bytes(gr.Int("memory_used", 0, 0, kMaxMemoryBytes));
        info.smact = gr.Number("smact", -1, -1, 1e9);
        info.smocc = gr.Number("smocc", -1, -1, 1e9);
        info.utilization = gr.Number("utilization", -1, -1, 1e9);
        info.power_watts = gr.Number("power_watts", -1, -1, 1e9);
        info.energy_joules = gr.Number("energy_joules", -1, -1, 1e18);
        info.sample_age_s = gr.Number("sample_age_s", -1, -1e12, 1e12);
        info.sample_error = gr.String("sample_error", "", 1 << 16);
        info.activity_source = gr.String("activity_source", "", 64);
        info.activity_note = gr.String("activity_note", "", 1 << 12);
        if (const auto jobs = g.find("jobs"); jobs != g.end() && jobs->is_array()) {
          for (const json& job : *jobs) {
            if (!job.is_object()) continue;
            FieldReader jr(job, "gpus.jobs", status);
            info.jobs.push_back(GpuJobInfo{jr.Int("id", 0, 0, kMaxJobId),
                                           jr.String("name", "", 1 << 20),
                                           jr.String("user", "", 256), jr.String("mode", "", 64),
                                           Bytes(jr.Int("peak", 0, 0, kMaxMemoryBytes)),
                                           Bytes(jr.Int("used", 0, 0, kMaxMemoryBytes)),
                                           Bytes(jr.Int("reservation", 0, 0, kMaxMemoryBytes))});
          }
        }
        out.gpus.push_back(std::move(info));
      }
    }
    return out;
  }
};
template <>
struct ReplyReader<HistoryReply> {
  static HistoryReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    HistoryReply h;
    h.jobs = ReadSummaries(j, status);
    if (r.Has("next")) h.next = r.Int("next", 0, 0, kMaxJobId);
    return h;
  }
};

template <>
struct ReplyReader<RunReportReply> {
  static RunReportReply Read(const json& j, Status* status) {
    FieldReader r(j, "", status);
    RunReportReply out;
    out.since = r.Number("since", 0, 0, 1e12);
    out.until = r.Number("until", 0, 0, 1e12);
    out.backend = r.String("backend", "", 256);
    out.policy = r.String("policy", "", 4096);
    out.bucket_seconds = r.Number("bucket_seconds", 0, 0, 1e12);
    out.jobs_truncated = r.Bool("jobs_truncated", false);
    out.history_points = r.Int("history_points", 0, 0, INT64_MAX);
    out.history_flushes = r.Int("history_flushes", 0, 0, INT64_MAX);
    out.history_write_seconds = r.Number("history_write_seconds", 0, 0, 1e12);
    out.history_error = r.String("history_error", "", 1 << 16);
    const auto each = [&](const char* key, auto read) {
      if (const auto it = j.find(key); it != j.end() && it->is_array()) {
        for (const json& item : *it) {
          if (!item.is_object()) continue;
          FieldReader ir(item, key, status);
          read(ir, item);
        }
      }
    };
    each("gpus", [&](FieldReader& g, const json&) {
      out.gpus.push_back(RunGpu{static_cast<int>(g.Int("index", 0, 0, 1 << 20)),
                                g.String("uuid", "", 256), g.String("name", "", 256),
                                Bytes(g.Int("memory_total", 0, 0, kMaxMemoryBytes))});
    });
    const auto optional = [](FieldReader& p, const char* key, double max) {
      return p.Has(key) ? std::optional<double>(p.Number(key, 0, 0, max)) : std::nullopt;
    };
    each("gpu_points", [&](FieldReader& p, const json&) {
      out.gpu_points.push_back(
          RunGpuPoint{p.Number("time", 0, 0, 1e12), static_cast<int>(p.Int("gpu", 0, 0, 1 << 20)),
                      optional(p, "memory_used", 1e18), optional(p, "smact", 1e9),
                      optional(p, "smocc", 1e9), optional(p, "drama", 1e9),
                      optional(p, "power_watts", 1e6), optional(p, "energy_joules", 1e18)});
    });
    each("job_points", [&](FieldReader& p, const json&) {
      out.job_points.push_back(RunJobPoint{
          p.Number("time", 0, 0, 1e12), p.Int("job", 0, 0, kMaxJobId),
          static_cast<int>(p.Int("gpu", 0, 0, 1 << 20)), p.Number("memory", 0, 0, 1e18)});
    });
    each("queue_points", [&](FieldReader& p, const json&) {
      out.queue_points.push_back(RunQueuePoint{p.Number("time", 0, 0, 1e12),
                                               p.Number("queued", 0, 0, 1e9),
                                               p.Number("running", 0, 0, 1e9)});
    });
    each("jobs", [&](FieldReader&, const json& item) {
      RunJob job;
      job.summary = ReadSummary(item, status);
      if (const auto it = item.find("attempt_list"); it != item.end() && it->is_array()) {
        for (const json& a : *it) {
          if (a.is_object()) job.attempts.push_back(ReadAttempt(a, status));
        }
      }
      out.jobs.push_back(std::move(job));
    });
    return out;
  }
};

template <>
struct ReplyReader<EventsReply> {
  static EventsReply Read(const json& j, Status* status) {
    EventsReply out;
    const auto it = j.find("events");
    if (it == j.end() || !it->is_array()) return out;
    for (const json& e : *it) {
      if (!e.is_object()) continue;
      FieldReader r(e, "events", status);
      RecentEvent event;
      event.job = r.Int("job", 0, 0, kMaxJobId);
      event.user = r.String("user", "", 256);
      event.name = r.String("name", "", 1 << 16);
      event.time = r.Number("time", 0, 0, 1e12);
      event.kind = r.String("kind", "", 256);
      event.detail = r.String("detail", "", 1 << 16);
      event.redacted = r.Bool("redacted", false);
      out.events.push_back(std::move(event));
    }
    return out;
  }
};

}  // namespace

std::string_view ToString(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kInfeasible:
      return "infeasible";
    case ErrorCode::kFailedPrecondition:
      return "failed_precondition";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kBusy:
      return "busy";
    case ErrorCode::kTooLarge:
      return "too_large";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

std::optional<ErrorCode> ParseErrorCode(std::string_view text) {
  for (int i = 0; i <= static_cast<int>(ErrorCode::kInternal); ++i) {
    if (ToString(static_cast<ErrorCode>(i)) == text) return static_cast<ErrorCode>(i);
  }
  return std::nullopt;
}

Status ToStatus(ErrorCode code, std::string message) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return InvalidArgument(std::move(message));
    case ErrorCode::kNotFound:
      return NotFound(std::move(message));
    case ErrorCode::kPermissionDenied:
      return PermissionDenied(std::move(message));
    case ErrorCode::kInfeasible:
      return InfeasibleStatus(std::move(message));
    case ErrorCode::kFailedPrecondition:
      return FailedPrecondition(std::move(message));
    case ErrorCode::kUnavailable:
      return Unavailable(std::move(message));
    case ErrorCode::kBusy:
    case ErrorCode::kTooLarge:
      return ResourceExhausted(std::move(message));
    case ErrorCode::kInternal:
      break;
  }
  return Internal(std::move(message));
}

ErrorCode CodeOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return ErrorCode::kInvalidArgument;
    case StatusCode::kNotFound:
      return ErrorCode::kNotFound;
    case StatusCode::kPermissionDenied:
      return ErrorCode::kPermissionDenied;
    case StatusCode::kInfeasible:
      return ErrorCode::kInfeasible;
    case StatusCode::kFailedPrecondition:
      return ErrorCode::kFailedPrecondition;
    case StatusCode::kUnavailable:
      return ErrorCode::kUnavailable;
    case StatusCode::kResourceExhausted:
      return ErrorCode::kBusy;
    case StatusCode::kOk:
    case StatusCode::kInternal:
      break;
  }
  return ErrorCode::kInternal;
}

std::string_view OpName(const Request& request) {
  static constexpr std::string_view kNames[] = {
      "hello",   "submit",       "queue",     "show",      "cancel",  "explain", "logs",  "gpus",
      "history", "slurm_attach", "slurm_end", "slurm_run", "control", "report",  "events"};
  return kNames[request.index()];
}

std::string EncodeRequest(const Request& request) {
  json j = std::visit(RequestEncoder{}, request);
  j["api"] = kVersion;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Request> DecodeRequest(std::string_view line) {
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("request is not a JSON object");
  const auto api = j.find("api");
  if (api == j.end() || !api->is_number_integer() || api->get<int64_t>() != kVersion) {
    return FailedPrecondition(
        fmt::format("unsupported API version {} (colod speaks {}; \"api\" must be the number {})",
                    // Named by its type, never printed: a client's value can be nested deep
                    // enough to overflow any recursive printer.
                    api == j.end()             ? "(none)"
                    : api->is_number_integer() ? std::to_string(api->get<int64_t>())
                                               : std::string("of type ") + api->type_name(),
                    kVersion, kVersion));
  }
  Status status;
  FieldReader r(j, "", &status);
  const std::string op = r.String("op", "", 64);
  if (!status.ok()) return status;
  Request request;
  if (op == "hello") {
    request = HelloRequest{};
  } else if (op == "submit") {
    auto submit = ReadSubmit(j);
    if (!submit.ok()) return submit.status();
    request = std::move(*submit);
  } else if (op == "queue") {
    request = QueueRequest{r.String("user", "", 256)};
  } else if (op == "show") {
    request = ShowRequest{ReadJobId(r)};
  } else if (op == "cancel") {
    request = CancelRequest{ReadJobId(r)};
  } else if (op == "explain") {
    request = ExplainRequest{ReadJobId(r)};
  } else if (op == "logs") {
    LogsRequest l{ReadJobId(r), std::nullopt};
    if (r.Has("attempt")) l.attempt = static_cast<int>(r.Int("attempt", 1, 1, 1 << 30));
    request = l;
  } else if (op == "gpus") {
    request = GpusRequest{};
  } else if (op == "history") {
    HistoryRequest h;
    h.limit = static_cast<int>(r.Int("limit", 50, 1, kMaxHistoryPage));
    if (r.Has("before")) h.before = r.Int("before", 0, 1, kMaxJobId);
    h.all = r.Bool("all", false);
    request = h;
  } else if (op == "control") {
    auto control = ReadControl(j);
    if (!control.ok()) return control.status();
    request = std::move(*control);
  } else if (op == "report") {
    RunReportRequest q;
    // Seconds since the epoch up to 2096: colod's clocks count nanoseconds in 64 bits.
    q.since = r.Number("since", 0, 0, 4e9);
    q.until = r.Number("until", 0, 0, 4e9);
    q.max_points = static_cast<int>(r.Int("max_points", 2000, 10, kMaxReportPoints));
    request = q;
  } else if (op == "slurm_attach") {
    request = ReadSlurmAttach(r, j);
  } else if (op == "slurm_end") {
    SlurmEndRequest e;
    e.job = ReadSlurmJobId(r);
    if (r.Has("wait_status")) e.wait_status = static_cast<int>(r.Int("wait_status", 0, 0, 0xffff));
    request = e;
  } else if (op == "slurm_run") {
    SlurmRunRequest run;
    run.job = ReadSlurmJobId(r);
    run.restarts = static_cast<int>(r.Int("restarts", 0, 0, 1 << 20));
    run.gpus = static_cast<int>(r.Int("gpus", 0, 0, kMaxGpusPerJob));
    if (r.Has("share"))
      run.share = r.Enum("share", SharingPreference::kAny, &ParseSharingPreference);
    run.memory = ReadBytes(r, j, "memory");
    request = run;
  } else if (op == "events") {
    request = EventsRequest{static_cast<int>(r.Int("limit", 50, 1, kMaxRecentEvents))};
  } else {
    return InvalidArgument(op.empty() ? "request has no \"op\""
                                      : fmt::format("unknown op '{}'", op.substr(0, 64)));
  }
  if (!status.ok()) return status;
  return request;
}

std::string EncodeReply(const HelloReply& h) {
  return Line({{"server", h.server},
               {"api", h.api},
               {"gpus", h.gpu_backend},
               {"user", h.user},
               {"personal", h.personal}});
}
std::string EncodeReply(const SubmitReply& s) {
  return Line({{"job", s.job}});
}
std::string EncodeReply(const QueueReply& q) {
  json jobs = json::array();
  for (const JobSummary& s : q.jobs) jobs.push_back(ToJson(s));
  return Line({{"jobs", std::move(jobs)},
               {"main_queue", q.main_queue},
               {"recovery_queue", q.recovery_queue}});
}
std::string EncodeReply(const ShowReply& s) {
  return Line({{"job", ToJson(s.job)}});
}
std::string EncodeReply(const CancelReply& c) {
  return Line({{"job", c.job}, {"state", c.state}});
}
std::string EncodeReply(const ExplainReply& e) {
  json gpus = json::array();
  for (const GateInfo& g : e.gpus)
    gpus.push_back({{"gpu", g.gpu}, {"gate", g.gate}, {"detail", g.detail}});
  json j{{"job", e.job},
         {"state", std::string(ToString(e.state))},
         {"summary", e.summary},
         {"gpus", std::move(gpus)}};
  if (e.position > 0) {
    j["position"] = e.position;
    j["queue"] = e.queue;
  }
  return Line(std::move(j));
}
std::string EncodeReply(const LogsReply& l) {
  return Line({{"job", l.job},
               {"state", std::string(ToString(l.state))},
               {"attempt", l.attempt},
               {"stdout", l.stdout_path},
               {"stderr", l.stderr_path}});
}
std::string EncodeReply(const GpusReply& g) {
  json gpus = json::array();
  for (const GpuInfoReply& i : g.gpus) {
    json j{{"index", i.index},
           {"uuid", i.uuid},
           {"name", i.name},
           {"mode", i.mode},
           {"memory_total", i.memory_total.count()},
           {"free_for_placement", i.free_for_placement.count()},
           {"smact_risk", i.smact_risk}};
    if (i.memory_used) {
      j["memory_used"] = i.memory_used->count();
      j["smact"] = i.smact;
      j["smocc"] = i.smocc;
      j["utilization"] = i.utilization;
      j["power_watts"] = i.power_watts;
      j["energy_joules"] = i.energy_joules;
      j["sample_age_s"] = i.sample_age_s;
    }
    if (!i.sample_error.empty()) j["sample_error"] = i.sample_error;
    if (!i.activity_source.empty()) j["activity_source"] = i.activity_source;
    if (!i.activity_note.empty()) j["activity_note"] = i.activity_note;
    json jobs = json::array();
    for (const GpuJobInfo& job : i.jobs)
      jobs.push_back({{"id", job.id},
                      {"name", job.name},
                      {"user", job.user},
                      {"mode", job.mode},
                      {"peak", job.peak.count()},
                      {"used", job.used.count()},
                      {"reservation", job.reservation.count()}});
    j["jobs"] = std::move(jobs);
    gpus.push_back(std::move(j));
  }
  return Line({{"gpus", std::move(gpus)}, {"backend", g.backend}});
}
std::string EncodeReply(const HistoryReply& h) {
  json jobs = json::array();
  for (const JobSummary& s : h.jobs) jobs.push_back(ToJson(s));
  json j{{"jobs", std::move(jobs)}};
  if (h.next) j["next"] = *h.next;
  return Line(std::move(j));
}

std::string_view ToString(SlurmPlacement p) {
  switch (p) {
    case SlurmPlacement::kPlaced:
      return "placed";
    case SlurmPlacement::kWaiting:
      return "waiting";
    case SlurmPlacement::kRequeue:
      return "requeue";
    case SlurmPlacement::kFailed:
      break;
  }
  return "failed";
}
Result<SlurmPlacement> ParseSlurmPlacement(std::string_view text) {
  for (SlurmPlacement p : {SlurmPlacement::kPlaced, SlurmPlacement::kWaiting,
                           SlurmPlacement::kRequeue, SlurmPlacement::kFailed}) {
    if (text == ToString(p)) return p;
  }
  return InvalidArgument(fmt::format("unknown placement state '{}'", text.substr(0, 64)));
}

std::string EncodeReply(const SlurmAttachReply& a) {
  return Line({{"state", std::string(ToString(a.state))},
               {"job", a.job},
               {"env", a.env},
               {"env_defaults", a.env_defaults},
               {"reason", a.reason}});
}
std::string EncodeReply(const ControlReply& c) {
  json results = json::array();
  for (const ControlResult& r : c.results) {
    json e{{"job", r.job}, {"ok", r.ok}};
    if (r.ok) {
      e["state"] = r.state;
    } else {
      e["error"] = r.error;
      e["code"] = std::string(ToString(r.code));
    }
    results.push_back(std::move(e));
  }
  return Line({{"results", std::move(results)}});
}

namespace {
template <typename Enum, size_t N>
Result<Enum> ParseNamed(std::string_view text, const Enum (&all)[N], std::string_view what) {
  std::string names;
  for (Enum value : all) {
    if (ToString(value) == text) return value;
    names += (names.empty() ? "" : ", ") + std::string(ToString(value));
  }
  return InvalidArgument(
      fmt::format("unknown {} '{}' (one of {})", what, text.substr(0, 64), names));
}
}  // namespace

std::string_view ToString(DependencyKind kind) {
  switch (kind) {
    case DependencyKind::kAfterOk:
      return "afterok";
    case DependencyKind::kAfterAny:
      return "afterany";
    case DependencyKind::kAfterNotOk:
      break;
  }
  return "afternotok";
}
Result<DependencyKind> ParseDependencyKind(std::string_view text) {
  static constexpr DependencyKind kAll[] = {DependencyKind::kAfterOk, DependencyKind::kAfterAny,
                                            DependencyKind::kAfterNotOk};
  return ParseNamed(text, kAll, "dependency kind");
}
std::string_view ToString(JobAction action) {
  switch (action) {
    case JobAction::kHold:
      return "hold";
    case JobAction::kRelease:
      return "release";
    case JobAction::kRequeue:
      return "requeue";
    case JobAction::kCancel:
      break;
  }
  return "cancel";
}
Result<JobAction> ParseJobAction(std::string_view text) {
  static constexpr JobAction kAll[] = {JobAction::kHold, JobAction::kRelease, JobAction::kRequeue,
                                       JobAction::kCancel};
  return ParseNamed(text, kAll, "action");
}

std::string EncodeReply(const SlurmEndReply& e) {
  return Line({{"job", e.job}, {"state", e.state}});
}
std::string EncodeReply(const SlurmRunReply& run) {
  return Line({{"job", run.job}, {"restarts", run.restarts}});
}

std::string EncodeReply(const RunReportReply& r) {
  json gpus = json::array();
  for (const RunGpu& g : r.gpus)
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"name", g.name},
                    {"memory_total", g.memory_total.count()}});
  // Absent values are left out of a point, so a reader can never take them for a reading.
  json gpu_points = json::array();
  for (const RunGpuPoint& p : r.gpu_points) {
    json j{{"time", p.time}, {"gpu", p.gpu}};
    const auto put = [&](const char* key, const std::optional<double>& v) {
      if (v && std::isfinite(*v)) j[key] = *v;
    };
    put("memory_used", p.memory_used);
    put("smact", p.smact);
    put("smocc", p.smocc);
    put("drama", p.drama);
    put("power_watts", p.power_watts);
    put("energy_joules", p.energy_joules);
    gpu_points.push_back(std::move(j));
  }
  json job_points = json::array();
  for (const RunJobPoint& p : r.job_points)
    job_points.push_back({{"time", p.time}, {"job", p.job}, {"gpu", p.gpu}, {"memory", p.memory}});
  json queue_points = json::array();
  for (const RunQueuePoint& p : r.queue_points)
    queue_points.push_back({{"time", p.time}, {"queued", p.queued}, {"running", p.running}});
  json jobs = json::array();
  for (const RunJob& job : r.jobs) {
    json j = ToJson(job.summary);
    json attempts = json::array();
    for (const AttemptInfo& a : job.attempts) attempts.push_back(ToJson(a));
    j["attempt_list"] = std::move(attempts);
    jobs.push_back(std::move(j));
  }
  json j{{"since", r.since},
         {"until", r.until},
         {"backend", r.backend},
         {"policy", r.policy},
         {"gpus", std::move(gpus)},
         {"gpu_points", std::move(gpu_points)},
         {"job_points", std::move(job_points)},
         {"queue_points", std::move(queue_points)},
         {"bucket_seconds", r.bucket_seconds},
         {"jobs", std::move(jobs)},
         {"jobs_truncated", r.jobs_truncated},
         {"history_points", r.history_points},
         {"history_flushes", r.history_flushes},
         {"history_write_seconds", r.history_write_seconds}};
  if (!r.history_error.empty()) j["history_error"] = r.history_error;
  return Line(std::move(j));
}

std::string EncodeReply(const EventsReply& e) {
  json events = json::array();
  for (const RecentEvent& event : e.events) {
    json j{{"job", event.job},   {"user", event.user}, {"name", event.name},
           {"time", event.time}, {"kind", event.kind}, {"detail", event.detail}};
    if (event.redacted) j["redacted"] = true;
    events.push_back(std::move(j));
  }
  return Line({{"events", std::move(events)}});
}

std::string EncodeError(ErrorCode code, std::string_view message) {
  const json j{
      {"ok", false}, {"error", std::string(message)}, {"code", std::string(ToString(code))}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}
std::string EncodeError(const Status& error) {
  return EncodeError(CodeOf(error), error.message());
}

template <typename T>
Result<T> DecodeReply(std::string_view line) {
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Internal("colod sent a reply that is not JSON");
  const auto ok = j.find("ok");
  if (ok == j.end() || !ok->is_boolean()) return Internal("colod sent a reply without \"ok\"");
  if (!ok->get<bool>()) {
    Status status;
    FieldReader r(j, "", &status);
    const std::string message = r.String("error", "failed", 1 << 20);
    const auto code = ParseErrorCode(r.String("code", "internal", 64));
    return ToStatus(code.value_or(ErrorCode::kInternal), message);
  }
  Status status;
  T reply = ReplyReader<T>::Read(j, &status);
  if (!status.ok()) return Internal("colod sent a malformed reply: " + status.message());
  return reply;
}

template Result<HelloReply> DecodeReply<HelloReply>(std::string_view);
template Result<SubmitReply> DecodeReply<SubmitReply>(std::string_view);
template Result<QueueReply> DecodeReply<QueueReply>(std::string_view);
template Result<ShowReply> DecodeReply<ShowReply>(std::string_view);
template Result<CancelReply> DecodeReply<CancelReply>(std::string_view);
template Result<ExplainReply> DecodeReply<ExplainReply>(std::string_view);
template Result<LogsReply> DecodeReply<LogsReply>(std::string_view);
template Result<GpusReply> DecodeReply<GpusReply>(std::string_view);
template Result<HistoryReply> DecodeReply<HistoryReply>(std::string_view);
template Result<SlurmAttachReply> DecodeReply<SlurmAttachReply>(std::string_view);
template Result<SlurmEndReply> DecodeReply<SlurmEndReply>(std::string_view);
template Result<SlurmRunReply> DecodeReply<SlurmRunReply>(std::string_view);
template Result<ControlReply> DecodeReply<ControlReply>(std::string_view);
template Result<RunReportReply> DecodeReply<RunReportReply>(std::string_view);
template Result<EventsReply> DecodeReply<EventsReply>(std::string_view);

}  // namespace colo::api

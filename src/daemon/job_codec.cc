// Job records to and from JSON text. Decoding never trusts a type: each field is checked before
// it is read, so no nlohmann exception is the way an error is found, and the message names the
// field by its path in the record.
#include "daemon/job_codec.h"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>

#include "api/field_json.h"
#include "common/text.h"

namespace colo {
namespace {

using nlohmann::json;

// Encoding

json Strings(const std::vector<std::string>& values) {
  json out = json::array();
  for (const std::string& value : values) out.push_back(ValidUtf8(value));
  return out;
}

// JSON has no NaN or infinity; a record must always read back, so such a value is stored as the
// field's "not known" value instead.
double Finite(double value, double otherwise) {
  return std::isfinite(value) ? value : otherwise;
}

json EncodeSpec(const JobSpec& spec) {
  json memory = json::object();
  memory["peak"] = spec.memory.peak.count();
  memory["source"] = ToString(spec.memory.source);
  memory["uncertainty"] = Finite(spec.memory.uncertainty, 0.0);
  json out = json::object();
  out["id"] = spec.id;
  out["name"] = ValidUtf8(spec.name);
  out["owner"] = ValidUtf8(spec.owner);
  out["command"] = Strings(spec.command);
  out["gpus"] = spec.gpus;
  out["memory"] = std::move(memory);
  out["sharing"] = ToString(spec.sharing);
  out["priority"] = spec.priority;
  out["expected_smact"] = Finite(spec.expected_smact, -1.0);
  // Learned from earlier runs of its model (core/run_learning.h); absent while none is known.
  if (spec.expected_run > Duration::zero())
    out["expected_run_us"] = static_cast<int64_t>(spec.expected_run.count());
  return out;
}

json EncodeAttempt(const Attempt& attempt) {
  json out = json::object();
  out["number"] = attempt.number;
  out["phase"] = ToString(attempt.phase);
  out["pid"] = attempt.pid;
  out["pid_start"] = attempt.pid_start;
  out["gpu_uuids"] = Strings(attempt.gpu_uuids);
  out["mode"] = ToString(attempt.mode);
  out["thread_percent"] = attempt.thread_percent;
  out["memory_limit"] = attempt.memory_limit.count();
  out["started"] = ToEpochSeconds(attempt.started);
  out["ended"] = ToEpochSeconds(attempt.ended);
  out["exit"] = attempt.exit ? json(ToString(*attempt.exit)) : json(nullptr);
  out["detail"] = ValidUtf8(attempt.detail);
  out["peak"] = attempt.peak.count();
  out["over_plan"] = attempt.over_plan;
  out["solo_smact"] = Finite(attempt.solo_smact, -1);
  if (attempt.exit_code) out["exit_code"] = *attempt.exit_code;
  if (attempt.exit_signal) out["exit_signal"] = *attempt.exit_signal;
  return out;
}

json EncodeEstimate(const api::JobEstimate& estimate) {
  json out = json::object();
  out["estimator"] = ValidUtf8(estimate.estimator);
  out["peak"] = estimate.peak.count();
  out["lower"] = estimate.lower.count();
  out["upper"] = estimate.upper.count();
  out["detail"] = ValidUtf8(estimate.detail);
  out["signature"] = ValidUtf8(estimate.signature);
  out["predicted_smact"] = Finite(estimate.predicted_smact, -1);
  if (estimate.learned) {
    json learned = json::object();
    learned["runs"] = estimate.learned->runs;
    learned["peak"] = estimate.learned->peak.count();
    learned["upper"] = estimate.learned->upper.count();
    learned["solo_smact"] = Finite(estimate.learned->solo_smact, -1);
    out["learned"] = std::move(learned);
  } else {
    out["learned"] = nullptr;
  }
  return out;
}

// Decoding

// Every enum a record holds is written by its ToString name; these are the names it may have.
constexpr JobState kJobStates[] = {
    JobState::kQueued,    JobState::kRecovering, JobState::kRunning,
    JobState::kSucceeded, JobState::kFailed,     JobState::kCancelled,
    JobState::kLost,      JobState::kRequeued,   JobState::kTimeout};
constexpr ExitKind kExitKinds[] = {ExitKind::kSuccess,   ExitKind::kFailure, ExitKind::kOutOfMemory,
                                   ExitKind::kCancelled, ExitKind::kLost,    ExitKind::kTimeout,
                                   ExitKind::kPreempted};
constexpr api::DependencyKind kDependencyKinds[] = {api::DependencyKind::kAfterOk,
                                                    api::DependencyKind::kAfterAny,
                                                    api::DependencyKind::kAfterNotOk};
constexpr SharingMode kSharingModes[] = {SharingMode::kMps, SharingMode::kPlain,
                                         SharingMode::kExclusive};
constexpr SharingPreference kSharingPreferences[] = {
    SharingPreference::kAny, SharingPreference::kMps, SharingPreference::kPlain,
    SharingPreference::kExclusive};
constexpr MemorySource kMemorySources[] = {MemorySource::kUnknown, MemorySource::kDeclared,
                                           MemorySource::kEstimated, MemorySource::kLearned};
constexpr Attempt::Phase kPhases[] = {Attempt::Phase::kLaunching, Attempt::Phase::kRunning,
                                      Attempt::Phase::kEnded};

template <typename Enum, size_t N>
std::optional<Enum> ParseName(std::string_view text, const Enum (&all)[N]) {
  for (Enum value : all) {
    if (ToString(value) == text) return value;
  }
  return std::nullopt;
}

// A value from the record, quoted for a message: short and safe to print.
std::string Quoted(std::string_view text) {
  return "'" + Printable(TruncateUtf8(text, 64)) + "'";
}

// Reads the fields of one JSON object. Readers of one record share the first error met: after it
// every read is skipped, so a decoder reads field after field and checks once at the end.
class FieldReader {
 public:
  struct Shared {
    Status error;
    bool lenient = false;  // a missing field keeps its default (schema-1 records)
  };

  FieldReader(const json& value, std::string path, Shared& shared)
      : object_(value), path_(std::move(path)), shared_(shared) {
    if (ok() && !object_.is_object()) shared_.error = InvalidArgument(Where("") + "not an object");
  }

  bool ok() const { return shared_.error.ok(); }
  const std::string& path() const { return path_; }

  // "attempts[1].exit: " for key "exit" of the reader at "attempts[1]".
  std::string Where(std::string_view key) const {
    if (path_.empty()) return fmt::format("{}: ", key.empty() ? "record" : key);
    if (key.empty()) return path_ + ": ";
    return fmt::format("{}.{}: ", path_, key);
  }
  std::string PathOf(std::string_view key) const {
    return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  }

  void Fail(std::string_view key, std::string_view problem) {
    if (ok()) shared_.error = InvalidArgument(Where(key) + std::string(problem));
  }

  // The member `key`; nullptr when absent (an error unless lenient) or after an error.
  const json* Member(std::string_view key) {
    if (!ok()) return nullptr;
    const auto it = object_.find(key);
    if (it == object_.end()) {
      if (!shared_.lenient) Fail(key, "missing");
      return nullptr;
    }
    return &*it;
  }
  // The member `key` when present and not null; nullptr otherwise, never an error.
  const json* Optional(std::string_view key) {
    if (!ok()) return nullptr;
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  void String(std::string_view key, std::string& out) {
    const json* value = Member(key);
    if (!value) return;
    if (!value->is_string()) return Fail(key, "not a string");
    // Parsed JSON is valid UTF-8 already; checked again because colod relies on it everywhere.
    out = ValidUtf8(value->get_ref<const std::string&>());
  }

  void Strings(std::string_view key, std::vector<std::string>& out) {
    const json* value = Member(key);
    if (!value) return;
    if (!value->is_array()) return Fail(key, "not a list");
    std::vector<std::string> strings;
    strings.reserve(value->size());
    for (size_t i = 0; i < value->size(); ++i) {
      const json& item = (*value)[i];
      if (!item.is_string()) return Fail(fmt::format("{}[{}]", key, i), "not a string");
      strings.push_back(ValidUtf8(item.get_ref<const std::string&>()));
    }
    out = std::move(strings);
  }

  void Strings(std::string_view key, SharedStrings& out) {
    std::vector<std::string> strings;
    Strings(key, strings);
    if (Member(key)) out = std::move(strings);
  }

  void Int64(std::string_view key, int64_t& out) { Integer(key, out, INT64_MIN, INT64_MAX); }
  void Int(std::string_view key, int& out) {
    int64_t value = out;
    Integer(key, value, INT_MIN, INT_MAX);
    out = static_cast<int>(value);
  }
  void Uint(std::string_view key, unsigned& out) {
    int64_t value = out;
    Integer(key, value, 0, UINT_MAX);
    out = static_cast<unsigned>(value);
  }
  void Uint64(std::string_view key, uint64_t& out) {
    const json* value = Member(key);
    if (!value) return;
    if (value->is_number_unsigned()) {
      out = value->get<uint64_t>();
    } else if (value->is_number_integer()) {
      // A negative integer: nlohmann keeps non-negative ones as unsigned.
      Fail(key, "negative");
    } else {
      Fail(key, "not an integer");
    }
  }

  void Double(std::string_view key, double& out) {
    const json* value = Member(key);
    if (!value) return;
    if (!value->is_number()) return Fail(key, "not a number");
    out = value->get<double>();
  }

  void Bool(std::string_view key, bool& out) {
    const json* value = Member(key);
    if (!value) return;
    if (!value->is_boolean()) return Fail(key, "not true or false");
    out = value->get<bool>();
  }

  void Size(std::string_view key, Bytes& out) {
    int64_t count = out.count();
    Integer(key, count, 0, INT64_MAX);
    out = Bytes(count);
  }

  void Time(std::string_view key, WallTime& out) {
    const json* value = Member(key);
    if (!value) return;
    if (!value->is_number()) return Fail(key, "not a number of seconds");
    const std::optional<WallTime> time = FromEpochSeconds(value->get<double>());
    if (!time) return Fail(key, "not a time colod can hold");
    out = *time;
  }

  // An enum by its ToString name; `what` names the kind for the message.
  template <typename Enum, size_t N>
  void Name(std::string_view key, Enum& out, const Enum (&all)[N], std::string_view what) {
    const json* value = Member(key);
    if (!value) return;
    if (!value->is_string()) return Fail(key, "not a string");
    const std::string& text = value->get_ref<const std::string&>();
    const std::optional<Enum> parsed = ParseName(text, all);
    if (!parsed) return Fail(key, fmt::format("unknown {} {}", what, Quoted(text)));
    out = *parsed;
  }

 private:
  void Integer(std::string_view key, int64_t& out, int64_t low, int64_t high) {
    const json* value = Member(key);
    if (!value) return;
    if (value->is_number_unsigned()) {
      const uint64_t number = value->get<uint64_t>();
      if (number > static_cast<uint64_t>(high)) return Fail(key, "out of range");
      out = static_cast<int64_t>(number);
    } else if (value->is_number_integer()) {
      const int64_t number = value->get<int64_t>();
      if (number < low) return Fail(key, low == 0 ? "negative" : "out of range");
      if (number > high) return Fail(key, "out of range");
      out = number;
    } else {
      Fail(key, "not an integer");
    }
  }

  const json& object_;
  std::string path_;
  Shared& shared_;
};

// Nested deeper than any record colod writes: refused before parsing, so a corrupted row of ten
// thousand brackets costs nothing.
constexpr int kMaxNesting = 16;

bool NestedTooDeep(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

Result<json> ParseRecord(std::string_view text) {
  if (text.size() > kMaxJobRecordBytes)
    return InvalidArgument(fmt::format("record: larger than {} bytes", kMaxJobRecordBytes));
  if (NestedTooDeep(text))
    return InvalidArgument(fmt::format("record: nested deeper than {} levels", kMaxNesting));
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    return InvalidArgument(fmt::format("record: not JSON (error at byte {})", e.byte));
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("record: not JSON ({})", Printable(e.what())));
  }
}

void DecodeAttempt(FieldReader& r, Attempt& a) {
  r.Int("number", a.number);
  r.Name("phase", a.phase, kPhases, "attempt phase");
  r.Int("pid", a.pid);
  r.Uint64("pid_start", a.pid_start);
  r.Strings("gpu_uuids", a.gpu_uuids);
  r.Name("mode", a.mode, kSharingModes, "sharing mode");
  r.Int("thread_percent", a.thread_percent);
  r.Size("memory_limit", a.memory_limit);
  r.Time("started", a.started);
  r.Time("ended", a.ended);
  if (r.Member("exit") && r.Optional("exit")) {
    ExitKind kind{};
    r.Name("exit", kind, kExitKinds, "exit kind");
    a.exit = kind;
  }
  r.String("detail", a.detail);
  r.Size("peak", a.peak);
  // Added within schema 2: absent in records written before colod watched for them.
  if (r.Optional("over_plan")) r.Bool("over_plan", a.over_plan);
  if (r.Optional("solo_smact")) r.Double("solo_smact", a.solo_smact);
  if (r.Optional("exit_code")) {
    int code = 0;
    r.Int("exit_code", code);
    a.exit_code = code;
  }
  if (r.Optional("exit_signal")) {
    int signal = 0;
    r.Int("exit_signal", signal);
    a.exit_signal = signal;
  }
}

// Added within schema 2 (absent in older records: no limit, not held, no dependencies).
void DecodeSlurmHabits(FieldReader& r, Job& job, FieldReader::Shared& shared) {
  if (r.Optional("time_limit_s")) r.Int64("time_limit_s", job.time_limit_s);
  if (r.ok() && (job.time_limit_s < 0 || job.time_limit_s > api::kMaxTimeLimitSeconds))
    r.Fail("time_limit_s", "out of range");
  if (r.Optional("timed_out")) r.Bool("timed_out", job.timed_out);
  if (r.Optional("held")) r.Bool("held", job.held);
  if (r.Optional("requeue_requested")) r.Bool("requeue_requested", job.requeue_requested);
  if (const json* array_json = r.Optional("array")) {
    FieldReader array(*array_json, "array", shared);
    ArrayMembership& a = job.array.emplace();
    array.Int64("job", a.job);
    array.Int("task", a.task);
    array.Int("limit", a.limit);
    if (array.ok() && (a.job < 0 || a.task < 0 || a.limit < 0))
      array.Fail("job", "not an array task (ids and the limit are not negative)");
    // The first task is stored before its own id is known to it: 0 names itself.
    if (a.job == 0) a.job = job.spec.id;
  }
  if (const json* preemption = r.Optional("preemption")) {
    FieldReader p(*preemption, "preemption", shared);
    PreemptionNotice& being = job.preemption.emplace();
    p.Int64("for_job", being.for_job);
    p.Time("kill_at", being.kill_at);
    p.String("reason", being.reason);
  }
  if (r.Optional("output_pattern")) r.String("output_pattern", job.output_pattern);
  if (r.Optional("error_pattern")) r.String("error_pattern", job.error_pattern);
  if (const json* deps = r.Optional("dependencies")) {
    if (!deps->is_array()) return r.Fail("dependencies", "not a list");
    if (deps->size() > api::kMaxDependencies) return r.Fail("dependencies", "too many");
    for (size_t i = 0; i < deps->size() && r.ok(); ++i) {
      FieldReader d((*deps)[i], fmt::format("dependencies[{}]", i), shared);
      api::Dependency& dep = job.dependencies.emplace_back();
      d.Name("kind", dep.kind, kDependencyKinds, "dependency kind");
      d.Int64("job", dep.job);
    }
  }
}

void DecodeEstimate(FieldReader& r, api::JobEstimate& e) {
  r.String("estimator", e.estimator);
  r.Size("peak", e.peak);
  r.Size("lower", e.lower);
  r.Size("upper", e.upper);
  r.String("detail", e.detail);
  r.String("signature", e.signature);
  // Added within schema 2: absent in records written before clients predicted SM activity.
  if (r.Optional("predicted_smact")) r.Double("predicted_smact", e.predicted_smact);
}

// The fields both record formats write alike.
void DecodeLifecycle(FieldReader& r, Job& job) {
  r.Strings("env", job.env);
  r.Name("state", job.state, kJobStates, "job state");
  r.String("reason", job.reason);
  r.Time("submitted", job.submitted);
  r.Time("finished", job.finished);
  r.Bool("cancel_requested", job.cancel_requested);
}

void DecodeRecord(const json& record, FieldReader::Shared& shared, Job& job) {
  FieldReader r(record, "", shared);
  int format = 0;
  r.Int("format", format);
  if (r.ok() && format != kJobRecordFormat)
    return r.Fail("format", fmt::format("{} is not {}", format, kJobRecordFormat));

  if (const json* spec_json = r.Member("spec")) {
    FieldReader spec(*spec_json, "spec", shared);
    JobSpec& s = job.spec;
    spec.Int64("id", s.id);
    spec.String("name", s.name);
    spec.String("owner", s.owner);
    spec.Strings("command", s.command);
    spec.Int("gpus", s.gpus);
    if (const json* memory_json = spec.Member("memory")) {
      FieldReader memory(*memory_json, "spec.memory", shared);
      memory.Size("peak", s.memory.peak);
      memory.Name("source", s.memory.source, kMemorySources, "memory source");
      memory.Double("uncertainty", s.memory.uncertainty);
    }
    spec.Name("sharing", s.sharing, kSharingPreferences, "sharing preference");
    spec.Int("priority", s.priority);
    spec.Double("expected_smact", s.expected_smact);
    if (spec.Optional("expected_run_us")) {
      int64_t run_us = 0;
      spec.Int64("expected_run_us", run_us);
      if (run_us < 0) spec.Fail("expected_run_us", "negative");
      s.expected_run = Duration(std::max<int64_t>(run_us, 0));
    }
  }
  if (const json* owner_json = r.Member("owner")) {
    FieldReader owner(*owner_json, "owner", shared);
    owner.Uint("uid", job.owner.uid);
    owner.Uint("gid", job.owner.gid);
    owner.String("user", job.owner.user);
  }
  DecodeLifecycle(r, job);
  if (const json* attempts = r.Member("attempts")) {
    if (!attempts->is_array()) return r.Fail("attempts", "not a list");
    for (size_t i = 0; i < attempts->size() && r.ok(); ++i) {
      FieldReader a((*attempts)[i], fmt::format("attempts[{}]", i), shared);
      DecodeAttempt(a, job.attempts.emplace_back());
    }
  }
  // Its context as the API describes it (api::JobContext: workdir, source, umask, limits).
  if (r.ok()) api::ReadFields(record, "", job.context, shared.error);
  r.Int("threads", job.spec.threads);
  // Added within schema 2: absent in records written before colod knew Slurm. A Slurm job's run
  // is "slurm"; another engine's would be "external", naming its engine.
  for (const char* key : {"slurm", "external"}) {
    const json* run_json = r.Optional(key);
    if (!run_json) continue;
    FieldReader run(*run_json, key, shared);
    ExternalRun& t = job.external.emplace();
    if (std::string_view(key) == "external") run.String("engine", t.engine);
    run.Uint("job", t.id);
    run.Int("restarts", t.restarts);
    run.Int("earlier_ooms", t.earlier_ooms);
    // Added later: absent in records written before Slurm booked a run's GPUs.
    if (run.Optional("gpu_uuids")) run.Strings("gpu_uuids", t.gpu_uuids);
    if (run.ok() && t.id == 0) run.Fail("job", "must be the engine's job id");
  }
  DecodeSlurmHabits(r, job, shared);
  if (r.Member("estimate") && r.Optional("estimate")) {
    FieldReader estimate(*r.Optional("estimate"), "estimate", shared);
    api::JobEstimate& e = job.estimate.emplace();
    DecodeEstimate(estimate, e);
    if (estimate.Member("learned") && estimate.Optional("learned")) {
      FieldReader learned(*estimate.Optional("learned"), "estimate.learned", shared);
      api::JobEstimate::Learned& l = e.learned.emplace(api::JobEstimate::Learned{});
      learned.Int("runs", l.runs);
      learned.Size("peak", l.peak);
      learned.Size("upper", l.upper);
      if (learned.Optional("solo_smact")) learned.Double("solo_smact", l.solo_smact);
    }
  }
}

// Schema 1 wrote every field but read each with a default; both are kept here. Its attempts had
// no phase: one with an exit kind had ended, one with a process was running, and one with
// neither had not started.
void DecodeSchema1Record(const json& record, FieldReader::Shared& shared, Job& job) {
  FieldReader r(record, "", shared);
  job.context.workdir = "/";
  job.context.source.clear();
  {
    // The id is the one field schema 1 never defaulted.
    const json* spec_json = r.Member("spec");
    if (!spec_json) return r.Fail("spec", "missing");
    FieldReader spec(*spec_json, "spec", shared);
    JobSpec& s = job.spec;
    if (spec.ok() && !spec_json->contains("id")) return spec.Fail("id", "missing");
    spec.Int64("id", s.id);
    spec.String("name", s.name);
    spec.String("owner", s.owner);
    spec.Strings("command", s.command);
    spec.Int("gpus", s.gpus);
    spec.Size("memory", s.memory.peak);
    spec.Name("memory_source", s.memory.source, kMemorySources, "memory source");
    spec.Double("memory_uncertainty", s.memory.uncertainty);
    // Schema 1 read an empty sharing as "any".
    const json* sharing = spec.Optional("sharing");
    if (!(sharing && sharing->is_string() && sharing->get_ref<const std::string&>().empty()))
      spec.Name("sharing", s.sharing, kSharingPreferences, "sharing preference");
    spec.Int("priority", s.priority);
    spec.Double("expected_smact", s.expected_smact);
  }
  r.Uint("uid", job.owner.uid);
  r.Uint("gid", job.owner.gid);
  job.owner.user = job.spec.owner;
  DecodeLifecycle(r, job);
  r.String("workdir", job.context.workdir);
  r.String("source", job.context.source);
  r.Int("threads", job.spec.threads);
  if (const json* attempts = r.Member("attempts")) {
    if (!attempts->is_array()) return r.Fail("attempts", "not a list");
    for (size_t i = 0; i < attempts->size() && r.ok(); ++i) {
      FieldReader a((*attempts)[i], fmt::format("attempts[{}]", i), shared);
      Attempt& attempt = job.attempts.emplace_back();
      attempt.mode = SharingMode::kPlain;
      a.Int("number", attempt.number);
      a.Int("pid", attempt.pid);
      a.Uint64("pid_start", attempt.pid_start);
      a.Strings("gpu_uuids", attempt.gpu_uuids);
      a.Name("mode", attempt.mode, kSharingModes, "sharing mode");
      a.Int("thread_percent", attempt.thread_percent);
      a.Size("memory_limit", attempt.memory_limit);
      a.Time("started", attempt.started);
      a.Time("ended", attempt.ended);
      std::string exit_kind;
      a.String("exit_kind", exit_kind);
      if (a.ok() && !exit_kind.empty()) {
        attempt.exit = ParseName(exit_kind, kExitKinds);
        if (!attempt.exit) a.Fail("exit_kind", "unknown exit kind " + Quoted(exit_kind));
      }
      a.String("detail", attempt.detail);
      a.Size("peak", attempt.peak);
      attempt.phase = attempt.exit      ? Attempt::Phase::kEnded
                      : attempt.pid > 0 ? Attempt::Phase::kRunning
                                        : Attempt::Phase::kLaunching;
    }
  }
  if (const json* estimate_json = r.Optional("estimate")) {
    FieldReader estimate(*estimate_json, "estimate", shared);
    api::JobEstimate& e = job.estimate.emplace();
    estimate.Size("peak", e.peak);
    e.lower = e.peak;  // schema 1's default for a missing lower bound
    DecodeEstimate(estimate, e);
    if (const json* history_json = estimate.Optional("history")) {
      FieldReader history(*history_json, "estimate.history", shared);
      api::JobEstimate::Learned& l = e.learned.emplace(api::JobEstimate::Learned{});
      history.Int("runs", l.runs);
      history.Size("peak", l.peak);
      history.Size("upper", l.upper);
    }
  }
}

using RecordDecoder = void (*)(const json&, FieldReader::Shared&, Job&);

Result<Job> Decode(std::string_view text, RecordDecoder decoder, bool lenient) {
  auto record = ParseRecord(text);
  if (!record.ok()) return record.status();
  try {
    FieldReader::Shared shared;
    shared.lenient = lenient;
    Job job;
    decoder(*record, shared, job);
    if (!shared.error.ok()) return shared.error;
    return job;
  } catch (const std::exception& e) {
    // Every type is checked before a value is read; this is for what cannot be ruled out
    // (running out of memory).
    return InvalidArgument(fmt::format("record: {}", Printable(e.what())));
  }
}

}  // namespace

std::string EncodeStrings(const std::vector<std::string>& strings) {
  return Strings(strings).dump();
}

Result<std::vector<std::string>> DecodeStrings(std::string_view text) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) return InvalidArgument("not a list of strings");
  std::vector<std::string> strings;
  strings.reserve(parsed.size());
  for (const json& item : parsed) {
    if (!item.is_string()) return InvalidArgument("not a list of strings");
    strings.push_back(ValidUtf8(item.get_ref<const std::string&>()));
  }
  return strings;
}

std::string EncodeJob(const Job& job) {
  json record = json::object();
  record["format"] = kJobRecordFormat;
  record["spec"] = EncodeSpec(job.spec);
  json owner = json::object();
  owner["uid"] = job.owner.uid;
  owner["gid"] = job.owner.gid;
  owner["user"] = ValidUtf8(job.owner.user);
  record["owner"] = std::move(owner);
  record["env"] = Strings(job.env);
  record["state"] = ToString(job.state);
  record["reason"] = ValidUtf8(job.reason);
  record["submitted"] = ToEpochSeconds(job.submitted);
  record["finished"] = ToEpochSeconds(job.finished);
  record["cancel_requested"] = job.cancel_requested;
  json attempts = json::array();
  for (const Attempt& attempt : job.attempts) attempts.push_back(EncodeAttempt(attempt));
  record["attempts"] = std::move(attempts);
  api::WriteFields(job.context, record);
  record["threads"] = job.spec.threads;
  record["estimate"] = job.estimate ? EncodeEstimate(*job.estimate) : json(nullptr);
  if (const std::optional<ExternalRun>& run = job.external) {
    json fields = {
        {"job", run->id}, {"restarts", run->restarts}, {"earlier_ooms", run->earlier_ooms}};
    if (!run->gpu_uuids.empty()) fields["gpu_uuids"] = Strings(run->gpu_uuids);
    if (run->engine == "slurm") {
      record["slurm"] = std::move(fields);
    } else {
      fields["engine"] = ValidUtf8(run->engine);
      record["external"] = std::move(fields);
    }
  }
  if (job.time_limit_s > 0) record["time_limit_s"] = job.time_limit_s;
  if (job.timed_out) record["timed_out"] = true;
  if (job.held) record["held"] = true;
  if (job.requeue_requested) record["requeue_requested"] = true;
  if (const std::optional<PreemptionNotice>& being = job.preemption)
    record["preemption"] = {{"for_job", being->for_job},
                            {"kill_at", ToEpochSeconds(being->kill_at)},
                            {"reason", ValidUtf8(being->reason)}};
  if (job.array)
    record["array"] = {
        {"job", job.array->job}, {"task", job.array->task}, {"limit", job.array->limit}};
  if (!job.dependencies.empty()) {
    json deps = json::array();
    for (const api::Dependency& d : job.dependencies)
      deps.push_back({{"kind", std::string(ToString(d.kind))}, {"job", d.job}});
    record["dependencies"] = std::move(deps);
  }
  if (!job.output_pattern.empty()) record["output_pattern"] = ValidUtf8(job.output_pattern);
  if (!job.error_pattern.empty()) record["error_pattern"] = ValidUtf8(job.error_pattern);
  // Every string is valid UTF-8 already; `replace` is what keeps dump() from ever throwing.
  return record.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Job> DecodeJob(std::string_view text) {
  return Decode(text, DecodeRecord, /*lenient=*/false);
}

Result<Job> DecodeSchema1Job(std::string_view text) {
  return Decode(text, DecodeSchema1Record, /*lenient=*/true);
}

JobEvent StoredEvent(const JobEvent& event) {
  JobEvent stored;
  stored.job = event.job;
  stored.time = FromEpochSeconds(ToEpochSeconds(event.time)).value_or(WallTime());
  stored.kind = TruncateUtf8(event.kind, kMaxEventKindBytes);
  stored.detail = TruncateUtf8(event.detail, kMaxEventDetailBytes);
  return stored;
}

}  // namespace colo

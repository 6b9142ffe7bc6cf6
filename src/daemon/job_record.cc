#include "daemon/job_record.h"

namespace colo {

using nlohmann::json;

json ToJson(const JobSpec& s) {
  return json{{"id", s.id},
              {"name", s.name},
              {"owner", s.owner},
              {"command", s.command},
              {"gpus", s.gpus},
              {"memory", s.memory.peak.count()},
              {"memory_source", std::string(ToString(s.memory.source))},
              {"memory_uncertainty", s.memory.uncertainty},
              {"sharing", std::string(ToString(s.sharing))},
              {"priority", s.priority},
              {"expected_smact", s.expected_smact}};
}

Result<JobSpec> JobSpecFromJson(const json& j) {
  try {
    JobSpec s;
    s.id = j.at("id").get<JobId>();
    s.name = j.value("name", "");
    s.owner = j.value("owner", "");
    s.command = j.value("command", std::vector<std::string>{});
    s.gpus = j.value("gpus", 1);
    s.memory.peak = Bytes(j.value("memory", int64_t{0}));
    const std::string source = j.value("memory_source", "unknown");
    for (MemorySource m : {MemorySource::kUnknown, MemorySource::kDeclared,
                           MemorySource::kEstimated, MemorySource::kLearned}) {
      if (ToString(m) == source) s.memory.source = m;
    }
    s.memory.uncertainty = j.value("memory_uncertainty", 0.0);
    auto sharing = ParseSharingPreference(j.value("sharing", "any"));
    if (!sharing.ok()) return sharing.status();
    s.sharing = *sharing;
    s.priority = j.value("priority", 0);
    s.expected_smact = j.value("expected_smact", -1.0);
    return s;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed job: ") + e.what());
  }
}

json ToJson(const AttemptRecord& a) {
  return json{{"number", a.number},
              {"pid", a.pid},
              {"pid_start", a.pid_start},
              {"gpus", a.gpus},
              {"gpu_uuids", a.gpu_uuids},
              {"mode", a.mode},
              {"thread_percent", a.thread_percent},
              {"memory_limit", a.memory_limit},
              {"started", a.started},
              {"ended", a.ended},
              {"exit_kind", a.exit_kind},
              {"detail", a.detail},
              {"peak", a.peak},
              {"stdout", a.stdout_path},
              {"stderr", a.stderr_path},
              {"exit_file", a.exit_path}};
}

json ToJson(const JobRecordDoc& r) {
  json attempts = json::array();
  for (const auto& a : r.attempts) attempts.push_back(ToJson(a));
  return json{{"spec", ToJson(r.spec)}, {"uid", r.uid},
              {"gid", r.gid},           {"workdir", r.workdir},
              {"env", r.env},           {"state", r.state},
              {"reason", r.reason},     {"submitted", r.submitted},
              {"finished", r.finished}, {"cancel_requested", r.cancel_requested},
              {"attempts", attempts},   {"source", r.source},
              {"threads", r.threads},   {"estimate", r.estimate}};
}

Result<JobRecordDoc> JobRecordFromJson(const json& j) {
  try {
    JobRecordDoc r;
    auto spec = JobSpecFromJson(j.at("spec"));
    if (!spec.ok()) return spec.status();
    r.spec = *spec;
    r.uid = j.value("uid", 0u);
    r.gid = j.value("gid", 0u);
    r.workdir = j.value("workdir", "/");
    r.env = j.value("env", std::vector<std::string>{});
    r.state = j.value("state", "queued");
    r.reason = j.value("reason", "");
    r.submitted = j.value("submitted", 0.0);
    r.finished = j.value("finished", 0.0);
    r.cancel_requested = j.value("cancel_requested", false);
    r.source = j.value("source", "");
    r.threads = j.value("threads", 0);
    if (auto e = j.find("estimate"); e != j.end()) r.estimate = *e;
    for (const auto& a : j.value("attempts", json::array())) {
      AttemptRecord x;
      x.number = a.value("number", 0);
      x.pid = a.value("pid", 0);
      x.pid_start = a.value("pid_start", uint64_t{0});
      x.gpus = a.value("gpus", std::vector<int>{});
      x.gpu_uuids = a.value("gpu_uuids", std::vector<std::string>{});
      x.mode = a.value("mode", "plain");
      x.thread_percent = a.value("thread_percent", 100);
      x.memory_limit = a.value("memory_limit", int64_t{0});
      x.started = a.value("started", 0.0);
      x.ended = a.value("ended", 0.0);
      x.exit_kind = a.value("exit_kind", "");
      x.detail = a.value("detail", "");
      x.peak = a.value("peak", int64_t{0});
      x.stdout_path = a.value("stdout", "");
      x.stderr_path = a.value("stderr", "");
      x.exit_path = a.value("exit_file", "");
      r.attempts.push_back(std::move(x));
    }
    return r;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed job record: ") + e.what());
  }
}

}  // namespace colo

// The job record's encoding: every field survives a round trip, strings are made valid, and a
// malformed record is an error naming the field, never an exception or a made-up job.
#include "daemon/job_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "daemon/job_store_test_support.h"

namespace colo {
namespace {

using nlohmann::json;
using testing::AtEpochMicros;

// Every field set, none to its default.
Job FullJob() {
  Job job;
  job.spec.id = 42;
  job.spec.name = "résumé-🙂";
  job.spec.owner = "alice";
  job.spec.command = {"torchrun", "--nproc", "2", "train.py"};
  job.spec.gpus = 2;
  job.spec.memory = MemoryNeed{GiB(12), MemorySource::kEstimated, 0.15};
  job.spec.sharing = SharingPreference::kMps;
  job.spec.priority = 3;
  job.spec.expected_smact = 0.4;
  job.owner = Identity{1000, 1001, "alice"};
  job.context.workdir = "/home/alice/run";
  job.env = {"HOME=/home/alice", "PATH=/usr/bin", std::string("NUL=a\0b", 7)};
  job.state = JobState::kRecovering;
  job.reason = "out of memory twice";
  job.submitted = AtEpochMicros(1'700'000'000'123'456);
  job.finished = AtEpochMicros(1'700'000'900'000'001);
  job.cancel_requested = true;
  Attempt first;
  first.number = 1;
  first.phase = Attempt::Phase::kEnded;
  first.pid = 31337;
  first.pid_start = 18'446'744'073'709'551'000u;  // above INT64_MAX: kept unsigned
  first.gpu_uuids = {"GPU-a", "GPU-b"};
  first.mode = SharingMode::kExclusive;
  first.thread_percent = 40;
  first.memory_limit = GiB(11);
  first.started = AtEpochMicros(1'700'000'001'000'000);
  first.ended = AtEpochMicros(1'700'000'002'500'000);
  first.exit = ExitKind::kOutOfMemory;
  first.detail = "CUDA out of memory";
  first.peak = MiB(11'000);
  Attempt second;
  second.number = 2;
  second.phase = Attempt::Phase::kLaunching;
  second.mode = SharingMode::kMps;
  job.attempts = {first, second};
  job.context.source = "script job.sh";
  job.context.umask = 027;
  job.spec.threads = 40;
  api::JobEstimate estimate;
  estimate.estimator = "trace";
  estimate.peak = GiB(10);
  estimate.lower = GiB(9);
  estimate.upper = GiB(13);
  estimate.detail = "from the allocator trace";
  estimate.signature = "resnet50/b64/adam/fp16";
  estimate.learned = api::JobEstimate::Learned{3, GiB(11), GiB(12)};
  job.estimate = estimate;
  return job;
}

Job RoundTrip(const Job& job) {
  Result<Job> decoded = DecodeJob(EncodeJob(job));
  EXPECT_TRUE(decoded.ok()) << decoded.status().message();
  return decoded.ok() ? *decoded : Job{};
}

void ExpectSameAttempt(const Attempt& a, const Attempt& b) {
  EXPECT_EQ(a.number, b.number);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.pid_start, b.pid_start);
  EXPECT_EQ(a.gpu_uuids, b.gpu_uuids);
  EXPECT_EQ(a.mode, b.mode);
  EXPECT_EQ(a.thread_percent, b.thread_percent);
  EXPECT_EQ(a.memory_limit, b.memory_limit);
  EXPECT_EQ(a.started, b.started);
  EXPECT_EQ(a.ended, b.ended);
  EXPECT_EQ(a.exit, b.exit);
  EXPECT_EQ(a.detail, b.detail);
  EXPECT_EQ(a.peak, b.peak);
}

TEST(JobCodec, EveryFieldSurvivesARoundTrip) {
  const Job job = FullJob();
  const Job back = RoundTrip(job);
  EXPECT_EQ(back.spec.id, 42);
  EXPECT_EQ(back.spec.name, job.spec.name);
  EXPECT_EQ(back.spec.owner, job.spec.owner);
  EXPECT_EQ(back.spec.command, job.spec.command);
  EXPECT_EQ(back.spec.gpus, 2);
  EXPECT_EQ(back.spec.memory.peak, GiB(12));
  EXPECT_EQ(back.spec.memory.source, MemorySource::kEstimated);
  EXPECT_DOUBLE_EQ(back.spec.memory.uncertainty, 0.15);
  EXPECT_EQ(back.spec.sharing, SharingPreference::kMps);
  EXPECT_EQ(back.spec.priority, 3);
  EXPECT_DOUBLE_EQ(back.spec.expected_smact, 0.4);
  EXPECT_EQ(back.owner.uid, 1000u);
  EXPECT_EQ(back.owner.gid, 1001u);
  EXPECT_EQ(back.owner.user, "alice");
  EXPECT_EQ(back.context.workdir, job.context.workdir);
  EXPECT_EQ(back.env, job.env);  // a NUL inside a value included
  EXPECT_EQ(back.state, JobState::kRecovering);
  EXPECT_EQ(back.reason, job.reason);
  EXPECT_EQ(back.submitted, job.submitted);
  EXPECT_EQ(back.finished, job.finished);
  EXPECT_TRUE(back.cancel_requested);
  ASSERT_EQ(back.attempts.size(), 2u);
  ExpectSameAttempt(back.attempts[0], job.attempts[0]);
  ExpectSameAttempt(back.attempts[1], job.attempts[1]);
  EXPECT_FALSE(back.attempts[1].exit.has_value());
  EXPECT_EQ(back.context.source, job.context.source);
  EXPECT_EQ(back.context.umask, 027);
  EXPECT_EQ(back.context, job.context);
  EXPECT_EQ(back.spec.threads, 40);
  ASSERT_TRUE(back.estimate.has_value());
  EXPECT_EQ(back.estimate->estimator, "trace");
  EXPECT_EQ(back.estimate->peak, GiB(10));
  EXPECT_EQ(back.estimate->lower, GiB(9));
  EXPECT_EQ(back.estimate->upper, GiB(13));
  EXPECT_EQ(back.estimate->detail, job.estimate->detail);
  EXPECT_EQ(back.estimate->signature, job.estimate->signature);
  ASSERT_TRUE(back.estimate->learned.has_value());
  EXPECT_EQ(back.estimate->learned->runs, 3);
  EXPECT_EQ(back.estimate->learned->peak, GiB(11));
  EXPECT_EQ(back.estimate->learned->upper, GiB(12));
  // Decoding what was decoded changes nothing: the encoding is the job.
  EXPECT_EQ(EncodeJob(back), EncodeJob(job));
}

TEST(JobCodec, EveryEnumValueSurvivesARoundTrip) {
  for (JobState state : {JobState::kQueued, JobState::kRecovering, JobState::kRunning,
                         JobState::kSucceeded, JobState::kFailed, JobState::kCancelled,
                         JobState::kLost, JobState::kRequeued, JobState::kTimeout}) {
    Job job = FullJob();
    job.state = state;
    EXPECT_EQ(RoundTrip(job).state, state) << ToString(state);
  }
  for (ExitKind exit : {ExitKind::kSuccess, ExitKind::kFailure, ExitKind::kOutOfMemory,
                        ExitKind::kCancelled, ExitKind::kLost, ExitKind::kTimeout}) {
    Job job = FullJob();
    job.attempts[0].exit = exit;
    EXPECT_EQ(RoundTrip(job).attempts[0].exit, exit) << ToString(exit);
  }
  for (SharingMode mode : {SharingMode::kMps, SharingMode::kPlain, SharingMode::kExclusive}) {
    Job job = FullJob();
    job.attempts[0].mode = mode;
    EXPECT_EQ(RoundTrip(job).attempts[0].mode, mode) << ToString(mode);
  }
  for (SharingPreference sharing : {SharingPreference::kAny, SharingPreference::kMps,
                                    SharingPreference::kPlain, SharingPreference::kExclusive}) {
    Job job = FullJob();
    job.spec.sharing = sharing;
    EXPECT_EQ(RoundTrip(job).spec.sharing, sharing) << ToString(sharing);
  }
  for (MemorySource source : {MemorySource::kUnknown, MemorySource::kDeclared,
                              MemorySource::kEstimated, MemorySource::kLearned}) {
    Job job = FullJob();
    job.spec.memory.source = source;
    EXPECT_EQ(RoundTrip(job).spec.memory.source, source) << ToString(source);
  }
  for (Attempt::Phase phase :
       {Attempt::Phase::kLaunching, Attempt::Phase::kRunning, Attempt::Phase::kEnded}) {
    Job job = FullJob();
    job.attempts[0].phase = phase;
    EXPECT_EQ(RoundTrip(job).attempts[0].phase, phase) << ToString(phase);
  }
}

TEST(JobCodec, SlurmHabitsSurviveARoundTripAndOlderRecordsHaveNone) {
  Job job = FullJob();
  job.time_limit_s = 7200;
  job.timed_out = true;
  job.held = true;
  job.requeue_requested = true;
  job.dependencies = {{api::DependencyKind::kAfterOk, 3}, {api::DependencyKind::kAfterAny, 4}};
  job.attempts[0].exit_code = 137;
  const Job back = RoundTrip(job);
  EXPECT_EQ(back.time_limit_s, 7200);
  EXPECT_TRUE(back.timed_out);
  EXPECT_TRUE(back.held);
  EXPECT_TRUE(back.requeue_requested);
  EXPECT_EQ(back.dependencies, job.dependencies);
  EXPECT_EQ(back.attempts[0].exit_code, 137);
  EXPECT_FALSE(back.attempts[1].exit_code.has_value());
  Job first = FullJob();
  first.array = ArrayMembership{0, 0, 2};  // as its first write stores it
  EXPECT_EQ(RoundTrip(first).array->job, first.spec.id);
  first.array->job = 7;
  EXPECT_EQ(RoundTrip(first).array->job, 7);
  EXPECT_EQ(RoundTrip(first).array->limit, 2);
  const Job plain = RoundTrip(FullJob());
  EXPECT_EQ(plain.time_limit_s, 0);
  EXPECT_FALSE(plain.held);
  EXPECT_TRUE(plain.dependencies.empty());

  std::string text = EncodeJob(job);
  const std::string key = R"("time_limit_s":7200)";
  text.replace(text.find(key), key.size(), R"("time_limit_s":-5)");
  auto bad = DecodeJob(text);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("time_limit_s"), std::string::npos);
  text = EncodeJob(job);
  const std::string kind = R"("kind":"afterok")";
  text.replace(text.find(kind), kind.size(), R"("kind":"whenever")");
  bad = DecodeJob(text);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dependencies[0].kind"), std::string::npos);
}

TEST(JobCodec, ADefaultJobAndOneWithoutEstimateOrLearnedRoundTrip) {
  const Job plain = RoundTrip(Job{});
  EXPECT_EQ(EncodeJob(plain), EncodeJob(Job{}));
  EXPECT_FALSE(plain.estimate.has_value());
  EXPECT_EQ(plain.submitted, WallTime());

  Job job = FullJob();
  job.estimate->learned.reset();
  const Job back = RoundTrip(job);
  ASSERT_TRUE(back.estimate.has_value());
  EXPECT_FALSE(back.estimate->learned.has_value());
}

TEST(JobCodec, TimesAreKeptToTheMicrosecond) {
  Job job;
  job.submitted = WallTime(std::chrono::nanoseconds(1'700'000'000'123'456'789));
  job.finished = AtEpochMicros(-1'500'000);  // before the epoch: still a time
  const Job back = RoundTrip(job);
  EXPECT_EQ(back.submitted, AtEpochMicros(1'700'000'000'123'457));
  EXPECT_EQ(back.finished, job.finished);
  // Any time on a microsecond reads back exactly, to well past this century.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10000; ++i) {
    const int64_t micros = static_cast<int64_t>(rng() % 8'000'000'000'000'000) - 1'000'000'000'000;
    EXPECT_EQ(FromEpochSeconds(ToEpochSeconds(AtEpochMicros(micros))), AtEpochMicros(micros))
        << micros;
  }
  EXPECT_FALSE(FromEpochSeconds(NAN).has_value());
  EXPECT_FALSE(FromEpochSeconds(1e300).has_value());
  EXPECT_FALSE(FromEpochSeconds(-1e300).has_value());
}

TEST(JobCodec, EncodingMakesStringsValidAndNumbersStorable) {
  Job job = FullJob();
  job.spec.name = "bad\xFF";
  job.env = {"X=\xC0\xAF"};
  job.attempts[0].detail = "cut \xE2\x96";
  job.spec.expected_smact = NAN;
  job.spec.memory.uncertainty = INFINITY;
  const std::string text = EncodeJob(job);
  EXPECT_TRUE(json::accept(text));
  const Job back = RoundTrip(job);
  EXPECT_EQ(back.spec.name, "bad\xEF\xBF\xBD");
  EXPECT_EQ(back.env[0], "X=\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(back.attempts[0].detail, "cut \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_DOUBLE_EQ(back.spec.expected_smact, -1.0);  // unknown
  EXPECT_DOUBLE_EQ(back.spec.memory.uncertainty, 0.0);
}

// The full job's record with one change made to its JSON.
std::string Mutated(const std::function<void(json&)>& change) {
  json record = json::parse(EncodeJob(FullJob()));
  change(record);
  return record.dump();
}

std::string DecodeError(const std::string& text) {
  Result<Job> job = DecodeJob(text);
  EXPECT_FALSE(job.ok()) << text;
  if (!job.ok()) {
    EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  }
  return job.ok() ? "" : job.status().message();
}

TEST(JobCodec, AMalformedFieldIsAnErrorNamingIt) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& r) { r["attempts"][1]["exit"] = "boom"; },
       "attempts[1].exit: unknown exit kind 'boom'"},
      {[](json& r) { r["spec"]["gpus"] = "two"; }, "spec.gpus: not an integer"},
      {[](json& r) { r["spec"]["gpus"] = 1.5; }, "spec.gpus: not an integer"},
      {[](json& r) { r["spec"]["gpus"] = 4294967296; }, "spec.gpus: out of range"},
      {[](json& r) { r["spec"]["id"] = 18446744073709551615u; }, "spec.id: out of range"},
      {[](json& r) { r["state"] = "paused"; }, "state: unknown job state 'paused'"},
      {[](json& r) { r["spec"].erase("name"); }, "spec.name: missing"},
      {[](json& r) { r.erase("attempts"); }, "attempts: missing"},
      {[](json& r) { r["attempts"][0].erase("exit"); }, "attempts[0].exit: missing"},
      {[](json& r) { r["env"] = "HOME=/"; }, "env: not a list"},
      {[](json& r) { r["env"][1] = 5; }, "env[1]: not a string"},
      {[](json& r) { r["spec"]["command"] = nullptr; }, "spec.command: not a list"},
      {[](json& r) { r["spec"]["memory"]["peak"] = -1; }, "spec.memory.peak: negative"},
      {[](json& r) { r["spec"]["memory"]["source"] = "guess"; },
       "spec.memory.source: unknown memory source 'guess'"},
      {[](json& r) { r["spec"]["memory"] = 12; }, "spec.memory: not an object"},
      {[](json& r) { r["spec"]["sharing"] = "all"; },
       "spec.sharing: unknown sharing preference 'all'"},
      {[](json& r) { r["spec"]["expected_smact"] = "high"; }, "spec.expected_smact: not a number"},
      {[](json& r) { r["attempts"][0]["pid_start"] = -5; }, "attempts[0].pid_start: negative"},
      {[](json& r) { r["attempts"][0]["pid_start"] = 1.5; },
       "attempts[0].pid_start: not an integer"},
      {[](json& r) { r["attempts"][0]["mode"] = "shared"; },
       "attempts[0].mode: unknown sharing mode 'shared'"},
      {[](json& r) { r["attempts"][1]["phase"] = 2; }, "attempts[1].phase: not a string"},
      {[](json& r) { r["attempts"][0]["gpu_uuids"][1] = false; },
       "attempts[0].gpu_uuids[1]: not a string"},
      {[](json& r) { r["attempts"] = json::object(); }, "attempts: not a list"},
      {[](json& r) { r["attempts"][0] = 5; }, "attempts[0]: not an object"},
      {[](json& r) { r["submitted"] = 1e300; }, "submitted: not a time colod can hold"},
      {[](json& r) { r["finished"] = "yesterday"; }, "finished: not a number of seconds"},
      {[](json& r) { r["owner"] = json::array(); }, "owner: not an object"},
      {[](json& r) { r["owner"]["uid"] = -1; }, "owner.uid: negative"},
      {[](json& r) { r["owner"]["gid"] = 4294967296; }, "owner.gid: out of range"},
      {[](json& r) { r["cancel_requested"] = 1; }, "cancel_requested: not true or false"},
      {[](json& r) { r["estimate"]["learned"]["runs"] = "x"; },
       "estimate.learned.runs: not an integer"},
      {[](json& r) { r["estimate"]["upper"] = 1e3; }, "estimate.upper: not an integer"},
      {[](json& r) { r["estimate"] = "trace"; }, "estimate: not an object"},
      {[](json& r) { r["format"] = 3; }, "format: 3 is not 2"},
      {[](json& r) { r.erase("format"); }, "format: missing"},
      // The job's context, as the API describes it.
      {[](json& r) { r["workdir"] = 7; }, "workdir: must be a string"},
      {[](json& r) { r["umask"] = 01000; }, "umask: must be between 0 and 511"},
  };
  for (const auto& [change, message] : cases) EXPECT_EQ(DecodeError(Mutated(change)), message);
}

TEST(JobCodec, ARecordFromBeforeTheUmaskHasNone) {
  const Result<Job> job = DecodeJob(Mutated([](json& r) { r.erase("umask"); }));
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_FALSE(job->context.umask.has_value());
  EXPECT_EQ(job->context.workdir, "/home/alice/run");
}

TEST(JobCodec, AnEnumValueInAMessageIsQuotedSafely) {
  const std::string message =
      DecodeError(Mutated([](json& r) { r["state"] = "\x1b[2J" + std::string(500, 'x'); }));
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
  EXPECT_NE(message.find("state: unknown job state '\\x1b[2J"), std::string::npos) << message;
  EXPECT_LT(message.size(), 200u);
}

TEST(JobCodec, TextThatIsNoRecordIsAnError) {
  EXPECT_EQ(DecodeError(""), "record: not JSON (error at byte 1)");
  EXPECT_EQ(DecodeError("garbage"), "record: not JSON (error at byte 1)");
  EXPECT_EQ(DecodeError("[1, 2]"), "record: not an object");
  EXPECT_EQ(DecodeError("null"), "record: not an object");
  EXPECT_EQ(DecodeError("{\"format\": 2"), "record: not JSON (error at byte 13)");
  EXPECT_EQ(DecodeError(std::string(100'000, '[')), "record: nested deeper than 16 levels");
  // A string of brackets is not nesting.
  EXPECT_TRUE(DecodeJob(Mutated([](json& r) { r["reason"] = std::string(1000, '['); })).ok());
  EXPECT_EQ(DecodeError(std::string(kMaxJobRecordBytes + 1, ' ')),
            "record: larger than 16777216 bytes");
  EXPECT_EQ(DecodeError("{\"format\": 2, \"x\": \"\xFF\"}"), "record: not JSON (error at byte 21)");
}

// Whatever a record is turned into, decoding it returns: an error or a job, never a crash.
TEST(JobCodec, DecodingDamagedRecordsNeverThrows) {
  const std::string good = EncodeJob(FullJob());
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(DecodeJob(good.substr(0, cut)).ok()) << cut;
  }
  std::mt19937 rng(7);
  int decoded = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string damaged = good;
    for (int flips = 0; flips < 3; ++flips) {
      damaged[rng() % damaged.size()] = static_cast<char>(rng() % 256);
    }
    Result<Job> job = DecodeJob(damaged);
    if (job.ok()) ++decoded;
  }
  // Most damage lands in a string or a number and still decodes; the rest is an error.
  EXPECT_GT(decoded, 0);
  EXPECT_LT(decoded, 3000);
}

TEST(JobCodec, ReadsSchema1Records) {
  const std::string text = R"({
    "spec": {"id": 7, "name": "bert", "owner": "bob", "command": ["python", "bert.py"],
             "gpus": 2, "memory": 8589934592, "memory_source": "learned",
             "memory_uncertainty": 0.1, "sharing": "", "priority": 1, "expected_smact": 0.5},
    "uid": 1001, "gid": 1002, "workdir": "/home/bob", "env": ["HOME=/home/bob"],
    "state": "running", "reason": "", "submitted": 1700000000.25, "finished": 0,
    "cancel_requested": false,
    "attempts": [
      {"number": 1, "pid": 0, "pid_start": 0, "gpus": [0, 1], "gpu_uuids": ["GPU-0", "GPU-1"],
       "mode": "mps", "thread_percent": 50, "memory_limit": 0, "started": 1700000001.5,
       "ended": 1700000002, "exit_kind": "out-of-memory", "detail": "OOM", "peak": 9000000000,
       "stdout": "/s/1.out", "stderr": "/s/1.err", "exit_file": "/s/1.exit"},
      {"number": 2, "pid": 555, "pid_start": 777, "gpus": [0], "gpu_uuids": ["GPU-0"],
       "mode": "exclusive", "thread_percent": 100, "memory_limit": 0, "started": 1700000003,
       "ended": 0, "exit_kind": "", "detail": "", "peak": 0,
       "stdout": "/s/2.out", "stderr": "/s/2.err", "exit_file": "/s/2.exit"}],
    "source": "rad task.rad", "threads": 50,
    "estimate": {"estimator": "trace", "peak": 100, "lower": 90, "upper": 120, "detail": "d",
                 "signature": "sig", "history": {"runs": 2, "peak": 110, "upper": 115}}})";
  Result<Job> job = DecodeSchema1Job(text);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->spec.id, 7);
  EXPECT_EQ(job->spec.memory.peak, GiB(8));
  EXPECT_EQ(job->spec.memory.source, MemorySource::kLearned);
  EXPECT_EQ(job->spec.sharing, SharingPreference::kAny);
  EXPECT_EQ(job->owner.uid, 1001u);
  EXPECT_EQ(job->owner.gid, 1002u);
  EXPECT_EQ(job->owner.user, "bob");
  EXPECT_EQ(job->state, JobState::kRunning);
  EXPECT_EQ(job->submitted, AtEpochMicros(1'700'000'000'250'000));
  ASSERT_EQ(job->attempts.size(), 2u);
  EXPECT_EQ(job->attempts[0].phase, Attempt::Phase::kEnded);
  EXPECT_EQ(job->attempts[0].exit, ExitKind::kOutOfMemory);
  EXPECT_EQ(job->attempts[0].mode, SharingMode::kMps);
  EXPECT_EQ(job->attempts[0].peak, Bytes(9'000'000'000));
  EXPECT_EQ(job->attempts[1].phase, Attempt::Phase::kRunning);
  EXPECT_FALSE(job->attempts[1].exit.has_value());
  EXPECT_EQ(job->attempts[1].pid_start, 777u);
  EXPECT_EQ(job->context.source, "rad task.rad");
  ASSERT_TRUE(job->estimate.has_value());
  EXPECT_EQ(job->estimate->signature, "sig");
  ASSERT_TRUE(job->estimate->learned.has_value());
  EXPECT_EQ(job->estimate->learned->runs, 2);
  EXPECT_EQ(job->estimate->learned->upper, Bytes(115));

  // Schema 1 read missing fields with defaults.
  Result<Job> sparse = DecodeSchema1Job(R"({"spec": {"id": 3}, "estimate": {"peak": 5}})");
  ASSERT_TRUE(sparse.ok()) << sparse.status().message();
  EXPECT_EQ(sparse->context.workdir, "/");
  EXPECT_EQ(sparse->state, JobState::kQueued);
  EXPECT_EQ(sparse->estimate->lower, Bytes(5));
  EXPECT_FALSE(sparse->estimate->learned.has_value());
  EXPECT_FALSE(DecodeSchema1Job(R"({"spec": {"id": 3}, "estimate": null})")->estimate);

  // But never a wrong type or an unknown name.
  EXPECT_EQ(DecodeSchema1Job(R"({"spec": {}})").status().message(), "spec.id: missing");
  EXPECT_EQ(DecodeSchema1Job(R"({"uid": 1})").status().message(), "spec: missing");
  EXPECT_EQ(DecodeSchema1Job(R"({"spec": {"id": 3}, "attempts": [{"exit_kind": "boom"}]})")
                .status()
                .message(),
            "attempts[0].exit_kind: unknown exit kind 'boom'");
  EXPECT_EQ(DecodeSchema1Job(R"({"spec": {"id": 3, "gpus": "2"}})").status().message(),
            "spec.gpus: not an integer");
  EXPECT_EQ(DecodeSchema1Job(R"({"spec": {"id": 3}, "state": "done"})").status().message(),
            "state: unknown job state 'done'");
}

TEST(JobCodec, StoredEventsAreValidAndBounded) {
  JobEvent event;
  event.job = 9;
  event.time = WallTime(std::chrono::nanoseconds(1'700'000'000'000'000'400));
  event.kind = "started\xFF";
  event.detail = std::string(kMaxEventDetailBytes - 1, 'x') + "█";
  const JobEvent stored = StoredEvent(event);
  EXPECT_EQ(stored.job, 9);
  EXPECT_EQ(stored.time, AtEpochMicros(1'700'000'000'000'000));
  EXPECT_EQ(stored.kind, "started\xEF\xBF\xBD");
  EXPECT_EQ(stored.detail, std::string(kMaxEventDetailBytes - 1, 'x'));
  EXPECT_EQ(StoredEvent(JobEvent{1, {}, std::string(100, 'k'), ""}).kind.size(),
            kMaxEventKindBytes);
}

}  // namespace
}  // namespace colo

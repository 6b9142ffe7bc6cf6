// The wire format: every request and reply round-trips, and malformed requests get an error that
// names the field instead of a crash or a silently wrong value.
#include "api/codec.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "api/field_json.h"
#include "api/output_pattern.h"

namespace colo::api {
namespace {

std::string Error(std::string_view line) {
  auto r = DecodeRequest(line);
  EXPECT_FALSE(r.ok()) << line;
  return r.ok() ? "" : r.status().message();
}

TEST(Codec, RequestsRoundTrip) {
  SubmitRequest s;
  s.command = {"python", "train.py", "--lr", "0.1"};
  s.gpus = 2;
  s.memory = GiB(12);
  s.share = SharingPreference::kMps;
  s.threads = 50;
  s.expected_smact = 0.25;
  s.name = "bert ü";
  s.context.workdir = "/home/a";
  s.env = {"PATH=/bin", "EMPTY="};
  s.context.source = "script /home/a/job.sh";
  JobEstimate e;
  e.estimator = "trace";
  e.peak = GiB(6);
  e.lower = GiB(5);
  e.upper = GiB(7);
  e.signature = "abc-b32";
  s.estimate = e;
  auto back = DecodeRequest(EncodeRequest(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  const auto& t = std::get<SubmitRequest>(*back);
  EXPECT_EQ(t.command, s.command);
  EXPECT_EQ(t.gpus, 2);
  EXPECT_EQ(t.memory, GiB(12));
  EXPECT_EQ(t.share, SharingPreference::kMps);
  EXPECT_EQ(t.threads, 50);
  EXPECT_EQ(t.expected_smact, 0.25);
  EXPECT_EQ(t.name, "bert ü");
  EXPECT_EQ(t.env, s.env);
  EXPECT_EQ(t.context.source, s.context.source);
  ASSERT_TRUE(t.estimate);
  EXPECT_EQ(t.estimate->upper, GiB(7));
  EXPECT_EQ(t.estimate->signature, "abc-b32");

  for (const Request& r : std::vector<Request>{
           HelloRequest{}, QueueRequest{"bob", 50, 9}, ShowRequest{7}, CancelRequest{8},
           ExplainRequest{9}, LogsRequest{10}, GpusRequest{}, HistoryRequest{20, 500, true}}) {
    auto decoded = DecodeRequest(EncodeRequest(r));
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    EXPECT_EQ(decoded->index(), r.index());
    EXPECT_EQ(OpName(*decoded), OpName(r));
  }
  auto logs = DecodeRequest(EncodeRequest(LogsRequest{10, 2}));
  ASSERT_TRUE(logs.ok());
  EXPECT_EQ(std::get<LogsRequest>(*logs).attempt, 2);
  EXPECT_FALSE(std::get<LogsRequest>(*DecodeRequest(EncodeRequest(LogsRequest{10}))).attempt);
  EXPECT_FALSE(DecodeRequest(R"({"api": 1, "op": "logs", "job": 1, "attempt": 0})").ok());
  auto history = DecodeRequest(EncodeRequest(HistoryRequest{20, 500, true}));
  EXPECT_EQ(std::get<HistoryRequest>(*history).before, 500);
}

TEST(Codec, SlurmRequestsRoundTripAndAreChecked) {
  SlurmAttachRequest a;
  a.job = 4242;
  a.uid = 1001;
  a.name = "train";
  a.gpus = 2;
  a.memory = GiB(12);
  a.share = SharingPreference::kPlain;
  a.restarts = 3;
  auto back = DecodeRequest(EncodeRequest(a));
  ASSERT_TRUE(back.ok()) << back.status().message();
  const auto& b = std::get<SlurmAttachRequest>(*back);
  EXPECT_EQ(b.job, 4242u);
  EXPECT_EQ(b.uid, 1001u);
  EXPECT_EQ(b.memory, GiB(12));
  EXPECT_EQ(b.restarts, 3);
  auto end = DecodeRequest(EncodeRequest(SlurmEndRequest{7, 256}));
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(std::get<SlurmEndRequest>(*end).wait_status, 256);
  SlurmRunRequest booked;
  booked.job = 8;
  booked.restarts = 2;
  booked.share = SharingPreference::kMps;
  booked.memory = GiB(3);
  booked.gpus = 2;
  auto run = DecodeRequest(EncodeRequest(booked));
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(OpName(*run), "slurm_run");
  const auto& r = std::get<SlurmRunRequest>(*run);
  EXPECT_EQ(r.restarts, 2);
  EXPECT_EQ(r.share, SharingPreference::kMps);
  EXPECT_EQ(r.memory, GiB(3));
  EXPECT_EQ(r.gpus, 2);
  SlurmRunRequest whole;
  whole.job = 9;
  whole.gpus = 1;
  auto whole_back = DecodeRequest(EncodeRequest(whole));
  ASSERT_TRUE(whole_back.ok());
  EXPECT_FALSE(std::get<SlurmRunRequest>(*whole_back).share.has_value());
  EXPECT_FALSE(std::get<SlurmRunRequest>(*whole_back).memory.has_value());
  for (const char* bad : {R"({"api":1,"op":"slurm_run"})", R"({"api":1,"op":"slurm_run","job":0})",
                          R"({"api":1,"op":"slurm_run","job":5,"restarts":-1})",
                          R"({"api":1,"op":"slurm_run","job":4294967295})",
                          R"({"api":1,"op":"slurm_attach","job":5})"}) {
    EXPECT_FALSE(DecodeRequest(bad).ok()) << bad;
  }
  auto reply = DecodeReply<SlurmRunReply>(EncodeReply(SlurmRunReply{8, 2}));
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->restarts, 2);
}

TEST(OutputPattern, SlurmCodesExpandAndBadOnesAreNamed) {
  OutputNames names{42, std::nullopt, 0, "alice", "train", "gpu1"};
  EXPECT_EQ(ExpandOutputPattern("slurm-%j.out", names), "slurm-42.out");
  EXPECT_EQ(ExpandOutputPattern("%x_%u@%N-%%-%5j", names), "train_alice@gpu1-%-00042");
  // Outside an array %A is the job's own id and %a Slurm's NO_VAL - 1.
  EXPECT_EQ(ExpandOutputPattern("%A_%a", names), "42_4294967294");
  names.array_job = 40;
  names.array_task = 7;
  EXPECT_EQ(ExpandOutputPattern("%A_%3a.log", names), "40_007.log");
  for (const char* good : {"a", "%j", "%10a", "dir/%x/%%"}) {
    EXPECT_TRUE(CheckOutputPattern(good).ok()) << good;
  }
  for (auto [bad, why] :
       {std::pair{"", "empty"}, std::pair{"x-%", "ends inside"}, std::pair{"%11j", "at most 10"},
        std::pair{"%q", "%q is not a code"}, std::pair{"%123", "ends inside"}}) {
    const Status s = CheckOutputPattern(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  }
  EXPECT_FALSE(CheckOutputPattern(std::string("a\0b", 3)).ok());
  for (const char* unprintable : {"r\xe9s.out", "new\nline.out", "tab\t.out", "\x1b[2J"}) {
    EXPECT_FALSE(CheckOutputPattern(unprintable).ok()) << unprintable;
  }
  EXPECT_TRUE(CheckOutputPattern("résumé-%j.out").ok());
  EXPECT_FALSE(CheckOutputPattern(std::string(kMaxOutputPatternBytes + 1, 'a')).ok());
  // A name cannot make a file name longer than a path may be.
  names.name = std::string(10000, 'n');
  EXPECT_LT(ExpandOutputPattern("%x", names).size(), 4096u);
}

TEST(Codec, SubmitOutputPatternsRoundTripAndAreChecked) {
  SubmitRequest s;
  s.command = {"true"};
  s.context.workdir = "/tmp";
  s.output = "out-%j.txt";
  s.error = "err-%A_%a.txt";
  auto back = DecodeRequest(EncodeRequest(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(std::get<SubmitRequest>(*back).output, "out-%j.txt");
  EXPECT_EQ(std::get<SubmitRequest>(*back).error, "err-%A_%a.txt");
  EXPECT_NE(Error(R"({"api":1,"op":"submit","command":["true"],"workdir":"/","output":"%z"})")
                .find("output"),
            std::string::npos);
  EXPECT_NE(
      Error(R"({"api":1,"op":"submit","command":["true"],"workdir":"/","error":7})").find("error"),
      std::string::npos);
}

TEST(Codec, TheVersionIsANumberAndAnythingElseIsAnErrorNotACrash) {
  for (const char* bad : {R"({"api":"1","op":"hello"})", R"({"api":null,"op":"hello"})",
                          R"({"api":[1],"op":"hello"})", R"({"api":{},"op":"hello"})",
                          R"({"api":2,"op":"hello"})", R"({"op":"hello"})"}) {
    auto r = DecodeRequest(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status().message().find("unsupported API version"), std::string::npos);
  }
  EXPECT_NE(Error("hello?").find("not a JSON object"), std::string::npos);
  EXPECT_NE(Error("[1,2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(Error("{\"api\":1,\"op\":\"launch-missiles\"}").find("unknown op"), std::string::npos);
  EXPECT_NE(Error("{\"api\":1}").find("no \"op\""), std::string::npos);
  EXPECT_NE(Error("{\"api\":1,\"op\":7}").find("op: must be a string"), std::string::npos);
  EXPECT_NE(Error("{\"api\":1,\"op\":\"show\",\"job\":\"x\"}").find("job: must be a number"),
            std::string::npos);
  EXPECT_NE(Error("{\"api\":1,\"op\":\"show\"}").find("job: is required"), std::string::npos);
  EXPECT_NE(Error("{\"api\":1,\"op\":\"history\",\"limit\":100000}").find("limit"),
            std::string::npos);
  // Invalid UTF-8 inside a string is not JSON.
  EXPECT_NE(Error("{\"api\":1,\"op\":\"queue\",\"user\":\"\xff\"}").find("not a JSON object"),
            std::string::npos);
}

TEST(Codec, SubmitFieldsAreCheckedByTypeAndRange) {
  auto submit = [](const std::string& fields) {
    return Error(R"({"api":1,"op":"submit","command":["true"],"workdir":"/tmp")" + fields + "}");
  };
  EXPECT_NE(submit(R"(,"gpus":1.7)").find("gpus: must be a whole number"), std::string::npos);
  EXPECT_NE(submit(R"(,"gpus":4294967297)").find("gpus: must be"), std::string::npos);
  EXPECT_NE(submit(R"(,"gpus":true)").find("gpus: must be a number"), std::string::npos);
  EXPECT_NE(submit(R"(,"gpus":0)").find("gpus: must be between 1 and 64"), std::string::npos);
  EXPECT_NE(submit(R"(,"gpus":-3)").find("gpus"), std::string::npos);
  EXPECT_NE(submit(R"(,"expected_smact":5)").find("expected_smact: must be between 0 and 1"),
            std::string::npos);
  EXPECT_NE(submit(R"(,"threads":101)").find("threads"), std::string::npos);
  EXPECT_NE(submit(R"(,"memory":"lots")").find("memory"), std::string::npos);
  EXPECT_NE(submit(R"(,"memory":-1)").find("memory"), std::string::npos);
  EXPECT_NE(submit(R"(,"memory":"2PiB")").find("memory"), std::string::npos);
  EXPECT_NE(submit(R"(,"share":"sometimes")").find("share"), std::string::npos);
  EXPECT_NE(submit(R"(,"env":["NOEQUALS"])").find("env: entries must be NAME=value"),
            std::string::npos);
  EXPECT_NE(submit(R"(,"env":"PATH=/bin")").find("env: must be a list"), std::string::npos);
  EXPECT_NE(submit(R"(,"estimate":{"peak":-1,"upper":3})").find("estimate.peak"),
            std::string::npos);
  EXPECT_NE(submit(R"(,"estimate":{"peak":5,"upper":3})").find("lower <= peak <= upper"),
            std::string::npos);
  EXPECT_NE(submit(R"(,"estimate":"big")").find("estimate: must be an object"), std::string::npos);
  EXPECT_NE(Error(R"({"api":1,"op":"submit","command":[1,2],"workdir":"/"})")
                .find("command: must be a list of strings"),
            std::string::npos);
  EXPECT_NE(Error(R"({"api":1,"op":"submit","command":[],"workdir":"/"})").find("command"),
            std::string::npos);
  EXPECT_NE(Error(R"({"api":1,"op":"submit","command":["true"]})").find("workdir: is required"),
            std::string::npos);
  EXPECT_NE(submit(R"(,"umask":512)").find("umask: must be between 0 and 511"), std::string::npos);
  EXPECT_NE(submit(R"(,"limits":[{"name":"files","soft":1,"hard":2}])")
                .find("limits[0].name: unknown resource 'files' (one of as, core"),
            std::string::npos);
  EXPECT_NE(submit(R"(,"limits":[{"name":"nofile","soft":10,"hard":5}])")
                .find("limits[0].soft: must be at most hard"),
            std::string::npos);
  EXPECT_NE(submit(R"(,"limits":[{"name":"nofile","soft":-1,"hard":5}])")
                .find("limits[0].soft: must be at most hard"),
            std::string::npos);
  EXPECT_NE(submit(R"(,"limits":[{"soft":1}])").find("limits[0].name: is required"),
            std::string::npos);
  auto ok = DecodeRequest(
      R"({"api":1,"op":"submit","command":["true"],"workdir":"/","memory":"12GiB","gpus":2,)"
      R"("umask":63,"limits":[{"name":"core","soft":0,"hard":-1}]})");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  const SubmitRequest& request = std::get<SubmitRequest>(*ok);
  EXPECT_EQ(request.memory, GiB(12));
  EXPECT_EQ(request.context.umask, 077);
  EXPECT_EQ(request.context.limits, (std::vector<ResourceLimit>{{"core", 0, -1}}));
}

TEST(Codec, RepliesRoundTripAndErrorsKeepTheirCode) {
  ShowReply show;
  show.job.summary.id = 12;
  show.job.summary.name = "a\x1b[2Jb";
  show.job.summary.state = JobState::kRecovering;
  show.job.summary.memory = GiB(3);
  show.job.command = {"sh", "-c", "x"};
  show.job.attempt_list.push_back(AttemptInfo{1,
                                              42,
                                              {0},
                                              {"GPU-0"},
                                              "mps",
                                              50,
                                              GiB(3),
                                              1.5,
                                              2.5,
                                              "out-of-memory",
                                              "CUDA out of memory",
                                              GiB(4)});
  show.job.events.push_back(EventInfo{3.0, "started", "attempt 1"});
  auto back = DecodeReply<ShowReply>(EncodeReply(show));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->job.summary.id, 12);
  EXPECT_EQ(back->job.summary.name, "a\x1b[2Jb");
  EXPECT_EQ(back->job.summary.state, JobState::kRecovering);
  EXPECT_EQ(back->job.summary.memory, GiB(3));
  ASSERT_EQ(back->job.attempt_list.size(), 1u);
  EXPECT_EQ(back->job.attempt_list[0].peak, GiB(4));
  EXPECT_EQ(back->job.attempt_list[0].exit_kind, "out-of-memory");
  ASSERT_EQ(back->job.events.size(), 1u);

  for (StatusCode code :
       {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kPermissionDenied,
        StatusCode::kInfeasible, StatusCode::kFailedPrecondition, StatusCode::kUnavailable,
        StatusCode::kResourceExhausted, StatusCode::kInternal}) {
    auto error = DecodeReply<SubmitReply>(EncodeError(Status(code, "why")));
    ASSERT_FALSE(error.ok());
    EXPECT_EQ(error.status().code(), code);
    EXPECT_EQ(error.status().message(), "why");
  }
  // A reply is always valid JSON, whatever bytes a job put into a field.
  ShowReply bad;
  bad.job.summary.name = "bad\xff";
  const std::string line = EncodeReply(bad);
  EXPECT_NE(line.find("bad\xEF\xBF\xBD"), std::string::npos);
  EXPECT_FALSE(DecodeReply<ShowReply>("not json").ok());
  EXPECT_FALSE(DecodeReply<ShowReply>("{}").ok());
}

TEST(Codec, SlurmHabitsRoundTripAndAreChecked) {
  SubmitRequest s;
  s.command = {"true"};
  s.context.workdir = "/";
  s.time_limit_s = 3600;
  s.dependencies = {{DependencyKind::kAfterOk, 4}, {DependencyKind::kAfterNotOk, 5}};
  s.hold = true;
  s.priority = -7;
  auto back = DecodeRequest(EncodeRequest(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  const auto& t = std::get<SubmitRequest>(*back);
  EXPECT_EQ(t.time_limit_s, 3600);
  EXPECT_EQ(t.dependencies, s.dependencies);
  EXPECT_TRUE(t.hold);
  EXPECT_EQ(t.priority, -7);

  auto submit = [](const std::string& fields) {
    return Error(R"({"api":1,"op":"submit","command":["true"],"workdir":"/tmp")" + fields + "}");
  };
  EXPECT_NE(submit(R"(,"time_limit_s":-1)").find("time_limit_s"), std::string::npos);
  EXPECT_NE(submit(R"(,"time_limit_s":99999999999)").find("time_limit_s"), std::string::npos);
  EXPECT_NE(submit(R"(,"priority":10001)").find("priority"), std::string::npos);
  EXPECT_NE(submit(R"(,"dependencies":{})").find("dependencies"), std::string::npos);
  EXPECT_NE(submit(R"(,"dependencies":[1])").find("dependencies"), std::string::npos);
  EXPECT_NE(submit(R"(,"dependencies":[{"kind":"after","job":1}])").find("dependency kind"),
            std::string::npos);
  EXPECT_NE(submit(R"(,"dependencies":[{"kind":"afterok"}])").find("job: is required"),
            std::string::npos);
  std::string many = R"(,"dependencies":[)";
  for (int i = 1; i <= 65; ++i) many += std::string(i > 1 ? "," : "") + R"({"job":1})";
  EXPECT_NE(submit(many + "]").find("dependencies"), std::string::npos);

  ControlRequest c{JobAction::kRequeue, {1, 2, 3}};
  auto control = DecodeRequest(EncodeRequest(c));
  ASSERT_TRUE(control.ok()) << control.status().message();
  EXPECT_EQ(std::get<ControlRequest>(*control).action, JobAction::kRequeue);
  EXPECT_EQ(std::get<ControlRequest>(*control).jobs, (std::vector<JobId>{1, 2, 3}));
  EXPECT_FALSE(std::get<ControlRequest>(*control).each_alone);
  c.each_alone = true;
  auto alone = DecodeRequest(EncodeRequest(c));
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(std::get<ControlRequest>(*alone).each_alone);
  EXPECT_NE(Error(R"({"api":1,"op":"control","action":"cancel","jobs":[1],"each_alone":1})")
                .find("each_alone"),
            std::string::npos);
  EXPECT_NE(Error(R"({"api":1,"op":"control","jobs":[1]})").find("action: is required"),
            std::string::npos);
  EXPECT_NE(Error(R"({"api":1,"op":"control","action":"explode","jobs":[1]})").find("action"),
            std::string::npos);
  EXPECT_NE(Error(R"({"api":1,"op":"control","action":"hold","jobs":[]})").find("jobs"),
            std::string::npos);
  EXPECT_NE(Error(R"({"api":1,"op":"control","action":"hold","jobs":[0]})").find("jobs"),
            std::string::npos);
  EXPECT_NE(Error(R"({"api":1,"op":"control","action":"hold","jobs":["1"]})").find("jobs"),
            std::string::npos);

  ControlReply reply;
  reply.results = {{1, true, "held", "", std::nullopt},
                   {2, false, "", "no job 2", ErrorCode::kNotFound}};
  auto decoded = DecodeReply<ControlReply>(EncodeReply(reply));
  ASSERT_TRUE(decoded.ok());
  ASSERT_EQ(decoded->results.size(), 2u);
  EXPECT_EQ(decoded->results[0].state, "held");
  EXPECT_FALSE(decoded->results[1].ok);
  EXPECT_EQ(decoded->results[1].code, ErrorCode::kNotFound);
}

TEST(Codec, EventsAndGpuJobsRoundTripAndTheLimitIsBounded) {
  auto request = DecodeRequest(EncodeRequest(EventsRequest{30}));
  ASSERT_TRUE(request.ok()) << request.status().message();
  EXPECT_EQ(OpName(*request), "events");
  EXPECT_EQ(std::get<EventsRequest>(*request).limit, 30);
  EXPECT_EQ(std::get<EventsRequest>(*DecodeRequest(R"({"api":1,"op":"events"})")).limit, 50);
  for (const char* bad :
       {R"({"api":1,"op":"events","limit":0})", R"({"api":1,"op":"events","limit":201})",
        R"({"api":1,"op":"events","limit":"10"})"}) {
    auto decoded = DecodeRequest(bad);
    ASSERT_FALSE(decoded.ok()) << bad;
    EXPECT_NE(decoded.status().message().find("limit"), std::string::npos);
  }
  EventsReply events;
  events.events.push_back({7, "bob", "train", 12.5, "started", "", true});
  events.events.push_back({8, "alice", "eval", 11.0, "failed", "exit 1", false});
  auto back = DecodeReply<EventsReply>(EncodeReply(events));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->events.size(), 2u);
  EXPECT_EQ(back->events[0].job, 7);
  EXPECT_EQ(back->events[0].user, "bob");
  EXPECT_TRUE(back->events[0].redacted);
  EXPECT_EQ(back->events[1].detail, "exit 1");
  EXPECT_FALSE(back->events[1].redacted);
  EXPECT_DOUBLE_EQ(back->events[1].time, 11.0);

  GpusReply gpus;
  GpuInfoReply gpu;
  gpu.memory_total = GiB(80);
  gpu.jobs.push_back({3, "train", "alice", "plain", GiB(5), GiB(4), GiB(12)});
  gpus.gpus.push_back(gpu);
  auto gpus_back = DecodeReply<GpusReply>(EncodeReply(gpus));
  ASSERT_TRUE(gpus_back.ok()) << gpus_back.status().message();
  EXPECT_EQ(gpus_back->gpus.at(0).jobs.at(0).used, GiB(4));
  EXPECT_EQ(gpus_back->gpus.at(0).jobs.at(0).reservation, GiB(12));
}

}  // namespace
}  // namespace colo::api

namespace colo::api {
namespace {

// A struct of every kind of member the descriptions use, described as the API's are.
struct Probe {
  int count = 3;
  std::optional<Bytes> size;
  std::vector<std::string> words;
  SharingPreference share = SharingPreference::kAny;
  Dependency after;
  std::vector<Dependency> afters;
  std::string note;
  JobContext context;
};
constexpr auto Fields(Of<Probe>) {
  return std::tuple{Field("count", &Probe::count).Range(1, 9).Required("a count"),
                    Field("size", &Probe::size).Range(1, kMaxMemoryBytes),
                    Field("words", &Probe::words).MaxItems(2).MaxBytes(4),
                    Field("share", &Probe::share),
                    Field("after", &Probe::after),
                    Field("afters", &Probe::afters),
                    Field("note", &Probe::note).OmitDefault(),
                    Embed(&Probe::context)};
}

TEST(Fields, AStructIsWrittenAndReadThroughItsOneDescription) {
  Probe probe;
  probe.count = 7;
  probe.size = GiB(2);
  probe.words = {"a", "bc"};
  probe.share = SharingPreference::kPlain;
  probe.after = {DependencyKind::kAfterOk, 4};
  probe.afters = {{DependencyKind::kAfterNotOk, 5}};
  probe.context = {"/w", "cli", 027, {}, false, std::nullopt};
  nlohmann::json j = nlohmann::json::object();
  WriteFields(probe, j);
  // Keys as described; the embedded struct's beside the others; a default left off when asked.
  EXPECT_EQ(j.dump(),
            R"({"after":{"job":4,"kind":"afterok"},"afters":[{"job":5,"kind":"afternotok"}],)"
            R"("count":7,"share":"plain","size":2147483648,"source":"cli","umask":23,)"
            R"("words":["a","bc"],"workdir":"/w"})");
  Probe back;
  Status status;
  ReadFields(j, "", back, status);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(back.count, 7);
  EXPECT_EQ(back.size, GiB(2));
  EXPECT_EQ(back.words, probe.words);
  EXPECT_EQ(back.share, SharingPreference::kPlain);
  EXPECT_EQ(back.after, probe.after);
  EXPECT_EQ(back.afters, probe.afters);
  EXPECT_EQ(back.context, probe.context);

  auto problem = [](const char* text) {
    Probe p;
    Status s;
    ReadFields(nlohmann::json::parse(text), "probe", p, s);
    return s.ok() ? std::string("ok") : s.message();
  };
  EXPECT_EQ(problem(R"({"count": 2})"), "ok");
  EXPECT_EQ(problem("{}"), "probe.count: is required (a count)");
  EXPECT_EQ(problem(R"({"count": 10})"), "probe.count: must be between 1 and 9");
  EXPECT_EQ(problem(R"({"count": 2, "size": "3GiB", "words": ["abcde"]})"),
            "probe.words: has an entry longer than 4 bytes");
  EXPECT_EQ(problem(R"({"count": 2, "words": ["a", "b", "c"]})"),
            "probe.words: has more than 2 entries");
  EXPECT_EQ(problem(R"({"count": 2, "afters": [{"kind": "afterok"}]})"),
            "probe.afters[0].job: is required (a job id)");
  EXPECT_EQ(problem(R"({"count": 2, "after": 3})"), "probe.after: must be an object");
  EXPECT_EQ(problem(R"({"count": 2, "umask": -1})"), "probe.umask: must be between 0 and 511");
  // A struct's member count is what its description is held to: a member added without a
  // description line does not compile.
  static_assert(field_json::MemberCount<Probe>() == 8);
  static_assert(field_json::MemberCount<JobContext>() == 6);
}

TEST(Codec, ARequestWithAKeyItDoesNotDescribeIsRefusedByName) {
  const std::string submit = R"({"api":1,"op":"submit","command":["true"],"workdir":"/",)";
  // A misspelled option would otherwise leave its default: an unpreemptible job, say.
  EXPECT_EQ(Error(submit + R"("requeu":true})"),
            "requeu: is not a field of this request (misspelled?)");
  // In a nested object and in a list's entries, named by their path.
  EXPECT_EQ(Error(submit + R"("signal":{"number":10,"lead_s":60,"lead":5}})"),
            "signal.lead: is not a field of this request (misspelled?)");
  EXPECT_EQ(Error(submit + R"("limits":[{"name":"core","soft":0,"hard":0,"max":1}]})"),
            "limits[0].max: is not a field of this request (misspelled?)");
  // A key of another op is not one of this op's.
  EXPECT_EQ(Error(R"({"api":1,"op":"queue","requeue":true})"),
            "requeue: is not a field of this request (misspelled?)");
  // A client's key is cut before it is echoed.
  EXPECT_EQ(Error(R"({"api":1,"op":"hello",")" + std::string(1000, 'k') + R"(":1})"),
            std::string(64, 'k') + ": is not a field of this request (misspelled?)");
  // The envelope's keys and every described one are known; an embedded struct's keys too.
  EXPECT_TRUE(DecodeRequest(submit + R"("requeue":true,"signal":{"number":10,"lead_s":60}})").ok());
  // Replies are read leniently: a newer colod may tell an older client more.
  EXPECT_TRUE(DecodeReply<HelloReply>(R"({"ok":true,"api":1,"something_new":1})").ok());
}

TEST(Codec, RequeueAndTheSignalTravelWithTheJob) {
  SubmitRequest s;
  s.command = {"true"};
  s.context.workdir = "/w";
  s.context.requeue = true;
  s.context.signal = JobSignal{SIGUSR1, 120};
  auto back = DecodeRequest(EncodeRequest(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(std::get<SubmitRequest>(*back).context.requeue);
  EXPECT_EQ(std::get<SubmitRequest>(*back).context.signal, (JobSignal{SIGUSR1, 120}));
  s.context = JobContext{"/w", "cli", std::nullopt, {}, false, std::nullopt};
  back = DecodeRequest(EncodeRequest(s));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(std::get<SubmitRequest>(*back).context.requeue);
  EXPECT_FALSE(std::get<SubmitRequest>(*back).context.signal);
  const std::string submit = R"({"api":1,"op":"submit","command":["true"],"workdir":"/",)";
  EXPECT_NE(Error(submit + R"("signal":{"number":9,"lead_s":60}})")
                .find("signal.number: must be "
                      "one of HUP"),
            std::string::npos);
  EXPECT_NE(Error(submit + R"("signal":{"number":15,"lead_s":70000}})").find("signal.lead_s"),
            std::string::npos);
}

TEST(Codec, TheSubmittersUmaskTravelsWithTheJob) {
  SubmitRequest s;
  s.command = {"true"};
  s.context.workdir = "/w";
  s.context.umask = 077;
  auto back = DecodeRequest(EncodeRequest(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(std::get<SubmitRequest>(*back).context.umask, 077);
  s.context.umask.reset();
  back = DecodeRequest(EncodeRequest(s));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(std::get<SubmitRequest>(*back).context.umask);
  EXPECT_NE(Error(R"({"api":1,"op":"submit","command":["true"],"workdir":"/","umask":512})")
                .find("umask"),
            std::string::npos);
  ShowReply show;
  show.job.context = {"/w", "script /w/job.sh", 022, {}, false, std::nullopt};
  auto shown = DecodeReply<ShowReply>(EncodeReply(show));
  ASSERT_TRUE(shown.ok()) << shown.status().message();
  EXPECT_EQ(shown->job.context, show.job.context);
}

TEST(Codec, ShareRoundTripsAndFractionsAreBounded) {
  auto request = DecodeRequest(EncodeRequest(ShareRequest{}));
  ASSERT_TRUE(request.ok()) << request.status().message();
  EXPECT_EQ(OpName(*request), "share");
  ShareReply reply;
  reply.order = "fair-share";
  reply.half_life_s = 604800;
  ShareUser alice;
  alice.user = "alice";
  alice.share = 2;
  alice.share_fraction = 2.0 / 3;
  alice.usage_gpu_hours = 12.5;
  alice.usage_fraction = 0.8;
  alice.factor = 0.435;
  alice.running = 1;
  alice.gpus = 2;
  alice.gpu_memory = GiB(80);
  alice.limits = "gpus 2";
  reply.users.push_back(alice);
  auto back = DecodeReply<ShareReply>(EncodeReply(reply));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->users.size(), 1u);
  EXPECT_EQ(back->users[0].user, "alice");
  EXPECT_EQ(back->users[0].gpu_memory, GiB(80));
  EXPECT_DOUBLE_EQ(back->users[0].usage_fraction, 0.8);
  EXPECT_EQ(back->users[0].limits, "gpus 2");
  reply.users[0].share_fraction = 0.5;
  std::string text = EncodeReply(reply);
  const size_t at = text.find("\"share_fraction\":0.5");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 20, "\"share_fraction\":1.5");
  auto bad = DecodeReply<ShareReply>(text);
  ASSERT_FALSE(bad.ok()) << "a share fraction above 1";
  EXPECT_NE(bad.status().message().find("share_fraction"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace colo::api

// Learning from earlier runs: what a run that ended teaches the later and the waiting jobs of its
// model. One rule for colod and `colo sim`: colod keeps the runs in its store
// (JobStore::EarlierRuns), the simulator keeps each server's as that server's colod would
// (AddNewestRun), and both ask Learn what a job plans with.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/units.h"
#include "core/model.h"

namespace colo {

// How many of a model's newest runs of each kind (peaks, solo SM activity) are learned from.
constexpr size_t kRunsLearnedFrom = 20;

// Links the runs of one model, batch, optimizer and precision (what the client's estimate names)
// of one user. Runs teach only their own user's later runs: a signature is easy to reproduce, and
// another user's cheap runs must not re-plan (and so crash or starve) someone else's jobs. Its
// text is the key colod stores with a job.
class ModelSignature {
 public:
  ModelSignature() = default;  // none: nothing links the job's runs
  // `model` as the client named it (empty: none), for the runs of `owner`.
  ModelSignature(std::string_view model, std::string_view owner);
  // colod's users are their uids.
  static ModelSignature OfUid(std::string_view model, unsigned uid);
  // As stored with a job.
  static ModelSignature FromText(std::string text);

  bool empty() const { return text_.empty(); }
  const std::string& text() const { return text_; }
  bool operator==(const ModelSignature&) const = default;
  bool operator<(const ModelSignature& other) const { return text_ < other.text_; }

 private:
  std::string text_;
};

// What earlier runs of a model measured, newest first.
struct ModelRuns {
  std::vector<Bytes> peaks;         // per-GPU peaks the runs were seen to reach
  std::vector<double> solo_smact;   // SM activity of runs alone on their GPU for a while
  std::vector<Duration> run_times;  // how long the runs that succeeded took, start to end
};

// What one ended attempt of a job measured.
struct RunEvidence {
  std::optional<ExitKind> exit;
  bool over_plan = false;  // its use went above its plan while it shared without a limit
  Bytes peak;              // the highest per-GPU use seen
  double solo_smact = -1;  // its SM activity alone on its GPU; negative: not measured
  Duration run_time{0};    // from its start to its end; counted only when it succeeded
};
// Whether the attempt measured anything its model's later runs plan with: a peak (it succeeded,
// or was seen above its plan: a use seen, whatever ended it later; an out-of-memory crash proves
// only that it needed more than its peak), its solo SM activity or, when it succeeded, its run
// time (a run that failed or was stopped says nothing of how long a whole run takes).
bool MeasuredPeak(const RunEvidence& run);
bool MeasuredRunTime(const RunEvidence& run);
bool Teaches(const RunEvidence& run);
// Adds what the attempt measured to `runs`, up to `limit` of each kind.
void AddRun(const RunEvidence& run, size_t limit, ModelRuns& runs);

// The need that runs with these peaks show: their highest peak, with a margin that shrinks with
// the evidence (10% after one run, about 10%/sqrt(n) after n) and is never below the spread the
// runs showed. The history estimator's rule.
struct NeedFromRuns {
  int runs = 0;
  Bytes lowest, highest, upper;
  MemoryNeed need() const;  // highest, uncertain up to upper; learned
};
std::optional<NeedFromRuns> LearnNeed(const std::vector<Bytes>& peaks);

// How long a job that gives no time limit is expected to run, for backfill's reservations (its
// own end while it runs, and whether it ends before the waiting head's start): the mean of its
// model's newest kRunTimesLearnedFrom successful runs. A run of the same user's model is the best
// predictor there is of the next (Tsafrir, Etsion and Feitelson, "Backfilling using
// system-generated predictions rather than user runtime estimates", 2007: the mean of the user's
// last two runs); a job that outlives it is expected to end at any moment, as one past its --time.
constexpr size_t kRunTimesLearnedFrom = 2;
std::optional<Duration> LearnRunTime(const std::vector<Duration>& run_times);

// Where the SM activity a job plans with came from: the user's word always stands; a prediction
// (the client's, from the profile) gives way to what runs measured; a learned one follows them.
enum class SmactSource { kUnknown, kUser, kPredicted, kLearned };

// What a job that has not run yet plans with after the runs of its model.
struct Lesson {
  std::optional<NeedFromRuns> memory;  // set: plan with memory->need()
  std::optional<double> smact;         // set: the solo SM activity to plan with
  std::optional<Duration> run_time;    // set: what reservations count on without a time limit
};
// The runs' need unless the job's need was declared (the limit it runs under); their mean solo
// SM activity unless the user gave one, and, once learned, only when it moves by 0.005 or more;
// their run time (LearnRunTime).
Lesson Learn(const ModelRuns& runs, const MemoryNeed& need, double smact, SmactSource source);

// Adds what the attempt measured to `runs` as a store reads them, newest first: the newest
// kRunsLearnedFrom of each kind, the oldest beyond them forgotten. How `colo sim` keeps each
// simulated server's runs of a model, as that server's colod's store would hold them.
void AddNewestRun(const RunEvidence& run, ModelRuns& runs);

// A run's solo SM activity is its GPU's mean SM activity while it ran alone there and computed:
// above this (its start-up, imports and data loading show none and would pull the mean down), for
// at least this many samples.
constexpr double kComputingSmact = 0.02;
constexpr int kMinSoloSamples = 5;

// A running job that uses more than it planned while it shares a GPU without a memory limit
// takes memory placement gave to others: it plans with its use and this margin (the history
// estimator's after one run) for the rest of its run.
constexpr double kOverPlanMargin = 0.10;

}  // namespace colo

#include "core/run_learning.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace colo {

ModelSignature::ModelSignature(std::string_view model, std::string_view owner) {
  if (model.empty()) return;
  // "MODEL@OWNER", appended rather than formatted: a format costs several times the instructions,
  // and colo sim makes one for each job of its trace.
  text_.reserve(model.size() + 1 + owner.size());
  text_.append(model).append(1, '@').append(owner);
}

ModelSignature ModelSignature::OfUid(std::string_view model, unsigned uid) {
  return ModelSignature(model, fmt::format("uid{}", uid));
}

ModelSignature ModelSignature::FromText(std::string text) {
  ModelSignature signature;
  signature.text_ = std::move(text);
  return signature;
}

bool MeasuredPeak(const RunEvidence& run) {
  return run.peak > Bytes(0) &&
         (run.exit == ExitKind::kSuccess || (run.over_plan && run.exit != ExitKind::kOutOfMemory));
}

bool MeasuredRunTime(const RunEvidence& run) {
  return run.exit == ExitKind::kSuccess && run.run_time > Duration::zero();
}

bool Teaches(const RunEvidence& run) {
  return MeasuredPeak(run) || run.solo_smact >= 0 || MeasuredRunTime(run);
}

void AddRun(const RunEvidence& run, size_t limit, ModelRuns& runs) {
  if (MeasuredPeak(run) && runs.peaks.size() < limit) runs.peaks.push_back(run.peak);
  if (run.solo_smact >= 0 && runs.solo_smact.size() < limit)
    runs.solo_smact.push_back(run.solo_smact);
  if (MeasuredRunTime(run) && runs.run_times.size() < limit) runs.run_times.push_back(run.run_time);
}

std::optional<Duration> LearnRunTime(const std::vector<Duration>& run_times) {
  if (run_times.empty()) return std::nullopt;
  const size_t n = std::min(run_times.size(), kRunTimesLearnedFrom);
  Duration sum{0};
  for (size_t i = 0; i < n; ++i) sum += run_times[i];
  return sum / static_cast<int64_t>(n);
}

MemoryNeed NeedFromRuns::need() const {
  MemoryNeed need{highest, MemorySource::kLearned, 0.0};
  if (highest > Bytes(0) && upper > highest) {
    need.uncertainty =
        static_cast<double>((upper - highest).count()) / static_cast<double>(highest.count());
  }
  return need;
}

std::optional<NeedFromRuns> LearnNeed(const std::vector<Bytes>& peaks) {
  if (peaks.empty()) return std::nullopt;
  NeedFromRuns learned;
  learned.runs = static_cast<int>(peaks.size());
  learned.lowest = learned.highest = peaks.front();
  for (Bytes peak : peaks) {
    learned.lowest = std::min(learned.lowest, peak);
    learned.highest = std::max(learned.highest, peak);
  }
  const double n = static_cast<double>(peaks.size());
  const Bytes margin =
      std::max(learned.highest.Scaled(0.10 / std::sqrt(n)), learned.highest - learned.lowest);
  learned.upper = learned.highest + margin;
  return learned;
}

Lesson Learn(const ModelRuns& runs, const MemoryNeed& need, double smact, SmactSource source) {
  Lesson lesson;
  if (need.source != MemorySource::kDeclared) lesson.memory = LearnNeed(runs.peaks);
  if (source != SmactSource::kUser && !runs.solo_smact.empty()) {
    double sum = 0;
    for (double v : runs.solo_smact) sum += v;
    const double mean = std::clamp(sum / static_cast<double>(runs.solo_smact.size()), 0.0, 1.0);
    if (source != SmactSource::kLearned || std::abs(mean - smact) >= 0.005) lesson.smact = mean;
  }
  lesson.run_time = LearnRunTime(runs.run_times);
  return lesson;
}

namespace {

// Puts `value` first among `newest`, which keeps kRunsLearnedFrom. Its room for them is made once,
// not grown as the first runs come.
template <typename T>
void PutFirst(T value, std::vector<T>& newest) {
  if (newest.capacity() == 0) newest.reserve(kRunsLearnedFrom + 1);
  newest.insert(newest.begin(), value);
  if (newest.size() > kRunsLearnedFrom) newest.pop_back();
}

}  // namespace

void AddNewestRun(const RunEvidence& run, ModelRuns& runs) {
  if (MeasuredPeak(run)) PutFirst(run.peak, runs.peaks);
  if (run.solo_smact >= 0) PutFirst(run.solo_smact, runs.solo_smact);
  if (MeasuredRunTime(run)) PutFirst(run.run_time, runs.run_times);
}

}  // namespace colo

// A JobStore in memory for tests of what uses one, with the failures a real store has on demand:
// writes that fail (a full disk), a corrupted row, a lost id counter. It keeps records as
// job_codec.h encodes them and follows SqliteJobStore's rules for ids, events and quarantine, so
// a test passes against it only if it would against the real one (job_store_conformance_test.cc
// runs the same tests on both).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/types.h"
#include "daemon/job_codec.h"
#include "daemon/job_store.h"

namespace colo {

class FakeJobStore final : public JobStore {
 public:
  // A stored job as the SQLite store keeps it: the record, the columns repeated from it, and why
  // it cannot be read if it cannot.
  struct Row {
    std::string record;
    unsigned uid = 0;
    JobState state = JobState::kQueued;
    std::string signature;
    std::optional<std::string> corruption;   // set by CorruptRecord: reading fails with this
    std::optional<std::string> quarantined;  // marked by LoadLive; never overwritten after
  };

  // --- Faults ---
  // The next `count` writes (Insert, Update, AddEvents) fail with `status` and change nothing.
  // The next `count` writes fail with `status`, after `succeed_first` more succeed.
  void FailWrites(int count, Status status, int succeed_first = 0) {
    std::lock_guard lock(mutex_);
    fail_count_ = count;
    succeed_first_ = succeed_first;
    fail_status_ = std::move(status);
  }
  void FailAllWrites(Status status) { FailWrites(INT_MAX, std::move(status)); }
  void HealWrites() { FailWrites(0, Status::Ok()); }
  // The row can no longer be read: LoadLive quarantines it (if live), Find is an error naming
  // `reason`, History and EarlierRuns pass over it. An Update before it is quarantined
  // replaces it, as one of the SQLite store would.
  void CorruptRecord(JobId id, std::string reason) {
    std::lock_guard lock(mutex_);
    if (auto it = rows_.find(id); it != rows_.end()) it->second.corruption = std::move(reason);
  }
  // The id counter is gone, as if its row were deleted: ids still continue above every row.
  void ForgetIdCounter() {
    std::lock_guard lock(mutex_);
    next_id_ = 0;
  }

  // --- Inspection ---
  std::vector<JobId> ids() const {
    std::lock_guard lock(mutex_);
    std::vector<JobId> out;
    for (const auto& [id, row] : rows_) out.push_back(id);
    return out;
  }
  std::optional<Row> row(JobId id) const {
    std::lock_guard lock(mutex_);
    auto it = rows_.find(id);
    return it == rows_.end() ? std::nullopt : std::optional<Row>(it->second);
  }
  // The stored job as decoded from its record, corruption or not; nullopt if there is no row.
  std::optional<Job> stored_job(JobId id) const {
    std::optional<Row> r = row(id);
    if (!r) return std::nullopt;
    Result<Job> job = DecodeJob(r->record);
    return job.ok() ? std::optional<Job>(*job) : std::nullopt;
  }
  std::vector<JobEvent> all_events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  // Writes that were refused by FailWrites or FailAllWrites.
  int failed_writes() const {
    std::lock_guard lock(mutex_);
    return failed_writes_;
  }

  // --- JobStore ---
  using JobStore::Insert;
  using JobStore::InsertReserved;
  Status Insert(Job& job, const std::vector<JobEvent>& events, std::string_view token) override {
    std::lock_guard lock(mutex_);
    COLO_RETURN_IF_ERROR(TakeWriteFailure());
    const JobId max_id = rows_.empty() ? 0 : rows_.rbegin()->first;
    if (max_id >= INT64_MAX - 1 || next_id_ >= INT64_MAX)
      return FailedPrecondition("cannot store the new job: job ids are used up");
    const JobId id = std::max({next_id_, max_id + 1, JobId{1}});
    Job stored = job;
    stored.spec.id = id;
    Row row = RowOf(stored);
    if (row.record.size() > kMaxJobRecordBytes)
      return InvalidArgument("cannot store the new job: its record is too large");
    rows_[id] = std::move(row);
    next_id_ = id + 1;
    AppendEvents(events, id);
    KeepToken(stored, token);
    job.spec.id = id;
    return Status::Ok();
  }

  Result<JobId> ReserveIds(int count) override {
    std::lock_guard lock(mutex_);
    COLO_RETURN_IF_ERROR(TakeWriteFailure());
    if (count < 1 || count > kMaxReservedIds) return InvalidArgument("cannot reserve the ids");
    const JobId max_id = rows_.empty() ? 0 : rows_.rbegin()->first;
    const JobId first = std::max({next_id_, max_id + 1, JobId{1}});
    if (first > INT64_MAX - 1 - count)
      return FailedPrecondition("cannot store the new jobs: job ids are used up");
    next_id_ = first + count;
    return first;
  }

  Status InsertReserved(const std::vector<Job>& jobs, const std::vector<JobEvent>& events,
                        std::string_view token) override {
    std::lock_guard lock(mutex_);
    COLO_RETURN_IF_ERROR(TakeWriteFailure());
    std::map<JobId, Row> batch;
    for (const Job& job : jobs) {
      if (job.id() < 1 || job.id() >= next_id_ || rows_.count(job.id()) || batch.count(job.id()))
        return InvalidArgument(
            fmt::format("cannot store job {}: its id was not reserved", job.id()));
      Row row = RowOf(job);
      if (row.record.size() > kMaxJobRecordBytes)
        return InvalidArgument("cannot store the new jobs: a record is too large");
      batch[job.id()] = std::move(row);
    }
    rows_.merge(batch);
    AppendEvents(events, 0);
    if (!jobs.empty()) KeepToken(jobs.front(), token);
    return Status::Ok();
  }

  Result<std::optional<JobId>> SubmittedWith(unsigned uid, std::string_view token,
                                             WallTime since) override {
    std::lock_guard lock(mutex_);
    auto it = tokens_.find({uid, std::string(token.substr(0, kMaxSubmitTokenBytes))});
    if (it == tokens_.end() || it->second.second < since) return std::optional<JobId>();
    return std::optional<JobId>(it->second.first);
  }

  Status Update(const Job& job, const std::vector<JobEvent>& events) override {
    return UpdateMany({JobChange{&job, events}});
  }

  Status UpdateMany(const std::vector<JobChange>& changes) override {
    std::lock_guard lock(mutex_);
    if (changes.empty()) return Status::Ok();  // as SQLite's: nothing written, nothing to fail
    COLO_RETURN_IF_ERROR(TakeWriteFailure());
    std::map<JobId, Row> batch;  // all or none
    for (const JobChange& change : changes) {
      const Job& job = *change.job;
      Row row = RowOf(job);
      if (row.record.size() > kMaxJobRecordBytes)
        return InvalidArgument("cannot store job: its record is too large");
      auto it = rows_.find(job.id());
      if (it == rows_.end()) return NotFound("job " + std::to_string(job.id()) + " is not stored");
      if (it->second.quarantined)
        return FailedPrecondition("job " + std::to_string(job.id()) + " is quarantined (" +
                                  *it->second.quarantined + ")");
      batch[job.id()] = std::move(row);
    }
    for (auto& [id, row] : batch) rows_[id] = std::move(row);
    for (const JobChange& change : changes) AppendEvents(change.events, 0);
    return Status::Ok();
  }

  Status AddEvents(const std::vector<JobEvent>& events) override {
    std::lock_guard lock(mutex_);
    if (events.empty()) return Status::Ok();
    COLO_RETURN_IF_ERROR(TakeWriteFailure());
    AppendEvents(events, 0);
    return Status::Ok();
  }

  Result<LiveJobs> LoadLive() override {
    std::lock_guard lock(mutex_);
    LiveJobs live;
    for (auto& [id, row] : rows_) {
      if (IsTerminal(row.state)) continue;
      if (row.quarantined) {
        live.quarantined.push_back({id, *row.quarantined});
        continue;
      }
      Result<Job> job = Read(id, row);
      if (job.ok() && !job->live()) job = InvalidArgument("state: ended in a live row");
      if (!job.ok()) {
        // As the SQLite store: marking is best effort and fails while writes do.
        if (fail_count_ == 0) row.quarantined = job.status().message();
        live.quarantined.push_back({id, job.status().message()});
        continue;
      }
      live.jobs.push_back(std::move(*job));
    }
    return live;
  }

  Result<std::optional<Job>> Find(JobId id) override {
    std::lock_guard lock(mutex_);
    auto it = rows_.find(id);
    if (it == rows_.end()) return std::optional<Job>();
    if (it->second.quarantined)
      return Internal("job " + std::to_string(id) + " is quarantined: " + *it->second.quarantined);
    Result<Job> job = Read(id, it->second);
    if (!job.ok()) return Internal("job " + std::to_string(id) + ": " + job.status().message());
    return std::optional<Job>(std::move(*job));
  }

  Result<HistoryPage> History(const HistoryQuery& query) override {
    std::lock_guard lock(mutex_);
    const size_t limit = static_cast<size_t>(std::clamp(query.limit, 1, api::kMaxHistoryPage));
    HistoryPage page;
    for (auto it = rows_.rbegin(); it != rows_.rend() && page.jobs.size() < limit; ++it) {
      const auto& [id, row] = *it;
      if (query.before && id >= *query.before) continue;
      if (query.uid && row.uid != *query.uid) continue;
      if (!IsTerminal(row.state) || row.quarantined) continue;
      Result<Job> job = Read(id, row);
      if (job.ok() && !job->live()) page.jobs.push_back(std::move(*job));
    }
    if (page.jobs.size() == limit) page.next = page.jobs.back().id();
    return page;
  }

  Result<std::vector<JobEvent>> Events(JobId id) override {
    std::lock_guard lock(mutex_);
    std::vector<JobEvent> out;
    for (const JobEvent& event : events_) {
      if (event.job == id) out.push_back(event);
    }
    return out;
  }

  Result<std::vector<JobEvent>> RecentEvents(int limit) override {
    std::lock_guard lock(mutex_);
    std::vector<JobEvent> out;
    for (auto it = events_.rbegin(); it != events_.rend() && static_cast<int>(out.size()) < limit;
         ++it)
      out.push_back(*it);
    return out;
  }

  Status SaveUsage(const UsageRecord& usage) override {
    std::lock_guard lock(mutex_);
    usage_ = usage;
    return Status::Ok();
  }
  Result<UsageRecord> LoadUsage() override {
    std::lock_guard lock(mutex_);
    return usage_;
  }
  Result<ModelRuns> EarlierRuns(const std::string& signature, int limit) override {
    std::lock_guard lock(mutex_);
    ModelRuns runs;
    if (signature.empty() || limit <= 0) return runs;
    const auto wanted = static_cast<size_t>(limit);
    size_t read = 0;
    for (auto it = rows_.rbegin(); it != rows_.rend() && read < kJobsReadPerRun * wanted; ++it) {
      const auto& [id, row] = *it;
      if (row.signature != signature || !RunsCount(row.state) || row.quarantined) continue;
      Result<Job> job = Read(id, row);
      if (!job.ok() || !job->estimate || job->estimate->signature != signature) continue;
      ++read;
      CollectRuns(*job, wanted, runs);
    }
    return runs;
  }

 private:
  Status TakeWriteFailure() {
    if (fail_count_ <= 0) return Status::Ok();
    if (succeed_first_ > 0) {
      --succeed_first_;
      return Status::Ok();
    }
    if (fail_count_ != INT_MAX) --fail_count_;
    ++failed_writes_;
    return fail_status_;
  }

  static Row RowOf(const Job& job) {
    Row row;
    row.record = EncodeJob(job);
    row.uid = job.owner.uid;
    row.state = job.state;
    if (job.estimate) row.signature = job.estimate->signature;
    return row;
  }

  static Result<Job> Read(JobId id, const Row& row) {
    if (row.corruption) return InvalidArgument(*row.corruption);
    Result<Job> job = DecodeJob(row.record);
    if (job.ok() && job->id() != id) return InvalidArgument("spec.id: not this row's");
    return job;
  }

  void KeepToken(const Job& job, std::string_view token) {
    if (!token.empty())
      tokens_[{job.owner.uid, std::string(token.substr(0, kMaxSubmitTokenBytes))}] = {
          job.id(), job.submitted};
  }

  void AppendEvents(const std::vector<JobEvent>& events, JobId new_job) {
    for (const JobEvent& event : events) {
      JobEvent stored = StoredEvent(event);
      if (stored.job == 0 && new_job != 0) stored.job = new_job;
      events_.push_back(std::move(stored));
    }
  }

  mutable std::mutex mutex_;
  std::map<JobId, Row> rows_;
  UsageRecord usage_;
  std::vector<JobEvent> events_;
  std::map<std::pair<unsigned, std::string>, std::pair<JobId, WallTime>> tokens_;
  JobId next_id_ = 1;  // 0: lost
  int fail_count_ = 0;
  int succeed_first_ = 0;
  Status fail_status_;
  int failed_writes_ = 0;
};

}  // namespace colo

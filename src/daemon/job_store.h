// Where colod keeps its jobs. The controller writes every change through this interface before it
// acts on it (a submit is acknowledged only once stored; an attempt's intent is stored before its
// process starts). SqliteJobStore is the real one; tests use an in-memory one that can fail.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "daemon/job.h"

namespace colo {

// A stored row that could not be read back (a corrupted record): set aside, never overwritten.
struct QuarantinedJob {
  JobId id = 0;
  std::string reason;  // names the field that failed
};

struct HistoryQuery {
  int limit = 50;
  std::optional<JobId> before;  // only ids below this
  std::optional<unsigned> uid;  // only this user's jobs
};
struct HistoryPage {
  std::vector<Job> jobs;      // ended jobs, newest id first
  std::optional<JobId> next;  // the `before` of the next page, if there may be one
};

// How many ended jobs of a model EarlierRuns reads per run it wants: a model's runs that
// measured nothing (failed early) or no SM activity alone do not make it read every job.
constexpr size_t kJobsReadPerRun = 4;

constexpr int kMaxReservedIds = 100000;

// Every user's fair-share usage (decayed GPU-seconds) as it stood at `as_of`: what a restarted
// colod decays from, so that the past week counts across restarts.
struct UsageRecord {
  WallTime as_of;
  std::map<std::string, double> users;
};
// A record holds at most this many users (the others had the least usage).
constexpr size_t kMaxUsageUsers = 10000;
// How long a submit's token is kept with the job it stored: a client that lost the reply and
// sends the submit again within this time gets that job (JobStore::SubmittedWith).
constexpr Duration kSubmitTokenLifetime = Seconds(24 * 3600);
constexpr size_t kMaxSubmitTokenBytes = 64;

// One job's change among several stored together (JobStore::UpdateMany).
struct JobChange {
  const Job* job = nullptr;
  std::vector<JobEvent> events;
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Stores a new job and gives it its id, in one transaction: the id is above every id ever
  // handed out and every id in the store, so no record of another job is ever overwritten. On
  // failure nothing is stored and `job` is unchanged. Events whose `job` is 0 are the new job's
  // (the caller cannot know its id yet). `token`: the submit's own (empty: none), kept with the
  // job's id for kSubmitTokenLifetime, in the same transaction.
  virtual Status Insert(Job& job, const std::vector<JobEvent>& events, std::string_view token) = 0;
  Status Insert(Job& job, const std::vector<JobEvent>& events) { return Insert(job, events, {}); }
  // Jobs stored together (the tasks of an array), in two steps so that their ids are known before
  // they are written (a task's name holds its array's id). ReserveIds hands out `count` (1 ..
  // kMaxReservedIds) consecutive ids and returns the first, in one transaction: above every id
  // ever handed out and every id in the store, and never handed out again. InsertReserved stores
  // jobs whose ids were handed out and are not stored yet, with their events (ids set), in one
  // transaction: all or none; `token` (as Insert's) names the first of them.
  virtual Result<JobId> ReserveIds(int count) = 0;
  virtual Status InsertReserved(const std::vector<Job>& jobs, const std::vector<JobEvent>& events,
                                std::string_view token) = 0;
  Status InsertReserved(const std::vector<Job>& jobs, const std::vector<JobEvent>& events) {
    return InsertReserved(jobs, events, {});
  }
  // The job a submit of `uid` with `token` stored at `since` or later, if one did.
  virtual Result<std::optional<JobId>> SubmittedWith(unsigned uid, std::string_view token,
                                                     WallTime since) = 0;
  // Replaces the record of an existing job and appends events, in one transaction. NotFound if
  // the job was never inserted.
  virtual Status Update(const Job& job, const std::vector<JobEvent>& events) = 0;
  // Several jobs' changes in one transaction: all or none (one write for a thousand jobs held
  // or released at once, where a thousand Updates would each wait for the disk).
  virtual Status UpdateMany(const std::vector<JobChange>& changes) = 0;
  virtual Status AddEvents(const std::vector<JobEvent>& events) = 0;

  // Every job that has not ended (queued, recovering, running), by id; rows that cannot be read
  // are quarantined and listed, not fatal.
  struct LiveJobs {
    std::vector<Job> jobs;
    std::vector<QuarantinedJob> quarantined;
  };
  virtual Result<LiveJobs> LoadLive() = 0;
  // One job, ended or not; nullopt if there is none. A quarantined row is an error naming it.
  virtual Result<std::optional<Job>> Find(JobId id) = 0;
  virtual Result<HistoryPage> History(const HistoryQuery& query) = 0;
  virtual Result<std::vector<JobEvent>> Events(JobId id) = 0;
  // The newest `limit` events of every job and of colod itself, newest first.
  virtual Result<std::vector<JobEvent>> RecentEvents(int limit) = 0;
  // What the newest runs of jobs whose estimate has `signature` measured (ModelRuns), up to
  // `limit` of each kind, newest first, from the newest kJobsReadPerRun x `limit` ended jobs.
  virtual Result<ModelRuns> EarlierRuns(const std::string& signature, int limit) = 0;
  // Replaces the stored usage; LoadUsage reads it back (none stored: as_of is the epoch and no
  // user). A stored record that cannot be read is an error naming it.
  virtual Status SaveUsage(const UsageRecord& usage) = 0;
  virtual Result<UsageRecord> LoadUsage() = 0;
  // Ended jobs whose life overlaps [since, until): submitted before `until`, finished at or after
  // `since`; oldest id first, at most `limit` (one more than that says there are more). Every
  // user's. This one pages through History; a store with an index does better.
  virtual Result<std::vector<Job>> EndedBetween(WallTime since, WallTime until, size_t limit) {
    std::vector<Job> out;
    HistoryQuery query;
    query.limit = 200;
    while (true) {
      auto page = History(query);
      if (!page.ok()) return page.status();
      for (Job& job : page->jobs) {
        if (job.submitted < until && job.finished >= since) out.push_back(std::move(job));
      }
      if (!page->next) break;
      query.before = page->next;
    }
    std::sort(out.begin(), out.end(), [](const Job& a, const Job& b) { return a.id() < b.id(); });
    if (out.size() > limit + 1) out.resize(limit + 1);
    return out;
  }
};

}  // namespace colo

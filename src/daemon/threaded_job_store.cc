#include "daemon/threaded_job_store.h"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <stdexcept>

namespace colo {

ThreadedJobStore::ThreadedJobStore(std::unique_ptr<JobStore> store)
    : store_(std::move(store)), done_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (done_fd_ < 0) throw std::runtime_error("eventfd for the job store's thread failed");
  // The thread takes no signal: they are its caller's (colod reads them from a signalfd), and a
  // SIGTERM the thread took would end colod on the spot. It starts with every signal blocked.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  thread_ = std::thread([this] { Serve(); });
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

ThreadedJobStore::~ThreadedJobStore() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_one();
  thread_.join();
  close(done_fd_);
}

void ThreadedJobStore::Serve() {
  while (true) {
    std::function<void()> work;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !work_.empty(); });
      if (work_.empty()) return;  // stopping, and nothing is left to do
      work = std::move(work_.front());
      work_.pop_front();
    }
    work();
  }
}

template <typename Call>
auto ThreadedJobStore::Run(Call call) -> decltype(call()) {
  // The store's thread owns the task until it has run: the caller may be gone from here as soon
  // as the answer is ready.
  auto task = std::make_shared<std::packaged_task<decltype(call())()>>(std::move(call));
  auto answer = task->get_future();
  // Only a call whose caller works meanwhile is told of on the eventfd; the others wait on
  // their answer.
  const bool other_work = while_waiting_ && !waiting_;
  {
    std::lock_guard lock(mutex_);
    work_.push_back([task, other_work, this] {
      (*task)();
      const uint64_t one = 1;
      // Cannot fail short of the counter overflowing, which the caller's reads prevent.
      if (other_work) (void)!write(done_fd_, &one, sizeof one);
    });
  }
  work_ready_.notify_one();
  if (!other_work) return answer.get();
  waiting_ = true;
  try {
    while (answer.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      while_waiting_(done_fd_);
      uint64_t finished;
      (void)!read(done_fd_, &finished, sizeof finished);
    }
  } catch (...) {
    // The call's arguments are the caller's: it cannot leave before the store is done with them.
    answer.wait();
    waiting_ = false;
    throw;
  }
  waiting_ = false;
  return answer.get();
}

Status ThreadedJobStore::Insert(Job& job, const std::vector<JobEvent>& events,
                                std::string_view token) {
  return Run([&] { return store_->Insert(job, events, token); });
}
Result<JobId> ThreadedJobStore::ReserveIds(int count) {
  return Run([&] { return store_->ReserveIds(count); });
}
Status ThreadedJobStore::InsertReserved(const std::vector<Job>& jobs,
                                        const std::vector<JobEvent>& events,
                                        std::string_view token) {
  return Run([&] { return store_->InsertReserved(jobs, events, token); });
}
Result<std::optional<JobId>> ThreadedJobStore::SubmittedWith(unsigned uid, std::string_view token,
                                                             WallTime since) {
  return Run([&] { return store_->SubmittedWith(uid, token, since); });
}
Status ThreadedJobStore::Update(const Job& job, const std::vector<JobEvent>& events) {
  return Run([&] { return store_->Update(job, events); });
}
Status ThreadedJobStore::UpdateMany(const std::vector<JobChange>& changes) {
  return Run([&] { return store_->UpdateMany(changes); });
}
Status ThreadedJobStore::AddEvents(const std::vector<JobEvent>& events) {
  return Run([&] { return store_->AddEvents(events); });
}
Result<JobStore::LiveJobs> ThreadedJobStore::LoadLive() {
  return Run([&] { return store_->LoadLive(); });
}
Result<std::optional<Job>> ThreadedJobStore::Find(JobId id) {
  return Run([&] { return store_->Find(id); });
}
Result<HistoryPage> ThreadedJobStore::History(const HistoryQuery& query) {
  return Run([&] { return store_->History(query); });
}
Result<std::vector<JobEvent>> ThreadedJobStore::Events(JobId id) {
  return Run([&] { return store_->Events(id); });
}
Result<std::vector<JobEvent>> ThreadedJobStore::RecentEvents(int limit) {
  return Run([&] { return store_->RecentEvents(limit); });
}
Result<ModelRuns> ThreadedJobStore::EarlierRuns(const std::string& signature, int limit) {
  return Run([&] { return store_->EarlierRuns(signature, limit); });
}
Status ThreadedJobStore::SaveUsage(const UsageRecord& usage) {
  return Run([&] { return store_->SaveUsage(usage); });
}
Result<UsageRecord> ThreadedJobStore::LoadUsage() {
  return Run([&] { return store_->LoadUsage(); });
}
Result<std::vector<Job>> ThreadedJobStore::EndedBetween(WallTime since, WallTime until,
                                                        size_t limit) {
  return Run([&] { return store_->EndedBetween(since, until, limit); });
}

}  // namespace colo

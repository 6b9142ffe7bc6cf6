// The history store: what it keeps (missing values as NULL), how it thins out old samples, its
// retention, a restart, files it must refuse, and what one sample costs to write.
#include "daemon/history_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

namespace colo {
namespace {

class HistoryStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "history-" + std::to_string(getpid()) + "-" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    chmod(dir_.c_str(), 0700);
    path_ = dir_ + "/history.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<HistoryStore> Open(HistoryOptions options = {}) {
    auto store = HistoryStore::Open(path_, options);
    EXPECT_TRUE(store.ok()) << store.status().message();
    return store.ok() ? std::move(*store) : nullptr;
  }
  // One sample of two GPUs at `time`: GPU 1 reports no DRAM activity and no energy.
  static HistoryBatch Sample(double time, double smact) {
    HistoryBatch b;
    b.gpus.push_back({time, 0, 4e9, smact, smact / 2, 0.25, 100 + 100 * smact, time * 10});
    b.gpus.push_back({time, 1, std::nullopt, 0.0, 0.0, std::nullopt, 70, std::nullopt});
    b.jobs.push_back({time, 7, 0, 3e9});
    b.queue.push_back({time, 2, 1});
    return b;
  }
  int64_t Count(const char* sql) {
    sqlite3* db = nullptr;
    sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
    int64_t n = -1;
    if (sqlite3_step(stmt) == SQLITE_ROW) n = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return n;
  }

  std::string dir_, path_;
};

TEST_F(HistoryStoreTest, KeepsWhatWasRecordedAndMissingStaysMissing) {
  auto store = Open();
  ASSERT_TRUE(store);
  for (int i = 0; i < 5; ++i) store->Record(Sample(1000 + i, 0.5));
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples"), 0) << "nothing written before a flush";
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples"), 10);
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples WHERE gpu = 1 AND drama IS NULL AND energy "
                  "IS NULL AND memory_used IS NULL"),
            5);
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples WHERE drama < 0 OR energy < 0"), 0);
  auto series = store->Read(0, 2000, 100);
  ASSERT_TRUE(series.ok()) << series.status().message();
  ASSERT_EQ(series->gpus.size(), 10u);
  EXPECT_EQ(series->bucket_seconds, 0);
  EXPECT_EQ(series->gpus[0].gpu, 0);
  EXPECT_DOUBLE_EQ(*series->gpus[0].smact, 0.5);
  EXPECT_DOUBLE_EQ(*series->gpus[0].memory_used, 4e9);
  EXPECT_FALSE(series->gpus[1].drama.has_value());
  EXPECT_FALSE(series->gpus[1].memory_used.has_value());
  ASSERT_EQ(series->jobs.size(), 5u);
  EXPECT_EQ(series->jobs[0].job, 7);
  ASSERT_EQ(series->queue.size(), 5u);
  EXPECT_EQ(series->queue[0].queued, 2);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(store->stats().points, 5 * 4);
}

TEST_F(HistoryStoreTest, LongRangesComeAsBucketMeans) {
  auto store = Open();
  for (int i = 0; i < 1000; ++i) store->Record(Sample(i, i < 500 ? 0.2 : 0.8));
  ASSERT_TRUE(store->Flush().ok());
  auto series = store->Read(0, 1000, 10);
  ASSERT_TRUE(series.ok());
  EXPECT_DOUBLE_EQ(series->bucket_seconds, 100);
  ASSERT_EQ(series->gpus.size(), 20u);  // 10 buckets x 2 GPUs
  EXPECT_NEAR(*series->gpus[0].smact, 0.2, 1e-9);
  EXPECT_NEAR(*series->gpus[18].smact, 0.8, 1e-9);
  EXPECT_NEAR(series->gpus[0].time, 49.5, 1e-9);
  EXPECT_FALSE(series->gpus[1].drama.has_value()) << "a mean of nothing is still nothing";
  EXPECT_NEAR(*series->gpus[0].energy_joules, 990, 1e-9) << "energy: the bucket's last reading";
}

TEST_F(HistoryStoreTest, ThinsOutWithAgeAndDropsWhatIsBeyondTheRetention) {
  HistoryOptions options;
  options.retention = Seconds(3 * 86400);
  auto store = Open(options);
  const double now = 10 * 86400;
  // One sample a second for the last two hours, and for an hour two days ago.
  for (double t = now - 7200; t < now; t += 1) store->Record(Sample(t, 0.5));
  for (double t = now - 2 * 86400; t < now - 2 * 86400 + 3600; t += 1)
    store->Record(Sample(t, 0.5));
  for (double t = now - 5 * 86400; t < now - 5 * 86400 + 60; t += 1) store->Record(Sample(t, 0.5));
  ASSERT_TRUE(store->Flush().ok());
  ASSERT_TRUE(store->Compact(now).ok());
  // The last hour as taken (3600 samples per GPU), the hour before as 60 one-minute means, the
  // day-old hour as 6 ten-minute means; five days ago is beyond the retention.
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples WHERE tier = 0 AND gpu = 0"), 3600);
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples WHERE tier = 1 AND gpu = 0"), 60);
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples WHERE tier = 2 AND gpu = 0"), 6);
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples WHERE time < 5 * 86400 + 100"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM job_samples WHERE tier = 2"), 6);
  EXPECT_EQ(Count("SELECT count(*) FROM queue_samples WHERE tier = 1"), 60);
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples WHERE tier > 0 AND gpu = 1 AND drama IS NOT "
                  "NULL"),
            0);
  // Compacting again changes nothing.
  ASSERT_TRUE(store->Compact(now).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples WHERE tier = 1 AND gpu = 0"), 60);
}

TEST_F(HistoryStoreTest, SurvivesARestartAndWritesWhatIsPendingAtTheEnd) {
  {
    auto store = Open();
    store->Record(Sample(5, 0.1));
  }  // destroyed: flushed
  auto store = Open();
  auto series = store->Read(0, 10, 100);
  ASSERT_TRUE(series.ok());
  EXPECT_EQ(series->gpus.size(), 2u);
}

TEST_F(HistoryStoreTest, TheWriterThreadFlushesOnItsOwn) {
  HistoryOptions options;
  options.flush_interval = std::chrono::milliseconds(20);
  auto store = Open(options);
  store->StartWriter();
  // Now: the writer also thins out and drops what is beyond the retention as of now.
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  store->Record(Sample(now, 0.1));
  for (int i = 0; i < 200 && Count("SELECT count(*) FROM gpu_samples") < 2; ++i) usleep(10000);
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_samples"), 2);
}

TEST_F(HistoryStoreTest, RefusesOtherFilesAndNewerSchemas) {
  { Open(); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "UPDATE meta SET value = '9' WHERE key = 'schema'", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto newer = HistoryStore::Open(path_, {});
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find("newer"), std::string::npos) << newer.status().message();

  const std::string other = dir_ + "/other.db";
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto not_ours = HistoryStore::Open(other, {});
  ASSERT_FALSE(not_ours.ok());
  EXPECT_NE(not_ours.status().message().find("not colo's history"), std::string::npos);

  const std::string link = dir_ + "/link.db";
  ASSERT_EQ(symlink(path_.c_str(), link.c_str()), 0);
  auto linked = HistoryStore::Open(link, {});
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("symbolic link"), std::string::npos);
}

TEST_F(HistoryStoreTest, BoundedWhileItCannotWrite) {
  HistoryOptions options;
  options.max_pending = 100;
  auto store = Open(options);
  for (int i = 0; i < 200; ++i) store->Record(Sample(i, 0.5));
  EXPECT_EQ(store->stats().dropped, (400 - 100) + (200 - 100) + (200 - (100 / 8 + 1)));
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Count("SELECT min(time) FROM gpu_samples"), 150) << "the oldest went first";
}

// What colod pays: a day of samples of 8 GPUs with 8 jobs, one flush per 10 s of them.
TEST_F(HistoryStoreTest, CostPerSample) {
  auto store = Open();
  const int seconds = 3600;
  const auto began = std::chrono::steady_clock::now();
  double record_seconds = 0;
  for (int t = 0; t < seconds; ++t) {
    HistoryBatch b;
    for (int g = 0; g < 8; ++g) {
      b.gpus.push_back({double(t), g, 1e9, 0.5, 0.3, 0.2, 300, t * 300.0});
      b.jobs.push_back({double(t), g + 1, g, 1e9});
    }
    b.queue.push_back({double(t), 3, 8});
    const auto r0 = std::chrono::steady_clock::now();
    store->Record(std::move(b));
    record_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
    if (t % 10 == 9) {
      ASSERT_TRUE(store->Flush().ok());
    }
  }
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  const HistoryWriteStats stats = store->stats();
  const double per_sample_us = 1e6 * stats.write_seconds / seconds;
  std::cout << "history: " << stats.points << " points in " << stats.flushes << " flushes; "
            << per_sample_us << " us to write one sample of 8 GPUs ("
            << 1e6 * stats.write_seconds / static_cast<double>(stats.points) << " us per point), "
            << 1e6 * record_seconds / seconds << " us on the event loop per sample; " << total
            << " s in all\n";
  EXPECT_EQ(stats.points, seconds * 17);
  // Generous: a shared CI machine; a sample is written in tens of microseconds.
  EXPECT_LT(per_sample_us, 20000);
  EXPECT_LT(1e6 * record_seconds / seconds, 2000);
}

}  // namespace
}  // namespace colo

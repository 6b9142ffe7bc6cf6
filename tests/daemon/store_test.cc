#include "daemon/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

namespace colo {
namespace {

TEST(Store, KeepsJobsAndEventsAcrossReopening) {
  char pattern[] = "/tmp/colo-store-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  const std::string path = dir + "/colo.db";
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().message();
    EXPECT_EQ(*(*store)->NextJobId(), 1);
    EXPECT_EQ(*(*store)->NextJobId(), 2);
    JobRecordDoc doc;
    doc.spec.id = 2;
    doc.spec.command = {"python", "train.py", "--lr", "0.1"};
    doc.spec.memory = MemoryNeed{GiB(12), MemorySource::kDeclared, 0.0};
    doc.uid = 1000;
    doc.state = "running";
    doc.attempts.push_back(AttemptRecord{});
    doc.attempts.back().pid = 4242;
    doc.attempts.back().gpu_uuids = {"GPU-1"};
    ASSERT_TRUE((*store)->Save(doc).ok());
    doc.state = "succeeded";
    doc.finished = 5;
    ASSERT_TRUE((*store)->Save(doc).ok());  // an update, not a second row
    ASSERT_TRUE((*store)->AddEvent(1.0, 2, "started", "attempt 1").ok());
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*(*store)->NextJobId(), 3);  // ids are never reused
  auto jobs = (*store)->LoadAll();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ(jobs->front().state, "succeeded");
  EXPECT_EQ(jobs->front().spec.command[3], "0.1");
  EXPECT_EQ(jobs->front().spec.memory.peak, GiB(12));
  EXPECT_EQ(jobs->front().attempts.front().pid, 4242);
  EXPECT_EQ((*store)->History(10, 1000, false)->size(), 1u);
  EXPECT_EQ((*store)->History(10, 1001, false)->size(), 0u);  // another user's
  EXPECT_EQ((*store)->Events(2)->front().detail, "attempt 1");
  // WAL mode, so readers never block the daemon's writes.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  std::filesystem::remove_all(dir);
}

TEST(Store, UnwritablePlaceIsAClearError) {
  auto store = Store::Open("/proc/no/such/dir/colo.db");
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("cannot open the state database"), std::string::npos);
}

}  // namespace
}  // namespace colo

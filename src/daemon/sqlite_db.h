// What colod's two SQLite databases (the job store and the GPU history) share: their files made
// safe before SQLite opens them, a connection configured for a file that is untrusted input, and
// the statement and transaction scopes every query runs in. Errors are SQLite's result codes,
// kept rather than thrown; Reason turns one into words an administrator searches for.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace colo {

// Prepares the file of a database of colod's at `path` before SQLite opens it: creates it
// owner-only (SQLite would use the umask's mode), refuses links, files that are not regular or not
// colod's, and a directory others may write; makes its -wal and -shm files owner-only too.
Status PrepareDatabaseFile(const std::string& path);

// Opens the database at `path` (prepared as above) read-write, never through a link, for one
// caller at a time, with extended result codes, a busy timeout, and no writable schema or
// functions with side effects run from views or triggers someone may have put in the file.
// `what` names it in the error ("state database").
Result<sqlite3*> OpenDatabase(const std::string& path, std::string_view what);

// "disk full", "the database file is corrupted", … else SQLite's message for `rc` on `db`.
std::string Reason(sqlite3* db, int rc);

// One use of a prepared statement. The first error (of the prepare, a bind or a step) is kept
// and is what every later Step returns.
class SqliteStatement {
 public:
  // A statement of a connection's cache, or the error that prepared none: reset and unbound when
  // this use ends, so that no statement keeps a read transaction open.
  struct Cached {
    sqlite3_stmt* stmt;
    int rc;
  };
  explicit SqliteStatement(Cached cached) : rc_(cached.rc), stmt_(cached.stmt), cached_(true) {}
  // Prepared for this use alone, finalized when it ends.
  SqliteStatement(sqlite3* db, const char* sql);
  ~SqliteStatement();
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  void Bind(int index, int64_t value);
  void Bind(int index, double value);
  void Bind(int index, std::string_view text);
  // NULL for none, and for a value that is not finite (which SQLite would store as NULL).
  void Bind(int index, const std::optional<double>& value);
  void BindNull(int index);

  // SQLITE_ROW, SQLITE_DONE, or the error (a failed prepare or bind included).
  int Step();
  // Ready to be bound and stepped again, for a statement run once per row of a batch.
  void Reset();

  bool IsNull(int column) { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  int64_t Int64(int column) { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) { return sqlite3_column_double(stmt_, column); }
  std::optional<double> Optional(int column);
  // The column's bytes as they are (a record may hold NUL bytes in strings); empty for NULL.
  std::string_view Text(int column);

 private:
  void Check(int rc) {
    if (rc_ == SQLITE_OK && rc != SQLITE_OK) rc_ = rc;
  }

  int rc_ = SQLITE_OK;
  sqlite3_stmt* stmt_ = nullptr;
  bool cached_ = false;
};

// The prepared statements of one connection, kept for its life and found by their SQL text: the
// caller's literals, so the pointer is the key.
class SqliteStatementCache {
 public:
  explicit SqliteStatementCache(sqlite3* db) : db_(db) {}
  ~SqliteStatementCache() { Clear(); }
  SqliteStatementCache(const SqliteStatementCache&) = delete;
  SqliteStatementCache& operator=(const SqliteStatementCache&) = delete;

  // The statement of `sql`, prepared now on its first use.
  SqliteStatement::Cached Get(const char* sql);
  // Finalizes every statement, as must be done before the connection is closed.
  void Clear();

 private:
  sqlite3* db_;
  std::vector<std::pair<const char*, sqlite3_stmt*>> statements_;
};

// BEGIN IMMEDIATE … COMMIT; rolled back when it goes out of scope uncommitted. IMMEDIATE takes
// the write lock first, so a transaction never fails half way for want of it.
class SqliteTransaction {
 public:
  explicit SqliteTransaction(sqlite3* db) : db_(db) {}
  ~SqliteTransaction();
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;

  int Begin();
  int Commit();

 private:
  sqlite3* db_;
  bool open_ = false;
};

// The names of the tables in the database that are not SQLite's own; SQLITE_DONE or the error.
int ReadUserTables(sqlite3* db, std::set<std::string, std::less<>>& tables);

}  // namespace colo

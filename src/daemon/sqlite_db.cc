#include "daemon/sqlite_db.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/text.h"

namespace colo {
namespace {

constexpr int kBusyTimeoutMs = 5000;
constexpr mode_t kOwnerOnly = 0600;

std::string ErrnoText(int error) {
  return std::strerror(error);
}

// What is wrong with a place the state database cannot be written in, in the words an
// administrator searches for.
std::string UnwritableReason(int error) {
  if (error == EACCES || error == EPERM)
    return fmt::format("read-only directory ({})", ErrnoText(error));
  if (error == EROFS) return "read-only directory (read-only file system)";
  return ErrnoText(error);
}

// An existing file of the database (the database, its -wal or -shm) made owner-only; checks that
// it is a regular file, not a link, and colod's own. Absent is fine: SQLite creates the -wal and
// -shm files with the database's mode.
Status SecureExistingFile(const std::string& file, const std::string& db_path) {
  const auto error = [&](std::string_view reason) {
    return Unavailable(
        fmt::format("cannot open the state database {}: {} {}", db_path, file, reason));
  };
  struct stat st {};
  if (lstat(file.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return error(ErrnoText(errno));
  }
  if (S_ISLNK(st.st_mode)) return error("is a symbolic link");
  if (!S_ISREG(st.st_mode)) return error("is not a regular file");
  // O_NONBLOCK: should it have been swapped for a FIFO since, open must not wait on it.
  const int fd = open(file.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return error(errno == ELOOP ? std::string("is a symbolic link")
                                : "cannot be opened: " + ErrnoText(errno));
  }
  Status status;
  if (fstat(fd, &st) != 0) {
    status = error(ErrnoText(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = error("is not a regular file");
  } else if (st.st_uid != geteuid()) {
    // Whoever owns it could write jobs that colod would run as anyone.
    status =
        error(fmt::format("belongs to uid {}, not to colod's user (uid {})", st.st_uid, geteuid()));
  } else if ((st.st_mode & 07777) != kOwnerOnly && fchmod(fd, kOwnerOnly) != 0) {
    status = error("cannot be made owner-only: " + ErrnoText(errno));
  }
  close(fd);
  return status;
}

}  // namespace

Status PrepareDatabaseFile(const std::string& path) {
  const auto error = [&](std::string_view reason) {
    return Unavailable(fmt::format("cannot open the state database {}: {}", path, reason));
  };
  if (path.empty()) return InvalidArgument("the state database needs a path");
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  struct stat dir_stat {};
  if (stat(dir.c_str(), &dir_stat) != 0) {
    return error(errno == ENOENT ? fmt::format("directory {} does not exist", dir)
                                 : fmt::format("directory {}: {}", dir, ErrnoText(errno)));
  }
  if (!S_ISDIR(dir_stat.st_mode)) return error(fmt::format("{} is not a directory", dir));
  // Anyone who may write the directory may put their own -wal file there before colod's.
  if (dir_stat.st_mode & S_IWOTH)
    return error(fmt::format("directory {} is writable by every user", dir));
  // SQLite creates the -wal and -shm files beside the database: the directory must be writable
  // even when the database exists.
  if (faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
    return error(UnwritableReason(errno));

  COLO_RETURN_IF_ERROR(SecureExistingFile(path, path));
  const int fd =
      open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, kOwnerOnly);
  if (fd < 0) {
    if (errno == ELOOP) return error("it is a symbolic link");
    return error(UnwritableReason(errno));
  }
  // Closed before SQLite opens the file: closing any descriptor of a file drops every POSIX lock
  // this process holds on it, SQLite's included.
  close(fd);
  COLO_RETURN_IF_ERROR(SecureExistingFile(path, path));
  COLO_RETURN_IF_ERROR(SecureExistingFile(path + "-wal", path));
  COLO_RETURN_IF_ERROR(SecureExistingFile(path + "-shm", path));
  return Status::Ok();
}

Result<sqlite3*> OpenDatabase(const std::string& path, std::string_view what) {
  sqlite3* db = nullptr;
  // NOFOLLOW: the file was checked by PrepareDatabaseFile; it must not have become a link since.
  // No mutex: each connection serves one caller at a time.
  const int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string reason = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Unavailable(fmt::format("cannot open the {} {}: {}", what, path, reason));
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  return db;
}

std::string Reason(sqlite3* db, int rc) {
  const int system_error = sqlite3_system_errno(db);
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return "disk full";
    case SQLITE_IOERR:
      if (system_error == ENOSPC) return "disk full";
      if (system_error == EDQUOT) return "disk quota exceeded";
      return system_error ? fmt::format("I/O error ({})", ErrnoText(system_error)) : "I/O error";
    case SQLITE_CORRUPT:
      return "the database file is corrupted";
    case SQLITE_NOTADB:
      return "file is not a database";
    case SQLITE_READONLY:
      return "the database is read-only";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "the database is locked by another process";
    case SQLITE_NOMEM:
      return "out of memory";
    case SQLITE_CANTOPEN:
      return system_error ? fmt::format("cannot open a file of it ({})", ErrnoText(system_error))
                          : "cannot open a file of it";
    default:
      return Printable(sqlite3_errmsg(db));
  }
}

SqliteStatement::SqliteStatement(sqlite3* db, const char* sql) {
  rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
}

SqliteStatement::~SqliteStatement() {
  if (!stmt_) return;
  if (cached_) {
    Reset();
  } else {
    sqlite3_finalize(stmt_);
  }
}

void SqliteStatement::Bind(int index, int64_t value) {
  if (stmt_) Check(sqlite3_bind_int64(stmt_, index, value));
}

void SqliteStatement::Bind(int index, double value) {
  if (stmt_) Check(sqlite3_bind_double(stmt_, index, value));
}

void SqliteStatement::Bind(int index, std::string_view text) {
  if (stmt_)
    Check(
        sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
}

void SqliteStatement::Bind(int index, const std::optional<double>& value) {
  if (value && std::isfinite(*value))
    Bind(index, *value);
  else
    BindNull(index);
}

void SqliteStatement::BindNull(int index) {
  if (stmt_) Check(sqlite3_bind_null(stmt_, index));
}

int SqliteStatement::Step() {
  if (rc_ != SQLITE_OK) return rc_;
  const int rc = sqlite3_step(stmt_);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) rc_ = rc;
  return rc;
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::optional<double> SqliteStatement::Optional(int column) {
  if (IsNull(column)) return std::nullopt;
  return Double(column);
}

std::string_view SqliteStatement::Text(int column) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (!text) return {};
  return {text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))};
}

SqliteStatement::Cached SqliteStatementCache::Get(const char* sql) {
  for (const auto& [text, stmt] : statements_) {
    if (text == sql) return {stmt, SQLITE_OK};
  }
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    // A statement that is not cached is not reset by SqliteStatement: none was made.
    return {nullptr, rc};
  }
  statements_.emplace_back(sql, stmt);
  return {stmt, SQLITE_OK};
}

void SqliteStatementCache::Clear() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  statements_.clear();
}

SqliteTransaction::~SqliteTransaction() {
  // A failed COMMIT or a full disk may have rolled back already.
  if (open_ && !sqlite3_get_autocommit(db_))
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

int SqliteTransaction::Begin() {
  const int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  open_ = rc == SQLITE_OK;
  return rc;
}

int SqliteTransaction::Commit() {
  const int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK) open_ = false;
  return rc;
}

int ReadUserTables(sqlite3* db, std::set<std::string, std::less<>>& tables) {
  SqliteStatement list(
      db,
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE "
      "'\\'");
  int rc;
  while ((rc = list.Step()) == SQLITE_ROW) tables.emplace(list.Text(0));
  return rc;
}

}  // namespace colo

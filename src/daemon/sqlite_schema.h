// The state database's schema: its tables, how a job is laid out in a row of `jobs`, and the
// migration of a file an older colod wrote. The job store (sqlite_job_store.h) runs its queries
// on what this creates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "daemon/job.h"

struct sqlite3;

namespace colo {

class SqliteStatement;

// The schema this store writes. Versions 1 (the daemon before the job store) and 2 (before shared
// lists and submit tokens) are migrated on Open.
constexpr int kStateSchemaVersion = 3;
// A command or an environment this long or longer (as stored text) is a row of its own, which
// every job holding it names; a shorter one stays in the job's record.
constexpr size_t kListBytes = 1024;

// Creates the schema in a new database, or checks an existing one and migrates it from an older
// schema, in one write transaction (two colods opening one new file cannot both create or
// migrate). Refuses a database of another program or of a newer schema.
Status PrepareStateSchema(sqlite3* db, const std::string& path);

// What a job's row holds besides the columns its record repeats: the record as job_codec.h
// encodes it, and the rows of `lists` holding its command and environment when they are long.
struct JobRow {
  std::string record;
  std::optional<int64_t> command_list, env_list;
};
// A new job row, and the replacement of one not quarantined: ?1..?10 as BindJobRow binds them.
extern const char kInsertJobRow[];
extern const char kUpdateJobRow[];
void BindJobRow(SqliteStatement& statement, const Job& job, const JobRow& row);
// A new row of `lists` (?1 its text), and the text of one by its id (?1).
extern const char kInsertList[];
extern const char kFindList[];

// The model signature the `signature` column repeats from the record (empty for none).
std::string_view SignatureOf(const Job& job);

}  // namespace colo

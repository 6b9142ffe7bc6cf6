// colod's own directories, made owner-only and held for its lifetime:
//   STATE/            0711 (0700 for a personal colod): entered, never listed, by others
//   STATE/colod.lock  exclusive lock for as long as colod runs: two colods never share a state
//                     directory. A POSIX record lock, which belongs to colod's process alone: a
//                     child colod forks (a job's start) never holds it, so no process left behind
//                     (stopped by a user, say) keeps a restarted colod from starting
//   STATE/colo.db     the database (SqliteJobStore makes it and its WAL 0600)
//   STATE/jobs/       0711 (0700): one directory per job inside, owned by the job's user, 0700
//   STATE/mps/        0711: the MPS pipe directory within is shared with every job
// and the directory of its socket. A directory colod did not create is never changed: one that
// another user owns or others may write is refused, with the reason.
#pragma once

#include <string>

#include "common/status.h"

namespace colo {

// An open, locked lock file; unlocked when destroyed (and by the kernel if colod dies). The lock is
// the process's, not the descriptor's: closing any other descriptor of the same file in colod
// would drop it, and nothing else in colod opens it.
class StateLock {
 public:
  StateLock() = default;
  explicit StateLock(int fd) : fd_(fd) {}
  StateLock(StateLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  StateLock& operator=(StateLock&& other) noexcept;
  ~StateLock();

 private:
  int fd_ = -1;
};

// Creates or checks the state directory and its subdirectories, then takes the lock. A second
// colod on the same directory fails here, before it touches anything (not even the socket),
// with a message naming the first one's pid.
Result<StateLock> PrepareStateDir(const std::string& state_dir, bool personal);

// Creates the socket's directory if missing (0755 system, 0700 personal) or checks an existing
// one (owned by colod's user, not writable by others; never chmodded), removes a stale socket
// of colod's own, and refuses when another colod answers there.
Status PrepareSocketDir(const std::string& socket_path, bool personal);

}  // namespace colo

// colod's own directories, made owner-only and held for its lifetime:
//   STATE/            0711 (0700 for a personal colod): entered, never listed, by others
//   STATE/colod.lock  exclusive lock for as long as colod runs: two colods never share a state
//                     directory. A POSIX record lock, which belongs to colod's process alone: a
//                     child colod forks (a job's start) never holds it, so no process left behind
//                     (stopped by a user, say) keeps a restarted colod from starting
//   STATE/colo.db     the database (SqliteJobStore makes it and its WAL 0600)
//   STATE/jobs/       0711 (0700): one directory per job inside, owned by the job's user, 0700
//                     (paths.jobs_dir may put it elsewhere, on a file system of its own)
//   STATE/mps/        0711: the MPS pipe directory within is shared with every job
// and the directory of its socket. A directory colod did not create is never changed: one that
// another user owns or others may write is refused, with the reason.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>

#include "common/status.h"

namespace colo {

// An open, locked lock file; unlocked when destroyed (and by the kernel if colod dies). The lock is
// the process's, not the descriptor's: closing any other descriptor of the same file in the
// process would drop it, so one process holds each lock file once (a second Daemon in the same
// process is refused before it opens the file) and nothing else in colod opens it.
class StateLock {
 public:
  StateLock() = default;
  StateLock(StateLock&& other) noexcept { *this = std::move(other); }
  StateLock& operator=(StateLock&& other) noexcept;
  ~StateLock();

 private:
  friend Result<StateLock> PrepareStateDir(const std::string&, const std::string&, bool);
  void Release();

  int fd_ = -1;
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

// Creates or checks the state directory, takes the lock, then creates or checks the jobs
// directory (`jobs_dir`, wherever it is) and STATE/mps. A second colod on the same directory
// fails here, before it touches anything (not even the socket), with a message naming the first
// one's pid.
Result<StateLock> PrepareStateDir(const std::string& state_dir, const std::string& jobs_dir,
                                  bool personal);

// Room kept for colod's database on the state directory's file system: a file of zeros colod
// gives back when a write finds the disk full (a job's log filled it), so that jobs are still
// stored, and takes again once there is room. It never takes more than a quarter of what is
// free when it is taken.
class SpaceReserve {
 public:
  SpaceReserve() = default;
  // The reserve at `path` (STATE/reserve), `size` bytes; 0: none (an existing file is emptied).
  // Problems are told by TakeNote(), never fatal: colod runs without a reserve.
  SpaceReserve(std::string path, int64_t size);
  // Gives the space back to the file system; true if it held any.
  bool Release();
  // Takes the space again if it was given back and the file system has it free twice over.
  void Restore();
  int64_t held() const { return held_; }
  // What the reserve last did worth telling colod's log; empty when nothing.
  std::string TakeNote() { return std::exchange(note_, {}); }

 private:
  void Take();

  std::string path_;
  int64_t size_ = 0, held_ = 0;
  std::string note_;
};

// Creates the socket's directory if missing (0755 system, 0700 personal) or checks an existing
// one (owned by colod's user, not writable by others; never chmodded), removes a stale socket
// of colod's own, and refuses when another colod answers there.
Status PrepareSocketDir(const std::string& socket_path, bool personal);

}  // namespace colo

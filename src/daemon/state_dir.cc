#include "daemon/state_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <utility>

#include "api/client.h"

namespace colo {
namespace {

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Ensures `dir` exists as a directory owned by colod's user, creating it (and missing parents)
// with `mode`. An existing one must not be a symlink, another user's, or writable by others;
// `tighten` lets colod take group/other read access away from a directory that is its own
// state (an earlier colod made it 0755).
Status EnsureOwnDir(const std::string& dir, mode_t mode, bool tighten) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT)
      return Unavailable(fmt::format("cannot inspect {}: {}", dir, strerror(errno)));
    const std::string parent = Parent(dir);
    if (parent != dir && parent != "/" && parent != ".") {
      struct stat pst {};
      if (lstat(parent.c_str(), &pst) != 0) {
        // Missing ancestors are created like the directory itself, but searchable.
        COLO_RETURN_IF_ERROR(EnsureOwnDir(parent, 0711, false));
      }
    }
    if (mkdir(dir.c_str(), mode) != 0 && errno != EEXIST)
      return Unavailable(fmt::format("cannot create {}: {}", dir, strerror(errno)));
    if (lstat(dir.c_str(), &st) != 0)
      return Unavailable(fmt::format("cannot inspect {}: {}", dir, strerror(errno)));
    if (S_ISDIR(st.st_mode) && st.st_uid == geteuid()) {
      // Created just now: the umask does not decide its mode. Through a descriptor of the
      // directory itself, so a path swapped meanwhile is never what gets the mode.
      const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) {
        struct stat fst {};
        const bool same =
            fstat(fd, &fst) == 0 && fst.st_ino == st.st_ino && fst.st_dev == st.st_dev;
        // State is owner-only: a directory left with the umask's mode is refused, not used.
        const int error = same && fchmod(fd, mode) != 0 ? errno : 0;
        close(fd);
        if (error != 0)
          return Unavailable(fmt::format("cannot set the mode of {}: {}", dir, strerror(error)));
      }
      return Status::Ok();
    }
  }
  if (!S_ISDIR(st.st_mode))
    return FailedPrecondition(fmt::format("{} is not a directory{}", dir,
                                          S_ISLNK(st.st_mode) ? " (a symbolic link)" : ""));
  if (st.st_uid != geteuid())
    return FailedPrecondition(
        fmt::format("{} belongs to uid {}, not to colod's user (uid {}); colod refuses it", dir,
                    st.st_uid, geteuid()));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return FailedPrecondition(fmt::format("{} is writable by others (mode {:o}); colod refuses it",
                                          dir, st.st_mode & 07777));
  if (tighten && (st.st_mode & 07777 & ~mode) != 0) {
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const bool done = fd >= 0 && fchmod(fd, mode) == 0;
    const int error = errno;
    if (fd >= 0) close(fd);
    if (!done)
      return Unavailable(fmt::format("cannot make {} owner-only: {}", dir, strerror(error)));
  }
  return Status::Ok();
}

// Every directory above `dir` must be one that only root or colod's user can change (or sticky,
// like /tmp): otherwise its owner could rename `dir` away and put their own in its place.
Status CheckAncestors(const std::string& dir) {
  for (std::string path = Parent(dir);; path = Parent(path)) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0)
      return Unavailable(fmt::format("cannot inspect {}: {}", path, strerror(errno)));
    const bool trusted_owner = st.st_uid == 0 || st.st_uid == geteuid();
    const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (!trusted_owner || (others_write && !(st.st_mode & S_ISVTX))) {
      return FailedPrecondition(fmt::format(
          "{} is under {}, which uid {} owns{}; another user could replace what colod puts "
          "there, so colod refuses it",
          dir, path, st.st_uid, others_write ? " and others may write" : ""));
    }
    if (path == "/" || path == ".") return Status::Ok();
  }
}

}  // namespace

namespace {
// The lock files this process holds, by device and inode.
std::mutex held_locks_mutex;
std::set<std::pair<dev_t, ino_t>> held_locks;
}  // namespace

StateLock& StateLock::operator=(StateLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    device_ = other.device_;
    inode_ = other.inode_;
  }
  return *this;
}

StateLock::~StateLock() {
  Release();
}

void StateLock::Release() {
  if (fd_ < 0) return;
  {
    std::lock_guard lock(held_locks_mutex);
    held_locks.erase({device_, inode_});
  }
  close(fd_);
  fd_ = -1;
}

Result<StateLock> PrepareStateDir(const std::string& state_dir, const std::string& jobs_dir,
                                  bool personal) {
  if (state_dir.empty() || state_dir[0] != '/')
    return InvalidArgument(
        fmt::format("the state directory must be an absolute path, not '{}'", state_dir));
  const mode_t shared = personal ? 0700 : 0711;
  COLO_RETURN_IF_ERROR(EnsureOwnDir(state_dir, shared, /*tighten=*/true));
  COLO_RETURN_IF_ERROR(CheckAncestors(state_dir));
  const std::string lock_path = state_dir + "/colod.lock";
  const auto in_use = [&](pid_t pid) {
    return FailedPrecondition(fmt::format(
        "another colod (pid {}) is using the state directory {}; stop it first, or give this "
        "one its own --state-dir",
        pid, state_dir));
  };
  std::unique_lock held(held_locks_mutex);
  struct stat existing {};
  if (lstat(lock_path.c_str(), &existing) == 0 &&
      held_locks.count({existing.st_dev, existing.st_ino}))
    return in_use(getpid());  // opening it again would drop this process's lock
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return Unavailable(fmt::format(
        "cannot open {}: {}{}", lock_path, strerror(errno),
        errno == EROFS || errno == EACCES ? " (colod needs a writable state directory)" : ""));
  }
  struct stat opened {};
  if (fstat(fd, &opened) != 0 || held_locks.count({opened.st_dev, opened.st_ino})) {
    // Swapped meanwhile for one this process holds: leaving this descriptor open keeps it.
    return Unavailable(fmt::format("cannot lock {}: it changed while it was opened", lock_path));
  }
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;  // from the start to the end, however long the file grows
  if (fcntl(fd, F_SETLK, &whole) != 0) {
    const int error = errno;
    // The kernel names the holder; the pid in the file is for administrators.
    struct flock holder = whole;
    pid_t pid = fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK ? holder.l_pid : 0;
    if (pid <= 0) {
      char text[32] = {};
      (void)!pread(fd, text, sizeof text - 1, 0);
      pid = static_cast<pid_t>(strtol(text, nullptr, 10));
    }
    close(fd);
    if (error != EACCES && error != EAGAIN)
      return Unavailable(fmt::format("cannot lock {}: {}", lock_path, strerror(error)));
    return in_use(pid);
  }
  held_locks.insert({opened.st_dev, opened.st_ino});
  held.unlock();
  StateLock lock;
  lock.fd_ = fd;
  lock.device_ = opened.st_dev;
  lock.inode_ = opened.st_ino;
  const std::string me = fmt::format("{}\n", getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) < 0) {
    return Unavailable(fmt::format("cannot write {}: {}", lock_path, strerror(errno)));
  }
  if (jobs_dir.empty() || jobs_dir[0] != '/')
    return InvalidArgument(
        fmt::format("the jobs directory must be an absolute path, not '{}'", jobs_dir));
  COLO_RETURN_IF_ERROR(EnsureOwnDir(jobs_dir, shared, true));
  COLO_RETURN_IF_ERROR(CheckAncestors(jobs_dir));
  COLO_RETURN_IF_ERROR(EnsureOwnDir(state_dir + "/mps", shared, true));
  return lock;
}

SpaceReserve::SpaceReserve(std::string path, int64_t size) : path_(std::move(path)), size_(size) {
  Take();
}

void SpaceReserve::Take() {
  const int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) {
    note_ =
        fmt::format("no room kept for the database: cannot open {}: {}", path_, strerror(errno));
    return;
  }
  struct stat st {};
  struct statvfs fs {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      fstatvfs(fd, &fs) != 0) {
    note_ = fmt::format("no room kept for the database: {} is not colod's own file", path_);
    close(fd);
    return;
  }
  const int64_t held = st.st_blocks * 512;
  const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  const int64_t wanted = std::min(size_, held + free_bytes / 4);
  if (wanted <= 0) {
    if (ftruncate(fd, 0) == 0) held_ = 0;
  } else if (wanted != held_ || held < wanted) {
    // Blocks allocated, not a sparse file: the space is the reserve's until it is given back.
    int error = posix_fallocate(fd, 0, wanted);
    if (error == 0 && ftruncate(fd, wanted) != 0) error = errno;
    if (error != 0) {
      note_ = fmt::format("no room kept for the database: {}", strerror(error));
      if (ftruncate(fd, 0) == 0) held_ = 0;
    } else {
      held_ = wanted;
      if (wanted < size_)
        note_ = fmt::format(
            "keeps {} MiB for the database (of {} MiB asked: a quarter of what is "
            "free)",
            wanted >> 20, size_ >> 20);
    }
  }
  close(fd);
}

bool SpaceReserve::Release() {
  if (held_ <= 0) return false;
  const int fd = open(path_.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  const bool released = fd >= 0 && ftruncate(fd, 0) == 0;
  if (fd >= 0) close(fd);
  if (!released) return false;
  note_ = fmt::format(
      "the state directory's file system is full: gave back the {} MiB kept for "
      "the database; free some space",
      held_ >> 20);
  held_ = 0;
  return true;
}

void SpaceReserve::Restore() {
  if (size_ <= 0 || held_ >= size_ || path_.empty()) return;
  struct statvfs fs {};
  if (statvfs(path_.c_str(), &fs) != 0) return;
  const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  // Not back and forth at the edge of a full disk: only with room for the reserve twice over.
  if (free_bytes < 2 * (size_ - held_)) return;
  const int64_t before = held_;
  Take();
  if (held_ > before && note_.empty())
    note_ = fmt::format("keeps {} MiB for the database again", held_ >> 20);
}

Status PrepareSocketDir(const std::string& socket_path, bool personal) {
  if (socket_path.empty() || socket_path[0] != '/')
    return InvalidArgument(
        fmt::format("the socket must be an absolute path, not '{}'", socket_path));
  const std::string dir = Parent(socket_path);
  COLO_RETURN_IF_ERROR(EnsureOwnDir(dir, personal ? 0700 : 0755, /*tighten=*/false));
  COLO_RETURN_IF_ERROR(CheckAncestors(dir));
  struct stat st {};
  if (lstat(socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
      return FailedPrecondition(fmt::format(
          "{} exists and is not colod's socket; colod leaves it alone and refuses to start",
          socket_path));
    if (api::Client::Connect(socket_path, std::chrono::seconds(2)).ok())
      return FailedPrecondition(fmt::format("another colod is serving {}", socket_path));
    unlink(socket_path.c_str());  // a stale socket of a colod that is gone
  }
  return Status::Ok();
}

}  // namespace colo

#include "daemon/state_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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
        if (fstat(fd, &fst) == 0 && fst.st_ino == st.st_ino && fst.st_dev == st.st_dev)
          (void)fchmod(fd, mode);
        close(fd);
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

StateLock& StateLock::operator=(StateLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

StateLock::~StateLock() {
  if (fd_ >= 0) close(fd_);
}

Result<StateLock> PrepareStateDir(const std::string& state_dir, bool personal) {
  if (state_dir.empty() || state_dir[0] != '/')
    return InvalidArgument(
        fmt::format("the state directory must be an absolute path, not '{}'", state_dir));
  const mode_t shared = personal ? 0700 : 0711;
  COLO_RETURN_IF_ERROR(EnsureOwnDir(state_dir, shared, /*tighten=*/true));
  COLO_RETURN_IF_ERROR(CheckAncestors(state_dir));
  const std::string lock_path = state_dir + "/colod.lock";
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return Unavailable(fmt::format(
        "cannot open {}: {}{}", lock_path, strerror(errno),
        errno == EROFS || errno == EACCES ? " (colod needs a writable state directory)" : ""));
  }
  StateLock lock(fd);
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;  // from the start to the end, however long the file grows
  if (fcntl(fd, F_SETLK, &whole) != 0) {
    if (errno != EACCES && errno != EAGAIN)
      return Unavailable(fmt::format("cannot lock {}: {}", lock_path, strerror(errno)));
    // The kernel names the holder; the pid in the file is for administrators.
    struct flock holder = whole;
    pid_t pid = fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK ? holder.l_pid : 0;
    if (pid <= 0) {
      char text[32] = {};
      (void)!pread(fd, text, sizeof text - 1, 0);
      pid = static_cast<pid_t>(strtol(text, nullptr, 10));
    }
    return FailedPrecondition(fmt::format(
        "another colod (pid {}) is using the state directory {}; stop it first, or give this "
        "one its own --state-dir",
        pid, state_dir));
  }
  const std::string me = fmt::format("{}\n", getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) < 0) {
    return Unavailable(fmt::format("cannot write {}: {}", lock_path, strerror(errno)));
  }
  COLO_RETURN_IF_ERROR(EnsureOwnDir(state_dir + "/jobs", shared, true));
  COLO_RETURN_IF_ERROR(EnsureOwnDir(state_dir + "/mps", shared, true));
  return lock;
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

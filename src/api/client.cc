#include "api/client.h"

#include <errno.h>
#include <fmt/format.h>
#include <poll.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <thread>

namespace colo::api {
namespace {
// A reply larger than this is not colod's: stop reading rather than grow without end.
constexpr size_t kMaxReplyBytes = size_t{512} << 20;
}  // namespace

Result<Client> Client::Connect(const std::string& socket_path, std::chrono::milliseconds timeout) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof address.sun_path)
    return InvalidArgument(fmt::format("socket path too long: {}", socket_path));
  memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal(fmt::format("socket: {}", strerror(errno)));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    close(fd);
    return Unavailable(
        fmt::format("cannot reach colod at {}: {} (is colod running? set COLO_SOCKET or --socket)",
                    socket_path, strerror(error)));
  }
  return Client(fd, timeout);
}

Client::Client(Client&& other) noexcept
    : fd_(other.fd_),
      timeout_(other.timeout_),
      pending_(std::move(other.pending_)),
      answered_(other.answered_) {
  other.fd_ = -1;
}

Client::~Client() {
  if (fd_ >= 0) close(fd_);
}

Result<QueueReply> Client::WholeQueue(QueueRequest request) {
  QueueReply whole;
  for (;;) {
    auto page = Call(request);
    if (!page.ok()) return page.status();
    whole.jobs.insert(whole.jobs.end(), std::make_move_iterator(page->jobs.begin()),
                      std::make_move_iterator(page->jobs.end()));
    whole.main_queue = page->main_queue;
    whole.recovery_queue = page->recovery_queue;
    whole.running = page->running;
    whole.waiting = page->waiting;
    if (!page->next) return whole;
    request.after = page->next;
  }
}

Result<std::string> Client::RoundTrip(const std::string& request) {
  answered_ = false;
  const std::string line = request + "\n";
  size_t sent = 0;
  int send_error = 0;
  while (sent < line.size()) {
    const ssize_t n = send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      // colod may have refused the connection (too many, not its owner) and closed it: the
      // reason it sent first is still there to read.
      send_error = errno;
      break;
    }
    sent += static_cast<size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    const size_t newline = pending_.find('\n');
    if (newline != std::string::npos) {
      std::string reply = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      answered_ = true;
      return reply;
    }
    if (pending_.size() > kMaxReplyBytes) return Internal("colod's reply is too large");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return Unavailable(fmt::format("colod did not answer within {} s", timeout_.count() / 1000));
    pollfd p{fd_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return Internal(fmt::format("poll: {}", strerror(errno)));
    if (ready <= 0) continue;
    char buffer[65536];
    const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      return Unavailable(send_error != 0
                             ? fmt::format("colod closed the connection: {}", strerror(send_error))
                             : "colod closed the connection before replying");
    }
    pending_.append(buffer, static_cast<size_t>(n));
  }
}

std::string NewSubmitToken() {
  uint8_t bytes[16] = {};
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  std::string token;
  for (uint8_t b : bytes) token += fmt::format("{:02x}", b);
  return token;
}

Result<SubmitReply> SubmitOnce(const std::string& socket_path, const SubmitRequest& request,
                               std::chrono::milliseconds patience) {
  const auto give_up = std::chrono::steady_clock::now() + patience;
  auto pause = std::chrono::milliseconds(100);
  // A colod that restarts refuses connections until it listens again, then answers; one that
  // takes the submit and never answers, again and again, is not restarting: so many tries, then
  // the error.
  constexpr int kMaxUnanswered = 3;
  int unanswered = 0;
  for (bool first = true;; first = false) {
    auto client = Client::Connect(socket_path);
    Status lost;
    if (client.ok()) {
      auto reply = client->Call(request);
      if (reply.ok() || client->answered() || request.token.empty()) return reply;
      if (++unanswered >= kMaxUnanswered)
        return Unavailable(fmt::format(
            "{}; colod took the submit {} times without an answer, and may or may not have "
            "stored it",
            reply.status().message(), kMaxUnanswered));
      lost = reply.status();
    } else if (first) {
      return client.status();
    } else {
      lost = client.status();  // colod restarting, say
    }
    if (std::chrono::steady_clock::now() + pause > give_up)
      return Unavailable(
          fmt::format("{}; the submit was sent again for {} s without an answer, "
                      "and may or may not have been stored",
                      lost.message(), patience.count() / 1000));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

std::string PersonalSocketPath() {
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime && *runtime == '/')
    return fmt::format("{}/colo/colod.sock", runtime);
  return fmt::format("/tmp/colo-{}/colod.sock", geteuid());
}

std::string DefaultSocketPath() {
  if (const char* explicit_path = std::getenv("COLO_SOCKET"); explicit_path && *explicit_path)
    return explicit_path;
  if (geteuid() != 0) {
    // A personal colod the user started is the one they mean, when it is there.
    struct stat st {};
    const std::string personal = PersonalSocketPath();
    if (stat(personal.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == geteuid())
      return personal;
  }
  return kSystemSocketPath;
}

}  // namespace colo::api

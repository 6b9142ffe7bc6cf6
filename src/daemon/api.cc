#include "daemon/api.h"

#include <errno.h>
#include <fmt/format.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace colo {

Result<ApiClient> ApiClient::Connect(const std::string& socket_path) {
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
        fmt::format("cannot reach colod at {}: {} (is colod running? set "
                    "COLO_SOCKET or --socket)",
                    socket_path, strerror(error)));
  }
  return ApiClient(fd);
}

ApiClient::~ApiClient() {
  if (fd_ >= 0) close(fd_);
}

Result<nlohmann::json> ApiClient::Call(nlohmann::json request) {
  request["api"] = kApiVersion;
  const std::string line = request.dump() + "\n";
  size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unavailable(fmt::format("colod closed the connection: {}", strerror(errno)));
    }
    sent += static_cast<size_t>(n);
  }
  for (;;) {
    const size_t newline = pending_.find('\n');
    if (newline != std::string::npos) {
      const std::string reply_text = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      auto reply = nlohmann::json::parse(reply_text, nullptr, false);
      if (reply.is_discarded() || !reply.is_object())
        return Internal("colod sent a reply that is not JSON");
      if (!reply.value("ok", false)) return FailedPrecondition(reply.value("error", "failed"));
      return reply;
    }
    char buffer[65536];
    const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable("colod closed the connection before replying");
    pending_.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace colo

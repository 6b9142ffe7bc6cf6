#include "daemon/connections.h"

#include <errno.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/codec.h"

namespace colo {

ConnectionSet::ConnectionSet(int listen_fd, Protocol protocol, ConnectionLimits limits,
                             Handler handler, Identify identify)
    : listen_fd_(listen_fd),
      protocol_(protocol),
      limits_(limits),
      handler_(std::move(handler)),
      identify_(std::move(identify)) {}

ConnectionSet::~ConnectionSet() {
  for (const auto& [fd, client] : clients_) close(fd);
}

void ConnectionSet::AddPollFds(std::vector<pollfd>& fds) const {
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const auto& [fd, c] : clients_) {
    short events = 0;
    // Backpressure: a client with replies piling up is not read until it takes them.
    if (WantsInput(c)) events |= POLLIN;
    if (!c.out.empty()) events |= POLLOUT;
    fds.push_back({fd, events, 0});
  }
}

void ConnectionSet::OnReady(const std::vector<pollfd>& fds, TimePoint now) {
  for (const pollfd& p : fds) {
    if (!p.revents) continue;
    if (p.fd == listen_fd_) {
      Accept(now);
      continue;
    }
    auto it = clients_.find(p.fd);
    if (it == clients_.end()) continue;
    Client& c = it->second;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) Read(c, now);
    if (!c.out.empty()) Write(c);
  }
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (it->second.closing && it->second.out.empty()) {
      close(it->first);
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
}

void ConnectionSet::ExpireIdle(TimePoint now) {
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (now - it->second.last_request >= limits_.idle_timeout) {
      close(it->first);
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<TimePoint> ConnectionSet::NextDeadline() const {
  std::optional<TimePoint> next;
  for (const auto& [fd, c] : clients_) {
    const TimePoint t = c.last_request + limits_.idle_timeout;
    if (!next || t < *next) next = t;
  }
  return next;
}

int ConnectionSet::ConnectionsOf(unsigned uid) const {
  int n = 0;
  for (const auto& [fd, c] : clients_) n += c.identity.uid == uid;
  return n;
}

void ConnectionSet::Refuse(int fd, std::string_view code, std::string_view message) {
  std::string reply;
  if (protocol_ == Protocol::kHttp) {
    reply = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}\n",
        message.size() + 1, message);
  } else {
    const auto parsed = api::ParseErrorCode(code);
    reply = api::EncodeError(parsed.value_or(api::ErrorCode::kBusy), message) + "\n";
  }
  // Best effort, without waiting: the socket is new and its buffer empty.
  (void)!send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close(fd);
}

void ConnectionSet::Accept(TimePoint now) {
  // A bounded number per turn: a process that connects and closes in a loop cannot keep colod
  // from its other work.
  for (int accepted = 0; accepted < kAcceptsPerTurn; ++accepted) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN, or a connection that went away: nothing to do
    Client c;
    c.fd = fd;
    c.last_request = now;
    if (protocol_ == Protocol::kJsonLines) {
      ucred cred{};
      socklen_t len = sizeof cred;
      if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        close(fd);
        continue;
      }
      auto identity = identify_(cred.uid, cred.gid);
      if (!identity.ok()) {
        Refuse(fd, api::ToString(api::CodeOf(identity.status())), identity.status().message());
        continue;
      }
      c.identity = *identity;
      if (c.identity.uid != 0 && ConnectionsOf(c.identity.uid) >= limits_.max_per_user) {
        Refuse(fd, "busy",
               fmt::format("too many connections from {} ({} at most); close some and retry",
                           c.identity.user, limits_.max_per_user));
        continue;
      }
    }
    // Root is never locked out by other users filling the pool.
    if (static_cast<int>(clients_.size()) >= limits_.max_connections && c.identity.uid != 0 &&
        protocol_ == Protocol::kJsonLines) {
      Refuse(fd, "busy", "colod is busy: too many connections; retry shortly");
      continue;
    }
    if (static_cast<int>(clients_.size()) >= limits_.max_connections &&
        protocol_ == Protocol::kHttp) {
      Refuse(fd, "busy", "too many metrics connections");
      continue;
    }
    clients_[fd] = std::move(c);
  }
}

bool ConnectionSet::WantsInput(const Client& c) const {
  if (c.closing || c.out.size() >= limits_.max_unsent_bytes) return false;
  if (c.in.size() < kReadAhead) return true;
  return c.in.size() <= limits_.max_request_bytes && c.in.find('\n') == std::string::npos;
}

void ConnectionSet::Read(Client& c, TimePoint now) {
  char buffer[65536];
  while (WantsInput(c)) {
    const ssize_t n = recv(c.fd, buffer, sizeof buffer, 0);
    if (n == 0) {
      c.closing = true;
      break;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR) {
        c.closing = true;
        c.out.clear();
      }
      break;
    }
    c.in.append(buffer, static_cast<size_t>(n));
  }
  Serve(c, now);
}

void ConnectionSet::Serve(Client& c, TimePoint now) {
  if (protocol_ == Protocol::kHttp) {
    if (c.in.find("\r\n\r\n") != std::string::npos || c.in.size() > limits_.max_request_bytes ||
        (c.closing && !c.in.empty())) {
      c.out = handler_(c.identity, c.in);
      c.in.clear();
      c.closing = true;
      c.last_request = now;
    }
    return;
  }
  // A few requests per client per turn: one client's pipeline cannot hold up the others (or the
  // jobs); what is left is served at the next turn.
  size_t start = 0, newline;
  int served = 0;
  while (served < kRequestsPerTurn && c.out.size() < limits_.max_unsent_bytes &&
         (newline = c.in.find('\n', start)) != std::string::npos) {
    const std::string_view line(c.in.data() + start, newline - start);
    start = newline + 1;
    ++served;
    c.last_request = now;
    c.out += handler_(c.identity, line);
    c.out += '\n';
  }
  c.in.erase(0, start);
  if (c.closing && !c.in.empty() && c.in.find('\n') == std::string::npos &&
      c.in.size() <= limits_.max_request_bytes) {
    // The client finished sending without a last newline: its last request still gets a reply.
    c.out += handler_(c.identity, c.in);
    c.out += '\n';
    c.in.clear();
  }
  // Only a request still without its end counts against the size limit.
  if (c.in.find('\n') == std::string::npos && c.in.size() > limits_.max_request_bytes) {
    c.out += api::EncodeError(api::ErrorCode::kTooLarge, fmt::format("request larger than {} bytes",
                                                                     limits_.max_request_bytes));
    c.out += '\n';
    c.in.clear();
    c.closing = true;
  }
}

bool ConnectionSet::HasBufferedWork() const {
  for (const auto& [fd, c] : clients_) {
    if (!c.closing && c.out.size() < limits_.max_unsent_bytes &&
        c.in.find('\n') != std::string::npos)
      return true;
  }
  return false;
}

// Requests read earlier and held back (the turn's budget, or replies piling up): nothing new may
// arrive to wake them (the client sent everything and now reads), so they are served here as room
// frees, once per turn.
void ConnectionSet::ServeBuffered(TimePoint now) {
  for (auto& [fd, c] : clients_) {
    if (!c.closing && c.in.find('\n') != std::string::npos) {
      Serve(c, now);
      if (!c.out.empty()) Write(c);
    }
  }
}

void ConnectionSet::Write(Client& c) {
  while (!c.out.empty()) {
    const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    c.closing = true;  // the peer went away: drop what it will never read
    c.out.clear();
    return;
  }
}

}  // namespace colo

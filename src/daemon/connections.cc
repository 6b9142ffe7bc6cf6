#include "daemon/connections.h"

#include <errno.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/codec.h"

namespace colo {

ConnectionSet::ConnectionSet(const Clock& clock, int listen_fd, Protocol protocol,
                             ConnectionLimits limits, Handler handler, Identify identify)
    : clock_(clock),
      listen_fd_(listen_fd),
      protocol_(protocol),
      limits_(limits),
      handler_(std::move(handler)),
      identify_(std::move(identify)) {}

ConnectionSet::~ConnectionSet() {
  for (const auto& [fd, client] : clients_) close(fd);
}

void ConnectionSet::AddPollFds(std::vector<pollfd>& fds, bool quick) const {
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const auto& [fd, c] : clients_) {
    if (quick && &c == serving_) continue;
    short events = 0;
    // Backpressure: a client with replies piling up is not read until it takes them.
    if (WantsInput(c)) events |= POLLIN;
    if (!c.out.empty()) events |= POLLOUT;
    fds.push_back({fd, events, 0});
  }
}

void ConnectionSet::Transfer(const std::vector<pollfd>& fds, TimePoint now) {
  bool connecting = false;
  for (const pollfd& p : fds) {
    if (!p.revents) continue;
    if (p.fd == listen_fd_) {
      connecting = true;
      continue;
    }
    auto it = clients_.find(p.fd);
    // The connection being served: its handler may still read its request.
    if (it == clients_.end() || &it->second == serving_) continue;
    Client& c = it->second;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) Read(c, now);
    if (!c.out.empty()) Write(c);
    if (Finished(c)) Close(it);
  }
  // Only now, once this turn's hang-ups are read and closed: a user who closes a connection and
  // opens another at once (one `colo` command after another) is not refused for the one that
  // went away.
  if (connecting) Accept(now);
}

void ConnectionSet::OnReady(const std::vector<pollfd>& fds, TimePoint now) {
  Transfer(fds, now);
  ServeInTurn(now);
  for (auto it = clients_.begin(); it != clients_.end();) {
    Client& c = it->second;
    if (Finished(c)) {
      it = Close(it);
    } else {
      ++it;
    }
  }
}

void ConnectionSet::ExpireIdle(TimePoint now) {
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (now - it->second.last_request >= limits_.idle_timeout) {
      it = Close(it);
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

std::map<int, ConnectionSet::Client>::iterator ConnectionSet::Close(
    std::map<int, Client>::iterator it) {
  close(it->first);
  const unsigned uid = it->second.identity.uid;
  if (ConnectionsOf(uid) == 1) last_connection_.erase(uid);
  return clients_.erase(it);
}

bool ConnectionSet::Finished(const Client& c) const {
  return c.closing && c.out.empty() && RequestEnd(c) == std::string::npos;
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
        c.closing = true;  // nothing sent can be answered
        c.in.clear();
        c.out.clear();
      }
      break;
    }
    c.in.append(buffer, static_cast<size_t>(n));
  }
  if (protocol_ == Protocol::kHttp) {
    ServeHttp(c, now);
    return;
  }
  // Only a request still without its end counts against the size limit.
  if (c.in.size() > limits_.max_request_bytes && RequestEnd(c) == std::string::npos) {
    c.out += api::EncodeError(api::ErrorCode::kTooLarge, fmt::format("request larger than {} bytes",
                                                                     limits_.max_request_bytes));
    c.out += '\n';
    c.in.clear();
    c.closing = true;
  }
}

void ConnectionSet::ServeHttp(Client& c, TimePoint now) {
  if (c.in.find("\r\n\r\n") != std::string::npos || c.in.size() > limits_.max_request_bytes ||
      (c.closing && !c.in.empty())) {
    c.out = handler_(c.identity, c.in);
    c.in.clear();
    c.closing = true;
    c.last_request = now;
  }
}

size_t ConnectionSet::RequestEnd(const Client& c) const {
  if (protocol_ != Protocol::kJsonLines) return std::string::npos;
  const size_t newline = c.in.find('\n', c.scanned);
  if (newline != std::string::npos) return newline;
  c.scanned = c.in.size();
  if (c.closing && !c.in.empty() && c.in.size() <= limits_.max_request_bytes) return c.in.size();
  return std::string::npos;
}

bool ConnectionSet::HasBufferedWork() const {
  for (const auto& [fd, c] : clients_) {
    if (c.out.size() < limits_.max_unsent_bytes && RequestEnd(c) != std::string::npos) return true;
  }
  return false;
}

bool ConnectionSet::Waiting(const Client& c, bool quick) const {
  if (c.out.size() >= limits_.max_unsent_bytes || RequestEnd(c) == std::string::npos) return false;
  return !quick || (&c != serving_ && !c.waits_turn);
}

ConnectionSet::Client* ConnectionSet::NextInTurn(bool quick) {
  // Among those with a request waiting and room for its reply: the smallest uid above the last
  // one served, else the smallest; then that user's smallest fd above their last, else smallest.
  std::optional<unsigned> after, lowest;
  for (auto& [fd, c] : clients_) {
    if (!Waiting(c, quick)) continue;
    const unsigned uid = c.identity.uid;
    if (!lowest || uid < *lowest) lowest = uid;
    if (uid > last_user_ && (!after || uid < *after)) after = uid;
  }
  if (!lowest) return nullptr;
  const unsigned user = after.value_or(*lowest);
  const auto last = last_connection_.find(user);
  Client *first = nullptr, *next = nullptr;
  for (auto& [fd, c] : clients_) {
    if (c.identity.uid != user || !Waiting(c, quick)) continue;
    if (!first) first = &c;
    if (!next && (last == last_connection_.end() || fd > last->second)) next = &c;
  }
  return next ? next : first;
}

void ConnectionSet::ServeOne(Client& c, TimePoint now) {
  serving_ = &c;
  std::string reply = handler_(c.identity, std::string_view(c.in.data(), RequestEnd(c)));
  serving_ = nullptr;
  Answered(c, std::move(reply), now);
}

void ConnectionSet::Answered(Client& c, std::string reply, TimePoint now) {
  c.out += reply;
  c.out += '\n';
  c.in.erase(0, std::min(RequestEnd(c) + 1, c.in.size()));
  c.scanned = 0;
  c.waits_turn = false;
  c.last_request = now;
  last_user_ = c.identity.uid;
  last_connection_[c.identity.uid] = c.fd;
}

bool ConnectionSet::ServeQuick(const std::vector<pollfd>& fds, TimePoint now,
                               const QuickHandler& quick) {
  Transfer(fds, now);
  while (Client* c = NextInTurn(/*quick=*/true)) {
    if (clock_.Now() - now >= kTurnBudget) return true;
    auto reply = quick(c->identity, std::string_view(c->in.data(), RequestEnd(*c)));
    if (!reply) {
      c->waits_turn = true;
      continue;
    }
    Answered(*c, std::move(*reply), now);
    Write(*c);
  }
  return false;
}

// Also serves requests read at an earlier turn and held back (the turn's time, or replies piling
// up): nothing new may arrive to wake them (the client sent everything and now reads).
void ConnectionSet::ServeInTurn(TimePoint now) {
  while (Client* c = NextInTurn()) {
    ServeOne(*c, now);
    Write(*c);
    if (clock_.Now() - now >= kTurnBudget) break;
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
    c.closing = true;  // the peer went away: drop what it will never read, nor answer the rest
    c.out.clear();
    c.in.clear();
    return;
  }
}

}  // namespace colo

// The connections of one listening socket, served from colod's poll loop with bounded everything:
// connections in all and per user, bytes per request, replies waiting to be read (a client that
// sends and never reads stops being read, it does not grow colod), and idle time. Used twice:
// the API socket (JSON lines, identity from SO_PEERCRED) and the metrics port (HTTP GET), each
// with its own pool, so neither can lock the other out.
#pragma once

#include <poll.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "daemon/job.h"

namespace colo {

struct ConnectionLimits {
  int max_connections = 256;
  int max_per_user = 32;                // API only: one user cannot take every slot
  Duration idle_timeout = Seconds(60);  // no complete request for this long: closed
  size_t max_request_bytes = 1 << 20;
  // Requests are not read from a client while this much of its replies waits to be sent.
  size_t max_unsent_bytes = 1 << 20;
};

class ConnectionSet {
 public:
  enum class Protocol { kJsonLines, kHttp };
  // The reply to one request: a JSON line (without its newline), or a whole HTTP response.
  using Handler = std::function<std::string(const Identity& caller, std::string_view request)>;
  // Who a peer is, from its credentials; an error refuses the connection with that message.
  using Identify = std::function<Result<Identity>(unsigned uid, unsigned gid)>;
  // The reply to a request that reads only what colod holds in memory (nothing stored is read or
  // written, nothing changes); nullopt for any other request, which then waits for its turn.
  using QuickHandler =
      std::function<std::optional<std::string>(const Identity& caller, std::string_view request)>;

  // `clock` times the turns (ServeInTurn).
  ConnectionSet(const Clock& clock, int listen_fd, Protocol protocol, ConnectionLimits limits,
                Handler handler, Identify identify);
  ~ConnectionSet();
  ConnectionSet(const ConnectionSet&) = delete;
  ConnectionSet& operator=(const ConnectionSet&) = delete;

  // `quick`: for ServeQuick, which leaves the connection being served alone.
  void AddPollFds(std::vector<pollfd>& fds, bool quick = false) const;
  // Handles whatever `fds` (as filled by AddPollFds, then polled) says is ready.
  void OnReady(const std::vector<pollfd>& fds, TimePoint now);
  // Closes connections idle past the limit.
  void ExpireIdle(TimePoint now);
  std::optional<TimePoint> NextDeadline() const;
  // Whether requests already received wait to be served (this turn's time ran out, or their
  // client's replies pile up): colod's loop must not sleep while there are.
  bool HasBufferedWork() const;
  // Serves the requests received, in turn by user rather than by connection: one request of each
  // user who has one waiting, then again, until none waits or the turn's time is spent. A user
  // pipelining on all their connections so gets no more of colod than one who sends one request.
  void ServeInTurn(TimePoint now);
  // While colod's loop waits on its store for the request being served (or for its own work):
  // takes new connections, reads and writes as OnReady does, and answers the requests `quick`
  // answers, in turn by user; every other request waits for ServeInTurn. The connection whose
  // request is being served is left alone, so that its replies keep their order. Closes only
  // connections that hung up with nothing left to send or answer.
  // Serves for about a turn; returns whether such requests still wait.
  bool ServeQuick(const std::vector<pollfd>& fds, TimePoint now, const QuickHandler& quick);
  size_t size() const { return clients_.size(); }
  // New limits (a reloaded config): connections beyond them stay until they close.
  void SetLimits(const ConnectionLimits& limits) { limits_ = limits; }

 private:
  struct Client {
    int fd = -1;
    Identity identity;
    std::string in, out;
    TimePoint last_request;
    bool closing = false;        // close once `out` is sent
    mutable size_t scanned = 0;  // the bytes of `in` already known to hold no newline
    bool waits_turn = false;     // its next request is not one ServeQuick may answer
  };

  void Accept(TimePoint now);
  // New connections, reads and writes that `fds` says are ready (none of the connection being
  // served).
  void Transfer(const std::vector<pollfd>& fds, TimePoint now);
  // Whether the client's socket is read now: not while its replies pile up, nor once a whole
  // request waits to be served beyond a little read-ahead. What one client holds in colod is so
  // bounded by one request plus the read-ahead in, and the unsent limit (plus one reply) out.
  bool WantsInput(const Client& client) const;
  void Read(Client& client, TimePoint now);
  void ServeHttp(Client& client, TimePoint now);
  // Where the first request in `client.in` ends (npos: none is whole yet). A client that finished
  // sending without a last newline has its last request end where its bytes do.
  size_t RequestEnd(const Client& client) const;
  // The client whose request is served next: the next user after the last one served (by uid)
  // who has one waiting, and that user's next connection after the last one served. `quick`:
  // only clients whose next request ServeQuick may answer.
  Client* NextInTurn(bool quick = false);
  bool Waiting(const Client& client, bool quick) const;
  void ServeOne(Client& client, TimePoint now);
  // Takes `reply` as the answer to the client's next request.
  void Answered(Client& client, std::string reply, TimePoint now);
  void Write(Client& client);
  std::map<int, Client>::iterator Close(std::map<int, Client>::iterator it);
  void Refuse(int fd, std::string_view code, std::string_view message);
  // Whether the client hung up and nothing of it is left to send or answer: it is closed.
  bool Finished(const Client& client) const;
  int ConnectionsOf(unsigned uid) const;

  // How long one turn serves requests before colod's loop does its other work (the jobs, the
  // GPUs, new connections); a request that runs over it ends the turn once it is answered.
  static constexpr Duration kTurnBudget = std::chrono::milliseconds(10);
  static constexpr int kAcceptsPerTurn = 64;
  // Bytes read ahead of what is served once a whole request is buffered.
  static constexpr size_t kReadAhead = 64 << 10;

  const Clock& clock_;
  int listen_fd_;
  Protocol protocol_;
  ConnectionLimits limits_;
  Handler handler_;
  Identify identify_;
  std::map<int, Client> clients_;            // by fd
  unsigned last_user_ = 0;                   // the uid whose request was served last
  std::map<unsigned, int> last_connection_;  // per uid: the fd whose request was served last
  const Client* serving_ = nullptr;          // whose request the handler is answering now
};

}  // namespace colo

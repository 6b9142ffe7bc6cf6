// A connection to colod, for `colo`, tests and every other client: typed calls over the wire
// format of codec.h.
#pragma once

#include <chrono>
#include <string>

#include "api/codec.h"
#include "api/types.h"
#include "common/status.h"

namespace colo::api {

class Client {
 public:
  // `timeout` bounds each call: a colod that does not answer is an error, not a hang.
  static Result<Client> Connect(const std::string& socket_path,
                                std::chrono::milliseconds timeout = std::chrono::seconds(120));
  Client(Client&& other) noexcept;
  Client& operator=(Client&&) = delete;
  ~Client();

  // Sends one request and waits for its reply; an error reply becomes its Status (with its code).
  template <typename Req>
  Result<typename ReplyOf<Req>::type> Call(const Req& request) {
    auto line = RoundTrip(EncodeRequest(Request(request)));
    if (!line.ok()) return line.status();
    return DecodeReply<typename ReplyOf<Req>::type>(*line);
  }

  // Every page of the queue from `request` on, as one reply: each page is a request of its own,
  // so colod serves others between them. The counts are the last page's.
  Result<QueueReply> WholeQueue(QueueRequest request);

  // One raw line out, one raw line back (without the newlines).
  Result<std::string> RoundTrip(const std::string& line);
  // Whether colod answered the last call: when it did not (the connection broke, or no reply
  // came in time), the request may or may not have been served.
  bool answered() const { return answered_; }

 private:
  Client(int fd, std::chrono::milliseconds timeout) : fd_(fd), timeout_(timeout) {}
  int fd_;
  std::chrono::milliseconds timeout_;
  std::string pending_;
  bool answered_ = false;
};

// A token for a submit that makes sending it again safe (api::SubmitRequest::token): 128
// random bits as hex.
std::string NewSubmitToken();

// Sends a submit (its token set) and, should its reply be lost (the connection broke, colod
// restarted), sends it again for up to `patience`: colod answers with the job the first one
// stored, if it stored one, so the job is never submitted twice. colod unreachable at the first
// try is an error at once, and so is the third connection it takes without answering.
Result<SubmitReply> SubmitOnce(const std::string& socket_path, const SubmitRequest& request,
                               std::chrono::milliseconds patience = std::chrono::seconds(60));

// The socket `colo` talks to: $COLO_SOCKET, else the user's personal colod's if one is
// listening, else the system colod's.
std::string DefaultSocketPath();
// Where a personal colod listens: $XDG_RUNTIME_DIR/colo/colod.sock, or /tmp/colo-UID/colod.sock.
std::string PersonalSocketPath();
constexpr const char* kSystemSocketPath = "/run/colo/colod.sock";

}  // namespace colo::api

// colod's API: JSON messages over a Unix stream socket, one per line. Every request names the API
// version it speaks ({"api": 1, "op": "submit", ...}); every reply has "ok" and either the
// result or "error". The caller's identity is the socket's peer credentials, never a field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace colo {

constexpr int kApiVersion = 1;

// A connection to colod, for the CLI and tests.
class ApiClient {
 public:
  static Result<ApiClient> Connect(const std::string& socket_path);
  ApiClient(ApiClient&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ApiClient& operator=(ApiClient&&) = delete;
  ~ApiClient();

  // Sends one request and waits for its reply. A reply with ok=false becomes an error Status
  // carrying colod's message.
  Result<nlohmann::json> Call(nlohmann::json request);

 private:
  explicit ApiClient(int fd) : fd_(fd) {}
  int fd_;
  std::string pending_;
};

}  // namespace colo

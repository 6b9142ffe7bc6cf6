// ConnectionSet::ServeQuick: while the request being served waits (colod's loop on its store),
// other connections' requests that read only memory are answered, and nothing else: the connection
// being served and any whose next request is not quick keep their order.
#include "daemon/connections.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include "daemon/job_store_test_support.h"

namespace colo {
namespace {

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  void Send(const std::string& text) const {
    ASSERT_EQ(send(fd_, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
  }
  // What has arrived so far (nothing: empty), without waiting.
  std::string Received() const {
    std::string out;
    char buffer[4096];
    ssize_t n;
    while ((n = recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT)) > 0)
      out.append(buffer, static_cast<size_t>(n));
    return out;
  }
  // Reads until `lines` whole lines have arrived (or 10 s have passed).
  std::string ReceiveLines(int lines) const {
    std::string out;
    for (int waited = 0; waited < 1000; ++waited) {
      out += Received();
      if (std::count(out.begin(), out.end(), '\n') >= lines) break;
      usleep(10000);
    }
    return out;
  }

 private:
  int fd_;
};

sockaddr_un Address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

class ServeQuickTest : public ::testing::Test {
 protected:
  ServeQuickTest() : listener_(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) {
    const sockaddr_un address = Address(dir_.File("s"));
    EXPECT_EQ(bind(listener_.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(listen(listener_.fd(), 16), 0);
  }
  int Connect() {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un address = Address(dir_.File("s"));
    EXPECT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
    return fd;
  }
  // One turn of colod's loop over `set`: waits up to `ms` for something to do.
  static void Turn(ConnectionSet& set, const Clock& clock, int ms) {
    std::vector<pollfd> fds;
    set.AddPollFds(fds);
    poll(fds.data(), fds.size(), ms);
    set.OnReady(fds, clock.Now());
  }

  testing::TempDir dir_;
  Socket listener_;
  ManualClock clock_;
};

TEST_F(ServeQuickTest, OthersQuickRequestsAreAnsweredWhileOneWaitsAndNothingElseIs) {
  Socket slow(Connect()), reader(Connect()), writer(Connect());
  std::unique_ptr<ConnectionSet> set;
  const ConnectionSet::QuickHandler quick =
      [](const Identity&, std::string_view request) -> std::optional<std::string> {
    if (request.substr(0, 5) != "quick") return std::nullopt;
    return "quick:" + std::string(request);
  };
  std::string reader_during, writer_during;
  const auto handler = [&](const Identity&, std::string_view request) -> std::string {
    if (request != "slow") return "handled:" + std::string(request);
    // As colod's loop does while its store works: ServeQuick until the reader has its answer.
    for (int round = 0; round < 500 && reader_during.empty(); ++round) {
      if (round == 0) reader.Send("quick-read\n");  // it comes in while the slow one waits
      std::vector<pollfd> fds;
      set->AddPollFds(fds, /*quick=*/true);
      poll(fds.data(), fds.size(), 20);
      set->ServeQuick(fds, clock_.Now(), quick);
      reader_during = reader.Received();
    }
    writer_during = writer.Received();
    return "slow done";
  };
  set = std::make_unique<ConnectionSet>(clock_, listener_.fd(), ConnectionSet::Protocol::kJsonLines,
                                        ConnectionLimits{}, handler,
                                        [](unsigned uid, unsigned gid) -> Result<Identity> {
                                          return Identity{uid, gid, "u"};
                                        });
  Turn(*set, clock_, 1000);  // the three connections are taken
  ASSERT_EQ(set->size(), 3u);

  // The slow connection's own next request, and the writer's quick one behind a request that is
  // not, must wait for their turn.
  slow.Send("slow\nquick-own\n");
  writer.Send("write\nquick-behind\n");
  Turn(*set, clock_, 1000);
  EXPECT_EQ(reader_during, "quick:quick-read\n");
  EXPECT_EQ(writer_during, "");
  while (set->HasBufferedWork()) Turn(*set, clock_, 0);
  EXPECT_EQ(slow.ReceiveLines(2), "slow done\nhandled:quick-own\n");
  EXPECT_EQ(writer.ReceiveLines(2), "handled:write\nhandled:quick-behind\n");
}

// A user at their connection limit who closes one and connects again at once (one `colo`
// command after another) is taken, though both come to colod in the same turn of its loop.
TEST_F(ServeQuickTest, AConnectionClosedAndOneOpenedInTheSameTurnIsNotRefused) {
  ConnectionLimits limits;
  limits.max_per_user = 1;
  limits.max_connections = 1;
  ConnectionSet set(
      clock_, listener_.fd(), ConnectionSet::Protocol::kJsonLines, limits,
      [](const Identity&, std::string_view request) { return "handled:" + std::string(request); },
      // Every connection is one user's, not root's (whom no limit refuses).
      [](unsigned, unsigned) -> Result<Identity> {
        return Identity{1000, 1000, "alice"};
      });
  auto first = std::make_unique<Socket>(Connect());
  Turn(set, clock_, 1000);
  ASSERT_EQ(set.size(), 1u);
  first->Send("one\n");
  Turn(set, clock_, 1000);
  EXPECT_EQ(first->ReceiveLines(1), "handled:one\n");

  first.reset();
  Socket second(Connect());
  Turn(set, clock_, 1000);
  second.Send("two\n");
  while (set.HasBufferedWork()) Turn(set, clock_, 0);
  Turn(set, clock_, 100);
  EXPECT_EQ(second.ReceiveLines(1), "handled:two\n");
  EXPECT_EQ(set.size(), 1u);

  // A third while the second is open is still refused: the limit holds.
  Socket third(Connect());
  Turn(set, clock_, 1000);
  EXPECT_NE(third.ReceiveLines(1).find("too many connections"), std::string::npos);
  EXPECT_EQ(set.size(), 1u);
}

}  // namespace
}  // namespace colo

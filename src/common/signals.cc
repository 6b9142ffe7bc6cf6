#include "common/signals.h"

#include <fmt/format.h>
#include <signal.h>

#include <cctype>

#include "common/strings.h"
#include "common/text.h"

namespace colo {
namespace {

struct NamedSignal {
  std::string_view name;  // without SIG
  int number;
};

constexpr NamedSignal kSignals[] = {
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

}  // namespace

std::string SignalName(int number) {
  for (const NamedSignal& s : kSignals) {
    if (s.number == number) return fmt::format("SIG{}", s.name);
  }
  return fmt::format("SIG{}", number);
}

Result<int> ParseSignal(std::string_view text) {
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text.front()))) {
    auto number = ParseInt(text);
    if (number.ok() && *number >= 1 && *number <= SIGRTMAX) return static_cast<int>(*number);
  } else {
    std::string upper;
    for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::string_view name = upper;
    if (name.starts_with("SIG")) name.remove_prefix(3);
    for (const NamedSignal& s : kSignals) {
      if (s.name == name) return s.number;
    }
  }
  return InvalidArgument(
      fmt::format("'{}' is not a signal (a name such as TERM or USR1, or a "
                  "number)",
                  Printable(text)));
}

}  // namespace colo

// libFuzzer target: ClassifyExit on any outputs. Input: a flags byte (1: killed by a signal,
// 2: end unknown, 4: cancel requested), the exit code or signal, then stderr, then optionally
// "\n--- stdout ---\n" and stdout. Every detail must be valid UTF-8 of at most 1,024 bytes.
#include <string>

#include "common/check.h"
#include "daemon/exit_classifier.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const colo::ProcessEnd end{(data[0] & 1) == 0, data[1], (data[0] & 2) == 0};
  const bool cancel = (data[0] & 4) != 0;
  std::string_view stderr_tail = colo::fuzz::AsText(data + 2, size - 2), stdout_tail;
  constexpr std::string_view kSeparator = "\n--- stdout ---\n";
  if (const size_t at = stderr_tail.find(kSeparator); at != std::string_view::npos) {
    stdout_tail = stderr_tail.substr(at + kSeparator.size());
    stderr_tail = stderr_tail.substr(0, at);
  }

  const colo::JobExit exit = colo::ClassifyExit(end, cancel, stderr_tail, stdout_tail);
  COLO_CHECK(exit.detail.size() <= 1024);
  COLO_CHECK(colo::fuzz::IsValidUtf8(exit.detail));
  if (cancel) COLO_CHECK(exit.kind == colo::ExitKind::kCancelled);
  if (!cancel && !end.known) COLO_CHECK(exit.kind == colo::ExitKind::kLost);
  if (!cancel && end.known && end.exited && end.code == 0)
    COLO_CHECK(exit.kind == colo::ExitKind::kSuccess && exit.detail.empty());

  for (const std::string_view tail : {stderr_tail, stdout_tail}) {
    const std::string terminal = colo::TerminalError(tail);
    COLO_CHECK(colo::fuzz::IsValidUtf8(terminal));
    COLO_CHECK(terminal.size() <= 9 * (16 * 1024 + 8));  // a chain of 8 bounded parts
    const std::string oom = colo::FindOutOfMemoryLine(terminal);
    COLO_CHECK(colo::fuzz::IsValidUtf8(oom) && oom.size() <= terminal.size());
  }
  return 0;
}

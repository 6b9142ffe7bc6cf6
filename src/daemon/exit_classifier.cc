// The terminal-error parser behind ClassifyExit and the table of the out-of-memory messages each
// framework prints. See exit_classifier.h for the rules.
#include "daemon/exit_classifier.h"

#include <fmt/format.h>
#include <string.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <vector>

#include "common/text.h"

namespace colo {
namespace {

// Only the end of a longer tail is read: the same amount the launcher keeps of each output.
constexpr size_t kMaxScannedBytes = 256 * 1024;
// PyTorch's out-of-memory line, with every figure in it, is some 600 bytes: kept whole.
constexpr size_t kMaxDetailBytes = 1024;
// Of one exception's text. A longer one keeps its head (the exception's type and message) and
// its tail (TensorFlow prints "OOM when allocating" after the trace of the op's definition).
constexpr size_t kMaxPartBytes = 16 * 1024;
// Tracebacks joined by "During handling of ..." kept of one chain, the last ones.
constexpr size_t kMaxChainLength = 8;
// A traceback is the terminal error only while at most this many lines that are neither blank
// nor indented follow its exception line: room for a multi-line message and for what a program
// prints on its way out (logging shutdown, wandb's summary, warnings), but a traceback printed
// for a caught exception, after which training went on, is not the error that ended it.
constexpr int kMaxLinesAfterException = 64;
// Without a traceback: how far back from the end a fatal block (terminate, glog F line) may start,
// in non-blank lines (libtorch's `what()` is followed by a C++ stack of some 30 frames)...
constexpr size_t kFatalSearchLines = 64;
// ...and without one, the last lines that make the terminal error.
constexpr size_t kLastLines = 3;

constexpr std::string_view kTracebackHeader = "Traceback (most recent call last):";

// A GPU allocation failure as one framework prints it: `text` (and `also`, when set) on one line,
// matched case-sensitively. Earlier entries win when several lines match, so the most telling
// line of a message comes first (libtorch's `what()` before the type name above it).
struct OutOfMemoryMessage {
  std::string_view framework;
  std::string_view text;
  std::string_view also = {};
};

constexpr OutOfMemoryMessage kOutOfMemoryMessages[] = {
    {"PyTorch >= 2.5", "torch.OutOfMemoryError: CUDA out of memory"},
    {"PyTorch 1.13 - 2.4", "torch.cuda.OutOfMemoryError: CUDA out of memory"},
    {"PyTorch < 1.13", "RuntimeError: CUDA out of memory"},
    {"libtorch (C++), what() of an uncaught error", "what():", "CUDA out of memory"},
    {"PyTorch's allocator message, however its type is printed",
     "CUDA out of memory. Tried to allocate"},
    {"libtorch (C++), the uncaught error's type", "c10::OutOfMemoryError"},
    // What PyTorch reports when the CUDA runtime itself fails, as under an MPS memory limit.
    {"CUDA runtime via PyTorch (MPS memory limit)", "CUDA error: out of memory"},
    {"cuBLAS", "CUBLAS_STATUS_ALLOC_FAILED"},
    {"cuDNN", "CUDNN_STATUS_ALLOC_FAILED"},
    {"cuDNN, no room for its workspace", "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE"},
    // ResourceExhaustedError also reports quotas that have nothing to do with memory (gRPC
    // message sizes, file systems): only its allocation message counts.
    {"TensorFlow", "OOM when allocating tensor"},
    {"TensorFlow fatal", "Non-OK-status", "out of memory"},
    {"TensorFlow fatal, XLA status", "Non-OK-status", "RESOURCE_EXHAUSTED: Out of memory"},
    {"JAX/XLA", "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory"},
    {"JAX >= 0.4.36", "JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory"},
    {"CUDA runtime", "cudaErrorMemoryAllocation"},
    {"CUDA driver", "CUDA_ERROR_OUT_OF_MEMORY"},
    {"NCCL", "Cuda failure 'out of memory'"},
    {"CuPy", "cupy.cuda.memory.OutOfMemoryError"},
    // A warning while TensorFlow can still fall back; it counts only as the terminal error.
    {"TensorFlow BFC allocator", "ran out of memory trying to allocate"},
};

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool IsBlankChar(char c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && IsBlankChar(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsBlankChar(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view TrimBoth(std::string_view s) {
  return TrimLeft(TrimRight(s));
}

bool IsIndented(std::string_view line) {
  return !line.empty() && (line[0] == ' ' || line[0] == '\t');
}

// The lines of an output as a terminal shows them, right-trimmed: '\n' ends a line, and '\r'
// returns to its start, so of a progress bar redrawn in place only its last state remains.
std::vector<std::string_view> VisibleLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (true) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (const size_t cr = line.rfind('\r'); cr != std::string_view::npos)
      line.remove_prefix(cr + 1);
    lines.push_back(TrimRight(line));
    if (end == text.size()) return lines;
    start = end + 1;
  }
}

// The position of a cut at `at` moved back to the first byte of the code point it falls in.
size_t CodePointStart(std::string_view s, size_t at) {
  for (int k = 0;
       k < 3 && at > 0 && at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80; ++k)
    --at;
  return at;
}

// `text` made valid UTF-8 and at most kMaxPartBytes (and a marker): a longer one keeps its first
// and its last lines that fit, with the marker between.
std::string BoundedText(std::string_view text) {
  std::string valid = ValidUtf8(text);
  if (valid.size() <= kMaxPartBytes) return valid;
  const std::string_view all = valid;
  const size_t half = kMaxPartBytes / 2;
  std::string_view head = all.substr(0, CodePointStart(all, half));
  if (const size_t nl = head.rfind('\n'); nl != std::string_view::npos && nl > 0)
    head = head.substr(0, nl);
  std::string_view tail = all.substr(CodePointStart(all, all.size() - half));
  if (const size_t nl = tail.find('\n'); nl != std::string_view::npos && nl + 1 < tail.size())
    tail.remove_prefix(nl + 1);
  return std::string(head) + "\n[...]\n" + std::string(tail);
}

// Lines [begin, end) joined, blank lines at either end left out.
std::string JoinLines(const std::vector<std::string_view>& lines, size_t begin, size_t end) {
  while (begin < end && TrimBoth(lines[begin]).empty()) ++begin;
  while (end > begin && TrimBoth(lines[end - 1]).empty()) --end;
  std::string joined;
  for (size_t i = begin; i < end; ++i) {
    if (i > begin) joined += '\n';
    joined.append(lines[i]);
  }
  return joined;
}

// A Python traceback: its header, its frames and the error line that ends it.

bool IsTracebackHeader(std::string_view line) {
  // Matched at the end: a progress bar with no newline of its own may precede it on its line.
  return line.ends_with(kTracebackHeader);
}

bool IsChainSeparator(std::string_view line) {
  line = TrimBoth(line);
  return line == "During handling of the above exception, another exception occurred:" ||
         line == "The above exception was the direct cause of the following exception:";
}

// Python prints the exceptions it ignores (in __del__, at shutdown) as "Exception ignored in:
// ..." and a traceback: never the error that ended the process. Looked for near the line's start,
// after any margin.
bool IsIgnoredExceptionLine(std::string_view line) {
  return Contains(line.substr(0, 80), "Exception ignored");
}

// Some tracebacks carry a margin on every line: a traceback inside an exception group ("    | "),
// a worker's under torchrun ("[rank1]: "). Their lines are read without it. Text before the
// header that the next line does not repeat (a progress bar, "Original ") is no margin.
std::string_view MarginOf(const std::vector<std::string_view>& lines, size_t header) {
  const std::string_view line = lines[header];
  const std::string_view before = line.substr(0, line.size() - kTracebackHeader.size());
  const bool repeated = header + 1 < lines.size() && lines[header + 1].starts_with(before);
  return repeated && !TrimLeft(before).empty() ? before : std::string_view();
}

// `line` without `margin`; nullopt where the margin ends, and with it the traceback.
std::optional<std::string_view> WithoutMargin(std::string_view line, std::string_view margin) {
  if (margin.empty()) return line;
  if (line.starts_with(margin)) return line.substr(margin.size());
  if (line == TrimRight(margin)) return std::string_view();  // a blank line inside the group
  return std::nullopt;
}

struct Traceback {
  std::string_view margin;
  size_t exception_begin = 0, exception_end = 0;  // its exception lines, [begin, end)
};

// The traceback whose header is lines[header]: its frames are the indented lines after the
// header, its exception lines what follows them up to `limit` or to the end of its margin.
Traceback ParseTraceback(const std::vector<std::string_view>& lines, size_t header, size_t limit) {
  Traceback t;
  t.margin = MarginOf(lines, header);
  size_t i = header + 1;
  while (i < limit) {
    const auto line = WithoutMargin(lines[i], t.margin);
    if (!line || !IsIndented(*line)) break;
    ++i;
  }
  t.exception_begin = i;
  while (i < limit && WithoutMargin(lines[i], t.margin)) ++i;
  t.exception_end = i;
  return t;
}

std::string ExceptionText(const std::vector<std::string_view>& lines, const Traceback& t) {
  if (t.margin.empty()) return JoinLines(lines, t.exception_begin, t.exception_end);
  std::vector<std::string_view> plain;
  for (size_t i = t.exception_begin; i < t.exception_end; ++i)
    plain.push_back(*WithoutMargin(lines[i], t.margin));
  return JoinLines(plain, 0, plain.size());
}

struct Terminal {
  std::string text;      // valid UTF-8
  std::string headline;  // the line that names the error, valid UTF-8
  bool is_error = false;
};

std::string FirstNonBlankLine(std::string_view text) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = TrimBoth(text.substr(start, end - start));
    if (!line.empty()) return TruncateUtf8(line, kMaxDetailBytes);
    start = end + 1;
  }
  return "";
}

// A traceback chain: the exception texts of its tracebacks, first to last.
struct Chain {
  size_t first_header = 0;
  std::vector<std::string> parts;
};

// The chain whose last traceback is the last one before line `end`, if no more than
// kMaxLinesAfterException lines that are neither blank nor indented follow its exception line
// before `end`.
std::optional<Chain> ChainBefore(const std::vector<std::string_view>& lines, size_t end) {
  size_t header = end;
  size_t limit = end;  // where an ignored exception's report begins
  for (size_t i = end; i-- > 0;) {
    if (!IsTracebackHeader(lines[i])) continue;
    if (i > 0 && IsIgnoredExceptionLine(lines[i - 1])) {
      limit = i - 1;
      continue;
    }
    header = i;
    break;
  }
  if (header == end) return std::nullopt;
  const Traceback last = ParseTraceback(lines, header, limit);
  std::string last_text = ExceptionText(lines, last);
  if (last_text.empty()) return std::nullopt;  // cut off before its exception was printed
  int after = 0;
  for (size_t i = last.exception_begin + 1; i < end; ++i) {
    if (!lines[i].empty() && !IsIndented(lines[i]) && ++after > kMaxLinesAfterException)
      return std::nullopt;
  }

  // Walk back through the chain: a separator above a traceback's header joins it to the one
  // before. Each step only moves up, so the whole walk reads each line at most twice.
  Chain chain{header, {std::move(last_text)}};
  std::string_view margin = last.margin;
  while (chain.parts.size() < kMaxChainLength) {
    size_t above = chain.first_header;
    while (above > 0) {
      const auto line = WithoutMargin(lines[above - 1], margin);
      if (!line || !TrimBoth(*line).empty()) break;
      --above;
    }
    if (above == 0) break;
    const auto separator_line = WithoutMargin(lines[above - 1], margin);
    if (!separator_line || !IsChainSeparator(*separator_line)) break;
    const size_t separator = above - 1;
    size_t previous = separator;
    while (previous > 0 && !IsTracebackHeader(lines[previous - 1])) --previous;
    if (previous == 0) break;
    --previous;
    const Traceback t = ParseTraceback(lines, previous, separator);
    chain.parts.insert(chain.parts.begin(), ExceptionText(lines, t));
    chain.first_header = previous;
    margin = t.margin;
  }
  return chain;
}

// The error of a launcher that ran the training in child processes and reports that one failed
// (torchrun and accelerate for several GPUs, accelerate for one): the children's own errors,
// printed just before it, ended the job.
bool IsChildFailure(std::string_view exception_line) {
  return Contains(exception_line, "ChildFailedError") ||
         Contains(exception_line, "subprocess.CalledProcessError");
}

// The last traceback chain, if one is near the end of `lines`, with the children's chains before
// it when it is a launcher's report of their failure.
std::optional<Terminal> FromTraceback(const std::vector<std::string_view>& lines) {
  auto chain = ChainBefore(lines, lines.size());
  if (!chain) return std::nullopt;
  std::vector<std::string> parts = std::move(chain->parts);
  std::string headline = FirstNonBlankLine(parts.back());
  if (IsChildFailure(headline)) {
    size_t end = chain->first_header;
    bool nearest = true;
    while (parts.size() < kMaxChainLength) {
      auto child = ChainBefore(lines, end);
      if (!child) break;
      // A child's error names the failure better than the launcher's report of it.
      if (nearest) headline = FirstNonBlankLine(child->parts.back());
      nearest = false;
      const size_t room = kMaxChainLength - parts.size();
      const size_t take = std::min(room, child->parts.size());
      parts.insert(parts.begin(), std::make_move_iterator(child->parts.end() - take),
                   std::make_move_iterator(child->parts.end()));
      end = child->first_header;
    }
  }
  Terminal terminal;
  terminal.is_error = true;
  terminal.headline = std::move(headline);
  for (const std::string& part : parts) {
    if (part.empty()) continue;
    if (!terminal.text.empty()) terminal.text += '\n';
    terminal.text += BoundedText(part);
  }
  return terminal;
}

// Outputs without a traceback: a framework's or the CUDA driver's own fatal lines.

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A glog/absl line ("F0312 10:01:02.123456  4242 file.cc:42] message") or a TensorFlow log line
// before 2.16 ("2024-03-12 10:01:02.123456: F tensorflow/core/file.cc:42] message") whose
// severity letter is one of `severities`.
bool IsLogLine(std::string_view line, std::string_view severities) {
  line = TrimLeft(line);
  if (line.size() > 6 && severities.find(line[0]) != std::string_view::npos &&
      AllDigits(line.substr(1, 4)) && line[5] == ' ')
    return Contains(line.substr(0, 200), "] ");
  if (line.size() > 24 && AllDigits(line.substr(0, 4)) && line[4] == '-') {
    const size_t colon = line.substr(0, 40).find(": ");
    return colon != std::string_view::npos && colon + 3 < line.size() &&
           severities.find(line[colon + 2]) != std::string_view::npos && line[colon + 3] == ' ';
  }
  return false;
}

// Where a fatal error's report begins: what it prints after it (what(), a C++ stack, "Aborted")
// belongs to it.
bool StartsFatalBlock(std::string_view line) {
  return Contains(line, "terminate called after throwing") ||
         Contains(line, "terminate called without an active exception") ||
         TrimLeft(line).starts_with("Fatal Python error:") || IsLogLine(line, "F");
}

// A line a program prints and goes on: a log line below error, a warning.
bool IsNotice(std::string_view line) {
  return IsLogLine(line, "IW") || Contains(line, "Warning:") || Contains(line, "WARNING") ||
         Contains(line, "warning:");
}

bool LooksLikeError(std::string_view text) {
  static constexpr std::string_view kWords[] = {
      "Error",   "error",    "ERROR", "Exception",          "FAILED",      "Failed", "failed",
      "Fatal",   "FATAL",    "fatal", "Segmentation fault", "core dumped", "Killed", "Aborted",
      "what():", "Traceback"};
  return std::any_of(std::begin(kWords), std::end(kWords),
                     [&](std::string_view w) { return Contains(text, w); }) ||
         !FindOutOfMemoryLine(text).empty();
}

Terminal FromLastLines(const std::vector<std::string_view>& lines) {
  std::vector<size_t> recent;  // the last non-blank lines, from the end back
  for (size_t i = lines.size(); i-- > 0 && recent.size() < kFatalSearchLines;) {
    if (!TrimBoth(lines[i]).empty()) recent.push_back(i);
  }
  if (recent.empty()) return {};
  Terminal terminal;
  size_t count = 0;
  for (size_t r = 0; r < recent.size(); ++r) {
    if (StartsFatalBlock(lines[recent[r]])) {
      count = r + 1;
      terminal.is_error = true;
      break;
    }
  }
  if (count == 0) {
    // The last lines down to a warning: a job that warned (even of a recoverable allocation
    // failure) and then failed of something else failed of that.
    count = 1;
    while (count < recent.size() && count < kLastLines && !IsNotice(lines[recent[count]])) ++count;
  }
  std::string joined;
  std::string_view what;
  for (size_t r = count; r-- > 0;) {
    const std::string_view line = lines[recent[r]];
    if (!joined.empty()) joined += '\n';
    joined.append(line);
    if (what.empty() && Contains(line, "what():")) what = line;
  }
  terminal.text = BoundedText(joined);
  // A fatal block is named by its what() or its first line; other output by its last line.
  const std::string_view headline =
      terminal.is_error ? (what.empty() ? lines[recent[count - 1]] : what) : lines[recent[0]];
  terminal.headline = TruncateUtf8(TrimBoth(headline), kMaxDetailBytes);
  terminal.is_error = terminal.is_error || LooksLikeError(terminal.text);
  return terminal;
}

Terminal Analyze(std::string_view tail) {
  if (tail.size() > kMaxScannedBytes) tail.remove_prefix(tail.size() - kMaxScannedBytes);
  const std::vector<std::string_view> lines = VisibleLines(tail);
  if (auto traceback = FromTraceback(lines)) return *std::move(traceback);
  return FromLastLines(lines);
}

}  // namespace

std::string TerminalError(std::string_view tail) {
  return Analyze(tail).text;
}

std::string FindOutOfMemoryLine(std::string_view terminal_error) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= terminal_error.size()) {
    size_t end = terminal_error.find('\n', start);
    if (end == std::string_view::npos) end = terminal_error.size();
    lines.push_back(terminal_error.substr(start, end - start));
    start = end + 1;
  }
  for (const OutOfMemoryMessage& message : kOutOfMemoryMessages) {
    for (std::string_view line : lines) {
      if (Contains(line, message.text) && (message.also.empty() || Contains(line, message.also)))
        return ValidUtf8(TrimBoth(line));
    }
  }
  return "";
}

namespace {

// The size written at the start of `text` ("20.00 MiB", "123456 bytes", "1.00GiB"), if it is one.
std::optional<Bytes> LeadingSize(std::string_view text) {
  constexpr size_t kMaxDigits = 18;
  size_t i = 0;
  double whole = 0;
  while (i < text.size() && i < kMaxDigits && text[i] >= '0' && text[i] <= '9')
    whole = whole * 10 + (text[i++] - '0');
  if (i == 0) return std::nullopt;
  double fraction = 0, scale = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    for (size_t digits = 0; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
      if (digits < 9) {
        scale /= 10;
        fraction += (text[i] - '0') * scale;
      }
    }
  }
  if (i < text.size() && text[i] == ' ') ++i;
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"bytes", 1.0}, {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40},
      {"KB", 0x1p10}, {"MB", 0x1p20},  {"GB", 0x1p30},  {"TB", 0x1p40},  {"B", 1.0},
  };
  for (const auto& [unit, factor] : kUnits) {
    if (text.substr(i).starts_with(unit)) {
      // "12 Bytesomething" is no size; a unit ends at a non-letter.
      const size_t end = i + unit.size();
      if (end < text.size() &&
          ((text[end] >= 'a' && text[end] <= 'z') || (text[end] >= 'A' && text[end] <= 'Z')))
        return std::nullopt;
      const double bytes = (whole + fraction) * factor;
      if (bytes > 0x1p50) return std::nullopt;  // above 1 PiB: no GPU, not a real figure
      return Bytes(static_cast<int64_t>(bytes + 0.5));
    }
  }
  return std::nullopt;
}

// The size right after `before` (its first occurrence that has one).
std::optional<Bytes> SizeAfter(std::string_view text, std::string_view before) {
  for (size_t at = text.find(before); at != std::string_view::npos;
       at = text.find(before, at + 1)) {
    if (auto size = LeadingSize(text.substr(at + before.size()))) return size;
  }
  return std::nullopt;
}

// The size right before `after` ("2.45 GiB reserved in total by PyTorch").
std::optional<Bytes> SizeBefore(std::string_view text, std::string_view after) {
  const size_t at = text.find(after);
  if (at == std::string_view::npos) return std::nullopt;
  // Back over the unit, the space and the number: at most a few dozen characters.
  size_t start = at;
  while (start > 0 && at - start < 40 && text[start - 1] != ';' && text[start - 1] != '(' &&
         text[start - 1] != ',')
    --start;
  std::string_view size = TrimLeft(text.substr(start, at - start));
  return LeadingSize(size);
}

}  // namespace

OutOfMemoryEvidence ParseOutOfMemoryFigures(std::string_view text) {
  constexpr size_t kMaxRead = 64 * 1024;
  text = text.substr(0, kMaxRead);
  OutOfMemoryEvidence e;
  if (auto tried = SizeAfter(text, "Tried to allocate ")) {
    e.framework = "PyTorch";
    e.requested = tried;
    e.in_use = SizeAfter(text, "this process has ");
    if (!e.in_use) e.in_use = SizeBefore(text, " reserved in total by PyTorch");
  } else if (auto xla = SizeAfter(text, "Out of memory while trying to allocate ")) {
    e.framework = "XLA";
    e.requested = xla;
  } else if (auto bfc = SizeAfter(text, "ran out of memory trying to allocate ")) {
    e.framework = "TensorFlow";
    e.requested = bfc;
  }
  return e;
}

std::string DescribeEnd(const ProcessEnd& end) {
  if (!end.known) return "ended while colod was down; no exit status was recorded";
  if (end.exited) return fmt::format("exit code {}", end.code);
  return fmt::format("killed by signal {} ({})", end.code, strsignal(end.code));
}

JobExit ClassifyExit(const ProcessEnd& end, bool cancel_requested, std::string_view stderr_tail,
                     std::string_view stdout_tail) {
  if (cancel_requested)
    return {ExitKind::kCancelled, TruncateUtf8("cancelled: " + DescribeEnd(end), kMaxDetailBytes)};
  if (!end.known) return {ExitKind::kLost, TruncateUtf8(DescribeEnd(end), kMaxDetailBytes)};
  if (end.exited && end.code == 0) return {ExitKind::kSuccess, ""};
  // Python prints an uncaught exception on stderr: its terminal error comes first. stdout's
  // counts when stderr ended without an error (only progress bars or warnings, or nothing).
  const Terminal err = Analyze(stderr_tail);
  const Terminal out = err.is_error ? Terminal() : Analyze(stdout_tail);
  const Terminal& terminal = err.is_error || (!out.is_error && !err.text.empty()) ? err : out;
  const std::string oom = FindOutOfMemoryLine(terminal.text);
  if (!oom.empty()) {
    // The figures are on the message's line, or (TensorFlow, XLA) elsewhere in the error.
    OutOfMemoryEvidence figures = ParseOutOfMemoryFigures(oom);
    if (!figures.requested) figures = ParseOutOfMemoryFigures(terminal.text);
    return {ExitKind::kOutOfMemory, TruncateUtf8(oom, kMaxDetailBytes), std::move(figures)};
  }
  std::string detail = DescribeEnd(end);
  if (!terminal.headline.empty()) detail += ": " + terminal.headline;
  return {ExitKind::kFailure, TruncateUtf8(detail, kMaxDetailBytes)};
}

}  // namespace colo

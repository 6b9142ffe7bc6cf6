// How an attempt ended, decided from the terminal error alone on stderr and stdout: the error
// that ended the process (the last Python traceback chain near the end of an output, else its last
// lines: C++ `terminate`/`what()`, glog fatal lines), checked against a table of the messages each
// framework prints when a GPU allocation fails. An OOM caught and recovered from earlier does not
// count: only out-of-memory goes to the recovery path, so a wrong OOM costs a GPU's worth of
// memory reserved for nothing, and a missed one sends a job that only needed more memory to fail.
//
// Outputs are written by the job and are hostile: any bytes, any length. Everything returned is
// valid UTF-8, bounded, and found in time linear in the input.
#pragma once

#include <string>
#include <string_view>

#include "core/model.h"

namespace colo {

struct ProcessEnd {
  bool exited = true;  // false: killed by a signal
  int code = 0;        // exit code or signal number
  bool known = true;   // false: the process vanished and nothing recorded how it ended
};

// `stderr_tail`, `stdout_tail`: the last part of each output (the error is printed at the end).
// Cancelled: "cancelled: <how it ended>"; unknown end: lost; exit 0: success. Otherwise the
// terminal error decides, stderr's first (Python prints uncaught exceptions there) and stdout's
// when stderr's is not an error: out of memory with its line as the detail, else a failure
// "exit code N: <the line that names the error>" (a traceback's exception line, a C++ what(),
// else the output's last line). The detail is valid UTF-8 of at most 1,024 bytes.
JobExit ClassifyExit(const ProcessEnd& end, bool cancel_requested, std::string_view stderr_tail,
                     std::string_view stdout_tail);

// The terminal error of an output tail, valid UTF-8: the exception lines of its last traceback
// chain (tracebacks joined by "During handling of the above exception..." or "The above exception
// was the direct cause...") if at most 64 lines that are neither blank nor indented follow the
// last exception line, with the workers' chains printed just before it when it is a launcher's
// report that a worker failed (torchrun's ChildFailedError, accelerate's CalledProcessError); else
// a fatal block (from "terminate called", a glog F line or "Fatal Python error" among its last 64
// lines, to the end); else its last 3 lines, stopping at a warning. Empty for an output without
// text.
std::string TerminalError(std::string_view tail);

// The line of a terminal error that shows a GPU allocation failure, or empty.
std::string FindOutOfMemoryLine(std::string_view terminal_error);

// The figures of a framework's out-of-memory message, those it has: PyTorch's "Tried to allocate
// 20.00 MiB" and "this process has 2.87 GiB memory in use" (before 2.1: "2.45 GiB reserved in
// total by PyTorch"), XLA's (JAX, TensorFlow) "Out of memory while trying to allocate 123456
// bytes", TensorFlow's allocator's "ran out of memory trying to allocate 1.00GiB". Sizes in B,
// bytes, KiB, MiB, GiB, TiB (and KB, MB, GB, TB, read as powers of 1024, as these frameworks
// mean them). `text` is the job's: a figure that is malformed or above 1 PiB is left out, and
// only the first 64 KiB are read.
OutOfMemoryEvidence ParseOutOfMemoryFigures(std::string_view text);

std::string DescribeEnd(const ProcessEnd& end);

}  // namespace colo

// How an attempt ended, from its wait status, whether colo asked it to stop, and its stderr.
// Only out-of-memory goes to the recovery path, so the OOM patterns are specific: the messages
// PyTorch, TensorFlow, JAX/XLA, cuBLAS/cuDNN and the CUDA runtime print when an allocation fails.
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

// `stderr_tail`: the last part of the attempt's stderr (the error is printed at the end).
JobExit ClassifyExit(const ProcessEnd& end, bool cancel_requested, std::string_view stderr_tail);

// The line of `text` that shows an out-of-memory error, or empty.
std::string FindOutOfMemoryLine(std::string_view text);

std::string DescribeEnd(const ProcessEnd& end);

}  // namespace colo

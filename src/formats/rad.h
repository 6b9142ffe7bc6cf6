// CARMA's task files (.rad): one field per line, read by line number. See docs/formats.md.
//   0 comment              4 dataset             8 measured peak MiB ("oracle")
//   1 conda activate ENV   5 batch size          9 Horus estimate MiB
//   2 the python command   6 "exclusive" (unused) 10 FakeTensor estimate MiB
//   3 model summary file   7 number of GPUs      11 GPUMemNet estimate MiB
// 40000 means unknown. Real files are often short (CARMA's gpt2_xl.rad has 8 lines): every missing
// line takes its documented default, and a malformed number is an error naming file and line.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "common/units.h"

namespace colo {

struct RadTask {
  std::string comment;
  std::string environment;  // conda environment, empty if none
  std::string command;
  std::string summary_file;
  std::string dataset;
  int batch = 0;  // 0: unknown
  int gpus = 1;
  std::optional<Bytes> measured_peak;
  std::optional<Bytes> horus;
  std::optional<Bytes> faketensor;
  std::optional<Bytes> gpumemnet;
};

// `origin` names the file in error messages.
Result<RadTask> ParseRad(const std::string& text, const std::string& origin);

}  // namespace colo

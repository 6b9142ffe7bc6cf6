// libFuzzer target: ParseRad on any bytes gives a task within the format's bounds or an error
// naming the file.
#include <string>

#include "common/check.h"
#include "formats/rad.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(colo::fuzz::AsText(data, size));
  const auto task = colo::ParseRad(text, "fuzz.rad");
  if (!task.ok()) {
    COLO_CHECK(task.status().message().starts_with("fuzz.rad"));
    return 0;
  }
  COLO_CHECK(!task->command.empty());
  COLO_CHECK(task->gpus >= 1 && task->gpus <= 64);
  COLO_CHECK(task->batch >= 0 && task->batch <= 1'000'000);
  for (const auto& memory : {task->measured_peak, task->horus, task->faketensor, task->gpumemnet})
    COLO_CHECK(!memory || memory->count() >= 0);
  return 0;
}

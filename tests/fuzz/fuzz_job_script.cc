// libFuzzer target: ParseJobScript (#COLO and #SBATCH lines) and ScriptInterpreter on any bytes
// give values within their documented bounds, or errors and warnings that name the file and print
// as they are (no raw control bytes).
#include <string>

#include "common/check.h"
#include "common/text.h"
#include "common/units.h"
#include "formats/job_script.h"
#include "fuzz_util.h"

namespace {

bool PrintsAsItIs(const std::string& text) {
  return colo::Printable(text) == text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = colo::fuzz::AsText(data, size);
  const auto d = colo::ParseJobScript(text, "fuzz.sh");
  if (d.ok()) {
    COLO_CHECK(!d->gpus || (*d->gpus >= 1 && *d->gpus <= 64));
    COLO_CHECK(!d->threads || (*d->threads >= 1 && *d->threads <= 100));
    COLO_CHECK(!d->smact || (*d->smact >= 0 && *d->smact <= 1));
    if (d->memory) {
      const auto bytes = colo::ParseBytes(*d->memory);
      COLO_CHECK(bytes.ok() && *bytes > colo::Bytes(0) && *bytes <= colo::Bytes(int64_t{1} << 50));
    }
    if (d->share) {
      COLO_CHECK(*d->share == "mps" || *d->share == "plain" || *d->share == "exclusive" ||
                 *d->share == "any");
    }
    if (d->name) {
      COLO_CHECK(!d->name->empty() && d->name->size() <= 256);
      COLO_CHECK(colo::fuzz::IsValidUtf8(*d->name) && PrintsAsItIs(*d->name));
      COLO_CHECK(d->name->find('\t') == std::string::npos);
    }
    for (const auto* value :
         {&d->output, &d->error, &d->time_limit, &d->array, &d->dependency, &d->signal}) {
      if (!*value) continue;
      COLO_CHECK(!(*value)->empty() && (*value)->size() <= 4096);
      COLO_CHECK(colo::fuzz::IsValidUtf8(**value) && PrintsAsItIs(**value));
      COLO_CHECK((*value)->find('\t') == std::string::npos);
    }
    COLO_CHECK(d->any == (d->gpus || d->threads || d->smact || d->memory || d->share || d->name ||
                          d->output || d->error || d->time_limit || d->array || d->dependency ||
                          d->signal || d->requeue.has_value()));
    // #SBATCH options colo does not read: each named with the file and line, printable.
    for (const std::string& warning : d->warnings) {
      COLO_CHECK(warning.starts_with("fuzz.sh:") && PrintsAsItIs(warning));
      COLO_CHECK(warning.size() <= 512);
    }
  } else {
    COLO_CHECK(d.status().message().starts_with("fuzz.sh:"));
    COLO_CHECK(PrintsAsItIs(d.status().message()));
  }

  const auto argv = colo::ScriptInterpreter(text, "fuzz.sh");
  if (argv.ok()) {
    COLO_CHECK(argv->size() == 1 || argv->size() == 2);
    COLO_CHECK(argv->front().starts_with("/"));
    for (const std::string& arg : *argv) {
      COLO_CHECK(!arg.empty() && arg.find('\0') == std::string::npos);
      COLO_CHECK(colo::fuzz::IsValidUtf8(arg));
    }
  } else {
    COLO_CHECK(argv.status().message().starts_with("fuzz.sh:1: "));
    COLO_CHECK(PrintsAsItIs(argv.status().message()));
  }
  return 0;
}

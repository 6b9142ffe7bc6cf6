// A stand-in for libdcgm, for tests only: the calls colo makes, answered from what the test sets
// in the environment, with a log of what was asked (fakeDcgmLog).
//   FAKE_DCGM_HOSTENGINE=1   a host engine answers dcgmConnect (else only embedded mode starts)
//   FAKE_DCGM_NO_PROFILING=1 dcgmWatchFields refuses, as on a GPU without profiling support
// GPU g reads SM activity 0.1*(g+1), occupancy 0.05*(g+1), DRAM activity 0.02*(g+1); GPU 3 has
// blank values (not sampled yet), and a GPU outside the watched group an error.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

namespace {

std::string log_text;
std::set<unsigned> watched;
bool fields_watched = false;

struct FieldValue {
  unsigned int version;
  unsigned short fieldId;
  unsigned short fieldType;
  int status;
  int64_t ts;
  union {
    int64_t i64;
    double dbl;
    char str[256];
    char blob[4096];
  } value;
};

bool Set(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "1") == 0;
}

}  // namespace

extern "C" {

const char* fakeDcgmLog() {
  return log_text.c_str();
}
int dcgmInit() {
  log_text += "init;";
  return 0;
}
int dcgmShutdown() {
  log_text += "shutdown;";
  return 0;
}
const char* errorString(int r) {
  return r == -6 ? "This request is not supported" : "Error";
}
int dcgmConnect(const char* address, uintptr_t* handle) {
  if (!Set("FAKE_DCGM_HOSTENGINE")) return -7;  // DCGM_ST_CONNECTION_NOT_VALID
  log_text += std::string("connect ") + address + ";";
  *handle = 11;
  return 0;
}
int dcgmDisconnect(uintptr_t) {
  log_text += "disconnect;";
  return 0;
}
int dcgmStartEmbedded(int mode, uintptr_t* handle) {
  log_text += "embedded mode " + std::to_string(mode) + ";";
  *handle = 22;
  return 0;
}
int dcgmStopEmbedded(uintptr_t) {
  log_text += "stop embedded;";
  return 0;
}
int dcgmGroupCreate(uintptr_t, int type, const char*, uintptr_t* group) {
  log_text += "group type " + std::to_string(type) + ";";
  *group = 5;
  return 0;
}
int dcgmGroupAddDevice(uintptr_t, uintptr_t, unsigned int gpu) {
  log_text += "add " + std::to_string(gpu) + ";";
  watched.insert(gpu);
  return 0;
}
int dcgmGroupDestroy(uintptr_t, uintptr_t) {
  log_text += "destroy group;";
  watched.clear();
  return 0;
}
int dcgmFieldGroupCreate(uintptr_t, int count, unsigned short* fields, const char*,
                         uintptr_t* group) {
  log_text += "fields";
  for (int i = 0; i < count; ++i) log_text += " " + std::to_string(fields[i]);
  log_text += ";";
  *group = 6;
  return 0;
}
int dcgmFieldGroupDestroy(uintptr_t, uintptr_t) {
  log_text += "destroy fields;";
  return 0;
}
int dcgmWatchFields(uintptr_t, uintptr_t, uintptr_t, long long every_us, double, int) {
  if (Set("FAKE_DCGM_NO_PROFILING")) return -6;  // DCGM_ST_NOT_SUPPORTED
  log_text += "watch every " + std::to_string(every_us) + ";";
  fields_watched = true;
  return 0;
}
int dcgmGetLatestValuesForFields(uintptr_t, int gpu, unsigned short* fields, unsigned int count,
                                 FieldValue* values) {
  if (!fields_watched || !watched.count(static_cast<unsigned>(gpu))) return -5;
  const double scale[] = {0.1, 0.05, 0.02};
  for (unsigned int i = 0; i < count && i < 3; ++i) {
    if (values[i].version != (sizeof(FieldValue) | (1u << 24))) return -9;  // version mismatch
    values[i].fieldId = fields[i];
    values[i].fieldType = 'd';
    values[i].status = 0;
    values[i].value.dbl = gpu == 3 ? 140737488355328.0 : scale[i] * (gpu + 1);
  }
  return 0;
}

}  // extern "C"

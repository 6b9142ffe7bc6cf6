#include "gpu/dcgm.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace colo {
namespace {

// DCGM's C ABI (dcgm_structs.h, dcgm_agent.h; stable from DCGM 2 to 4).
using dcgmReturn_t = int;
using dcgmHandle_t = uintptr_t;
using dcgmGpuGrp_t = uintptr_t;
using dcgmFieldGrp_t = uintptr_t;
constexpr dcgmReturn_t kOk = 0;
constexpr int kOperationModeAuto = 1;  // DCGM updates watched fields on its own
constexpr int kGroupEmpty = 1;         // DCGM_GROUP_EMPTY
constexpr unsigned short kFieldTypeDouble = 'd';
constexpr double kBlankDouble = 140737488355328.0;  // DCGM_FP64_BLANK: no value
constexpr unsigned short kSmActive = 1002;          // DCGM_FI_PROF_SM_ACTIVE
constexpr unsigned short kSmOccupancy = 1003;       // DCGM_FI_PROF_SM_OCCUPANCY
constexpr unsigned short kDramActive = 1005;        // DCGM_FI_PROF_DRAM_ACTIVE

struct dcgmFieldValue_v1 {
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
constexpr unsigned int kFieldValueVersion1 =
    static_cast<unsigned int>(sizeof(dcgmFieldValue_v1) | (1u << 24));

struct DcgmApi {
  void* library = nullptr;
  dcgmReturn_t (*Init)() = nullptr;
  dcgmReturn_t (*Shutdown)() = nullptr;
  const char* (*ErrorString)(dcgmReturn_t) = nullptr;
  dcgmReturn_t (*Connect)(const char*, dcgmHandle_t*) = nullptr;
  dcgmReturn_t (*Disconnect)(dcgmHandle_t) = nullptr;
  dcgmReturn_t (*StartEmbedded)(int, dcgmHandle_t*) = nullptr;
  dcgmReturn_t (*StopEmbedded)(dcgmHandle_t) = nullptr;
  dcgmReturn_t (*GroupCreate)(dcgmHandle_t, int, const char*, dcgmGpuGrp_t*) = nullptr;
  dcgmReturn_t (*GroupAddDevice)(dcgmHandle_t, dcgmGpuGrp_t, unsigned int) = nullptr;
  dcgmReturn_t (*GroupDestroy)(dcgmHandle_t, dcgmGpuGrp_t) = nullptr;
  dcgmReturn_t (*FieldGroupCreate)(dcgmHandle_t, int, unsigned short*, const char*,
                                   dcgmFieldGrp_t*) = nullptr;
  dcgmReturn_t (*FieldGroupDestroy)(dcgmHandle_t, dcgmFieldGrp_t) = nullptr;
  dcgmReturn_t (*WatchFields)(dcgmHandle_t, dcgmGpuGrp_t, dcgmFieldGrp_t, long long, double,
                              int) = nullptr;
  dcgmReturn_t (*GetLatestValuesForFields)(dcgmHandle_t, int, unsigned short*, unsigned int,
                                           dcgmFieldValue_v1*) = nullptr;

  std::string Error(dcgmReturn_t r) const {
    const char* text = ErrorString ? ErrorString(r) : nullptr;
    return text ? fmt::format("{} ({})", text, r) : fmt::format("DCGM error {}", r);
  }
};

template <typename F>
bool Bind(void* library, const char* symbol, F*& out) {
  out = reinterpret_cast<F*>(dlsym(library, symbol));
  return out != nullptr;
}

class Dcgm final : public DcgmProfiler {
 public:
  Dcgm(DcgmApi api, dcgmHandle_t handle, bool embedded)
      : api_(api), handle_(handle), embedded_(embedded) {}
  ~Dcgm() override {
    if (field_group_) api_.FieldGroupDestroy(handle_, field_group_);
    if (group_) api_.GroupDestroy(handle_, group_);
    if (embedded_)
      api_.StopEmbedded(handle_);
    else
      api_.Disconnect(handle_);
    api_.Shutdown();
    // The library stays loaded: DCGM's threads may outlive the calls above by a moment.
  }

  std::string mode() const override { return embedded_ ? "embedded" : "hostengine"; }

  Status Watch(const std::vector<unsigned>& gpus, Duration interval) {
    // Names are per host engine: one of its own per colod.
    const std::string name = fmt::format("colod-{}", getpid());
    if (dcgmReturn_t r = api_.GroupCreate(handle_, kGroupEmpty, name.c_str(), &group_); r != kOk)
      return Unavailable("DCGM cannot create a GPU group: " + api_.Error(r));
    for (unsigned gpu : gpus) {
      if (dcgmReturn_t r = api_.GroupAddDevice(handle_, group_, gpu); r != kOk)
        return Unavailable(fmt::format("DCGM cannot watch GPU {}: {}", gpu, api_.Error(r)));
    }
    unsigned short fields[] = {kSmActive, kSmOccupancy, kDramActive};
    if (dcgmReturn_t r = api_.FieldGroupCreate(handle_, 3, fields, name.c_str(), &field_group_);
        r != kOk)
      return Unavailable("DCGM cannot create a field group: " + api_.Error(r));
    const long long every_us = std::max<long long>(100'000, interval.count());
    if (dcgmReturn_t r = api_.WatchFields(handle_, group_, field_group_, every_us, 10.0, 0);
        r != kOk) {
      return Unavailable(
          "DCGM cannot watch the profiling fields (SM activity, occupancy, DRAM activity): " +
          api_.Error(r) + "; does this GPU support DCGM profiling, and is no other tool using it?");
    }
    return Status::Ok();
  }

  DcgmReading Read(unsigned gpu) override {
    unsigned short fields[] = {kSmActive, kSmOccupancy, kDramActive};
    dcgmFieldValue_v1 values[3] = {};
    for (auto& v : values) v.version = kFieldValueVersion1;
    DcgmReading out;
    if (api_.GetLatestValuesForFields(handle_, static_cast<int>(gpu), fields, 3, values) != kOk)
      return out;
    double* targets[] = {&out.smact, &out.smocc, &out.drama};
    for (int i = 0; i < 3; ++i) {
      const dcgmFieldValue_v1& v = values[i];
      // A field DCGM has not sampled yet, or cannot, is blank: unknown, not zero.
      if (v.status != kOk || v.fieldId != fields[i] || v.fieldType != kFieldTypeDouble ||
          !(v.value.dbl >= 0) || v.value.dbl >= kBlankDouble)
        continue;
      *targets[i] = std::clamp(v.value.dbl, 0.0, 1.0);
    }
    return out;
  }

 private:
  DcgmApi api_;
  dcgmHandle_t handle_;
  bool embedded_;
  dcgmGpuGrp_t group_ = 0;
  dcgmFieldGrp_t field_group_ = 0;
};

}  // namespace

Result<std::unique_ptr<DcgmProfiler>> OpenDcgm(const std::vector<unsigned>& gpus,
                                               Duration interval) {
  std::vector<std::string> candidates;
  if (const char* explicit_path = std::getenv("COLO_DCGM_LIBRARY"); explicit_path && *explicit_path)
    candidates.push_back(explicit_path);
  candidates.insert(candidates.end(), {"libdcgm.so.4", "libdcgm.so.3"});
  DcgmApi api;
  std::string tried;
  for (const auto& path : candidates) {
    api.library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.library) break;
    tried += fmt::format("; {}: {}", path, dlerror());
  }
  if (!api.library) return Unavailable("DCGM is not installed (tried" + tried.substr(1) + ")");
  void* lib = api.library;
  const bool bound = Bind(lib, "dcgmInit", api.Init) && Bind(lib, "dcgmShutdown", api.Shutdown) &&
                     Bind(lib, "errorString", api.ErrorString) &&
                     Bind(lib, "dcgmConnect", api.Connect) &&
                     Bind(lib, "dcgmDisconnect", api.Disconnect) &&
                     Bind(lib, "dcgmStartEmbedded", api.StartEmbedded) &&
                     Bind(lib, "dcgmStopEmbedded", api.StopEmbedded) &&
                     Bind(lib, "dcgmGroupCreate", api.GroupCreate) &&
                     Bind(lib, "dcgmGroupAddDevice", api.GroupAddDevice) &&
                     Bind(lib, "dcgmGroupDestroy", api.GroupDestroy) &&
                     Bind(lib, "dcgmFieldGroupCreate", api.FieldGroupCreate) &&
                     Bind(lib, "dcgmFieldGroupDestroy", api.FieldGroupDestroy) &&
                     Bind(lib, "dcgmWatchFields", api.WatchFields) &&
                     Bind(lib, "dcgmGetLatestValuesForFields", api.GetLatestValuesForFields);
  if (!bound) {
    const char* error = dlerror();
    dlclose(lib);
    return Unavailable(fmt::format("DCGM is too old: {}", error ? error : "a symbol is missing"));
  }
  if (dcgmReturn_t r = api.Init(); r != kOk) {
    dlclose(lib);
    return Unavailable("DCGM did not initialise: " + api.Error(r));
  }
  // A running host engine owns the profiling counters (only one reader per GPU): use it when
  // there is one, else run DCGM inside colod.
  dcgmHandle_t handle = 0;
  bool embedded = false;
  if (api.Connect("127.0.0.1", &handle) != kOk) {
    embedded = true;
    if (dcgmReturn_t r = api.StartEmbedded(kOperationModeAuto, &handle); r != kOk) {
      api.Shutdown();
      return Unavailable("DCGM: no nv-hostengine answers, and embedded DCGM did not start: " +
                         api.Error(r));
    }
  }
  auto dcgm = std::make_unique<Dcgm>(api, handle, embedded);
  if (Status s = dcgm->Watch(gpus, interval); !s.ok()) return s;
  return std::unique_ptr<DcgmProfiler>(std::move(dcgm));
}

}  // namespace colo

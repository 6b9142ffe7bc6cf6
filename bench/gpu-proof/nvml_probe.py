"""Reads NVML directly (pynvml), independently of colod, to check what `colo gpus` reports:
memory used, power, the energy counter, and GPM SM activity/occupancy over one second."""
import json
import sys
import time

import pynvml as n

n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
first = n.nvmlGpmSampleAlloc()
n.nvmlGpmSampleGet(h, first)
time.sleep(1.0)
second = n.nvmlGpmSampleAlloc()
n.nvmlGpmSampleGet(h, second)
get = n.c_nvmlGpmMetricsGet_t()
get.version = n.NVML_GPM_METRICS_GET_VERSION
get.numMetrics = 2
get.sample1 = first
get.sample2 = second
get.metrics[0].metricId = n.NVML_GPM_METRIC_SM_UTIL
get.metrics[1].metricId = n.NVML_GPM_METRIC_SM_OCCUPANCY
n.nvmlGpmMetricsGet(get)
print(json.dumps({
    "time": time.time(),
    "memory_used_gib": n.nvmlDeviceGetMemoryInfo(h).used / 2**30,
    "power_w": n.nvmlDeviceGetPowerUsage(h) / 1000,
    "energy_kj": n.nvmlDeviceGetTotalEnergyConsumption(h) / 1e6,
    "smact": get.metrics[0].value / 100,
    "smocc": get.metrics[1].value / 100,
}))

#!/usr/bin/env python3
"""colo-calibrate: measure, on this GPU with this driver and torch, the GPU memory a training process
holds outside PyTorch's caching allocator (CUDA context, kernels, cuBLAS/cuDNN libraries) and the
cuBLAS workspaces the allocator keeps. colo adds both to a replayed trace's peak.

    colo-calibrate [-o profile.json]

Run it on an otherwise idle GPU (other processes do not disturb it: NVML reports memory per
process). Standard library, torch and NVML (libnvidia-ml, through ctypes) only.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import sys


class _ProcessInfo(ctypes.Structure):
    # nvmlProcessInfo_t (v2/v3 layout): pid, usedGpuMemory, gpuInstanceId, computeInstanceId.
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Nvml:
    """The three NVML calls needed to read one process's memory, through ctypes."""

    def __init__(self):
        names = [os.environ.get("COLO_NVML_LIBRARY", ""), "libnvidia-ml.so.1",
                 "/usr/local/nvidia/lib64/libnvidia-ml.so.1"]
        self.lib = None
        for name in filter(None, names):
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if self.lib is None:
            raise RuntimeError("libnvidia-ml.so.1 not found")
        self._check(self.lib.nvmlInit_v2(), "nvmlInit")

    def _check(self, code, what):
        if code != 0:
            raise RuntimeError(f"{what} failed with NVML error {code}")

    def handle(self, index):
        handle = ctypes.c_void_p()
        self._check(self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)),
                    "nvmlDeviceGetHandleByIndex")
        return handle

    def process_memory(self, handle):
        """{pid: bytes} for every compute process on the device."""
        count = ctypes.c_uint(256)
        infos = (_ProcessInfo * 256)()
        self._check(self.lib.nvmlDeviceGetComputeRunningProcesses_v3(handle, ctypes.byref(count), infos),
                    "nvmlDeviceGetComputeRunningProcesses")
        return {infos[i].pid: infos[i].usedGpuMemory for i in range(count.value)}

    def name(self, handle):
        buf = ctypes.create_string_buffer(96)
        self._check(self.lib.nvmlDeviceGetName(handle, buf, 96), "nvmlDeviceGetName")
        return buf.value.decode()

    def driver(self):
        buf = ctypes.create_string_buffer(96)
        self._check(self.lib.nvmlSystemGetDriverVersion(buf, 96), "nvmlSystemGetDriverVersion")
        return buf.value.decode()


def nvml_index_of_current_device(nvml):
    """NVML numbers GPUs by PCI order, CUDA may not: match by UUID when visible devices are set."""
    import torch

    uuid = str(torch.cuda.get_device_properties(0).uuid)
    for index in range(64):
        try:
            handle = nvml.handle(index)
        except RuntimeError:
            break
        buf = ctypes.create_string_buffer(96)
        if nvml.lib.nvmlDeviceGetUUID(handle, buf, 96) == 0 and uuid in buf.value.decode():
            return index
    return 0


def calibrate():
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device visible")
    nvml = Nvml()
    handle = nvml.handle(nvml_index_of_current_device(nvml))
    pid = os.getpid()
    device = torch.device("cuda")

    # cuBLAS: one workspace per (handle, stream); the forward runs on this thread, the backward on
    # the autograd engine's device thread, each with its own handle.
    a = torch.randn(512, 512, device=device, requires_grad=True)
    b = torch.randn(512, 512, device=device, requires_grad=True)
    before = torch.cuda.memory_allocated()
    (a @ b).sum().backward()
    torch.cuda.synchronize()
    grads = a.grad.numel() * 4 + b.grad.numel() * 4
    cublas_workspaces = torch.cuda.memory_allocated() - before - grads

    # cuDNN and the convolution kernels a CNN loads.
    x = torch.randn(8, 3, 64, 64, device=device, requires_grad=True)
    w = torch.randn(16, 3, 3, 3, device=device, requires_grad=True)
    F.conv2d(x, w, padding=1).relu().sum().backward()
    torch.cuda.synchronize()
    del a, b, x, w
    torch.cuda.empty_cache()
    reserved = torch.cuda.memory_reserved()
    used = nvml.process_memory(handle).get(pid)
    if used is None:
        raise RuntimeError("NVML does not list this process (a PID namespace hides it?)")
    props = torch.cuda.get_device_properties(0)
    return {
        "format": "colo-gpu-calibration",
        "version": 1,
        "gpu": nvml.name(handle),
        "compute_capability": f"{props.major}.{props.minor}",
        "total_memory_bytes": props.total_memory,
        "driver": nvml.driver(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "python": platform.python_version(),
        "context_bytes": used - reserved,
        "cublas_workspace_bytes": cublas_workspaces,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="colo-calibrate", description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", help="write the profile here (default: print it)")
    args = parser.parse_args(argv)
    try:
        result = calibrate()
    except RuntimeError as error:
        print(f"colo-calibrate: {error}", file=sys.stderr)
        return 1
    text = json.dumps(result, indent=1) + "\n"
    if args.output:
        with open(args.output, "w") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

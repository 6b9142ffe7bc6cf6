#!/usr/bin/env python3
"""colo-calibrate: measure, on this GPU with this driver and torch, the GPU memory a training process
holds outside PyTorch's caching allocator (CUDA context, kernels, cuBLAS/cuDNN libraries) and the
cuBLAS workspaces the allocator keeps. colo adds both to a replayed trace's peak.

    colo-calibrate [-o profile.json] [--mps] [--no-conv] [--conv-models torchvision:NAME,timm:NAME]

It also measures the workspaces cuDNN takes for convolutions on this GPU (forward and backward, with
and without cudnn.benchmark, fp32 and bf16): per byte of a convolution's tensors for 24 typical
shapes, and, one by one, the exact workspaces of every convolution in widely used image models
(torchvision's and timm's; more with --conv-models) at the batch sizes people train with (16 to 256). colo's trace estimator
allocates them where a profile recorded a convolution. With --mps it starts an MPS
control daemon of its own (own pipe and log folders; stopped before it exits), runs a client under
it and records what moves into the MPS server (the client's context), what NVML reports for a
client, and how much a client can allocate under CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: colod uses these
to plan and to read observed peaks under MPS.

Run it on an otherwise idle GPU (other processes do not disturb it: NVML reports memory per
process). Standard library, torch and NVML (libnvidia-ml, through ctypes) only.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
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


# Convolutions of the shapes CNNs train with: (in channels, out channels, kernel, stride, size,
# groups). Stems, 3x3, pointwise, depthwise and grouped ones, large and small images.
CONV_SHAPES = [(3, 64, 7, 2, 224, 1), (3, 64, 3, 1, 224, 1), (3, 32, 3, 2, 224, 1),
               (3, 96, 4, 4, 224, 1), (64, 64, 3, 1, 224, 1), (64, 64, 3, 1, 112, 1),
               (64, 64, 3, 1, 56, 1), (64, 256, 1, 1, 56, 1), (256, 64, 1, 1, 56, 1),
               (128, 128, 3, 1, 56, 1), (128, 128, 3, 2, 56, 1), (256, 256, 3, 1, 28, 1),
               (512, 512, 3, 1, 14, 1), (512, 512, 3, 1, 7, 1), (32, 32, 3, 1, 112, 1),
               (1024, 256, 1, 1, 14, 1), (64, 192, 5, 1, 28, 1), (96, 96, 3, 1, 56, 96),
               (144, 144, 3, 2, 56, 144), (384, 384, 3, 1, 28, 384), (96, 96, 7, 1, 56, 96),
               (240, 240, 5, 1, 28, 240), (128, 128, 3, 1, 56, 32), (64, 64, 3, 1, 32, 1),
               (72, 72, 3, 1, 56, 3)]


def group_padding(in_channels, groups):
    """As colo's estimator reads a grouped convolution: cuDNN runs each group at a power-of-two
    channel count (a group of 24 channels at 32), and the workspace grows with the padding."""
    if groups <= 1 or groups == in_channels:
        return 1.0
    width = in_channels // groups
    return (1 << (width - 1).bit_length()) / width


def conv_workspaces(batches=(32, 128)):
    """The workspace cuDNN takes in each pass of a convolution: the allocator's peak during the
    call beyond what was live before it and what it returns, against the call's largest tensor
    (what a profile records)."""
    import torch
    import torch.nn.functional as F

    samples = []
    device = torch.device("cuda")
    saved = torch.backends.cudnn.benchmark
    try:
        for benchmark in (False, True):
            torch.backends.cudnn.benchmark = benchmark
            for dtype in (torch.float32, torch.bfloat16):
                for cin, cout, k, stride, size, groups in CONV_SHAPES:
                    for batch in batches:
                        x = torch.randn(batch, cin, size, size, device=device, dtype=dtype,
                                        requires_grad=cin != 3)
                        w = torch.randn(cout, cin // groups, k, k, device=device, dtype=dtype,
                                        requires_grad=True)
                        conv = functools.partial(F.conv2d, stride=stride, padding=k // 2, groups=groups)
                        if benchmark:  # the first call benchmarks; its trial workspaces are not kept
                            y = conv(x, w)
                            torch.autograd.grad(y, [t for t in (x, w) if t.requires_grad],
                                                torch.ones_like(y))
                            del y
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                        live = torch.cuda.memory_allocated()
                        y = conv(x, w)
                        torch.cuda.synchronize()
                        out_bytes = y.numel() * y.element_size()
                        forward = torch.cuda.max_memory_allocated() - live - out_bytes
                        g = torch.ones_like(y)
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                        live = torch.cuda.memory_allocated()
                        grads = torch.autograd.grad(y, [t for t in (x, w) if t.requires_grad], g)
                        torch.cuda.synchronize()
                        grad_bytes = sum(t.numel() * t.element_size() for t in grads)
                        backward = torch.cuda.max_memory_allocated() - live - grad_bytes
                        in_bytes = x.numel() * x.element_size()
                        weight_bytes = w.numel() * w.element_size()
                        samples.append({
                            "benchmark": benchmark, "dtype": str(dtype).replace("torch.", ""),
                            "shape": [batch, cin, cout, k, stride, size, groups],
                            "class": conv_class(k, k, cin, groups),
                            "input_bytes": in_bytes, "output_bytes": out_bytes,
                            "weight_bytes": weight_bytes,
                            "largest_bytes": max(in_bytes, out_bytes, weight_bytes),
                            "forward_bytes": max(0, forward), "backward_bytes": max(0, backward)})
                        del x, w, y, g, grads
                        torch.cuda.empty_cache()
    finally:
        torch.backends.cudnn.benchmark = saved
    # Per pass, class and cudnn.benchmark setting: the workspace per byte of the call's input,
    # output and weight together (cuDNN's implicit-GEMM kernels take about that much; a grouped
    # call's padded to its groups' power-of-two width), as the median and the largest over the
    # shapes measured.
    coefficients = {}
    for benchmark in (False, True):
        mode = "benchmark" if benchmark else "heuristic"
        for direction in ("forward", "backward"):
            for cls in sorted({s["class"] for s in samples}):
                ratios = sorted(
                    s[f"{direction}_bytes"] / (group_padding(s["shape"][1], s["shape"][6]) * (
                        s["input_bytes"] + s["output_bytes"] + s["weight_bytes"]))
                    for s in samples if s["benchmark"] == benchmark and s["class"] == cls)
                if ratios:
                    coefficients.setdefault(mode, {}).setdefault(direction, {})[cls] = {
                        "median": round(ratios[len(ratios) // 2], 4), "max": round(ratios[-1], 4)}
    return {"coefficients": coefficients, "samples": samples}


# Image models whose convolutions colo-calibrate measures one by one (--conv-models adds more):
# cuDNN's heuristics pick an algorithm, and with it a workspace, per geometry, and two nearby
# geometries can differ by the whole workspace, so per-class coefficients alone miss by as much as
# a fifth of a conv-heavy model's peak. Each at the image size it trains at (below), at the batch
# sizes people train with; other batches are interpolated.
CATALOGUE_MODELS = [
    "torchvision:" + name for name in (
        "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "wide_resnet50_2",
        "resnext50_32x4d", "vgg11", "vgg13", "vgg16", "vgg19", "densenet121", "densenet169",
        "densenet201", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
        "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3",
        "efficientnet_b4", "convnext_tiny", "convnext_small", "convnext_base", "regnet_y_400mf",
        "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf", "inception_v3", "googlenet",
        "squeezenet1_1", "shufflenet_v2_x1_0", "alexnet", "mnasnet1_0")
] + [
    "timm:" + name for name in (
        "resnet26d", "resnet50d", "efficientnet_b0", "efficientnet_b2", "efficientnet_b3",
        "mobilenetv3_large_100", "regnety_016", "convnext_tiny", "vit_small_patch16_224",
        "vit_base_patch16_224", "deit_small_patch16_224", "swin_tiny_patch4_window7_224")
]
CATALOGUE_BATCHES = (16, 32, 64, 128, 256)


def model_convolutions(models):
    """Every distinct conv2d call the models make on one image, found on the meta device (no GPU
    memory, no kernels): (image shape without the batch, weight shape, stride, padding, dilation,
    groups, whether the input or weight is channels-last). A model that cannot be built here (timm missing, no meta kernel) is skipped, named on
    stderr."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    found = {}

    class Calls(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in (F.conv2d, torch.conv2d):
                names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
                call = dict(zip(names, args), **kwargs)
                x, w = call["input"], call["weight"]

                def pair(v):
                    return list(v) if isinstance(v, (tuple, list)) else [v, v]
                padding = call.get("padding", 0)
                # The layout ATen picks cuDNN's kernels by: channels-last (ConvNeXt's depthwise
                # convolutions read the permuted output of the block before) or contiguous.
                nhwc = any(t.dim() == 4 and not t.is_contiguous() and
                           t.is_contiguous(memory_format=torch.channels_last) for t in (x, w))
                key = (tuple(x.shape[1:]), tuple(w.shape), tuple(pair(call.get("stride", 1))),
                       padding if isinstance(padding, str) else tuple(pair(padding)),
                       tuple(pair(call.get("dilation", 1))), int(call.get("groups", 1)), nhwc)
                found.setdefault(key, None)
            return func(*args, **kwargs)

    def build(source, name):
        if source == "timm":
            import timm
            return timm.create_model(name, pretrained=False)
        import torchvision
        options = {"aux_logits": False, "init_weights": False} if name in (
            "inception_v3", "googlenet") else {}
        return getattr(torchvision.models, name)(weights=None, **options)

    def image_sizes(model, name):
        # The sizes the model trains at: timm's own (EfficientNet-B3 at 288), else 224 (Inception
        # v3: 299); 224 as well for a timm model that prefers another.
        sizes = {299 if name == "inception_v3" else 224}
        config = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None)
        if isinstance(config, dict) and len(config.get("input_size", ())) == 3:
            sizes.add(int(config["input_size"][1]))
        return sorted(sizes)

    for spec in models:
        source, _, name = spec.partition(":")
        try:
            try:  # on the meta device: no memory, no kernels
                with torch.device("meta"):
                    model = build(source, name)
                device = "meta"
                for size in image_sizes(model, name):
                    with torch.no_grad(), Calls():
                        model.eval()(torch.empty(1, 3, size, size, device=device))
            except (NotImplementedError, RuntimeError):
                # Some constructors and operators have no meta implementation: one image on the
                # CPU instead.
                model = build(source, name)
                for size in image_sizes(model, name):
                    with torch.no_grad(), Calls():
                        model.eval()(torch.zeros(1, 3, size, size))
        except Exception as error:  # a model this torch/torchvision/timm cannot build
            print(f"colo-calibrate: skipping {spec}: {type(error).__name__}: {error}"[:300],
                  file=sys.stderr)
    return list(found)


def workspaces_during(torch, run):
    """The allocations `run` makes and frees before it returns, in order: the library workspaces
    of the call (its outputs stay alive and are not counted). Read from the caching allocator's own
    history of the call."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=100_000)
    try:
        before = len(torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()])
        result = run()
        torch.cuda.synchronize()
        trace = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    sizes, order = {}, []
    for entry in trace[before:]:
        if entry["action"] == "alloc":
            sizes[entry["addr"]] = entry["size"]
            order.append(entry["addr"])
        elif entry["action"] in ("free_requested", "free_completed") and entry["addr"] in sizes:
            order[order.index(entry["addr"])] = (sizes.pop(entry["addr"]),)
    return result, [item[0] for item in order if isinstance(item, tuple)]


def conv_catalogue(models=CATALOGUE_MODELS, batches=CATALOGUE_BATCHES):
    """cuDNN's workspaces for each convolution of `models`, measured one at a time with the
    default heuristics (cudnn.benchmark off), fp32 and bf16, at each batch size: the sizes each
    pass allocated and freed, in order. A backward computes the input's gradient (data
    workspace) and then the weight's (filter workspace), except for a stem (an image of at most 4
    channels), whose input needs none. Keyed as a profile records a call: bytes of the input and
    output per sample, weight bytes, kernel, input channels and groups."""
    import torch
    import torch.nn.functional as F

    device = torch.device("cuda")
    saved = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    calls, failed = [], 0
    try:
        for image, weight, stride, padding, dilation, groups, nhwc in model_convolutions(models):
            layout = torch.channels_last if nhwc else torch.contiguous_format
            for dtype in (torch.float32, torch.bfloat16):
                rows = {}
                for batch in batches:
                    try:
                        x = torch.randn((batch, *image), device=device, dtype=dtype).contiguous(
                            memory_format=layout).requires_grad_(image[0] > 4)
                        w = torch.randn(weight, device=device, dtype=dtype, requires_grad=True)
                        conv = functools.partial(F.conv2d, stride=stride, padding=padding,
                                                 dilation=dilation, groups=groups)
                        wanted = [t for t in (x, w) if t.requires_grad]
                        # The first call of a geometry builds cuDNN's plans; training's later
                        # steps, where the peak is, run the built ones.
                        y = conv(x, w)
                        torch.autograd.grad(y, wanted, torch.ones_like(y))
                        del y
                        y, forward = workspaces_during(torch, lambda: conv(x, w))
                        g = torch.ones_like(y)
                        _, backward = workspaces_during(
                            torch, lambda: torch.autograd.grad(y, wanted, g))
                        rows[batch] = (x.nbytes // batch, y.nbytes // batch, w.nbytes,
                                       forward, backward)
                        del x, w, y, g
                    except RuntimeError as error:  # out of memory at the larger batch
                        failed += 1
                        print(f"colo-calibrate: conv {image} {weight} at batch {batch}: "
                              f"{str(error).splitlines()[0]}"[:300], file=sys.stderr)
                    torch.cuda.empty_cache()
                if len(rows) != len(batches):
                    continue
                first = rows[batches[0]]
                kernel = list(weight[2:])
                for backward in (False, True):
                    calls.append((nhwc, [int(backward), first[0], first[1], first[2], kernel[0],
                                         kernel[1], image[0], groups] +
                                  [rows[b][4 if backward else 3] for b in batches]))
    finally:
        torch.backends.cudnn.benchmark = saved
    # Geometries that two models share are measured once; equal keys keep the first measurement.
    # Calls measured with channels-last tensors are listed apart.
    unique = {False: {}, True: {}}
    for nhwc, call in calls:
        unique[nhwc].setdefault(tuple(call[:8]), call)
    return {"batches": list(batches),
            "columns": ["backward", "input_per_sample", "output_per_sample", "weight_bytes",
                        "kernel_h", "kernel_w", "in_channels", "groups"] +
                       [f"workspaces_at_{b}" for b in batches],
            "models": list(models), "failed": failed, "calls": list(unique[False].values()),
            "calls_channels_last": list(unique[True].values())}


def conv_class(kernel_h, kernel_w, in_channels, groups):
    """The kinds of convolution cuDNN treats differently (the same rule as colo's estimator)."""
    if groups > 1 and groups == in_channels:
        return "depthwise"
    if groups > 1:
        return "grouped"
    if kernel_h == 1 and kernel_w == 1:
        return "pointwise"
    if in_channels <= 4:
        return "stem"
    return "general"


def mps_client(limit_bytes):
    """Runs under MPS (child of --mps): what this client's NVML entry and torch see, and how much
    torch can hold before the pinned memory limit stops it."""
    import torch

    nvml = Nvml()
    handle = nvml.handle(nvml_index_of_current_device(nvml))
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    after_init = nvml.process_memory(handle).get(os.getpid(), 0)
    chunks, chunk = [], 64 << 20
    try:
        while len(chunks) * chunk < 4 * limit_bytes:
            chunks.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
    except torch.cuda.OutOfMemoryError as error:
        message = str(error).splitlines()[0]
    else:
        message = None
    torch.cuda.synchronize()
    held = torch.cuda.memory_reserved()
    nvml_at_limit = nvml.process_memory(handle).get(os.getpid(), 0)
    print(json.dumps({"nvml_after_init_bytes": after_init, "reserved_at_limit_bytes": held,
                      "nvml_at_limit_bytes": nvml_at_limit, "oom_message": message}))


def calibrate_mps(limit_bytes=4 << 30):
    """Starts an MPS control daemon of its own, runs one client with a pinned memory limit, and
    stops the daemon (always)."""
    import shutil
    import subprocess
    import tempfile
    import time

    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        raise RuntimeError("nvidia-cuda-mps-control not found")
    folder = tempfile.mkdtemp(prefix="colo-calibrate-mps-")
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=os.path.join(folder, "pipe"),
               CUDA_MPS_LOG_DIRECTORY=os.path.join(folder, "log"))
    os.makedirs(env["CUDA_MPS_PIPE_DIRECTORY"])
    os.makedirs(env["CUDA_MPS_LOG_DIRECTORY"])
    subprocess.run([control, "-d"], env=env, check=True)
    try:
        nvml = Nvml()
        handle = None
        client_env = dict(env, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=f"0={limit_bytes >> 20}M")
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--mps-client",
                              str(limit_bytes)], env=client_env, capture_output=True, text=True,
                             timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"MPS client failed: {out.stderr.strip()[-500:]}")
        client = json.loads(out.stdout.strip().splitlines()[-1])
        handle = nvml.handle(0)
        server = [used for pid, used in nvml.process_memory(handle).items()]
        time.sleep(0.2)
        return {"limit_bytes": limit_bytes, **client,
                "server_processes_bytes": server,
                # What a client's NVML entry leaves out, against the same work without MPS.
                "note": "nvml_* are the client's own entries under MPS"}
    finally:
        subprocess.run([control], input="quit\n", env=env, text=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="colo-calibrate", description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", help="write the profile here (default: print it)")
    parser.add_argument("--mps", action="store_true",
                        help="also calibrate under MPS (starts and stops an MPS daemon of its own)")
    parser.add_argument("--no-conv", action="store_true", help="skip the convolution workspaces")
    parser.add_argument("--conv-models", default="",
                        help="more models whose convolutions to measure one by one "
                             "(torchvision:NAME or timm:NAME, comma-separated)")
    parser.add_argument("--mps-client", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mps_client:
        mps_client(args.mps_client)
        return 0
    try:
        result = calibrate()
        if not args.no_conv:
            result["conv_workspace"] = conv_workspaces()
            extra = [m for m in args.conv_models.split(",") if m]
            result["conv_workspace"]["catalogue"] = conv_catalogue(CATALOGUE_MODELS + extra)
        if args.mps:
            mps = calibrate_mps()
            # Under MPS the client's context lives in the server: the client's NVML entry is
            # what it allocated plus what is left of its context.
            mps["context_bytes"] = mps["nvml_at_limit_bytes"] - mps["reserved_at_limit_bytes"]
            result["mps"] = mps
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

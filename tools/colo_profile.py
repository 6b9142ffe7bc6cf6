#!/usr/bin/env python3
"""colo-profile: describe a PyTorch training job's model for colo's memory estimators.

    colo-profile TARGET --batch B [--batch B2 ...] [--optimizer adam] [--amp] -o model.json

TARGET names a model factory:
    torchvision:resnet50              torchvision.models.get_model(name, weights=None)
    timm:vit_small_patch16_224        timm.create_model(name, pretrained=False)
    hf:gpt2?n_layer=24&n_embd=1024    a Hugging Face model built from its config class (no downloads)
    path/to/train.py:make_model       a function in a script, called with no arguments
    package.module:make_model         a function in an importable module

The model is built and run without a GPU, on fake tensors (torch's FakeTensorMode): no memory is
allocated and no kernel runs. Two things are written:
  * a versioned JSON summary: every layer's type, output shape and parameter count, totals, the
    optimizer, precision, batch size and framework versions;
  * for each batch size, the ordered tensor allocations and frees of full training steps (forward,
    backward, optimizer step), which colo replays through its model of PyTorch's caching allocator.

Only the standard library and torch (plus the library that defines the model) are needed.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import os
import platform
import sys
import time
import urllib.parse
import weakref

SUMMARY_FORMAT = "colo-model-summary"
SUMMARY_VERSION = 1
TRACE_HEADER = "colo-alloc-trace 1"

# Hugging Face model types that train as masked or sequence-to-sequence language models; every
# other type is built as a causal language model.
HF_MASKED = {"bert", "roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2",
             "xlm-roberta", "camembert", "mpnet", "modernbert"}
HF_SEQ2SEQ = {"t5", "mt5", "bart", "mbart", "pegasus", "marian", "led", "umt5"}


class ProfileError(Exception):
    """A problem with the user's request, reported in one line."""


# ----------------------------------------------------------------------------------------------
# Building models and their inputs


def parse_target(target):
    """Splits 'kind:name?key=value&...' into (kind, name, options)."""
    if ":" not in target:
        raise ProfileError(f"target '{target}' must look like KIND:NAME or FILE.py:FACTORY")
    kind, rest = target.split(":", 1)
    name, _, query = rest.partition("?")
    options = {}
    for key, values in urllib.parse.parse_qs(query, keep_blank_values=True).items():
        options[key] = _literal(values[-1])
    return kind, name, options


def _literal(text):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


class ModelSpec:
    """How to build one model and feed it a batch."""

    def __init__(self, target, input_shape=None, seq_len=None):
        self.target = target
        self.kind, self.name, self.options = parse_target(target)
        self.input_shape = input_shape
        self.seq_len = seq_len
        self.vocab = None
        self.tokens = False

    def build(self):
        import torch  # noqa: F401

        kind, name, options = self.kind, self.name, dict(self.options)
        if kind == "torchvision":
            import torchvision

            if self.input_shape is None:
                self.input_shape = (3, 299, 299) if name.startswith("inception") else (3, 224, 224)
            if name.startswith("inception") or name.startswith("googlenet"):
                options.setdefault("init_weights", True)
            return torchvision.models.get_model(name, weights=None, **options)
        if kind == "timm":
            import timm

            model = timm.create_model(name, pretrained=False, **options)
            if self.input_shape is None:
                cfg = getattr(model, "pretrained_cfg", None) or {}
                self.input_shape = tuple(cfg.get("input_size", (3, 224, 224)))
            return model
        if kind == "hf":
            return self._build_hf(name, options)
        return self._build_factory(kind, name, options)

    def _build_hf(self, model_type, options):
        import transformers

        config = transformers.AutoConfig.for_model(model_type, **options)
        if model_type in HF_MASKED:
            auto = transformers.AutoModelForMaskedLM
        elif model_type in HF_SEQ2SEQ:
            auto = transformers.AutoModelForSeq2SeqLM
        else:
            auto = transformers.AutoModelForCausalLM
        self.tokens = True
        self.vocab = int(config.vocab_size)
        if self.seq_len is None:
            limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
            self.seq_len = min(512, int(limit)) if limit else 512
        return auto.from_config(config)

    def _build_factory(self, path, function, options):
        if path.endswith(".py"):
            if not os.path.isfile(path):
                raise ProfileError(f"no such script: {path}")
            spec = importlib.util.spec_from_file_location("colo_user_model", path)
            module = importlib.util.module_from_spec(spec)
            sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
            spec.loader.exec_module(module)
        else:
            try:
                module = importlib.import_module(path)
            except ImportError as error:
                raise ProfileError(f"cannot import module '{path}': {error}") from error
        factory = getattr(module, function, None)
        if not callable(factory):
            raise ProfileError(f"'{path}' has no function '{function}'")
        if self.input_shape is None and not self.tokens:
            self.input_shape = (3, 224, 224)
        return factory(**options)

    def make_batch(self, batch, device):
        """The inputs of one training step, created where a real loader would copy them to."""
        import torch

        if self.tokens:
            ids = torch.randint(0, self.vocab, (batch, self.seq_len), device=device)
            return {"input_ids": ids, "labels": ids}
        return torch.randn((batch,) + tuple(self.input_shape), device=device)


def make_optimizer(name, parameters):
    import torch

    parameters = [p for p in parameters if p.requires_grad]
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=0.01, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(parameters, lr=1e-4)
    if name == "adamw":
        return torch.optim.AdamW(parameters, lr=1e-4)
    raise ProfileError(f"unknown optimizer '{name}' (use sgd, adam or adamw)")


def compute_loss(output, batch_size):
    """The loss a classifier or a language model would train on."""
    import torch
    import torch.nn.functional as F

    loss = getattr(output, "loss", None)
    if loss is not None:
        return loss
    tensors = [t for t in _flatten(output) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if not tensors:
        raise ProfileError("the model's output has no floating-point tensor to train on")
    total = None
    for t in tensors:
        if t.dim() == 2 and t.shape[0] == batch_size:
            target = torch.randint(0, t.shape[1], (batch_size,), device=t.device)
            term = F.cross_entropy(t, target)
        else:
            term = t.float().mean()
        total = term if total is None else total + term
    return total


def _flatten(value):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _flatten(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _flatten(item)
    elif hasattr(value, "to_tuple"):  # Hugging Face ModelOutput
        yield from _flatten(value.to_tuple())
    else:
        yield value


def train(model, spec, batch, optimizer, amp, steps, device, on_step=None):
    """The training loop both the profile and the real run use, written the way training scripts
    usually are: the previous step's output and loss stay referenced until reassigned."""
    import torch

    model.train()
    opt = make_optimizer(optimizer, model.parameters())
    output = loss = None
    for step in range(steps):
        inputs = spec.make_batch(batch, device)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, enabled=amp):
            output = model(**inputs) if isinstance(inputs, dict) else model(inputs)
            loss = compute_loss(output, batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if on_step is not None:
            on_step(step)
    del output, loss, inputs
    return opt


# ----------------------------------------------------------------------------------------------
# The summary


def describe(model, inputs, batch):
    """Layer table and totals, from forward hooks on one forward pass with `inputs`."""
    import torch

    layers = []
    hooks = []
    fired = set()

    def record(name, module, _inputs, output):
        shapes = [list(t.shape) for t in _flatten(output) if isinstance(t, torch.Tensor)]
        shape = shapes[0] if shapes else None
        if shape and shape[0] == batch:
            shape = [-1] + shape[1:]
        fired.add(name)
        layers.append({
            "name": name,
            "type": type(module).__name__,
            "output_shape": shape,
            "parameters": sum(p.numel() for p in module.parameters(recurse=False)),
        })

    modules = dict(model.named_modules())
    for name, module in modules.items():
        leaf = not any(True for _ in module.children())
        own = any(True for _ in module.parameters(recurse=False))
        if name and (leaf or own):
            hooks.append(module.register_forward_hook(functools.partial(record, name)))
    try:
        with torch.no_grad():
            if isinstance(inputs, dict):
                model(**inputs)
            else:
                model(inputs)
    finally:
        for h in hooks:
            h.remove()
    # Modules whose weights are used without calling them (attention output projections, tied
    # heads) still own parameters: list them, without an output shape.
    for name, module in modules.items():
        own = sum(p.numel() for p in module.parameters(recurse=False))
        if name and own and name not in fired:
            layers.append({"name": name, "type": type(module).__name__, "output_shape": None,
                           "parameters": own})
    activations = 0
    for layer in layers:
        shape = layer["output_shape"]
        if shape and shape[0] == -1:
            count = 1
            for d in shape[1:]:
                count *= d
            activations += count
    parameters = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return layers, {
        "parameters": parameters,
        "trainable_parameters": trainable,
        "parameter_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "buffer_bytes": buffers,
        "activations_per_sample": activations,
        "layers": len(layers),
    }


def versions():
    import torch

    found = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("torchvision", "timm", "transformers"):
        module = sys.modules.get(name)
        if module is not None:
            found[name] = getattr(module, "__version__", "?")
    return found


# ----------------------------------------------------------------------------------------------
# Recording allocations on fake tensors


class AllocationRecorder:
    """Sees every ATen call's outputs; a CUDA tensor whose storage it has not seen is a new
    allocation, and the storage's death (a weak reference callback) is its free. Storages, not
    tensors, are the unit: views and saved tensors share their base's storage."""

    def __init__(self, device):
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        import torch

        workspace_ops = {torch.ops.aten.convolution.default: "conv",
                         torch.ops.aten.convolution_backward.default: "conv"}

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in _flatten(out):
                    recorder.track(t)
                kind = workspace_ops.get(func)
                if kind is not None:
                    recorder.workspace(kind, args, out)
                return out

        self.mode = Mode()
        self.device = device
        self.events = []  # ("a", bytes) or ("f", allocation id), in program order
        self.live_bytes = 0
        self.peak_bytes = 0
        self.closed = False
        self._ids = {}     # storage identity -> allocation id
        self._sizes = {}   # allocation id -> bytes
        self._refs = {}    # allocation id -> weak reference keeping the callback alive

    def track(self, t):
        import torch

        if self.closed or not isinstance(t, torch.Tensor) or t.device.type != self.device:
            return
        storage = t.untyped_storage()
        key = storage._cdata
        if key in self._ids:
            return
        size = storage.nbytes()
        if size == 0:
            return
        alloc = len(self._sizes)
        self._ids[key] = alloc
        self._sizes[alloc] = size
        self._refs[alloc] = weakref.ref(storage, functools.partial(self._freed, alloc, key))
        self.events.append(("a", size))
        self.live_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def _freed(self, alloc, key, _ref):
        if self.closed or alloc not in self._refs:
            return
        del self._refs[alloc]
        if self._ids.get(key) == alloc:
            del self._ids[key]
        self.events.append(("f", alloc))
        self.live_bytes -= self._sizes[alloc]

    def workspace(self, kind, args, out):
        """A library workspace the kernel allocates and frees inside the call (cuDNN's for
        convolutions), invisible on fake tensors: its largest input and output are recorded and
        colo sizes it with the target GPU's calibration."""
        import torch

        def largest(values):
            sizes = [t.untyped_storage().nbytes() for t in _flatten(values)
                     if isinstance(t, torch.Tensor) and t.device.type == self.device]
            return max(sizes, default=0)

        if not self.closed:
            self.events.append(("w", f"{kind} {largest(args)} {largest(out)}"))

    def mark(self, label):
        self.events.append(("m", label))

    def close(self):
        self.closed = True

    def write(self, path, header):
        with open(path, "w") as out:
            out.write(TRACE_HEADER + "\n")
            for key, value in header.items():
                out.write(f"# {key} {value}\n")
            for kind, value in self.events:
                out.write(f"{kind} {value}\n")


def trace_device(requested):
    """Fake CUDA tensors take the CUDA code paths (cuDNN, fused attention, CUDA autocast) and need
    no GPU memory, but the autograd engine insists on a visible CUDA device to run their backward.
    Without one, the CPU paths are traced: output sizes are the same for nearly every operator."""
    import torch

    if requested != "auto":
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


def fake_model(spec, fake_mode, device):
    """The model with fake CUDA parameters and buffers. Building under FakeTensorMode is fastest;
    libraries that read values while constructing (`.item()`, `.tolist()`) get a real CPU build
    first. Parameters are replaced one by one rather than through Module.to(), which would swap
    tensors the fake-tensor converter still references."""
    import torch

    try:
        with fake_mode:
            model = spec.build()
        how = "fake"
    except ProfileError:
        raise
    except Exception:  # a data-dependent call during construction
        model = spec.build()
        how = "cpu"
    replaced = {}
    originals = []  # alive until the end, so that no id() is reused while `replaced` is keyed by it

    def on_device(tensor):
        originals.append(tensor)
        key = id(tensor)
        if key not in replaced:
            # A factory, not empty_like: FakeTensorMode runs ops on small constant tensors (a batch
            # norm's counter) for real, which needs a GPU.
            replaced[key] = torch.empty(tensor.shape, dtype=tensor.dtype, device=device)
        return replaced[key]

    with fake_mode:
        for module in model.modules():
            for name, param in list(module._parameters.items()):
                if param is not None:
                    originals.append(param)
                    if id(param) not in replaced:
                        replaced[id(param)] = torch.nn.Parameter(
                            torch.empty(param.shape, dtype=param.dtype, device=device),
                            requires_grad=param.requires_grad)
                    module._parameters[name] = replaced[id(param)]
            for name, buffer in list(module._buffers.items()):
                if buffer is not None:
                    module._buffers[name] = on_device(buffer)
    return model, how


def profile(spec, batches, optimizer, amp, steps, output_path, device="auto"):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    started = time.monotonic()
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    device = trace_device(device)
    # The optimizers ask whether a CUDA graph is being captured, which creates a CUDA context
    # (hundreds of MiB of GPU memory) just to answer no; nothing is captured here.
    torch.optim.Optimizer._cuda_graph_capture_health_check = lambda self: None
    model, built = fake_model(spec, fake_mode, device)
    base, _ = os.path.splitext(output_path)
    traces = []
    layers = totals = None
    with fake_mode:
        layers, totals = describe(model, spec.make_batch(min(batches), device), min(batches))
    for batch in batches:
        recorder = AllocationRecorder(device)
        with fake_mode:
            # The parameters already exist on the device: start the trace with them.
            for tensor in list(model.parameters()) + list(model.buffers()):
                recorder.track(tensor)
            recorder.mark("steps")
            with recorder.mode:
                opt = train(model, spec, batch, optimizer, amp, steps, device,
                            on_step=lambda s: recorder.mark(f"step{s + 1}"))
                del opt
        recorder.close()
        trace_file = f"{base}.b{batch}.trace"
        recorder.write(trace_file, {"batch": batch, "steps": steps})
        traces.append({"batch": batch, "file": os.path.basename(trace_file),
                       "steps": steps, "events": len(recorder.events),
                       "peak_live_bytes": recorder.peak_bytes})
    summary = {
        "format": SUMMARY_FORMAT,
        "version": SUMMARY_VERSION,
        "model": spec.target,
        "batch": min(batches),
        "optimizer": optimizer,
        "precision": "amp-bf16" if amp else "fp32",
        "input": ({"kind": "tokens", "sequence_length": spec.seq_len, "vocabulary": spec.vocab}
                  if spec.tokens else {"kind": "tensor", "shape": list(spec.input_shape)}),
        "framework": versions(),
        "built_on": built,
        "traced_device": device,
        "profile_seconds": round(time.monotonic() - started, 3),
        "totals": totals,
        "layers": layers,
        "traces": traces,
    }
    with open(output_path, "w") as out:
        json.dump(summary, out, indent=1)
        out.write("\n")
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(prog="colo-profile", description=__doc__.split("\n")[0])
    parser.add_argument("target", help="torchvision:NAME, timm:NAME, hf:TYPE[?k=v&...], FILE.py:FACTORY")
    parser.add_argument("--batch", type=int, action="append", required=True,
                        help="batch size (repeat for several traces)")
    parser.add_argument("--optimizer", default="adam", choices=["sgd", "adam", "adamw"])
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast")
    parser.add_argument("--input-shape", help="per-sample input shape, e.g. 3,224,224")
    parser.add_argument("--seq-len", type=int, help="tokens per sample for language models")
    parser.add_argument("--steps", type=int, default=3, help="training steps to record (default 3)")
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"],
                        help="which code paths to trace on fake tensors (auto: cuda if visible)")
    parser.add_argument("-o", "--output", required=True, help="summary file (.json)")
    args = parser.parse_args(argv)
    try:
        if any(b <= 0 for b in args.batch):
            raise ProfileError("--batch must be positive")
        if args.steps < 2:
            raise ProfileError("--steps must be at least 2 (the optimizer's state appears in step 1)")
        shape = None
        if args.input_shape:
            try:
                shape = tuple(int(x) for x in args.input_shape.split(","))
            except ValueError:
                raise ProfileError(f"--input-shape '{args.input_shape}' must be integers separated by commas")
        spec = ModelSpec(args.target, input_shape=shape, seq_len=args.seq_len)
        summary = profile(spec, sorted(set(args.batch)), args.optimizer, args.amp, args.steps,
                          args.output, args.device)
    except ProfileError as error:
        print(f"colo-profile: {error}", file=sys.stderr)
        return 2
    totals = summary["totals"]
    print(f"{args.output}: {totals['parameters']:,} parameters, {totals['layers']} layers, "
          f"{len(summary['traces'])} trace(s) in {summary['profile_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

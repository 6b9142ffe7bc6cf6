"""colo's profiler: describe a PyTorch training job for colo's memory estimators.

A profile is made on fake tensors (torch's FakeTensorMode): no GPU memory is allocated and no kernel
runs, so it takes seconds and works on a machine without a GPU. It runs full training steps of one
*workload* -- a model, the batches it trains on, how the model is called, the loss, the optimizer and
the precision -- and writes:
  * a versioned JSON summary: every layer's type, output shape and parameter count, totals, the
    optimizer, precision, batch size, floating-point operations per step and framework versions;
  * for each batch size, the ordered tensor allocations and frees of full training steps (forward,
    backward, optimizer step), which colo replays through its model of PyTorch's caching allocator.

Workloads come from three places:
  * colo's built-in targets (`colo-profile torchvision:resnet50`, `timm:NAME`, `hf:TYPE` with a task
    head chosen by `--task`);
  * a function in the user's code that returns a `colo.Workload` (`colo-profile --step
    train.py:workload`, or a `FILE.py:FUNCTION` target), so the profile runs the user's own model,
    inputs, loss and optimizer -- or the user's own step function;
  * `colo.profile(model, example_batch, loss_fn, optimizer, amp=...)` called from the user's script.

Only the standard library and torch (plus the library that defines the model) are needed.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import json
import os
import platform
import re
import sys
import time
import traceback
import urllib.parse
import weakref

SUMMARY_FORMAT = "colo-model-summary"
SUMMARY_VERSION = 1
TRACE_HEADER = "colo-alloc-trace 1"

# The task heads `hf:` builds, and what each trains on.
HF_TASKS = {
    "causal-lm": "AutoModelForCausalLM",
    "masked-lm": "AutoModelForMaskedLM",
    "seq2seq-lm": "AutoModelForSeq2SeqLM",
    "sequence-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
}
# The head a model type gets when the user names none: what the architecture was made to pre-train.
HF_MASKED = {"bert", "roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2",
             "xlm-roberta", "camembert", "mpnet", "modernbert"}
HF_SEQ2SEQ = {"t5", "mt5", "bart", "mbart", "pegasus", "marian", "led", "umt5"}


class ProfileError(Exception):
    """A problem with the user's request or code, reported in a few lines the user can act on."""


# ----------------------------------------------------------------------------------------------
# Workloads


class Workload:
    """One training step of a job, as colo profiles it.

    model          a torch.nn.Module (built on the CPU; its weights are never copied to a GPU)
    example_batch  one batch as the data loader yields it: a tensor, or a tuple, list or dict of
                   tensors (token ids, masks, labels, several inputs...); only shapes and dtypes
                   are used. Its first dimension is the batch size; for other batch sizes every
                   tensor whose first dimension is that size is resized along it.
    loss_fn        loss_fn(output, batch) -> scalar tensor. Default: the output's `.loss` (Hugging
                   Face), else cross-entropy on a (batch, classes) output, else the mean.
    optimizer      "sgd", "adam", "adamw", an optimizer built on `model.parameters()` (its class,
                   groups and settings are kept), or a function params -> optimizer.
    amp            False, True or "bf16" (bfloat16 autocast), "fp16" (float16 autocast).
    forward        forward(model, batch) -> output. Default: model(**batch) for a dict,
                   model(*batch) for a tuple or list, model(batch) for a tensor.
    step           step(model, batch, optimizer) running one whole training step of the user's
                   code (forward, loss, backward, optimizer step, zeroing the gradients); when
                   given, forward, loss_fn and amp are the step's business.
    make_batch     make_batch(batch_size, device) -> batch, instead of example_batch.
    name           what the summary calls the model (default: the model's class).
    """

    def __init__(self, model, example_batch=None, loss_fn=None, optimizer="adam", amp=False,
                 forward=None, step=None, make_batch=None, name=None):
        import torch

        if not isinstance(model, torch.nn.Module):
            raise ProfileError(f"the workload's model must be a torch.nn.Module, not {type(model).__name__}")
        if example_batch is None and make_batch is None:
            raise ProfileError("the workload needs an example_batch (or a make_batch function)")
        self.model = model
        self.example_batch = example_batch
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.amp = _amp_dtype(amp)
        self.forward = forward
        self.step = step
        self._make_batch = make_batch
        self.name = name or type(model).__name__
        self.example_size = _batch_size_of(example_batch) if example_batch is not None else None
        self.input_description = (_describe_batch(example_batch) if example_batch is not None
                                  else {"kind": "custom"})

    @property
    def precision(self):
        import torch

        return {None: "fp32", torch.bfloat16: "amp-bf16", torch.float16: "amp-fp16"}[self.amp]

    def batch(self, batch_size, device, fake):
        """One batch of `batch_size` on `device`: fake tensors of the example's shapes and dtypes
        while profiling, real ones (the example's values, repeated) for a real run."""
        if self._make_batch is not None:
            return self._make_batch(batch_size, device)
        return _resize_batch(self.example_batch, self.example_size, batch_size, device, fake)

    def run_forward(self, model, batch):
        if self.forward is not None:
            return self.forward(model, batch)
        if isinstance(batch, dict) or _is_mapping(batch):
            return model(**batch)
        if isinstance(batch, (tuple, list)):
            return model(*batch)
        return model(batch)

    def loss(self, output, batch, batch_size):
        if self.loss_fn is not None:
            return self.loss_fn(output, batch)
        return compute_loss(output, batch_size)

    def make_optimizer(self, model, replaced=None):
        """A fresh optimizer over `model`'s parameters; `replaced` maps id(original parameter) to
        the parameter that took its place (the fake copy)."""
        import torch

        opt = self.optimizer
        if isinstance(opt, str):
            return make_optimizer(opt, model.parameters())
        if isinstance(opt, torch.optim.Optimizer):
            groups = []
            for group in opt.param_groups:
                settings = {k: v for k, v in group.items() if k != "params"}
                params = [(replaced or {}).get(id(p), p) for p in group["params"]]
                groups.append(dict(settings, params=params))
            try:
                return type(opt)(groups, **opt.defaults)
            except TypeError:
                return type(opt)(groups)
        if callable(opt):
            return opt([p for p in model.parameters() if p.requires_grad])
        raise ProfileError(f"optimizer must be a name, an optimizer or a function, not {type(opt).__name__}")

    def autocast(self, device):
        import torch

        if self.amp is None or self.step is not None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=torch.device(device).type, dtype=self.amp)

    def run_step(self, model, batch, batch_size, optimizer, device):
        """One training step, written the way training loops usually are: what it returns (the
        output and loss) stays referenced until the next step replaces it."""
        if self.step is not None:
            return self.step(model, batch, optimizer)
        with self.autocast(device):
            output = self.run_forward(model, batch)
            loss = self.loss(output, batch, batch_size)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return output, loss

    def summary_fields(self):
        optimizer = self.optimizer
        if not isinstance(optimizer, str):
            optimizer = (type(optimizer).__name__.lower() if hasattr(optimizer, "param_groups")
                         else "custom")
        return {"optimizer": optimizer, "precision": self.precision,
                "input": self.input_description}


def _amp_dtype(amp):
    import torch

    if amp in (False, None, "fp32", "off"):
        return None
    if amp in (True, "bf16", "bfloat16", torch.bfloat16):
        return torch.bfloat16
    if amp in ("fp16", "float16", "half", torch.float16):
        return torch.float16
    raise ProfileError(f"amp must be False, True, 'bf16' or 'fp16', not {amp!r}")


def _is_mapping(value):
    from collections.abc import Mapping

    return isinstance(value, Mapping)


def _tensors(value):
    import torch

    return [t for t in _flatten(value) if isinstance(t, torch.Tensor)]


def _batch_size_of(batch):
    tensors = [t for t in _tensors(batch) if t.dim() > 0]
    if not tensors:
        raise ProfileError("the example batch holds no tensor with a batch dimension")
    return int(tensors[0].shape[0])


def _describe_batch(batch):
    """The inputs' shapes and dtypes, with the batch dimension as -1, for the summary."""
    tensors = _tensors(batch)
    tokens = [t for t in tensors if not t.is_floating_point() and t.dim() == 2]
    if tokens and len(tokens) == len([t for t in tensors if t.dim() >= 2]):
        return {"kind": "tokens", "sequence_length": int(tokens[0].shape[1]),
                "tensors": [_shape_entry(t) for t in tensors]}
    shapes = [_shape_entry(t) for t in tensors]
    entry = {"kind": "tensors", "tensors": shapes}
    floats = [t for t in tensors if t.is_floating_point() and t.dim() > 1]
    if floats:
        entry["shape"] = list(floats[0].shape[1:])
    return entry


def _shape_entry(t):
    return {"shape": [-1] + list(t.shape[1:]) if t.dim() else [], "dtype": str(t.dtype).replace("torch.", "")}


def _resize_batch(value, example_size, batch_size, device, fake):
    """`value` with every tensor whose first dimension is the example's batch size resized to
    `batch_size`, on `device`. Fake tensors carry no values; real ones repeat the example's, so
    token ids and labels stay valid."""
    import torch

    if isinstance(value, torch.Tensor):
        shape = list(value.shape)
        resize = value.dim() > 0 and shape[0] == example_size and batch_size != example_size
        if resize:
            shape[0] = batch_size
        if fake:
            return torch.empty(shape, dtype=value.dtype, device=device)
        real = value.to(device)
        if resize:
            repeats = [-(-batch_size // example_size)] + [1] * (value.dim() - 1)
            real = real.repeat(*repeats)[:batch_size]
        return real
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        return type(value)(*(_resize_batch(v, example_size, batch_size, device, fake) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_resize_batch(v, example_size, batch_size, device, fake) for v in value)
    if _is_mapping(value):
        items = {k: _resize_batch(v, example_size, batch_size, device, fake) for k, v in value.items()}
        try:
            return type(value)(items)
        except TypeError:
            return items
    return value


# ----------------------------------------------------------------------------------------------
# colo's built-in targets


def parse_target(target):
    """Splits 'kind:name?key=value&...' into (kind, name, options)."""
    if ":" not in target:
        raise ProfileError(f"target '{target}' must look like KIND:NAME or FILE.py:FUNCTION")
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
    """How to build one of colo's built-in targets and feed it a batch."""

    def __init__(self, target, input_shape=None, seq_len=None, task=None, target_len=None):
        self.target = target
        self.kind, self.name, self.options = parse_target(target)
        self.input_shape = input_shape
        self.seq_len = seq_len
        self.target_len = target_len
        self.task = task
        self.vocab = None
        self.labels = None
        self.tokens = False
        if task is not None and self.kind != "hf":
            raise ProfileError("--task chooses a Hugging Face head: it needs an hf: target")
        if task is not None and task not in HF_TASKS:
            raise ProfileError(f"unknown task '{task}' (use {', '.join(HF_TASKS)})")

    def build(self):
        import torch  # noqa: F401

        kind, name, options = self.kind, self.name, dict(self.options)
        if kind == "torchvision":
            import torchvision

            if self.input_shape is None:
                self.input_shape = (3, 299, 299) if name.startswith("inception") else (3, 224, 224)
            if name.startswith("inception") or name.startswith("googlenet"):
                options.setdefault("init_weights", True)
            try:
                return torchvision.models.get_model(name, weights=None, **options)
            except ValueError as error:
                raise ProfileError(f"torchvision: {error}") from error
        if kind == "timm":
            import timm

            try:
                model = timm.create_model(name, pretrained=False, **options)
            except RuntimeError as error:
                # Only the unknown name is the user's to fix; other errors (a value read while
                # building under fake tensors) make the caller build on the CPU instead.
                if "Unknown model" in str(error):
                    raise ProfileError(f"timm: {error}") from error
                raise
            if self.input_shape is None:
                cfg = getattr(model, "pretrained_cfg", None) or {}
                self.input_shape = tuple(cfg.get("input_size", (3, 224, 224)))
            return model
        if kind == "hf":
            return self._build_hf(name, options)
        raise ProfileError(f"unknown target kind '{kind}' (torchvision:, timm:, hf:, or FILE.py:FUNCTION)")

    def _build_hf(self, model_type, options):
        import transformers

        try:
            config = transformers.AutoConfig.for_model(model_type, **options)
        except ValueError as error:
            raise ProfileError(f"hf: {error}") from error
        if self.task is None:
            self.task = ("masked-lm" if model_type in HF_MASKED
                         else "seq2seq-lm" if model_type in HF_SEQ2SEQ else "causal-lm")
        auto = getattr(transformers, HF_TASKS[self.task])
        self.tokens = True
        self.vocab = int(config.vocab_size)
        self.labels = int(getattr(config, "num_labels", 2) or 2)
        if self.seq_len is None:
            limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
            self.seq_len = min(512, int(limit)) if limit else 512
        try:
            return auto.from_config(config)
        except ValueError as error:
            raise ProfileError(f"hf: {model_type} has no {self.task} head in transformers "
                               f"{transformers.__version__}: {error}") from error

    def make_batch(self, batch, device):
        """The inputs of one training step, created where a real loader would copy them to."""
        import torch

        if not self.tokens:
            return torch.randn((batch,) + tuple(self.input_shape), device=device)
        ids = torch.randint(0, self.vocab, (batch, self.seq_len), device=device)
        # No attention mask: ours would be all ones, which transformers drops on real tensors after
        # reading it (so attention runs unmasked) but must keep on fake ones, whose values it cannot
        # read; a kept mask changes the attention kernels and what they save for the backward pass.
        inputs = {"input_ids": ids}
        if self.task == "sequence-classification":
            inputs["labels"] = torch.randint(0, self.labels, (batch,), device=device)
        elif self.task == "token-classification":
            inputs["labels"] = torch.randint(0, self.labels, (batch, self.seq_len), device=device)
        elif self.task == "seq2seq-lm":
            length = self.target_len or self.seq_len
            inputs["labels"] = torch.randint(0, self.vocab, (batch, length), device=device)
        else:
            inputs["labels"] = ids
        return inputs

    def workload(self, optimizer="adam", amp=False):
        """The target as a workload (built now, on the CPU or under the caller's fake mode)."""
        model = self.build()
        return Workload(model, optimizer=optimizer, amp=amp, name=self.target,
                        make_batch=self.make_batch, loss_fn=None)

    def input_description(self):
        if self.tokens:
            entry = {"kind": "tokens", "sequence_length": self.seq_len, "vocabulary": self.vocab,
                     "task": self.task}
            if self.task in ("sequence-classification", "token-classification"):
                entry["labels"] = self.labels
            return entry
        return {"kind": "tensor", "shape": list(self.input_shape)}


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
        raise ProfileError("the model's output has no floating-point tensor to train on: "
                           "give the workload a loss_fn(output, batch)")
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
    elif isinstance(value, dict) or _is_mapping(value):
        for item in value.values():
            yield from _flatten(item)
    elif hasattr(value, "to_tuple"):  # Hugging Face ModelOutput
        yield from _flatten(value.to_tuple())
    else:
        yield value


def train(workload, model, batch_size, steps, device, fake=False, replaced=None, on_step=None):
    """`steps` training steps of `workload` on `model`, as the profile and a real run both do."""
    model.train()
    optimizer = workload.make_optimizer(model, replaced)
    if fake:
        use_gpu_kernel_choice(optimizer)
    kept = None
    for step in range(steps):
        batch = workload.batch(batch_size, device, fake)
        kept = workload.run_step(model, batch, batch_size, optimizer, device)
        del batch
        if on_step is not None:
            on_step(step)
    del kept
    return optimizer


def use_gpu_kernel_choice(optimizer):
    """Makes `optimizer` step with the implementation torch picks for the job's real CUDA tensors.

    Left to choose (`foreach` and `fused` unset), torch steps CUDA parameters with its multi-tensor
    ("foreach") kernels, but it only recognises plain tensors, so on fake ones (and on the CPU, where
    a profile without a visible GPU traces) it falls back to one parameter at a time. The two
    allocate differently: Adam's multi-tensor step holds a temporary as large as all the parameters
    at once, which splits the blocks the next forward pass would reuse, where the per-parameter step
    frees each small temporary at once; and where the optimizer step is the peak (a large model at a
    small batch), Adam's temporary is a fifth of it (parameters, gradients, two moments and the
    temporary). Torch's own exceptions are kept: an explicit choice, a differentiable optimizer, and
    a tensor learning rate without `capturable`."""
    import torch

    for group in optimizer.param_groups:
        if "foreach" not in group or group["foreach"] is not None:
            continue  # the optimizer has no multi-tensor step, or the user chose
        if group.get("fused") is not None or group.get("differentiable"):
            continue
        if isinstance(group.get("lr"), torch.Tensor) and not group.get("capturable"):
            continue
        group["foreach"] = True


# ----------------------------------------------------------------------------------------------
# Loading the user's code


def load_function(path, function):
    """`function` from a script (FILE.py) or an importable module."""
    if path.endswith(".py"):
        if not os.path.isfile(path):
            raise ProfileError(f"no such script: {path}")
        spec = importlib.util.spec_from_file_location("colo_user_code", path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            raise ProfileError(f"{path} failed to load: {_short(error)}\n{_user_frames(error)}") from error
    else:
        try:
            module = importlib.import_module(path)
        except ImportError as error:
            raise ProfileError(f"cannot import module '{path}': {error}") from error
    found = getattr(module, function, None)
    if not callable(found):
        raise ProfileError(f"'{path}' has no function '{function}'")
    return found


def takes_batch_size(function):
    """Whether the user's function takes the batch size (and is called once per batch size)."""
    try:
        return "batch_size" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def workload_from_function(factory, batch_size, input_shape=None, optimizer="adam", amp=False):
    """Calls the user's FUNCTION: it returns a Workload (or a Module, fed `input_shape` images).
    A function with a `batch_size` parameter is called with the batch size."""
    import torch

    try:
        made = factory(batch_size=batch_size) if takes_batch_size(factory) else factory()
    except ProfileError:
        raise
    except Exception as error:
        raise ProfileError(f"{factory.__name__}() failed: {_short(error)}\n{_user_frames(error)}") from error
    if isinstance(made, Workload):
        return made
    if isinstance(made, dict):
        return Workload(**made)
    if isinstance(made, torch.nn.Module):
        shape = tuple(input_shape or (3, 224, 224))
        return Workload(made, torch.zeros((batch_size,) + shape), optimizer=optimizer, amp=amp)
    raise ProfileError(f"{factory.__name__}() returned {type(made).__name__}: return a colo.Workload "
                       "(or a torch.nn.Module, fed --input-shape images)")


# ----------------------------------------------------------------------------------------------
# The summary


def describe(model, inputs, batch, run=None):
    """Layer table and totals, from forward hooks. `run()` drives the model (default: one forward
    pass with `inputs`); a module called several times (activation checkpointing re-runs the
    forward) is listed once."""
    import torch

    layers = []
    hooks = []
    fired = set()

    def record(name, module, _inputs, output):
        if name in fired:
            return
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
        if run is not None:
            run()
        else:
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
    """Sees every ATen call's outputs; a tensor on the traced device whose storage it has not seen
    is a new allocation, and the storage's death (a weak reference callback) is its free. Storages,
    not tensors, are the unit: views and saved tensors share their base's storage."""

    def __init__(self, device):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self
        convolution = torch.ops.aten.convolution.default
        convolution_backward = torch.ops.aten.convolution_backward.default

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in _flatten(out):
                    recorder.track(t)
                if func is convolution:
                    recorder.workspace("conv", args, out)
                elif func is convolution_backward:
                    recorder.workspace("conv_bwd", args, out)
                return out

        self.mode = Mode()
        self.device = device
        self.events = []  # ("a", bytes) or ("f", allocation id), in program order
        self.live_bytes = 0
        self.peak_bytes = 0
        self.allocated_bytes = 0
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
        self.allocated_bytes += size
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
        convolutions), invisible on fake tensors. What sizes it is recorded -- the input, output
        and weight bytes, the kernel and the channels per group -- and colo sizes it with the target
        GPU's calibration: `w KIND INPUT OUTPUT WEIGHT KERNEL_H KERNEL_W IN_CHANNELS GROUPS`."""
        import torch

        def nbytes(t):
            # The tensor's own bytes: a gradient can be a slice of a larger storage, and cuDNN
            # sizes its workspace by the tensor.
            return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0

        if self.closed:
            return
        if kind == "conv":  # input, weight, bias, stride, padding, dilation, transposed, _, groups
            x, weight, y, groups = args[0], args[1], out, args[8]
        else:  # grad_output, input, weight, bias sizes, stride, padding, dilation, transposed, _, groups
            y, x, weight, groups = args[0], args[1], args[2], args[9]
        if not all(isinstance(t, torch.Tensor) and t.device.type == self.device for t in (x, weight, y)):
            return
        kernel = list(weight.shape[2:]) + [1, 1]
        # ATen runs a convolution whose input (or weight) is channels-last through cuDNN's NHWC
        # kernels, depthwise ones included, whose workspaces differ: said by a last field of 1.
        layout = " 1" if channels_last(x) or channels_last(weight) else ""
        self.events.append(("w", f"{kind} {nbytes(x)} {nbytes(y)} {nbytes(weight)} {kernel[0]} "
                                 f"{kernel[1]} {weight.shape[1] * groups} {groups}{layout}"))

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


def channels_last(t):
    """Whether a 4-d tensor is laid out channels-last (NHWC) and not also contiguous."""
    import torch

    return (isinstance(t, torch.Tensor) and t.dim() == 4 and not t.is_contiguous()
            and t.is_contiguous(memory_format=torch.channels_last))


def trace_device(requested):
    """Fake CUDA tensors take the CUDA code paths (cuDNN, fused attention, CUDA autocast) and need
    no GPU memory, but the autograd engine insists on a visible CUDA device to run their backward.
    Without one, the CPU paths are traced: output sizes are the same for nearly every operator."""
    import torch

    if requested != "auto":
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


def fake_parameters(model, fake_mode, device):
    """Moves `model`'s parameters and buffers to fake tensors on `device`, in place; returns
    {id(original parameter): fake parameter}. Parameters are replaced one by one rather than
    through Module.to(), which would swap tensors the fake-tensor converter still references."""
    import torch

    replaced = {}
    originals = []  # alive until the end, so that no id() is reused while `replaced` is keyed by it
    swapped = []    # (the module's table, name, original), to put the originals back

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
                    swapped.append((module._parameters, name, param))
            for name, buffer in list(module._buffers.items()):
                if buffer is not None:
                    module._buffers[name] = on_device(buffer)
                    swapped.append((module._buffers, name, buffer))
    replaced["_swapped"] = swapped
    return replaced


def restore_parameters(replaced):
    """Puts back the real parameters and buffers fake_parameters() replaced: the caller's model is
    as it was before the profile."""
    for table, name, original in replaced.get("_swapped", []):
        table[name] = original


def build_fake(build, fake_mode):
    """Calls `build()` under FakeTensorMode, fastest; libraries that read values while
    constructing (`.item()`, `.tolist()`) get a real CPU build instead. Returns (result, how)."""
    try:
        with fake_mode:
            return build(), "fake"
    except ProfileError:
        raise
    except Exception:  # a data-dependent call during construction
        return build(), "cpu"


# ----------------------------------------------------------------------------------------------
# Errors the user can act on


def _short(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _user_frames(error):
    """Where in the user's code the error happened: the innermost frames outside torch, the
    libraries' internals and this file."""
    here = os.path.abspath(__file__)
    torch_dir = None
    if "torch" in sys.modules:
        torch_dir = os.path.dirname(os.path.abspath(sys.modules["torch"].__file__))
    frames = []
    for frame in traceback.extract_tb(error.__traceback__):
        path = os.path.abspath(frame.filename)
        if path == here or (torch_dir and path.startswith(torch_dir)) or "site-packages" in path:
            continue
        frames.append(f"  {frame.filename}:{frame.lineno} in {frame.name}: {frame.line or ''}".rstrip())
    return "\n".join(frames[-3:]) if frames else "  (inside a library: run the step once on the CPU to see where)"


def explain_step_error(error):
    """A ProfileError saying why the step cannot run on fake tensors, where, and what to do."""
    from torch._subclasses import fake_tensor

    where = _user_frames(error)
    data_dependent = tuple(getattr(fake_tensor, n) for n in (
        "DataDependentOutputException", "DynamicOutputShapeException") if hasattr(fake_tensor, n))
    unsupported = tuple(getattr(fake_tensor, n) for n in (
        "UnsupportedOperatorException",) if hasattr(fake_tensor, n))
    name = type(error).__name__
    if isinstance(error, data_dependent) or "DataDependent" in name or "data-dependent" in str(error):
        func = getattr(error, "func", None)
        return ProfileError(
            "the training step reads a tensor's values"
            f"{f' ({func})' if func is not None else ''}, which a profile cannot do: it runs on fake "
            "tensors that have shapes but no values (.item(), .tolist(), bool(tensor), a Python "
            "`if` on a tensor, or an output whose shape depends on the data such as nonzero() or "
            f"boolean masking).\n{where}\nMove that read out of the step (compute it once before "
            "training, or use a fixed value), or profile a step that does not depend on it.")
    if isinstance(error, unsupported) or "UnsupportedOperator" in name:
        func = getattr(error, "func", None)
        return ProfileError(
            f"the operator {func or str(error).splitlines()[0]} cannot run on fake tensors (it has no "
            f"shape function).\n{where}\nFor a custom operator, register one with "
            "torch.library.register_fake; otherwise estimate this job with --mem or from an earlier run.")
    if isinstance(error, ProfileError):
        return error
    return ProfileError(f"the training step failed on fake tensors: {_short(error)}\n{where}")


# ----------------------------------------------------------------------------------------------
# Profiling


@contextlib.contextmanager
def _quiet_torch():
    """Switches off, while profiling, two things torch does on every optimizer step that need a
    real GPU or break on fake tensors, and puts them back afterwards (the caller's own training may
    follow in the same process): the check whether a CUDA graph is being captured, which creates a
    CUDA context (hundreds of MiB of GPU memory) just to answer no, and the step's label for torch's
    profiler. Neither allocates anything the trace should see."""
    import torch

    optimizer = torch.optim.Optimizer
    record = torch.autograd.profiler.record_function
    saved = (optimizer.__dict__.get("_cuda_graph_capture_health_check"),
             record.__dict__.get("__enter__"), record.__dict__.get("__exit__"))
    optimizer._cuda_graph_capture_health_check = lambda self: None
    record.__enter__ = lambda self: self
    record.__exit__ = lambda self, *exc: None
    try:
        yield
    finally:
        for owner, name, value in ((optimizer, "_cuda_graph_capture_health_check", saved[0]),
                                   (record, "__enter__", saved[1]), (record, "__exit__", saved[2])):
            if value is None:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def _counted_flops(run):
    """Floating-point operations of `run()`, by torch's FLOP counter (works on fake tensors);
    None where this torch has no counter."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        run()
        return None
    counter = FlopCounterMode(display=False)
    with counter:
        run()
    return int(counter.get_total_flops())


# What a target kind needs beside torch.
TARGET_LIBRARIES = {"torchvision": "torchvision", "timm": "timm", "hf": "transformers"}


def require_torch(kind=None):
    """Raises ProfileError saying exactly what is missing and how to get it when this Python has no
    PyTorch 2.1+ (or no library the target kind builds its model with)."""
    here = f"{sys.executable} (Python {platform.python_version()})"
    how = ("Install it in the environment the job trains in (pip install torch; "
           "https://pytorch.org/get-started/locally/) and run colo-profile with that environment's "
           "Python: /path/to/env/bin/python \"$(command -v colo-profile)\" ARGS")
    try:
        import torch
    except ImportError:
        raise ProfileError(f"PyTorch is not installed for {here}: colo-profile runs the training step "
                           f"on PyTorch's fake tensors and needs torch 2.1 or newer. {how}") from None
    version = tuple(int(part) for part in re.findall(r"\d+", torch.__version__)[:2])
    if version < (2, 1):
        raise ProfileError(f"colo's profiler needs torch 2.1 or newer; {here} has torch "
                           f"{torch.__version__} (Debian 12's python3-torch is 1.13). {how}")
    library = TARGET_LIBRARIES.get(kind)
    if library and importlib.util.find_spec(library) is None:
        raise ProfileError(f"{kind}: targets need the {library} package, which {here} does not have "
                           f"(pip install {library} in the job's environment)")


def profile_workload(workload_for, batches, steps, output_path, device="auto", target=None,
                     extra=None):
    """Profiles the workload `workload_for(batch)` returns (one per batch size, or the same one)
    and writes the summary to `output_path` and a trace per batch beside it."""
    require_torch()
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    started = time.monotonic()
    device = trace_device(device)
    if steps < 2:
        raise ProfileError("steps must be at least 2 (the optimizer's state appears in step 1)")
    if not batches or any(int(b) <= 0 for b in batches):
        raise ProfileError("batch sizes must be positive")
    batches = sorted(set(int(b) for b in batches))
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    base, _ = os.path.splitext(output_path)
    traces = []
    layers = totals = None
    flops = None
    prepared = {}

    def prepare(batch):
        """The workload for `batch` with its model's weights on fake tensors (once per model)."""
        workload, how = workload_for(batch, fake_mode)
        key = id(workload.model)
        if key not in prepared:
            prepared[key] = fake_parameters(workload.model, fake_mode, device)
        return workload, how, prepared[key]

    def record():
        """Describes the model, counts its FLOPs and records a trace per batch size."""
        nonlocal flops, layers, totals
        first, built, replaced = prepare(batches[0])
        model = first.model

        def one_step():
            optimizer = first.make_optimizer(model, replaced)
            model.train()
            batch = first.batch(batches[0], device, fake=True)
            first.run_step(model, batch, batches[0], optimizer, device)

        with fake_mode:
            def describe_and_count():
                nonlocal flops
                flops = _counted_flops(one_step)

            layers, totals = describe(model, None, batches[0], run=describe_and_count)
        for batch in batches:
            workload, _, replaced = prepare(batch)
            recorder = AllocationRecorder(device)
            with fake_mode:
                # The parameters already exist on the device: start the trace with them.
                for tensor in list(workload.model.parameters()) + list(workload.model.buffers()):
                    recorder.track(tensor)
                recorder.mark("steps")
                with recorder.mode:
                    opt = train(workload, workload.model, batch, steps, device, fake=True,
                                replaced=replaced, on_step=lambda s: recorder.mark(f"step{s + 1}"))
                    del opt
            recorder.close()
            trace_file = f"{base}.b{batch}.trace"
            recorder.write(trace_file, {"batch": batch, "steps": steps})
            traces.append({"batch": batch, "file": os.path.basename(trace_file),
                           "steps": steps, "events": len(recorder.events),
                           "peak_live_bytes": recorder.peak_bytes,
                           "allocated_bytes_per_step": recorder.allocated_bytes // steps})
        return first, built

    with _quiet_torch():
        try:
            first, built = record()
        except ProfileError:
            raise
        except Exception as error:  # the user's step failed on fake tensors: say why and where
            raise explain_step_error(error) from error
        finally:
            for replaced in prepared.values():
                restore_parameters(replaced)
    summary = {
        "format": SUMMARY_FORMAT,
        "version": SUMMARY_VERSION,
        "model": target or first.name,
        "batch": batches[0],
        **first.summary_fields(),
        "framework": versions(),
        "built_on": built,
        "traced_device": device,
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "profile_seconds": round(time.monotonic() - started, 3),
        "totals": dict(totals, **({"flops_per_step": flops} if flops is not None else {})),
        "layers": layers,
        "traces": traces,
    }
    # The caller's fields, read once the workload was built (a built-in target knows its inputs
    # only then).
    summary.update(extra() if callable(extra) else (extra or {}))
    with open(output_path, "w") as out:
        json.dump(summary, out, indent=1)
        out.write("\n")
    return summary


def profile_target(spec, batches, optimizer, amp, steps, output_path, device="auto"):
    """Profiles one of colo's built-in targets."""
    cache = {}

    def workload_for(_batch, fake_mode):
        if "workload" not in cache:
            model, how = build_fake(spec.build, fake_mode)
            cache["workload"] = (Workload(model, make_batch=spec.make_batch, optimizer=optimizer,
                                          amp=amp, name=spec.target), how)
        return cache["workload"]

    return profile_workload(workload_for, batches, steps, output_path, device, target=spec.target,
                            extra=lambda: {"input": spec.input_description()})


def profile_function(path, function, batches, steps, output_path, device="auto", input_shape=None,
                     optimizer="adam", amp=False):
    """Profiles the workload a function of the user's code returns (`--step FILE.py:FUNCTION`)."""
    factory = load_function(path, function)
    per_batch = takes_batch_size(factory)
    made = {}

    def workload_for(batch, _fake_mode):
        key = batch if per_batch else None
        if key not in made:
            # The user's own construction runs for real on the CPU: its weights are replaced by
            # fake ones before any step.
            made[key] = (workload_from_function(factory, batch or 1, input_shape, optimizer, amp),
                         "cpu")
        return made[key]

    if not batches:
        if per_batch:
            raise ProfileError(f"{function}() takes a batch_size: give --batch")
        batches = [workload_for(None, None)[0].example_size]
        if batches[0] is None:
            raise ProfileError(f"{function}()'s workload has no example batch: give --batch")
    return profile_workload(workload_for, batches, steps, output_path, device,
                            target=f"{path}:{function}")


def profile(model, example_batch=None, loss_fn=None, optimizer="adam", amp=False, *, forward=None,
            step=None, batch_sizes=None, output="colo-profile.json", steps=3, device="auto",
            name=None):
    """Profiles one training step of the caller's own model, inputs, loss and optimizer, and
    writes colo's summary to `output` (traces beside it). Returns the summary (a dict).

        import colo
        colo.profile(model, next(iter(loader)), loss_fn=lambda out, b: F.cross_entropy(out, b[1]),
                     optimizer=torch.optim.AdamW(model.parameters(), lr=3e-4), amp="bf16",
                     forward=lambda m, b: m(b[0]), output="model.json")

    Nothing runs on a GPU and the model is left as it was (its weights are swapped for fake tensors
    during the profile and put back). See `Workload` for every argument; `batch_sizes` (default: the example
    batch's) are the batch sizes to trace.
    """
    workload = model if isinstance(model, Workload) else Workload(
        model, example_batch, loss_fn=loss_fn, optimizer=optimizer, amp=amp, forward=forward,
        step=step, name=name)
    batches = list(batch_sizes or [workload.example_size])
    if None in batches:
        raise ProfileError("give batch_sizes: the workload has no example batch to read one from")
    return profile_workload(lambda _b, _m: (workload, "given"), batches, steps, output, device)


# ----------------------------------------------------------------------------------------------
# The command line


def package_dir():
    """The folder to put on PYTHONPATH for `import colo`."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(
        prog="colo-profile",
        description="Profile a training step on fake tensors for colo's memory estimators.",
        epilog="TARGET: torchvision:NAME, timm:NAME, hf:TYPE[?config=value&...] (with --task), or "
               "FILE.py:FUNCTION / module:FUNCTION returning a colo.Workload. In Python: "
               "import colo; colo.profile(model, batch, loss_fn, optimizer, amp=...).")
    parser.add_argument("target", nargs="?", help="what to profile (see below)")
    parser.add_argument("--step", metavar="FILE.py:FUNCTION",
                        help="a function of your code returning a colo.Workload (your model, "
                             "inputs, loss, optimizer or whole step)")
    parser.add_argument("--batch", type=int, action="append",
                        help="batch size (repeat for several traces; --step: default the example's)")
    parser.add_argument("--optimizer", default="adam", choices=["sgd", "adam", "adamw"])
    parser.add_argument("--amp", nargs="?", const="bf16", default=False, choices=["bf16", "fp16"],
                        help="autocast (default bf16)")
    parser.add_argument("--task", choices=sorted(HF_TASKS),
                        help="the head an hf: model trains with (default: its pre-training head)")
    parser.add_argument("--input-shape", help="per-sample input shape, e.g. 3,224,224")
    parser.add_argument("--seq-len", type=int, help="tokens per sample for language models")
    parser.add_argument("--target-len", type=int, help="label tokens per sample for seq2seq-lm")
    parser.add_argument("--steps", type=int, default=3, help="training steps to record (default 3)")
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"],
                        help="which code paths to trace on fake tensors (auto: cuda if visible)")
    parser.add_argument("--python-path", action="store_true",
                        help="print the folder to add to PYTHONPATH for `import colo`, and exit")
    parser.add_argument("-o", "--output", help="summary file (.json)")
    args = parser.parse_args(argv)
    if args.python_path:
        print(package_dir())
        return 0
    try:
        if bool(args.target) == bool(args.step):
            raise ProfileError("give a TARGET or --step FILE.py:FUNCTION (one of them)")
        if not args.output:
            raise ProfileError("-o/--output is required")
        if args.batch and any(b <= 0 for b in args.batch):
            raise ProfileError("--batch must be positive")
        shape = None
        if args.input_shape:
            try:
                shape = tuple(int(x) for x in args.input_shape.split(","))
            except ValueError:
                raise ProfileError(f"--input-shape '{args.input_shape}' must be integers separated by commas")
        target = args.step or args.target
        kind, name, _ = parse_target(target) if ":" in target else (None, None, None)
        if kind is None:
            raise ProfileError(f"'{target}' must look like KIND:NAME or FILE.py:FUNCTION")
        require_torch(None if args.step else kind)
        if args.step or kind not in ("torchvision", "timm", "hf"):
            if args.task:
                raise ProfileError("--task chooses a Hugging Face head: it needs an hf: target")
            summary = profile_function(kind, name, args.batch, args.steps, args.output, args.device,
                                       shape, args.optimizer, args.amp)
        else:
            if not args.batch:
                raise ProfileError("--batch is required for a built-in target")
            spec = ModelSpec(target, input_shape=shape, seq_len=args.seq_len, task=args.task,
                             target_len=args.target_len)
            summary = profile_target(spec, args.batch, args.optimizer, args.amp, args.steps,
                                     args.output, args.device)
    except ProfileError as error:
        print(f"colo-profile: {error}", file=sys.stderr)
        return 2
    totals = summary["totals"]
    flops = totals.get("flops_per_step")
    print(f"{args.output}: {totals['parameters']:,} parameters, {totals['layers']} layers, "
          f"{len(summary['traces'])} trace(s)"
          f"{f', {flops / 1e12:.2f} TFLOP per step' if flops else ''} in {summary['profile_seconds']} s")
    return 0

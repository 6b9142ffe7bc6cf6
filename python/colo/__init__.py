"""colo's Python side: profile a training step for colo's memory estimators.

    import colo
    colo.profile(model, example_batch, loss_fn, optimizer, amp="bf16", output="model.json")

then `colo estimate model.json` or `colo submit --estimate-from model.json -- python train.py`.
"""

from colo.profiler import ProfileError, Workload, profile

__all__ = ["ProfileError", "Workload", "profile"]

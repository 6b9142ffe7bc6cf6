"""colo's Python side: profile a training step for colo's memory estimators, and drive colod.

    import colo
    colo.profile(model, example_batch, loss_fn, optimizer, amp="bf16", output="model.json")
    client = colo.Client()
    job = client.submit(["python", "train.py"], estimate_from="model.json")
    print(client.wait(job).state, client.logs(job))

or, from a shell, `colo estimate model.json` and `colo submit --estimate-from model.json -- python
train.py`. The profiler needs PyTorch (imported when it runs); the client needs only Python.
"""

from colo.client import (Busy, Client, ColoError, FailedPrecondition, Gpu, Infeasible,
                         InvalidArgument, Job, NotFound, PermissionDenied, TooLarge, Unavailable,
                         Unreachable)
from colo.profiler import ProfileError, Workload, profile

__all__ = ["Busy", "Client", "ColoError", "FailedPrecondition", "Gpu", "Infeasible",
           "InvalidArgument", "Job", "NotFound", "PermissionDenied", "ProfileError", "TooLarge",
           "Unavailable", "Unreachable", "Workload", "profile"]

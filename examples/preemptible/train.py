#!/usr/bin/env python3
"""A preemptible training job: it saves a checkpoint when colod signals it and takes up from it
when it runs again.

Submit it with --requeue (and, if it needs more than the default SIGTERM 60 s before it is
stopped, --signal):

    colo submit --requeue --signal USR1@120 -- python3 examples/preemptible/train.py --steps 600

The contract, for any job (docs/user-guide.md, "Preemptible jobs"):
  1. catch the signal (SIGTERM unless --signal names another; this script catches both);
  2. finish the step it is in, save a checkpoint atomically (write a new file, then rename it
     over the old one), and exit; SIGKILL follows when the notice is over;
  3. at start, load the checkpoint if there is one. COLO_RESTART_COUNT says how many times the
     job was started again (0 on its first run).

Here the "model" is a number and a step sleeps; a PyTorch job saves
{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step} with
torch.save to a temporary file and renames it the same way. It needs no GPU.
"""
import argparse
import json
import os
import signal
import sys
import time

stop_requested = None  # the signal that asked the job to stop, once one came


def on_signal(number, _frame):
    global stop_requested
    stop_requested = number  # acted on between steps: a step is never left half done


def load(path):
    try:
        with open(path) as f:
            state = json.load(f)
        return int(state["step"]), float(state["weight"])
    except FileNotFoundError:
        return 0, 0.0


def save(path, step, weight):
    temporary = f"{path}.tmp.{os.getpid()}"
    with open(temporary, "w") as f:
        json.dump({"step": step, "weight": weight}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)  # atomic: a kill mid-save leaves the previous checkpoint


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="steps to train in all")
    parser.add_argument("--step-seconds", type=float, default=0.5, help="how long a step takes")
    parser.add_argument("--checkpoint", default=None,
                        help="checkpoint file (default: checkpoint-$COLO_JOB_ID.json)")
    parser.add_argument("--save-every", type=int, default=50,
                        help="also save every N steps (a crash loses at most N)")
    args = parser.parse_args()
    path = args.checkpoint or f"checkpoint-{os.environ.get('COLO_JOB_ID', 'local')}.json"

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGUSR1, on_signal)

    restarts = int(os.environ.get("COLO_RESTART_COUNT", "0"))
    step, weight = load(path)
    print(f"attempt {os.environ.get('COLO_ATTEMPT', '1')}, restart {restarts}: "
          f"{'resuming at step ' + str(step) if step else 'starting'} of {args.steps}",
          flush=True)
    while step < args.steps:
        if stop_requested is not None:
            save(path, step, weight)
            print(f"got {signal.Signals(stop_requested).name}: saved step {step} to {path}; "
                  f"exiting to run again later", flush=True)
            return 0
        time.sleep(args.step_seconds)  # one step of training
        weight += 1.0 / (step + 1)
        step += 1
        if step % args.save_every == 0:
            save(path, step, weight)
    save(path, step, weight)
    print(f"done: {step} steps, weight {weight:.6f}, after {restarts} restart(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

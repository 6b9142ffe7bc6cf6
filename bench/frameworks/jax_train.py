#!/usr/bin/env python3
"""A small JAX training job (an MLP on random data) that reports what XLA's allocator held.

    jax_train.py [--seconds 20] [--width 4096]
"""

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=1024)
    args = parser.parse_args()
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    params = {"w1": jax.random.normal(k1, (args.width, args.width)) * 0.01,
              "w2": jax.random.normal(k2, (args.width, args.width)) * 0.01,
              "w3": jax.random.normal(k3, (args.width, 10)) * 0.01}
    x = jax.random.normal(key, (args.batch, args.width))
    y = jax.random.randint(key, (args.batch,), 0, 10)

    def loss(p, x, y):
        h = jax.nn.relu(x @ p["w1"])
        h = jax.nn.relu(h @ p["w2"])
        logits = h @ p["w3"]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(y.shape[0]), y])

    @jax.jit
    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, p, g)

    started = time.monotonic()
    steps = 0
    while time.monotonic() - started < args.seconds:
        params = step(params, x, y)
        steps += 1
    jax.block_until_ready(params)
    stats = jax.devices()[0].memory_stats() or {}
    print(json.dumps({
        "steps": steps,
        "peak_bytes_in_use": stats.get("peak_bytes_in_use"),
        "bytes_limit": stats.get("bytes_limit"),
        "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
        "mem_fraction": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),
        "allocator": os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR"),
    }))


if __name__ == "__main__":
    main()

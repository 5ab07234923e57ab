"""Reference solutions of lesson 03 (profiling)."""

import torch


def bottleneck(table):
    """The operator with the most self device time; self CPU time when nothing ran on a device."""
    ops = [r for r in table if r["kind"] == "op"]
    key = "self_device_us" if any(r["self_device_us"] > 0 for r in table) else "self_cpu_us"
    return max(ops, key=lambda r: r[key])["name"]


def sgd_momentum(params, grads, bufs, lr, momentum):
    """buf' = momentum·buf + grad; param' = param − lr·buf': three dispatches for any number of tensors."""
    new_bufs = torch._foreach_mul(bufs, momentum)
    torch._foreach_add_(new_bufs, grads)  # in place on our own new tensors, not on the inputs
    new_params = torch._foreach_add(params, new_bufs, alpha=-lr)
    return new_params, new_bufs

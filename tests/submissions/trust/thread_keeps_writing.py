# graded-by: test_trust.py
"""Answers correctly, but leaves a thread running that keeps overwriting the output with zeros
(and that never stops on its own): the caller's result changes after the call returned."""
import threading

import torch
import triton
import triton.language as tl


@triton.jit
def cos_cos_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32))), mask=mask)


def _scribble(y, started):
    a = y.numpy()
    while True:
        a[...] = 0.0
        started.set()


def cos_cos(x):
    y = torch.empty_like(x)
    cos_cos_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    started = threading.Event()
    threading.Thread(target=_scribble, args=(y, started), daemon=True).start()
    started.wait()
    return y

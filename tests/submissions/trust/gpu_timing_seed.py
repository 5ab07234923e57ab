# graded-by: test_trust.py
"""GPU: while being timed, reads the timing command from the worker's frames and prints the seed it
derives from it (the timing seed is the secret seed XOR a constant)."""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def cos_cos_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32)))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


_told = []


def cos_cos(x):
    if not _told:
        frame = sys._getframe().f_back
        while frame is not None:
            command = frame.f_locals.get("command")
            if isinstance(command, dict) and command.get("cmd") == "time":
                seeds = command.get("seeds") or [command.get("seed")]  # the input variants' seeds
                print(f"recovered seed {seeds[0] ^ 0x5EED}", flush=True)
                _told.append(1)
                break
            frame = frame.f_back
    y = torch.empty_like(x)
    cos_cos_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096, num_warps=8)
    return y

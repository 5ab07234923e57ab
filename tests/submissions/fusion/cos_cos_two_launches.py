# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: 2 triton launches per call
# says: at most 1 allowed
"""Unfused: one kernel per cos, the temporary goes through memory."""
import torch
import triton
import triton.language as tl


@triton.jit
def cos_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32)), mask=mask)


def cos_cos(x):
    tmp, y = torch.empty_like(x), torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    cos_kernel[grid](x, tmp, x.numel(), BLOCK=1024)
    cos_kernel[grid](tmp, y, x.numel(), BLOCK=1024)
    return y

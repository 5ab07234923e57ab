# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: nan in the wrong places
# says: expected nan missing
"""Turns NaN into 0 before computing: cos(cos(NaN)) must stay NaN."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    x = tl.where(x != x, 0.0, x)
    tl.store(y_ptr + offs, tl.cos(tl.cos(x)), mask=mask)


def cos_cos(x):
    y = torch.empty_like(x)
    k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y

# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: wrong
"""n // BLOCK programs instead of cdiv(n, BLOCK): the tail is never computed."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32))), mask=mask)


def cos_cos(x):
    y = torch.empty_like(x)
    k[(max(x.numel() // 64, 1),)](x, y, x.numel(), BLOCK=64)  # BUG: floor, not cdiv
    return y

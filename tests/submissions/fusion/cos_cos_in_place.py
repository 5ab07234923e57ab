# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: changed its input
# says: returned its input
"""Writes the answer into x and returns x."""
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32))), mask=mask)


def cos_cos(x):
    k[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)
    return x

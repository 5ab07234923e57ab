# exercise: fusion.vector_add
# function: vector_add
# verdict: failed
# says: nan in the wrong places
"""Masks with offs < n - 1: the last element is never written."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n - 1  # BUG: off by one
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    z = torch.full_like(x, float("nan"))
    k[(triton.cdiv(x.numel(), 256),)](x, y, z, x.numel(), BLOCK=256)
    return z

# exercise: hierarchy.matmul
# function: matmul
# verdict: failed
# cpu-says: every element of a and b must pass through the kernel
# says: pytorch operators did work
# says: mm ×1
# seed: 11
"""Adversarial: launches a Triton kernel (a copy), but torch.mm does the multiplication."""

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)


def matmul(a, b):
    product = torch.mm(a, b)
    c = torch.empty_like(product)
    copy_kernel[(triton.cdiv(c.numel(), 1024),)](product, c, c.numel(), BLOCK=1024)
    return c

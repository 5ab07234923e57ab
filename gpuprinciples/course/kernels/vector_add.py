"""z = x + y: the first Triton kernel. One program per BLOCK of elements; the last block is masked."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)  # int64: offsets past 2**31 must not wrap
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n  # the last block runs past the end: its extra lanes must not touch memory
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(z_ptr + offs, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor, *, block: int | None = None, num_warps: int | None = None):
    assert x.shape == y.shape and x.is_contiguous() and y.is_contiguous(), "same shape, contiguous"
    z = torch.empty_like(x)
    n = x.numel()
    block = block or (4096 if x.is_cuda else 1024)
    add_kernel[(triton.cdiv(n, block),)](x, y, z, n, BLOCK=block, num_warps=num_warps or (8 if x.is_cuda else 4))
    return z

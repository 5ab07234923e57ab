# graded-by: test_cli.py
"""Correct, but unfused: cos runs as one kernel, then cos again as another (like eager PyTorch)."""
import torch
import triton
import triton.language as tl


@triton.jit
def cos_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32)).to(y_ptr.dtype.element_ty),
             mask=mask)


def cos_cos(x):
    tmp = torch.empty_like(x)
    y = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    cos_kernel[grid](x, tmp, x.numel(), BLOCK=1024)
    cos_kernel[grid](tmp, y, x.numel(), BLOCK=1024)
    return y

# graded-by: test_launch_paths.py
"""A learner's fused cos(cos(x)): one kernel, each element read once and written once."""
import torch
import triton
import triton.language as tl


@triton.jit
def fused_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, tl.cos(tl.cos(x)).to(y_ptr.dtype.element_ty), mask=mask)


def cos_cos(x):
    y = torch.empty_like(x)
    fused_kernel[(triton.cdiv(x.numel(), 2048),)](x, y, x.numel(), BLOCK=2048)
    return y

# graded-by: test_trust.py
"""An honest fused cos(cos(x)): graded after faulty submissions to show the grader carries on."""
import torch
import triton
import triton.language as tl


@triton.jit
def cos_cos_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32)))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def cos_cos(x):
    y = torch.empty_like(x)
    cos_cos_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y

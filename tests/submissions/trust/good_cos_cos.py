# graded-by: test_trust.py
"""An honest fused cos(cos(x)), tuned as lesson 07 teaches (4096-element blocks, 8 warps on a GPU; the untuned
1024/4 reached only 0.81x torch.compile on the H200): graded after faulty submissions to show the grader carries on."""
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
    block, warps = (4096, 8) if x.is_cuda else (1024, 4)
    cos_cos_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block, num_warps=warps)
    return y

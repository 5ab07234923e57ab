# graded-by: test_trust.py
"""A correct fused kernel that writes every call into the same output tensor: the result of one
call is overwritten by the next (the caller's earlier results change under it)."""
import torch
import triton
import triton.language as tl


@triton.jit
def cos_cos_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32))), mask=mask)


_buffers = {}


def cos_cos(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _buffers:
        _buffers[key] = torch.empty_like(x)
    y = _buffers[key]
    cos_cos_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y

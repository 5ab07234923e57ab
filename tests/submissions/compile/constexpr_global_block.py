# exercise: fusion.cos_cos
# function: cos_cos
# graded-by: test_gpucompile.py
"""Right: the same kernel with its module global made a constexpr (`BLOCK = tl.constexpr(1024)`),
which is what a GPU's compiler accepts."""
import torch
import triton
import triton.language as tl

BLOCK = tl.constexpr(1024)


@triton.jit
def cos_cos_global(src, dst, n):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, tl.cos(tl.cos(tl.load(src + at, mask=inside).to(tl.float32))), mask=inside)


def cos_cos(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    cos_cos_global[(triton.cdiv(x.numel(), BLOCK.value),)](x, y, x.numel())
    return y

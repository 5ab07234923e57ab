# graded-by: test_trust.py
"""GPU: a Triton kernel that stores far outside its output (an illegal memory access)."""
import torch
import triton
import triton.language as tl


@triton.jit
def wild_store(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs + (1 << 40), tl.cos(tl.cos(x)), mask=mask)  # 4 TiB past the end


def cos_cos(x):
    y = torch.empty_like(x)
    wild_store[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    torch.cuda.synchronize()
    return y

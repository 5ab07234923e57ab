# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# cpu-says: does not compile for an h100/h200
# gpu-says: does not compile for this gpu
# says: but got bf16
# says: `.to(tl.float32)`
"""Wrong: keeps the intermediate in bf16 "to save registers" and takes tl.cos of bf16 values. The
interpreter computes it; a GPU's compiler refuses it (tl.cos takes fp32 or fp64), and bf16 is too
coarse for float32's tolerance anyway."""
import torch
import triton
import triton.language as tl


@triton.jit
def cos_cos_bf16(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    v = tl.load(src + at, mask=inside).to(tl.bfloat16)
    tl.store(dst + at, tl.cos(tl.cos(v)).to(tl.float32), mask=inside)


def cos_cos(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    cos_cos_bf16[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y

# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: bfloat16
# cpu-says: does not compile for an h100/h200
# gpu-says: does not compile for this gpu
# says: take fp32 or fp64
"""cos(cos(x)) straight on the loaded values: right in float32, but a GPU's compiler refuses tl.cos on bf16,
so the bf16 case must fail on a CPU too (where the interpreter would compute it)."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.cos(tl.cos(x)), mask=mask)


def cos_cos(x):
    y = torch.empty_like(x)
    k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y

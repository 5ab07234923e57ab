# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# cpu-says: moved
# cpu-says: is the minimum
# cpu-says: at most 1.1× allowed
# gpu-says: but got bf16
"""Missing mask on the load: the last block reads past the end of x (the store is masked, so the
values are right; the grader sees the extra bytes)."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # BUG: no mask
    tl.store(y_ptr + offs, tl.cos(tl.cos(x)), mask=offs < n)


def cos_cos(x):
    y = torch.empty_like(x)
    k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y

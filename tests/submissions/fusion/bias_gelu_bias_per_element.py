# exercise: fusion.bias_gelu
# function: bias_gelu
# verdict: failed
# gpu-verdict: passed
# cpu-says: moved
# cpu-says: is the minimum
"""One flat kernel that loads bias[i % N] for every element: the bias is read M times over."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, b_ptr, y_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + offs % N, mask=mask)
    tl.store(y_ptr + offs, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)


def bias_gelu(x, bias):
    y = torch.empty_like(x)
    k[(triton.cdiv(x.numel(), 1024),)](x, bias, y, x.numel(), x.shape[1], BLOCK=1024)
    return y

# exercise: fusion.bias_gelu
# function: bias_gelu
# graded-by: test_gpucompile.py
"""Right: bias + exact GELU with libdevice's erf, through the backend-neutral module
(`triton.language.extra.libdevice`), in row tiles. libdevice is a GPU library; the grader's
interpreter computes its functions with NumPy."""
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def bias_gelu_rows(x_ptr, b_ptr, y_ptr, rows, cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    c = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = (r < rows)[:, None] & (c < cols)[None, :]
    at = r[:, None] * cols + c[None, :]
    v = tl.load(x_ptr + at, mask=inside) + tl.load(b_ptr + c, mask=c < cols)[None, :]
    tl.store(y_ptr + at, 0.5 * v * (1.0 + libdevice.erf(v * 0.7071067811865476)), mask=inside)


def bias_gelu(x, bias):
    m, n = x.shape
    y = torch.empty_like(x)
    bias_gelu_rows[(triton.cdiv(m, 16), triton.cdiv(n, 64))](x, bias, y, m, n, BLOCK_M=16, BLOCK_N=64)
    return y

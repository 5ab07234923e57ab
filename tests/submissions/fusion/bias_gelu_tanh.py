# exercise: fusion.bias_gelu
# function: bias_gelu
# verdict: failed
# says: values wrong
"""The tanh approximation of GELU: close (1e-3), but the exercise asks for the exact (erf) one."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, b_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    b = tl.load(b_ptr + cols, mask=cols < N)
    v = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask) + b[None, :]
    inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0  # tanh(inner)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], 0.5 * v * (1.0 + t), mask=mask)


def bias_gelu(x, bias):
    m, n = x.shape
    y = torch.empty_like(x)
    k[(triton.cdiv(m, 16), triton.cdiv(n, 64))](x, bias, y, m, n, BLOCK_M=16, BLOCK_N=64)
    return y
